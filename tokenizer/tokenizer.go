// Package tokenizer turns text into token ids and back for the vocabularies GGUF files
// carry. Each kind of vocabulary (tokenizer.ggml.model) is an implementation of the Tokenizer
// interface that registers itself (registry.go); the rest of gorun names only the interface.
//
// SPM implements SentencePiece vocabularies ("llama"; spm.go). BPE implements byte-level BPE
// ("gpt2") with the pre-tokenizer tokenizer.ggml.pre names (pretokenizers.go: GPT-2, Llama 3,
// Qwen2, StarCoder/SmolLM, Falcon, DeepSeek Coder, llama.cpp's default), producing the same ids
// as Hugging Face and llama.cpp. Its encoding splits the text on special tokens, splits each remaining piece with
// the GPT-2 pre-tokenizer (see pretokenize.go), and runs BPE over the raw
// bytes of each pre-token. Merges are kept as a table from a pair of token ids
// to (rank, merged id), so encoding never builds the byte-mapped strings.
//
// A BPE is immutable after construction apart from an internal, bounded
// word cache, and is safe for concurrent use. A Decoder is not.
package tokenizer

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"slices"
	"strings"
)

// ggml token types (enum llama_token_type as stored in GGUF).
const (
	TypeNormal      int32 = 1
	TypeUnknown     int32 = 2
	TypeControl     int32 = 3
	TypeUserDefined int32 = 4
	TypeUnused      int32 = 5
	TypeByte        int32 = 6
)

// EndOfText is GPT-2's end-of-text token.
const EndOfText = "<|endoftext|>"

// BPE is a GPT-2-style byte-level BPE tokenizer.
type BPE struct {
	tokens []string // stored (byte-mapped) token strings; control tokens as-is
	pieces []string // raw bytes of each token
	types  []int32
	vocab  map[string]int32

	// merges maps pairKey(left, right) to rank<<32 | merged id.
	merges  map[uint64]uint64
	byteTok [256]int32 // id of the token for each single byte, or -1

	specials    specialSet // control and user-defined tokens, and "<|endoftext|>"
	userDefined specialSet // user-defined tokens alone: matched by EncodeOrdinary too

	pre          preTokenizer // tokenizer.ggml.pre's (pretokenizers.go)
	ignoreMerges bool         // a pre-token that is a normal token is emitted whole

	eos     int32
	special Special // from the file's metadata (FromGGUF); EOS alone for New
	cache   wordCache
}

func pairKey(a, b int32) uint64 { return uint64(uint32(a))<<32 | uint64(uint32(b)) }

// New builds a tokenizer from the vocabulary as GGUF stores it: tokens[i] is
// the byte-level (byte-to-unicode mapped) string of token i, merges are
// "left right" strings in rank order, types are ggml token types (1 normal,
// 3 control, 4 user-defined, 6 byte; nil means all normal).
//
// Control and user-defined tokens are stored as their literal text; they and
// "<|endoftext|>" (whatever its type) are the special tokens that Encode
// matches in the input text. A merge whose two parts or whose result is not in
// the vocabulary can never apply and is ignored.
func New(tokens []string, merges []string, types []int32) (*BPE, error) {
	return NewWithPre("gpt-2", tokens, merges, types)
}

