package tokenizer

import (
	"fmt"

	"github.com/gorun-dev/gorun/gguf"
)

// FromGGUF builds the tokenizer stored in a GGUF file's metadata (tokenizer.ggml.*), as
// llama.cpp's converter writes it for GPT-2-style byte-level BPE vocabularies.
func FromGGUF(f *gguf.File) (*Tokenizer, error) {
	kind, err := f.String("tokenizer.ggml.model")
	if err != nil {
		return nil, err
	}
	if kind != "gpt2" {
		return nil, fmt.Errorf("tokenizer %q is not supported (supported: gpt2 byte-level BPE)", kind)
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
	if f.Has("tokenizer.ggml.eos_token_id") {
		id, err := f.Uint("tokenizer.ggml.eos_token_id")
		if err != nil {
			return nil, err
		}
		if id >= uint64(len(tokens)) {
			return nil, fmt.Errorf("tokenizer.ggml.eos_token_id %d is outside the vocabulary of %d", id, len(tokens))
		}
		t.eos = int32(id)
	}
	return t, nil
}
