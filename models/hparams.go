package models

import (
	"fmt"
	"math"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/kvcache"
)

// Norm is the normalization an architecture applies before attention, the feed-forward and
// the output layer.
type Norm uint8

const (
	LayerNorm Norm = iota // (x - mean) / sqrt(var + eps) * w + b (GPT-2)
	RMSNorm               // x / sqrt(mean(x²) + eps) * w (Llama)
)

func (n Norm) String() string {
	if n == RMSNorm {
		return "rms_norm"
	}
	return "layer_norm"
}

// Rope is how positions rotate queries and keys; a zero Rope (Dims 0) means the architecture
// has none (GPT-2 learns position embeddings instead).
type Rope struct {
	Dims      int     // rotated dimensions of each head (rope.dimension_count; default head_dim)
	FreqBase  float32 // rope.freq_base (default 10000)
	FreqScale float32 // positions are multiplied by it: 1, or 1/rope.scaling.factor (linear scaling)
	NeoX      bool    // rotate pairs (i, i+dims/2) as GPT-NeoX/Qwen2, not adjacent pairs (i, i+1)
}

// Hparams are the shape of a model: what the graph, the KV cache and the memory estimate need
// to know, read from the file's metadata (general.architecture's keys).
type Hparams struct {
	Arch    string
	NVocab  int
	NCtx    int // context length the model was trained for
	NEmbd   int
	NLayer  int
	NFF     int
	NHead   int // query heads
	NHeadKV int // key/value heads (< NHead: grouped-query attention)
	HeadDim int // values per head of queries and keys
	Norm    Norm
	Eps     float32
	Rope    Rope
}

// KVShape is the shape of the KV cache the model needs: a row per position of n_head_kv x
// head_dim values per layer.
func (h Hparams) KVShape() kvcache.Shape {
	return kvcache.Shape{Layers: h.NLayer, Width: h.NHeadKV * h.HeadDim}
}

// hparamReader reads "<arch>.<key>" values with bounds, keeping the first error, so an
// architecture's reader is a list of the keys it needs.
type hparamReader struct {
	f    *gguf.File
	arch string
	err  error
}

// int reads a required positive integer, bounded so that a hostile file cannot make us
// allocate absurd amounts.
func (r *hparamReader) int(dst *int, key string, limit int) {
	if r.err != nil {
		return
	}
	*dst, r.err = hparam(r.f, r.arch+"."+key, limit)
}

// intOr reads an optional positive integer, def when the key is absent.
func (r *hparamReader) intOr(dst *int, key string, limit, def int) {
	if r.err == nil && !r.f.Has(r.arch+"."+key) {
		*dst = def
		return
	}
	r.int(dst, key, limit)
}

// equals reports whether the optional integer key holds want (true when it is absent).
func (r *hparamReader) equals(key string, want int) bool {
	k := r.arch + "." + key
	if !r.f.Has(k) {
		return true
	}
	v, err := r.f.Uint(k)
	return err == nil && v == uint64(want)
}

// float reads a float in (lo, hi); def when the key is absent and def is not NaN.
func (r *hparamReader) float(dst *float32, key string, lo, hi, def float64) {
	if r.err != nil {
		return
	}
	k := r.arch + "." + key
	if !r.f.Has(k) && !math.IsNaN(def) {
		*dst = float32(def)
		return
	}
	v, err := r.f.Float(k)
	switch {
	case err != nil:
		r.err = err
	case !(v > lo && v < hi):
		r.err = fmt.Errorf("%s = %v is out of range", k, v)
	default:
		*dst = float32(v)
	}
}

// readHparams reads the keys every architecture shares (context, widths, depth, heads) and
// the vocabulary size from token_embd.weight. KV heads default to the query heads and the head
// size to n_embd / n_head, as llama.cpp's loader does.
func readHparams(f *gguf.File, arch string) (Hparams, *hparamReader) {
	hp := Hparams{Arch: arch}
	r := &hparamReader{f: f, arch: arch}
	r.int(&hp.NCtx, "context_length", 1<<20)
	r.int(&hp.NEmbd, "embedding_length", 1<<16)
	r.int(&hp.NLayer, "block_count", 1<<10)
	r.int(&hp.NFF, "feed_forward_length", 1<<18)
	r.int(&hp.NHead, "attention.head_count", 1<<10)
	if r.err != nil {
		return hp, r
	}
	r.intOr(&hp.NHeadKV, "attention.head_count_kv", hp.NHead, hp.NHead)
	if !f.Has(arch+".attention.key_length") && hp.NEmbd%hp.NHead != 0 {
		r.err = fmt.Errorf("embedding length %d is not a multiple of the head count %d", hp.NEmbd, hp.NHead)
		return hp, r
	}
	r.intOr(&hp.HeadDim, "attention.key_length", 1<<12, hp.NEmbd/hp.NHead)
	if r.err == nil && hp.NHead%hp.NHeadKV != 0 {
		r.err = fmt.Errorf("%d query heads cannot share %d key/value heads evenly", hp.NHead, hp.NHeadKV)
	}
	if r.err == nil {
		hp.NVocab, r.err = vocabSize(f)
	}
	return hp, r
}

// vocabSize is the number of rows of token_embd.weight.
func vocabSize(f *gguf.File) (int, error) {
	ti := f.Tensor("token_embd.weight")
	if ti == nil || len(ti.Dims) != 2 {
		return 0, fmt.Errorf("tensor \"token_embd.weight\" is missing or not a matrix")
	}
	if ti.Dims[1] < 1 || ti.Dims[1] > 1<<24 {
		return 0, fmt.Errorf("vocabulary of %d tokens is out of range", ti.Dims[1])
	}
	return int(ti.Dims[1]), nil
}

// hparam reads a positive integer hyperparameter, bounded so that a hostile file cannot make
// us allocate absurd amounts.
func hparam(f *gguf.File, key string, limit int) (int, error) {
	v, err := f.Uint(key)
	if err != nil {
		return 0, err
	}
	if v == 0 || v > uint64(limit) {
		return 0, fmt.Errorf("%s = %d is out of range (1..%d)", key, v, limit)
	}
	return int(v), nil
}