// NewWithPre is New with the pre-tokenizer named by pre, a tokenizer.ggml.pre value that
// llama.cpp knows ("gpt-2", "llama-bpe", "qwen2", "smollm", "default", ...; "" is GPT-2's).
func NewWithPre(pre string, tokens []string, merges []string, types []int32) (*BPE, error) {
	pt, ok := bpePreTokenizers[pre]
	if !ok {
		return nil, fmt.Errorf("tokenizer: pre-tokenizer %q is not supported; supported: %s", pre, strings.Join(supportedPre(), ", "))
	}
	n := len(tokens)
	if n == 0 {
		return nil, errors.New("tokenizer: empty vocabulary")
	}
	if n > math.MaxInt32 {
		return nil, fmt.Errorf("tokenizer: vocabulary of %d tokens is too large", n)
	}
	if types != nil && len(types) != n {
		return nil, fmt.Errorf("tokenizer: %d token types for %d tokens", len(types), n)
	}
	t := &BPE{
		tokens:  slices.Clone(tokens),
		pieces:  make([]string, n),
		types:   make([]int32, n),
		vocab:   make(map[string]int32, n),
		merges:  make(map[uint64]uint64, min(len(merges), n)), // a merge that applies makes a token
		eos:     -1,
		special: noSpecial(),

		pre:          pt.pre,
		ignoreMerges: pt.ignoreMerges,
	}
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
		if _, dup := t.vocab[tok]; !dup && tok != "" {
			t.vocab[tok] = int32(i)
		}
		switch typ {
		case TypeControl, TypeUserDefined:
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
			} else {
				t.pieces[i] = unmapToken(tok)
			}
		default:
			t.pieces[i] = unmapToken(tok)
		}
	}
	if id, ok := t.vocab[EndOfText]; ok {
		t.eos = id
		if typ := t.types[id]; typ != TypeControl && typ != TypeUserDefined {
			specials = append(specials, id)
		}
	}

	// Single-byte tokens: the normal token spelled with the byte's code point.
	for b := 0; b < 256; b++ {
		if id, ok := t.vocab[string(byteToRune[b])]; ok {
			if typ := t.types[id]; typ != TypeControl && typ != TypeUserDefined {
				t.byteTok[b] = id
			}
		}
	}

	for rank, m := range merges {
		sp := -1
		if len(m) > 1 {
			if k := strings.IndexByte(m[1:], ' '); k >= 0 {
				sp = k + 1
			}
		}
		if sp < 0 || sp == len(m)-1 {
			return nil, fmt.Errorf("tokenizer: merge %d %q is not \"left right\"", rank, m)
		}
		left, right := m[:sp], m[sp+1:]
		a, okA := t.vocab[left]
		b, okB := t.vocab[right]
		c, okC := t.vocab[left+right]
		if !okA || !okB || !okC {
			continue
		}
		k := pairKey(a, b)
		if _, dup := t.merges[k]; !dup {
			t.merges[k] = uint64(rank)<<32 | uint64(uint32(c))
		}
	}

	t.specials = newSpecialSet(t.tokens, specials)
	t.userDefined = newSpecialSet(t.tokens, userDefined)
	t.cache.m = make(map[string][]int32)
	return t, nil
}

// FromFiles builds a tokenizer from Hugging Face's vocab.json ({token: id})
// and merges.txt (one "left right" merge per line after the "#version"
// header). "<|endoftext|>" is a control (special) token; every other token is
// normal.
func FromFiles(vocabJSON, mergesTXT string) (*BPE, error) {
	vb, err := os.ReadFile(vocabJSON)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	var vocab map[string]int64
	if err := json.Unmarshal(vb, &vocab); err != nil {
		return nil, fmt.Errorf("tokenizer: %s: %w", vocabJSON, err)
	}
	size := int64(0)
	for tok, id := range vocab {
		if id < 0 || id >= math.MaxInt32 {
			return nil, fmt.Errorf("tokenizer: %s: token %q has id %d", vocabJSON, tok, id)
		}
		size = max(size, id+1)
	}
	if size > int64(len(vocab))+1<<20 {
		return nil, fmt.Errorf("tokenizer: %s: ids up to %d for %d tokens", vocabJSON, size-1, len(vocab))
	}
	tokens := make([]string, size)
	types := make([]int32, size)
	seen := make([]bool, size)
	for tok, id := range vocab {
		if seen[id] {
			return nil, fmt.Errorf("tokenizer: %s: id %d used twice (%q, %q)", vocabJSON, id, tokens[id], tok)
		}
		seen[id] = true
		tokens[id] = tok
		types[id] = TypeNormal
		if tok == EndOfText {
			types[id] = TypeControl
		}
	}
	for id := range tokens {
		if !seen[id] {
			types[id] = TypeUnused // a hole in the id space; never produced
		}
	}

	mb, err := os.ReadFile(mergesTXT)
	if err != nil {
		return nil, fmt.Errorf("tokenizer: %w", err)
	}
	var merges []string
	for line := range strings.SplitSeq(string(mb), "\n") {
		line = strings.TrimSuffix(line, "\r")
		if line == "" || strings.HasPrefix(line, "#version") {
			continue
		}
		merges = append(merges, line)
	}
	return New(tokens, merges, types)
}

