package tokenizer

import (
	"bytes"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gorun-dev/gorun/gguf"
)

// The vocabulary stored in llama.cpp's vocab-only GGUF tokenizes every Hugging Face case and
// every llama.cpp case exactly as the reference does.
func TestFromGGUFMatchesReferences(t *testing.T) {
	f, err := gguf.Open(filepath.Join(fixturesDir(t), "ggml-vocab-gpt-2.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tok, err := FromGGUF(f)
	if err != nil {
		t.Fatal(err)
	}
	if tok.VocabSize() != 50257 || tok.EOS() != 50256 {
		t.Fatalf("vocabulary %d, EOS %d", tok.VocabSize(), tok.EOS())
	}
	for _, c := range hfCases(t) {
		got := tok.Encode(c.Text)
		if !slices.Equal(got, c.IDs) {
			t.Errorf("%q: got %v, want %v", c.Text, got, c.IDs)
		}
		if back := tok.Decode(got); back != c.Text {
			t.Errorf("%q decodes back to %q", c.Text, back)
		}
	}
	inputs, want := ggmlVocabTests(t)
	for i, in := range inputs {
		if got := tok.EncodeOrdinary(in); !slices.Equal(got, want[i]) {
			t.Errorf("%q: got %v, want %v", in, got, want[i])
		}
	}
}

func TestFromGGUFRejectsOtherTokenizers(t *testing.T) {
	w := gguf.NewWriter()
	if err := w.Set("tokenizer.ggml.model", "llama"); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf, nil); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := FromGGUF(f); err == nil {
		t.Error("a llama (SentencePiece) tokenizer was accepted")
	}
}
