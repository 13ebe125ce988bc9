package tokenizer

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gorun-dev/gorun/gguf"
)

// ggufTokenizer builds the tokenizer of a vocab-only GGUF from the fixtures, or skips.
func ggufTokenizer(tb testing.TB, name string) Tokenizer {
	tb.Helper()
	p := filepath.Join(fixturesDir(tb), name)
	if _, err := os.Stat(p); err != nil {
		tb.Skipf("fixture %s not found (llama.cpp's models/%s; see the package's test notes): %v", p, name, err)
	}
	f, err := gguf.Open(p)
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	tok, err := FromGGUF(f)
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// Every case of llama.cpp's tests for the vocabularies whose GGUF it ships (models/
// ggml-vocab-*.gguf with .inp/.out) encodes to the reference ids, without special-token
// parsing as tests/test-tokenizer-0.cpp runs them, and decodes back to the input.
func TestLlamaCppVocabs(t *testing.T) {
	for _, name := range []string{"llama-spm", "phi-3", "mpt", "starcoder", "refact", "falcon", "deepseek-coder"} {
		t.Run(name, func(t *testing.T) {
			vocab := "ggml-vocab-" + name + ".gguf"
			tok := ggufTokenizer(t, vocab)
			inputs, want := ggmlVocabTestsOf(t, vocab)
			pass := 0
			for i, in := range inputs {
				got := tok.EncodeOrdinary(in)
				if !slices.Equal(got, want[i]) {
					t.Errorf("input %d %q:\n got  %v\n want %v", i, in, got, want[i])
					continue
				}
				if dec := tok.Decode(got); dec != in {
					t.Errorf("input %d: Decode(Encode(s)) = %q, want %q", i, dec, in)
					continue
				}
				pass++
			}
			t.Logf("%s: %d/%d llama.cpp cases identical", name, pass, len(inputs))
		})
	}
}
