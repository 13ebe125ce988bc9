package gguf

import (
	"bytes"
	"os"
	"reflect"
	"testing"

	"github.com/gorun-dev/gorun/internal/fixtures"
	"github.com/gorun-dev/gorun/quant"
)

// Known facts about the reference GGUFs made by llama.cpp (see ../shared/fixtures/README.md).
func TestFixtures(t *testing.T) {
	wantTypes := map[string][]quant.Type{
		"gpt2-tiny-f16.gguf":    {quant.F16, quant.F32},
		"gpt2-tiny-q8_0.gguf":   {quant.Q8_0, quant.F32},
		"gpt2-tiny-q4_0.gguf":   {quant.Q4_0, quant.Q6_K, quant.F32},
		"gpt2-tiny-q4_K_M.gguf": {quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.F32},
	}
	for name, types := range wantTypes {
		t.Run(name, func(t *testing.T) {
			f, err := Open(fixtures.Path(t, name))
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			checkFixture(t, f, types)
		})
	}
}

func checkFixture(t *testing.T, f *File, types []quant.Type) {
	if len(f.Tensors) != 101 || len(f.KV) != 20 || f.Version != 3 || f.Alignment != 32 {
		t.Errorf("%d tensors, %d KVs, version %d, alignment %d", len(f.Tensors), len(f.KV), f.Version, f.Alignment)
	}
	if s, err := f.String("general.architecture"); s != "gpt2" || err != nil {
		t.Errorf("architecture %q, %v", s, err)
	}
	if n, err := f.Uint("gpt2.embedding_length"); n != 256 || err != nil {
		t.Errorf("embedding_length %d, %v", n, err)
	}
	if eps, err := f.Float("gpt2.attention.layer_norm_epsilon"); float32(eps) != 1e-5 || err != nil {
		t.Errorf("eps %v, %v", eps, err)
	}
	tokens, err := f.Strings("tokenizer.ggml.tokens")
	if len(tokens) != 50257 || err != nil || tokens[0] != "!" || tokens[50256] != "<|endoftext|>" {
		t.Errorf("%d tokens, %v", len(tokens), err)
	}
	tt, err := f.Int32s("tokenizer.ggml.token_type")
	if len(tt) != 50257 || err != nil || tt[50256] != 3 {
		t.Errorf("%d token types, %v", len(tt), err)
	}
	if merges, err := f.Strings("tokenizer.ggml.merges"); len(merges) != 50000 || err != nil || merges[0] != "Ġ t" {
		t.Errorf("%d merges, %v", len(merges), err)
	}
	ti := f.Tensor("token_embd.weight")
	if ti == nil || !reflect.DeepEqual(ti.Dims, []int64{256, 50257}) {
		t.Fatalf("token_embd.weight: %+v", ti)
	}
	seen := map[quant.Type]bool{}
	for i := range f.Tensors {
		seen[f.Tensors[i].Type] = true
	}
	want := map[quant.Type]bool{}
	for _, ty := range types {
		want[ty] = true
	}
	if !reflect.DeepEqual(seen, want) {
		t.Errorf("tensor types %v, want %v", seen, want)
	}
}

// Writing the f16 fixture's metadata and tensors back through the Writer reproduces the file
// byte for byte: the writer writes what llama.cpp writes.
func TestFixtureRewriteIdentical(t *testing.T) {
	path := fixtures.Path(t, "gpt2-tiny-f16.gguf")
	in, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer in.Close()
	w := NewWriter()
	for _, kv := range in.KV {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	for _, ti := range in.Tensors {
		if err := w.AddTensor(ti.Name, ti.Type, ti.Dims); err != nil {
			t.Fatal(err)
		}
	}
	if !reflect.DeepEqual(w.Tensors(), in.Tensors) {
		t.Fatal("writer's layout differs from the file's")
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	buf.Grow(len(want))
	_, err = w.WriteTo(&buf, func(i int, ti *TensorInfo) ([]byte, error) { return in.Data(&in.Tensors[i]), nil })
	if err != nil {
		t.Fatal(err)
	}
	got := buf.Bytes()
	if !bytes.Equal(got, want) {
		n := 0
		for n < min(len(got), len(want)) && got[n] == want[n] {
			n++
		}
		t.Fatalf("rewrite differs: %d bytes vs %d, first difference at byte %d", len(got), len(want), n)
	}
}

// llama.cpp's vocabulary-only GGUF: metadata and no tensors.
func TestFixtureVocabOnly(t *testing.T) {
	f, err := Open(fixtures.Path(t, "tokenizer/ggml-vocab-gpt-2.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if tokens, err := f.Strings("tokenizer.ggml.tokens"); len(tokens) != 50257 || err != nil {
		t.Errorf("%d tokens, %v", len(tokens), err)
	}
}

func BenchmarkOpenFixture(b *testing.B) {
	path := fixtures.Path(b, "gpt2-tiny-f16.gguf")
	b.ReportAllocs()
	for b.Loop() {
		f, err := Open(path)
		if err != nil {
			b.Fatal(err)
		}
		f.Close()
	}
}
