package tokenizer

import (
	"bytes"
	"path/filepath"
	"slices"
	"strings"
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

// metaFile writes the key/value pairs to a GGUF in memory and parses it back.
func metaFile(t *testing.T, kv [][2]any) *gguf.File {
	t.Helper()
	w := gguf.NewWriter()
	for _, p := range kv {
		if err := w.Set(p[0].(string), p[1]); err != nil {
			t.Fatal(err)
		}
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf, nil); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// The registry names the vocabulary kind or pre-tokenizer a file needs when gorun lacks it,
// and the special ids come from the metadata (EOG includes EOS and recognized end tokens).
func TestRegistryRefusesUnknownKinds(t *testing.T) {
	if got := Kinds(); len(got) == 0 || got[0] != "gpt2" {
		t.Fatalf("Kinds() = %v", got)
	}
	base := [][2]any{
		{"tokenizer.ggml.tokens", []string{"a", "b", "<|endoftext|>", "<|im_end|>"}},
		{"tokenizer.ggml.merges", []string{"a b"}},
		{"tokenizer.ggml.token_type", []int32{1, 1, 3, 3}},
		{"tokenizer.ggml.bos_token_id", uint32(2)},
	}
	for _, c := range []struct {
		model, pre, want string
	}{
		{"bert", "", `tokenizer.ggml.model = "bert" is not supported; supported: gpt2`},
		{"gpt2", "tekken", `tokenizer.ggml.pre = "tekken" is not supported`},
	} {
		kv := append([][2]any{{"tokenizer.ggml.model", c.model}}, base...)
		if c.pre != "" {
			kv = append(kv, [2]any{"tokenizer.ggml.pre", c.pre})
		}
		_, err := FromGGUF(metaFile(t, kv))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s/%s: %v, want %q", c.model, c.pre, err, c.want)
		}
	}
	tok, err := FromGGUF(metaFile(t, append([][2]any{{"tokenizer.ggml.model", "gpt2"}}, base...)))
	if err != nil {
		t.Fatal(err)
	}
	sp := tok.Special()
	if sp.BOS != 2 || sp.EOS != 2 || sp.AddBOS || !tok.IsEOG(2) || !tok.IsEOG(3) || tok.IsEOG(0) {
		t.Errorf("special %+v, IsEOG(2,3,0) = %v %v %v", sp, tok.IsEOG(2), tok.IsEOG(3), tok.IsEOG(0))
	}
}
