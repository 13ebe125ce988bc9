package tokenizer

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/gorun-dev/gorun/gguf"
)

func init() { Register("llama", Kind{Build: spmFromGGUF, AddBOS: true}) }

// spaceMark is SentencePiece's stand-in for a space inside tokens (U+2581).
const spaceMark = "\u2581"

// SPM is a SentencePiece vocabulary (tokenizer.ggml.model "llama": Llama 1/2, Mistral, Phi-3,
// ...), tokenized as llama.cpp's llm_tokenizer_spm and Hugging Face's Llama tokenizer do: the
// text, with a space put in front and every space written "▁", is split into characters, and
// the adjacent pair whose concatenation is the token of highest score is merged (leftmost
// first among equal scores) until no pair makes a token. A character that is no token is
// written as its bytes' <0xNN> tokens (byte fallback), or as the unknown token when the
// vocabulary has none.
//
// Control, user-defined and unknown tokens written in the text are matched as special tokens
// by Encode; merges only ever produce normal tokens (SentencePiece never makes a control or
// byte token out of text; llama.cpp would, for "<s>" or "<0x41>" written in a text given as
// ordinary, which is taken as a bug not to reproduce).
//
// Decoding: Piece is a token's text with "▁" as a space and a byte token as its byte, so the
// stream a Decoder returns keeps every space (what a generated continuation needs). Decode,
// which reads a whole sequence, also drops the space the encoder put in front of the text when
// the sequence starts with a text token (llama.cpp's detokenize), so that
// Decode(EncodeOrdinary(s)) == s for every valid UTF-8 s.
type SPM struct {
	tokens []string // as stored, with "▁"
	pieces []string // raw text of each token
	scores []float32
	types  []int32
	vocab  map[string]int32 // every token by its stored text
	merge  map[string]int32 // the tokens merges may produce, by stored text

	byteTok        [256]int32 // the <0xNN> token of each byte, or -1
	addSpacePrefix bool

	specials    specialSet // control, user-defined and unknown tokens
	userDefined specialSet // user-defined tokens alone: matched by EncodeOrdinary too
	special     Special
}

// NewSPM builds a SentencePiece tokenizer from the vocabulary as GGUF stores it: tokens with
// "▁" for spaces, their scores, their ggml types (nil: all normal), and whether a space is
// put in front of the text (tokenizer.ggml.add_space_prefix, true for nearly all models).
func NewSPM(tokens []string, scores []float32, types []int32, addSpacePrefix bool) (*SPM, error) {
	n := len(tokens)
	switch {
	case n == 0:
		return nil, errors.New("tokenizer: empty vocabulary")
	case n > math.MaxInt32:
		return nil, fmt.Errorf("tokenizer: vocabulary of %d tokens is too large", n)
	case scores != nil && len(scores) != n:
		return nil, fmt.Errorf("tokenizer: %d scores for %d tokens", len(scores), n)
	case types != nil && len(types) != n:
		return nil, fmt.Errorf("tokenizer: %d token types for %d tokens", len(types), n)
	}
	t := &SPM{
		tokens:         slices.Clone(tokens),
		pieces:         make([]string, n),
		scores:         make([]float32, n),
		types:          make([]int32, n),
		vocab:          make(map[string]int32, n),
		merge:          make(map[string]int32, n),
		addSpacePrefix: addSpacePrefix,
		special:        noSpecial(),
	}
	copy(t.scores, scores)
	for i := range t.byteTok {
		t.byteTok[i] = -1
	}
	var specials, userDefined []int32
	for i, tok := range tokens {
		typ := TypeNormal
		if types != nil {
			typ = types[i]
		}
		t.types[i] = typ
		if _, dup := t.vocab[tok]; !dup {
			t.vocab[tok] = int32(i)
		}
		t.pieces[i] = strings.ReplaceAll(tok, spaceMark, " ")
		switch typ {
		case TypeControl, TypeUserDefined, TypeUnknown:
			t.pieces[i] = tok
			if tok != "" {
				specials = append(specials, int32(i))
				if typ == TypeUserDefined {
					userDefined = append(userDefined, int32(i))
				}
			}
		case TypeByte:
			if b, ok := parseByteToken(tok); ok {
				t.pieces[i] = string([]byte{b})
				if t.byteTok[b] < 0 {
					t.byteTok[b] = int32(i)
				}
			}
		case TypeUnused:
		default:
			if _, dup := t.merge[tok]; !dup && tok != "" {
				t.merge[tok] = int32(i)
			}
		}
	}
	t.specials = newSpecialSet(t.tokens, specials)
	t.userDefined = newSpecialSet(t.tokens, userDefined)
	if id, ok := t.vocab["<unk>"]; ok {
		t.special.UNK = id
	}
	return t, nil
}

