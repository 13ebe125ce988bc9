package tokenizer

import (
	"fmt"

	"github.com/gorun-dev/gorun/gguf"
)

func init() { Register("gpt2", Kind{Build: bpeFromGGUF}) }

// bpePreTokenizers are the tokenizer.ggml.pre values whose pre-tokenizer BPE implements
// (absent means GPT-2's, as in files written before llama.cpp recorded it).
var bpePreTokenizers = map[string]bool{"": true, "gpt-2": true}

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
	if !bpePreTokenizers[pre] {
		return nil, fmt.Errorf("tokenizer.ggml.pre = %q is not supported; supported: gpt-2", pre)
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
	t, err := New(tokens, merges, types)
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