// VocabSize returns the number of tokens.
func (t *BPE) VocabSize() int { return len(t.tokens) }

// EOS returns the end-of-sequence id: the file's eos_token_id, else "<|endoftext|>", or -1.
func (t *BPE) EOS() int32 { return t.eos }

// Special returns the special token ids and the BOS/EOS rules.
func (t *BPE) Special() Special {
	sp := t.special
	sp.EOS = t.eos
	return sp
}

// IsEOG reports whether id ends generation (see Special.EOG).
func (t *BPE) IsEOG(id int32) bool { return id == t.eos || t.special.isEOG(id) }

// Piece returns the raw text (bytes) of token id, or "" if id is out of range.
func (t *BPE) Piece(id int32) string {
	if id < 0 || int(id) >= len(t.pieces) {
		return ""
	}
	return t.pieces[id]
}

// Token returns the stored (byte-mapped) string of token id, or "" if id is
// out of range.
func (t *BPE) Token(id int32) string {
	if id < 0 || int(id) >= len(t.tokens) {
		return ""
	}
	return t.tokens[id]
}

// ID returns the id of the token whose stored string is token.
func (t *BPE) ID(token string) (int32, bool) {
	id, ok := t.vocab[token]
	return id, ok
}

// TokenBytes returns the raw bytes of token id (for control and user-defined
// tokens, their text), or nil if id is out of range. The result is a fresh
// copy.
func (t *BPE) TokenBytes(id int32) []byte {
	if id < 0 || int(id) >= len(t.pieces) {
		return nil
	}
	return []byte(t.pieces[id])
}

// Decode returns the concatenated bytes of the tokens. Out-of-range ids are
// skipped. The result may be invalid UTF-8 if the ids split a character.
func (t *BPE) Decode(ids []int32) string {
	n := 0
	for _, id := range ids {
		if id >= 0 && int(id) < len(t.pieces) {
			n += len(t.pieces[id])
		}
	}
	var b strings.Builder
	b.Grow(n)
	for _, id := range ids {
		if id >= 0 && int(id) < len(t.pieces) {
			b.WriteString(t.pieces[id])
		}
	}
	return b.String()
}

// Encode tokenizes text. Special tokens ("<|endoftext|>" and any control or
// user-defined token) occurring in text are matched first, leftmost and then
// longest, and emitted as their ids; the text between them is encoded as by
// EncodeOrdinary.
func (t *BPE) Encode(text string) []int32 {
	return t.AppendEncode(make([]int32, 0, len(text)/4+1), text)
}

// EncodeOrdinary tokenizes text without matching control tokens: "<|endoftext|>" in text is
// encoded as ordinary characters. User-defined tokens are still matched, as llama.cpp and
// Hugging Face match them in any text.
func (t *BPE) EncodeOrdinary(text string) []int32 {
	return t.userDefined.appendSplit(make([]int32, 0, len(text)/4+1), text, t.appendOrdinary)
}

// AppendEncode appends the encoding of text (as Encode) to dst and returns the
// extended slice.
func (t *BPE) AppendEncode(dst []int32, text string) []int32 {
	return t.specials.appendSplit(dst, text, t.appendOrdinary)
}

// matchSpecial returns the longest special token that s starts with (by trying each: the
// reference the matcher is tested against).
func (t *BPE) matchSpecial(s string) (int32, bool) { return t.specials.match(s) }

func (t *BPE) appendOrdinary(dst []int32, text string) []int32 {
	if t.pre == nil {
		for i := 0; i < len(text); {
			j := pretokenEnd(text, i)
			dst = t.appendWord(dst, text[i:j])
			i = j
		}
		return dst
	}
	t.pre.each(text, func(w string) { dst = t.appendWord(dst, w) })
	return dst
}
