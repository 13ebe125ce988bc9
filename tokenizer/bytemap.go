package tokenizer

import (
	"strconv"
	"unicode/utf8"
)

// GPT-2 stores every token as text in which each raw byte is replaced by a
// printable code point: the bytes that are already printable and not spaces
// (33..126, 161..172, 174..255) stand for themselves, and the remaining 68
// bytes are given the code points U+0100, U+0101, ... in increasing byte order.

var (
	byteToRune [256]rune
	// runeToByte inverts byteToRune for code points below 256+68; -1 means
	// the code point does not stand for any byte.
	runeToByte [256 + 68]int16
)

func init() {
	for i := range runeToByte {
		runeToByte[i] = -1
	}
	next := rune(256)
	for b := 0; b < 256; b++ {
		if (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255) {
			byteToRune[b] = rune(b)
		} else {
			byteToRune[b] = next
			next++
		}
		runeToByte[byteToRune[b]] = int16(b)
	}
}

// mapBytes returns the byte-level (mapped) form of raw bytes s.
func mapBytes(s string) string {
	out := make([]byte, 0, 2*len(s))
	for i := 0; i < len(s); i++ {
		out = utf8.AppendRune(out, byteToRune[s[i]])
	}
	return string(out)
}

// unmapToken turns a stored, mapped token string back into its raw bytes.
// Code points that do not stand for a byte (which a well-formed GPT-2
// vocabulary never contains) are kept as their own UTF-8 encoding.
func unmapToken(tok string) string {
	out := make([]byte, 0, len(tok))
	for _, r := range tok {
		if r >= 0 && int(r) < len(runeToByte) && runeToByte[r] >= 0 {
			out = append(out, byte(runeToByte[r]))
		} else {
			out = utf8.AppendRune(out, r)
		}
	}
	return string(out)
}

// parseByteToken recognises the "<0xXX>" spelling that some vocabularies use
// for byte tokens (ggml type 6).
func parseByteToken(tok string) (byte, bool) {
	if len(tok) != 6 || tok[:3] != "<0x" || tok[5] != '>' {
		return 0, false
	}
	v, err := strconv.ParseUint(tok[3:5], 16, 8)
	if err != nil {
		return 0, false
	}
	return byte(v), true
}
