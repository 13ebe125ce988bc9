// Package models builds the compute graphs of model architectures over weights from a GGUF file.
package models

import (
	"errors"
	"fmt"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/quant"
)

// Errors that Load wraps, for callers to tell apart with errors.Is.
var (
	ErrUnsupportedArchitecture = errors.New("unsupported model architecture")
	ErrUnsupportedType         = errors.New("unsupported tensor type")
)

// Hparams are the shape of a model.
type Hparams struct {
	Arch   string
	NVocab int
	NCtx   int // context length the model was trained for
	NEmbd  int
	NHead  int
	NLayer int
	NFF    int
	Eps    float32
}

// Model is an architecture bound to its weights. It is safe for concurrent use: Build only
// reads the weights.
type Model interface {
	Hparams() Hparams
	// Build adds the forward pass of n tokens to ctx. The step's Tokens and Positions inputs
	// are written before each Compute; K and V of the tokens are stored in the cache at their
	// positions. Logits holds the logits of tokens logitsFrom..n-1 (n-1 alone when generating,
	// all of them for perplexity); rows before logitsFrom skip the output layer.
	Build(ctx *graph.Context, cache *KVCache, n, logitsFrom int) (Step, error)
	// BuildRows adds the forward pass of one row per cache, for decoding several sequences
	// in one pass: row i is the next token of the sequence whose cache is caches[i], at the
	// position written to Positions[i]; its keys and values go to that cache and it attends
	// only to that cache. Logits has a row per row. Every weight is read once for all rows,
	// and a row's results are computed exactly as Build computes them for that sequence alone.
	BuildRows(ctx *graph.Context, caches []*KVCache) (Step, error)
	// MaxTensors bounds the tensors Build creates for any n (to size contexts).
	MaxTensors() int
}

// Step is one built forward pass.
type Step struct {
	Tokens    *graph.Tensor // I32 [n]
	Positions *graph.Tensor // I32 [n]
	Logits    *graph.Tensor // F32 [n_vocab, n - logitsFrom]
}

// Load binds the architecture named in the file to its weights on the backend.
func Load(f *gguf.File, be graph.Backend) (Model, error) {
	arch, err := f.String("general.architecture")
	if err != nil {
		return nil, err
	}
	switch arch {
	case "gpt2":
		return loadGPT2(f, be)
	}
	return nil, fmt.Errorf("%w: %q (supported: gpt2)", ErrUnsupportedArchitecture, arch)
}

// KVCache holds the keys and values of every layer for a context of Size positions.
type KVCache struct {
	K, V []*graph.Tensor
	Size int
	buf  *graph.Buffer
}

// NewKVCache allocates a cache of nctx positions of width embd for layers layers.
func NewKVCache(be graph.Backend, layers, embd, nctx int, typ quant.Type) (*KVCache, error) {
	row, err := typ.RowSize(int64(embd))
	if err != nil {
		return nil, err
	}
	per := int(row) * nctx
	buf, err := be.Alloc(2 * layers * per)
	if err != nil {
		return nil, fmt.Errorf("allocating the KV cache: %w", err)
	}
	c := &KVCache{Size: nctx, buf: buf}
	ctx := graph.NewContext(2 * layers)
	for l := 0; l < layers; l++ {
		c.K = append(c.K, ctx.NewStatic(fmt.Sprintf("cache_k.%d", l), typ, buf, (2*l)*per, embd, nctx))
		c.V = append(c.V, ctx.NewStatic(fmt.Sprintf("cache_v.%d", l), typ, buf, (2*l+1)*per, embd, nctx))
	}
	return c, ctx.Err()
}

// Bytes is the memory the cache holds.
func (c *KVCache) Bytes() int { return c.buf.Size }

// weights loads named tensors of a file as static graph tensors on a backend, checking shapes
// and types.
type weights struct {
	f   *gguf.File
	be  graph.Backend
	ctx *graph.Context
}

// get returns the tensor name with exactly the dims want (ne0 first).
func (w *weights) get(name string, want ...int) (*graph.Tensor, error) {
	ti := w.f.Tensor(name)
	if ti == nil {
		return nil, fmt.Errorf("tensor %q is missing", name)
	}
	if len(ti.Dims) != len(want) {
		return nil, fmt.Errorf("tensor %q has shape %v, want %v", name, ti.Dims, want)
	}
	for i, d := range ti.Dims {
		if d != int64(want[i]) {
			return nil, fmt.Errorf("tensor %q has shape %v, want %v", name, ti.Dims, want)
		}
	}
	if _, err := quant.FormatOf(ti.Type); err != nil {
		return nil, fmt.Errorf("tensor %q: %w: %w", name, ErrUnsupportedType, err)
	}
	buf, err := w.be.Weights(w.f.Data(ti))
	if err != nil {
		return nil, fmt.Errorf("tensor %q: %w", name, err)
	}
	t := w.ctx.NewStatic(name, ti.Type, buf, 0, want...)
	return t, w.ctx.Err()
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

// HostRows returns the bytes of the first n rows of layer l's keys (v false) or values (v
// true), or nil when the cache is not in host memory.
func (c *KVCache) HostRows(l int, v bool, n int) []byte {
	t := c.K[l]
	if v {
		t = c.V[l]
	}
	if t.Buf == nil || t.Buf.Host == nil || n < 0 || n > t.Ne[1] {
		return nil
	}
	return t.Buf.Host[t.Off : t.Off+n*t.Nb[1]]
}
