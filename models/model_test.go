package models

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/quant"
)

// metaFile is a GGUF in memory with the given metadata and an F32 token embedding of
// [embd, vocab].
func metaFile(t *testing.T, embd, vocab int, kv ...any) *gguf.File {
	t.Helper()
	w := gguf.NewWriter()
	for i := 0; i < len(kv); i += 2 {
		if err := w.Set(kv[i].(string), kv[i+1]); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.AddTensor("token_embd.weight", quant.F32, []int64{int64(embd), int64(vocab)}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf, func(int, *gguf.TensorInfo) ([]byte, error) {
		return make([]byte, 4*embd*vocab), nil
	}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Parse(buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	return f
}

// An architecture nobody registered is refused naming it and listing what is supported.
func TestLoadNamesUnsupportedArchitecture(t *testing.T) {
	f := metaFile(t, 4, 8, "general.architecture", "gemma2")
	_, err := Load(f, nil)
	want := `general.architecture = "gemma2" is not supported; supported: ` + strings.Join(Architectures(), ", ")
	if !errors.Is(err, ErrUnsupportedArchitecture) || !strings.Contains(err.Error(), want) {
		t.Fatalf("got %v, want %q", err, want)
	}
	if !strings.Contains(want, "gpt2") {
		t.Errorf("gpt2 is not registered: %v", Architectures())
	}
}

// The shared reader takes head_count_kv and key_length when present and defaults them as
// llama.cpp does; the KV cache row is n_head_kv x head_dim.
func TestReadHparams(t *testing.T) {
	base := []any{"x.context_length", uint32(128), "x.embedding_length", uint32(64), "x.block_count", uint32(2),
		"x.feed_forward_length", uint32(256), "x.attention.head_count", uint32(8)}
	hp, r := readHparams(metaFile(t, 64, 10, base...), "x")
	if r.err != nil || hp.NHeadKV != 8 || hp.HeadDim != 8 || hp.KVShape().Width != 64 || hp.NVocab != 10 {
		t.Fatalf("defaults: %+v, %v", hp, r.err)
	}
	gqa := append(append([]any{}, base...), "x.attention.head_count_kv", uint32(2), "x.attention.key_length", uint32(16))
	hp, r = readHparams(metaFile(t, 64, 10, gqa...), "x")
	if r.err != nil || hp.NHeadKV != 2 || hp.HeadDim != 16 || hp.KVShape().Width != 32 || hp.KVShape().Layers != 2 {
		t.Fatalf("grouped-query: %+v, %v", hp, r.err)
	}
	uneven := append(append([]any{}, base...), "x.attention.head_count_kv", uint32(3))
	if _, r = readHparams(metaFile(t, 64, 10, uneven...), "x"); r.err == nil || !strings.Contains(r.err.Error(), "3 key/value heads") {
		t.Errorf("8 heads over 3 KV heads: %v", r.err)
	}
	huge := append(append([]any{}, base[2:]...), "x.context_length", uint64(1)<<40)
	if _, r = readHparams(metaFile(t, 64, 10, huge...), "x"); r.err == nil || !strings.Contains(r.err.Error(), "x.context_length") {
		t.Errorf("context 2^40: %v", r.err)
	}
}

// GPT-2's reader refuses grouped-query attention, which its graph does not do.
func TestGPT2RefusesGroupedQuery(t *testing.T) {
	f := metaFile(t, 64, 10, "gpt2.context_length", uint32(128), "gpt2.embedding_length", uint32(64), "gpt2.block_count", uint32(2),
		"gpt2.feed_forward_length", uint32(256), "gpt2.attention.head_count", uint32(8), "gpt2.attention.head_count_kv", uint32(2),
		"gpt2.attention.layer_norm_epsilon", float32(1e-5))
	if _, err := gpt2Hparams(f); err == nil || !strings.Contains(err.Error(), "grouped-query") {
		t.Errorf("got %v", err)
	}
}
