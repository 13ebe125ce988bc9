package tokenizer

import "unicode/utf8"

// Decoder turns a stream of token ids into text that is always valid UTF-8.
// The bytes of a character split across tokens are held back until the
// character completes. Bytes that can never form a character are replaced by
// U+FFFD, one replacement per maximal ill-formed subsequence (the Unicode
// "maximal subpart" practice, as Rust's String::from_utf8_lossy and Python's
// errors="replace" do), so that the concatenation of everything Next and
// Flush return equals the lossy decoding of Decode(ids).
//
// A Decoder is not safe for concurrent use.
type Decoder struct {
	t     Tokenizer
	pend  [4]byte // an incomplete but so far valid UTF-8 sequence
	npend int
	work  []byte
	out   []byte
}

// NewDecoder returns a streaming decoder of t's tokens.
func NewDecoder(t Tokenizer) *Decoder { return &Decoder{t: t} }

// NewDecoder returns a streaming decoder.
func (t *BPE) NewDecoder() *Decoder { return NewDecoder(t) }

const replacement = "\uFFFD"

// Next adds token id and returns the text that is complete so far. Out-of-range
// ids are ignored.
func (d *Decoder) Next(id int32) string {
	piece := d.t.Piece(id)
	if piece == "" {
		return ""
	}
	if d.npend == 0 && utf8.ValidString(piece) {
		return piece // common case: no copy at all
	}
	d.work = append(append(d.work[:0], d.pend[:d.npend]...), piece...)
	d.npend = 0
	d.out = d.out[:0]
	w := d.work
	for i := 0; i < len(w); {
		c := w[i]
		if c < 0x80 {
			d.out = append(d.out, c)
			i++
			continue
		}
		n, need := utf8Subpart(w[i:])
		switch {
		case need == 0:
			d.out = append(d.out, replacement...)
			i++
		case n == need:
			d.out = append(d.out, w[i:i+n]...)
			i += n
		case i+n == len(w):
			// A valid prefix cut by the end of the data: wait for more.
			d.npend = copy(d.pend[:], w[i:])
			i = len(w)
		default:
			d.out = append(d.out, replacement...)
			i += n
		}
	}
	return string(d.out)
}

// Flush returns what is held back (an incomplete character, as U+FFFD) and
// resets the decoder for reuse.
func (d *Decoder) Flush() string {
	if d.npend == 0 {
		return ""
	}
	d.npend = 0
	return replacement
}

// utf8Subpart examines p, which starts with a byte >= 0x80. need is the length
// of the sequence announced by p[0] (0 if p[0] cannot start a sequence) and n
// is how many bytes of p form a valid beginning of that sequence: n == need
// means a complete character; n < need means p is cut (if n == len(p)) or
// ill-formed there.
func utf8Subpart(p []byte) (n, need int) {
	c := p[0]
	lo, hi := byte(0x80), byte(0xBF) // allowed range of the second byte
	switch {
	case c >= 0xC2 && c <= 0xDF:
		need = 2
	case c == 0xE0:
		need, lo = 3, 0xA0
	case c == 0xED:
		need, hi = 3, 0x9F
	case c >= 0xE1 && c <= 0xEF:
		need = 3
	case c == 0xF0:
		need, lo = 4, 0x90
	case c == 0xF4:
		need, hi = 4, 0x8F
	case c >= 0xF1 && c <= 0xF3:
		need = 4
	default:
		return 0, 0
	}
	n = 1
	for n < need && n < len(p) {
		b := p[n]
		if n == 1 {
			if b < lo || b > hi {
				break
			}
		} else if b < 0x80 || b > 0xBF {
			break
		}
		n++
	}
	return n, need
}
