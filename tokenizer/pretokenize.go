package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// The GPT-2 pre-tokenizer is the regular expression
//
//	's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//
// applied repeatedly from the start of the text, each match becoming one
// pre-token. Go's regexp has no lookahead, so pretokenEnd reproduces the
// backtracking semantics by hand:
//
//   - the alternatives are tried in order and the first that matches at the
//     current position wins; every repetition is greedy;
//   - \s is the Unicode White_Space property (what Oniguruma, used by Hugging
//     Face's tokenizers, Python's regex module and llama.cpp all use); it is
//     exactly unicode.IsSpace. Note that U+001C..U+001F, which Python's
//     str.isspace accepts, are NOT \s, and U+200B is not \s either;
//   - \p{L} is unicode.IsLetter, \p{N} is unicode.IsNumber (Nd, Nl, No);
//   - the contractions are case-sensitive;
//   - \s+(?!\S): a whitespace run that reaches the end of the text is taken
//     whole; one followed by a non-space character gives back its last
//     character (if that leaves at least one), which then starts the next
//     pre-token; that character joins the following word only if it is a
//     plain ' ' (the " ?" of the other alternatives), otherwise it is a
//     pre-token of its own via the final \s+.
//
// Bytes that are not valid UTF-8 (possible in a Go string) are treated as
// one-byte characters of the "other" class, so they end up in
// [^\s\p{L}\p{N}]+ runs and round-trip unchanged.

type charClass uint8

const (
	classOther charClass = iota
	classLetter
	classNumber
	classSpace
)

var asciiClass [utf8.RuneSelf]charClass

func init() {
	for c := 0; c < utf8.RuneSelf; c++ {
		asciiClass[c] = slowClass(rune(c))
	}
}

func slowClass(r rune) charClass {
	switch {
	case unicode.IsLetter(r):
		return classLetter
	case unicode.IsNumber(r):
		return classNumber
	case unicode.IsSpace(r):
		return classSpace
	}
	return classOther
}

// classAt returns the class and byte length of the character at s[i].
func classAt(s string, i int) (charClass, int) {
	if c := s[i]; c < utf8.RuneSelf {
		return asciiClass[c], 1
	}
	r, n := utf8.DecodeRuneInString(s[i:])
	if r == utf8.RuneError && n == 1 {
		return classOther, 1
	}
	return slowClass(r), n
}

// runEnd returns the end of the run of characters of class k starting at i.
func runEnd(s string, i int, k charClass) int {
	for i < len(s) {
		if c := s[i]; c < utf8.RuneSelf {
			if asciiClass[c] != k {
				return i
			}
			i++
			continue
		}
		ck, n := classAt(s, i)
		if ck != k {
			return i
		}
		i += n
	}
	return i
}

// pretokenEnd returns the end of the pre-token that starts at s[i]; i must be
// less than len(s). The result is always greater than i.
func pretokenEnd(s string, i int) int {
	// 's 't 're 've 'm 'll 'd
	if s[i] == '\'' && i+1 < len(s) {
		switch s[i+1] {
		case 's', 't', 'm', 'd':
			return i + 2
		case 'r', 'v':
			if i+2 < len(s) && s[i+2] == 'e' {
				return i + 3
			}
		case 'l':
			if i+2 < len(s) && s[i+2] == 'l' {
				return i + 3
			}
		}
	}
	k, n := classAt(s, i)
	if k == classSpace {
		// " ?\p{L}+", " ?\p{N}+" and " ?[^\s\p{L}\p{N}]+" with the space.
		if s[i] == ' ' && i+1 < len(s) {
			if k2, n2 := classAt(s, i+1); k2 != classSpace {
				return runEnd(s, i+1+n2, k2)
			}
		}
		// \s+(?!\S) and \s+.
		last := i // start of the last whitespace character of the run
		j := i + n
		for j < len(s) {
			kj, nj := classAt(s, j)
			if kj != classSpace {
				break
			}
			last = j
			j += nj
		}
		if j < len(s) && last > i {
			return last
		}
		return j
	}
	return runEnd(s, i+n, k)
}