// spmFromGGUF builds a SentencePiece tokenizer from the file's tokenizer.ggml.* metadata.
func spmFromGGUF(f *gguf.File, sp Special) (Tokenizer, error) {
	tokens, err := f.Strings("tokenizer.ggml.tokens")
	if err != nil {
		return nil, err
	}
	var scores []float32
	if f.Has("tokenizer.ggml.scores") {
		if scores, err = f.Float32s("tokenizer.ggml.scores"); err != nil {
			return nil, err
		}
	}
	var types []int32
	if f.Has("tokenizer.ggml.token_type") {
		if types, err = f.Int32s("tokenizer.ggml.token_type"); err != nil {
			return nil, err
		}
	}
	addSpace := true
	if f.Has("tokenizer.ggml.add_space_prefix") {
		v, _ := f.Get("tokenizer.ggml.add_space_prefix")
		if addSpace, err = v.AsBool(); err != nil {
			return nil, fmt.Errorf("tokenizer.ggml.add_space_prefix: %w", err)
		}
	}
	t, err := NewSPM(tokens, scores, types, addSpace)
	if err != nil {
		return nil, err
	}
	if sp.UNK < 0 {
		sp.UNK = t.special.UNK
	}
	sp.addEOG(t.ID)
	t.special = sp
	return t, nil
}

// VocabSize returns the number of tokens.
func (t *SPM) VocabSize() int { return len(t.tokens) }

// EOS returns the end-of-sequence id, or -1.
func (t *SPM) EOS() int32 { return t.special.EOS }

// Special returns the special token ids and the BOS/EOS rules.
func (t *SPM) Special() Special { return t.special }

// IsEOG reports whether id ends generation (see Special.EOG).
func (t *SPM) IsEOG(id int32) bool { return t.special.isEOG(id) }

// Piece returns the raw text of token id ("▁" as a space, a byte token as its byte; control
// tokens as their text), or "" if id is out of range.
func (t *SPM) Piece(id int32) string {
	if id < 0 || int(id) >= len(t.pieces) {
		return ""
	}
	return t.pieces[id]
}

// TokenBytes returns Piece as a fresh slice, or nil if id is out of range.
func (t *SPM) TokenBytes(id int32) []byte {
	if id < 0 || int(id) >= len(t.pieces) {
		return nil
	}
	return []byte(t.pieces[id])
}

// Token returns the stored string of token id (with "▁"), or "" if id is out of range.
func (t *SPM) Token(id int32) string {
	if id < 0 || int(id) >= len(t.tokens) {
		return ""
	}
	return t.tokens[id]
}

// ID returns the id of the token whose stored string is token.
func (t *SPM) ID(token string) (int32, bool) {
	id, ok := t.vocab[token]
	return id, ok
}

// NewDecoder returns a streaming decoder (it keeps every space; see SPM).
func (t *SPM) NewDecoder() *Decoder { return NewDecoder(t) }

// Decode returns the text of the tokens (out-of-range ids skipped), without the space the
// encoder put in front when the first token is a text token (see SPM).
func (t *SPM) Decode(ids []int32) string {
	var b strings.Builder
	for i, id := range ids {
		p := t.Piece(id)
		if i == 0 && t.addSpacePrefix && t.isText(id) {
			p = strings.TrimPrefix(p, " ")
		}
		b.WriteString(p)
	}
	return b.String()
}

// isText reports whether id is a normal or byte token.
func (t *SPM) isText(id int32) bool {
	if id < 0 || int(id) >= len(t.types) {
		return false
	}
	typ := t.types[id]
	return typ != TypeControl && typ != TypeUserDefined && typ != TypeUnknown
}

// Encode tokenizes text, matching the control, user-defined and unknown tokens written in it;
// every stretch of text (the first, and each after a special token) gets the space prefix, as
// llama.cpp and Hugging Face do.
func (t *SPM) Encode(text string) []int32 {
	return t.AppendEncode(make([]int32, 0, len(text)/3+1), text)
}

// AppendEncode is Encode appending to dst.
func (t *SPM) AppendEncode(dst []int32, text string) []int32 {
	return t.specials.appendSplit(dst, text, t.appendOrdinary)
}

