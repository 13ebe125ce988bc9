package testmodel

import (
	"fmt"
	"strings"
)

// EndOfText is GPT-2's only special token.
const EndOfText = "<|endoftext|>"

// Token types as llama.cpp stores them in tokenizer.ggml.token_type.
const (
	tokenNormal  = 1
	tokenControl = 3
)

// vocab is a tokenizer as the GGUF stores it.
type vocab struct {
	tokens []string
	types  []int32
	merges []string
	eot    int // id of <|endoftext|>: bos, eos and unknown
}

// ByteTokens returns GPT-2's 256 byte-level tokens in the order of its vocab.json (ids 0..255):
// the bytes that are printable Latin-1 map to themselves and come first (33..126, 161..172,
// 174..255); the other 68 bytes map to U+0100 upwards, in byte order, and follow.
func ByteTokens() [256]string {
	var out [256]string
	i := 0
	printable := func(b int) bool { return (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255) }
	for b := 0; b < 256; b++ {
		if printable(b) {
			out[i] = string(rune(b))
			i++
		}
	}
	for b, n := 0, 0; b < 256; b++ {
		if !printable(b) {
			out[i] = string(rune(256 + n))
			i++
			n++
		}
	}
	return out
}

// space is the byte-level token of ' ' (byte 32, the 33rd unprintable byte: U+0120).
const space = "Ġ"

// lettersByFrequency orders the first merges the way English text would: "Ġt", "Ġa", ...
const lettersByFrequency = "taoiswcbphfmdrelngyuvjkqxz"

// syntheticVocab builds a self-consistent byte-level BPE vocabulary of n tokens: the 256 byte
// tokens, n-257 merges, each adding the concatenation of two earlier tokens, then
// <|endoftext|>. The merges join lowercase letters (with or without a leading space), short
// tokens preferred, so ordinary text tokenizes into multi-byte tokens.
func syntheticVocab(n int, seed int64) (*vocab, error) {
	if n < 257 {
		return nil, fmt.Errorf("testmodel: a synthetic vocabulary needs at least 257 tokens, not %d", n)
	}
	bt := ByteTokens()
	v := &vocab{tokens: append(make([]string, 0, n), bt[:]...), eot: n - 1}
	b := newMergeBuilder(v, seed)
	for i := 0; i < len(lettersByFrequency) && len(v.tokens) < n-1; i++ {
		b.add(space, lettersByFrequency[i:i+1])
	}
	for len(v.tokens) < n-1 {
		b.addRandom()
	}
	v.tokens = append(v.tokens, EndOfText)
	v.types = make([]int32, n)
	for i := range v.types {
		v.types[i] = tokenNormal
	}
	v.types[v.eot] = tokenControl
	return v, nil
}

// mergeBuilder grows a vocabulary by merges over "words": tokens made of lowercase letters,
// optionally after a leading space.
type mergeBuilder struct {
	v       *vocab
	rng     rng
	have    map[string]bool
	words   []string // every word token
	suffix  []string // word tokens without a leading space: the right side of a merge
	longest string
}

func newMergeBuilder(v *vocab, seed int64) *mergeBuilder {
	b := &mergeBuilder{v: v, rng: newRNG(seed, 1<<32), have: make(map[string]bool, cap(v.tokens))}
	for _, t := range v.tokens {
		b.have[t] = true
	}
	for c := 'a'; c <= 'z'; c++ {
		b.noteWord(string(c))
	}
	return b
}

func (b *mergeBuilder) noteWord(t string) {
	b.words = append(b.words, t)
	if !strings.HasPrefix(t, space) {
		b.suffix = append(b.suffix, t)
	}
	if len(t) > len(b.longest) {
		b.longest = t
	}
}

// add records the merge "left right" and its new token.
func (b *mergeBuilder) add(left, right string) {
	t := left + right
	b.have[t] = true
	b.v.tokens = append(b.v.tokens, t)
	b.v.merges = append(b.v.merges, left+" "+right)
	b.noteWord(t)
}

// addRandom adds one merge of two random short words whose concatenation is new. Should many
// tries collide, extending the longest word by a letter is new by construction.
func (b *mergeBuilder) addRandom() {
	for try := 0; try < 64; try++ {
		l, r := b.pickShort(b.words), b.pickShort(b.suffix)
		if !b.have[l+r] {
			b.add(l, r)
			return
		}
	}
	b.add(b.longest, "a")
}

// pickShort draws two candidates and keeps the shorter, so short tokens are merged more often
// and the vocabulary grows like a real one, mostly by a letter or two at a time.
func (b *mergeBuilder) pickShort(from []string) string {
	x := from[b.rng.intn(len(from))]
	y := from[b.rng.intn(len(from))]
	if len(y) < len(x) {
		return y
	}
	return x
}

// givenVocab wraps a real vocabulary (Config.Tokens and Merges).
// addControl appends control tokens to the vocabulary.
func (v *vocab) addControl(tokens []string) {
	for _, t := range tokens {
		v.tokens = append(v.tokens, t)
		v.types = append(v.types, tokenControl)
	}
}

// idOr is the id of the token whose text is t, or def when t is empty.
func (v *vocab) idOr(t string, def uint32) (uint32, error) {
	if t == "" {
		return def, nil
	}
	for i, tok := range v.tokens {
		if tok == t {
			return uint32(i), nil
		}
	}
	return 0, fmt.Errorf("testmodel: the vocabulary has no token %q", t)
}

func givenVocab(tokens, merges []string) (*vocab, error) {
	v := &vocab{tokens: tokens, merges: merges, eot: -1, types: make([]int32, len(tokens))}
	for i, t := range tokens {
		v.types[i] = tokenNormal
		if t == EndOfText {
			v.types[i] = tokenControl
			v.eot = i
		}
	}
	if v.eot < 0 {
		return nil, fmt.Errorf("testmodel: the vocabulary has no %s token", EndOfText)
	}
	return v, nil
}
