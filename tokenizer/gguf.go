package tokenizer

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gorun-dev/gorun/gguf"
)

func init() { Register("gpt2", Kind{Build: bpeFromGGUF}) }

// bpeFromGGUF builds a byte-level BPE tokenizer from GPT-2-style metadata, as llama.cpp's
// converter writes it.
func bpeFromGGUF(f *gguf.File, sp Special) (Tokenizer, error) {
	pre := ""
	if f.Has("tokenizer.ggml.pre") {
		var err error
		if pre, err = f.String("tokenizer.ggml.pre"); err != nil {
			return nil, err
		}
	}
	pt, ok := bpePreTokenizers[pre]
	if !ok {
		return nil, fmt.Errorf("tokenizer.ggml.pre = %q is not supported; supported: %s", pre, strings.Join(supportedPre(), ", "))
	}
	if pt.addBOS && !f.Has("tokenizer.ggml.add_bos_token") {
		sp.AddBOS = true // llama.cpp's default for these
	}
	tokens, err := f.Strings("tokenizer.ggml.tokens")
	if err != nil {
		return nil, err
	}
	merges, err := f.Strings("tokenizer.ggml.merges")
	if err != nil {
		return nil, err
	}
	var types []int32
	if f.Has("tokenizer.ggml.token_type") {
		if types, err = f.Int32s("tokenizer.ggml.token_type"); err != nil {
			return nil, err
		}
	}
	t, err := NewWithPre(pre, tokens, merges, types)
	if err != nil {
		return nil, err
	}
	if sp.EOS >= 0 {
		t.eos = sp.EOS
	}
	sp.EOS = t.eos
	sp.addEOG(t.ID)
	t.special = sp
	return t, nil
}

// supportedPre lists the tokenizer.ggml.pre values BPE supports, sorted.
func supportedPre() []string {
	var names []string
	for n := range bpePreTokenizers {
		if n != "" {
			names = append(names, n)
		}
	}
	sort.Strings(names)
	return names
}