// EncodeOrdinary tokenizes text with the text of control and unknown tokens as ordinary
// characters; user-defined tokens are still matched (as llama.cpp and Hugging Face do).
func (t *SPM) EncodeOrdinary(text string) []int32 {
	return t.userDefined.appendSplit(make([]int32, 0, len(text)/3+1), text, t.appendOrdinary)
}

// spmSymbol is a run of characters of the text being merged, in a linked list.
type spmSymbol struct {
	start, end int // byte range in the escaped text
	prev, next int // neighbours, -1 at the ends
}

// spmBigram is a candidate merge of the symbol left with its right neighbour right, valid
// while both still span what they spanned when it was made (size bytes together).
type spmBigram struct {
	score       float32
	left, right int
	size        int
}

// before orders the queue: highest score first, then leftmost.
func (a spmBigram) before(b spmBigram) bool {
	return a.score > b.score || (a.score == b.score && a.left < b.left)
}

// appendOrdinary encodes text (no special tokens) with llama.cpp's SPM merge.
func (t *SPM) appendOrdinary(dst []int32, text string) []int32 {
	if text == "" {
		return dst
	}
	var sb strings.Builder
	sb.Grow(len(text) + len(text)/2 + 3)
	if t.addSpacePrefix {
		sb.WriteString(spaceMark)
	}
	for i := 0; i < len(text); i++ {
		if text[i] == ' ' {
			sb.WriteString(spaceMark)
		} else {
			sb.WriteByte(text[i])
		}
	}
	s := sb.String()

	syms := make([]spmSymbol, 0, len(s))
	for i := 0; i < len(s); {
		_, n := utf8.DecodeRuneInString(s[i:])
		k := len(syms)
		syms = append(syms, spmSymbol{start: i, end: i + n, prev: k - 1, next: k + 1})
		i += n
	}
	syms[len(syms)-1].next = -1

	var q spmQueue
	try := func(l, r int) {
		if l < 0 || r < 0 {
			return
		}
		id, ok := t.merge[s[syms[l].start:syms[r].end]]
		if !ok {
			return
		}
		q.push(spmBigram{score: t.scores[id], left: l, right: r, size: syms[r].end - syms[l].start})
	}
	for i := 1; i < len(syms); i++ {
		try(i-1, i)
	}
	for len(q) > 0 {
		bg := q.pop()
		l, r := &syms[bg.left], &syms[bg.right]
		if l.end == l.start || r.end == r.start || r.end-l.start != bg.size || l.next != bg.right {
			continue // one side already merged into something else
		}
		l.end = r.end
		r.end = r.start
		l.next = r.next
		if r.next >= 0 {
			syms[r.next].prev = bg.left
		}
		try(l.prev, bg.left)
		try(bg.left, l.next)
	}
	for i := 0; i >= 0; i = syms[i].next {
		dst = t.appendSymbol(dst, s[syms[i].start:syms[i].end])
	}
	return dst
}

// appendSymbol appends the token of a final symbol: itself when it is a token (every merge
// made one), else its bytes' tokens, else the unknown token.
func (t *SPM) appendSymbol(dst []int32, sym string) []int32 {
	if id, ok := t.merge[sym]; ok {
		return append(dst, id)
	}
	for i := 0; i < len(sym); i++ {
		if id := t.byteTok[sym[i]]; id >= 0 {
			dst = append(dst, id)
			continue
		}
		if t.special.UNK >= 0 {
			return append(dst, t.special.UNK) // one unknown token for the character
		}
	}
	return dst
}

// spmQueue is a binary heap of candidate merges, best first.
type spmQueue []spmBigram

func (h *spmQueue) push(b spmBigram) {
	*h = append(*h, b)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if !b.before(s[p]) {
			break
		}
		s[i] = s[p]
		i = p
	}
	s[i] = b
}

func (h *spmQueue) pop() spmBigram {
	s := *h
	top := s[0]
	last := s[len(s)-1]
	s = s[:len(s)-1]
	*h = s
	i := 0
	for {
		l := 2*i + 1
		if l >= len(s) {
			break
		}
		if r := l + 1; r < len(s) && s[r].before(s[l]) {
			l = r
		}
		if !s[l].before(last) {
			break
		}
		s[i] = s[l]
		i = l
	}
	if len(s) > 0 {
		s[i] = last
	}
	return top
}
