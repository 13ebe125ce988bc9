package tokenizer

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/gorun-dev/gorun/gguf"
)

// Kind is a vocabulary kind (tokenizer.ggml.model) that an implementation registers.
type Kind struct {
	// Build makes the tokenizer from the file's tokenizer.ggml.* metadata; sp holds the
	// special ids and rules already read and checked, for it to keep.
	Build func(f *gguf.File, sp Special) (Tokenizer, error)
	// AddBOS is llama.cpp's default for tokenizer.ggml.add_bos_token when the file lacks it
	// (true for SentencePiece vocabularies, false for GPT-2's BPE).
	AddBOS bool
}

var (
	kindsMu sync.RWMutex
	kinds   = map[string]Kind{}
)

// Register makes a vocabulary kind loadable; called from the init of its implementation.
func Register(model string, k Kind) {
	kindsMu.Lock()
	defer kindsMu.Unlock()
	if _, dup := kinds[model]; dup || model == "" || k.Build == nil {
		panic(fmt.Sprintf("tokenizer: Register(%q) twice or incomplete", model))
	}
	kinds[model] = k
}

// Kinds lists the registered vocabulary kinds, sorted.
func Kinds() []string {
	kindsMu.RLock()
	defer kindsMu.RUnlock()
	names := make([]string, 0, len(kinds))
	for n := range kinds {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// FromGGUF builds the tokenizer stored in a GGUF file's metadata (tokenizer.ggml.*): the kind
// tokenizer.ggml.model names, with the special ids and BOS/EOS rules of the file.
func FromGGUF(f *gguf.File) (Tokenizer, error) {
	model, err := f.String("tokenizer.ggml.model")
	if err != nil {
		return nil, err
	}
	kindsMu.RLock()
	k, ok := kinds[model]
	kindsMu.RUnlock()
	if !ok {
		return nil, fmt.Errorf("tokenizer.ggml.model = %q is not supported; supported: %s", model, strings.Join(Kinds(), ", "))
	}
	sp, err := readSpecial(f, k.AddBOS)
	if err != nil {
		return nil, err
	}
	return k.Build(f, sp)
}

// eogTexts are the tokens llama.cpp treats as end of generation by their text, whatever the
// file's eos_token_id says (chat models end turns with them).
var eogTexts = []string{"<|eot_id|>", "<|im_end|>", "<|end|>", "<end_of_turn>", "<|endoftext|>", "<|eom_id|>", "<EOT>", "_<EOT>", "<｜end▁of▁sentence｜>"}

// readSpecial reads the special token ids (each inside the vocabulary) and add_bos/add_eos.
func readSpecial(f *gguf.File, addBOS bool) (Special, error) {
	sp := noSpecial()
	sp.AddBOS = addBOS
	v, ok := f.Get("tokenizer.ggml.tokens")
	if !ok || v.Type() != gguf.TypeArray {
		return sp, fmt.Errorf("tokenizer.ggml.tokens is missing or not an array")
	}
	n := uint64(v.Len())
	for _, id := range []struct {
		key string
		dst *int32
	}{{"bos", &sp.BOS}, {"eos", &sp.EOS}, {"eot", &sp.EOT}, {"eom", &sp.EOM}, {"unknown", &sp.UNK}, {"padding", &sp.PAD}} {
		key := "tokenizer.ggml." + id.key + "_token_id"
		if !f.Has(key) {
			continue
		}
		x, err := f.Uint(key)
		if err != nil {
			return sp, err
		}
		if x >= n {
			return sp, fmt.Errorf("%s %d is outside the vocabulary of %d", key, x, n)
		}
		*id.dst = int32(x)
	}
	for _, b := range []struct {
		key string
		dst *bool
	}{{"add_bos_token", &sp.AddBOS}, {"add_eos_token", &sp.AddEOS}} {
		key := "tokenizer.ggml." + b.key
		if !f.Has(key) {
			continue
		}
		x, _ := f.Get(key)
		v, err := x.AsBool()
		if err != nil {
			return sp, fmt.Errorf("%s: %w", key, err)
		}
		*b.dst = v
	}
	return sp, nil
}

// addEOG fills sp.EOG from its ids and the tokens whose text llama.cpp recognizes.
func (sp *Special) addEOG(id func(string) (int32, bool)) {
	for _, e := range []int32{sp.EOS, sp.EOT, sp.EOM} {
		if e >= 0 && !sp.isEOG(e) {
			sp.EOG = append(sp.EOG, e)
		}
	}
	for _, text := range eogTexts {
		if e, ok := id(text); ok && !sp.isEOG(e) {
			sp.EOG = append(sp.EOG, e)
		}
	}
}
