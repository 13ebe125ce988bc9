// Package models builds the compute graphs of model architectures over weights from a GGUF file.
// Each architecture is one file that registers itself (Register in its init), as ollama's Go
// engine does: adding a family is that file, nothing else.
package models

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/kvcache"
)

// Errors that Load wraps, for callers to tell apart with errors.Is.
var (
	ErrUnsupportedArchitecture = errors.New("unsupported model architecture")
	ErrUnsupportedType         = errors.New("unsupported tensor type")
)

// Model is an architecture bound to its weights. It is safe for concurrent use: Build only
// reads the weights.
type Model interface {
	Hparams() Hparams
	// Build adds the forward pass of n tokens to ctx. The step's Tokens and Positions inputs
	// are written before each Compute; K and V of the tokens are stored in the cache at their
	// positions. Logits holds the logits of tokens logitsFrom..n-1 (n-1 alone when generating,
	// all of them for perplexity); rows before logitsFrom skip the output layer.
	Build(ctx *graph.Context, cache *kvcache.Cache, n, logitsFrom int) (Step, error)
	// BuildRows adds the forward pass of one row per cache, for decoding several sequences
	// in one pass: row i is the next token of the sequence whose cache is caches[i], at the
	// position written to Positions[i]; its keys and values go to that cache and it attends
	// only to that cache. Logits has a row per row. Every weight is read once for all rows,
	// and a row's results are computed exactly as Build computes them for that sequence alone.
	BuildRows(ctx *graph.Context, caches []*kvcache.Cache) (Step, error)
	// BuildPaged is Build and BuildRows over a paged pool: keys and values are stored and read
	// through block tables (the step's Tables input, I32 [pool.TableLen, seqs], written before
	// each Compute with every sequence's table padded by -1). seqs 1 is Build: the n tokens are
	// one sequence's, logits of rows logitsFrom..n-1. seqs n is BuildRows: row i is the next
	// token of the sequence whose table is row i (logitsFrom must be 0). Results are
	// bit-identical to Build and BuildRows over contiguous caches holding the same rows.
	BuildPaged(ctx *graph.Context, pool *kvcache.Pool, n, logitsFrom, seqs int) (Step, error)
	// MaxTensors bounds the tensors Build creates for any n (to size contexts).
	MaxTensors() int
}

// Step is one built forward pass.
type Step struct {
	Tokens    *graph.Tensor // I32 [n]
	Positions *graph.Tensor // I32 [n]
	Logits    *graph.Tensor // F32 [n_vocab, n - logitsFrom]
	// Hidden is the output layer's input: the final hidden states after the output norm
	// (llama.cpp's result_norm), F32 [n_embd, n - logitsFrom]. Embeddings pool it; a graph
	// built with Hidden as its output skips the output layer.
	Hidden *graph.Tensor
	// Tables are the block tables of a paged step (BuildPaged), nil otherwise.
	Tables *graph.Tensor
}

// Loader binds an architecture's weights in f to a backend.
type Loader func(f *gguf.File, be graph.Backend) (Model, error)

var (
	registryMu sync.RWMutex
	registry   = map[string]Loader{}
)

// Register makes an architecture loadable under its GGUF name (general.architecture). It is
// called from the init of the architecture's file; registering a name twice is a programming
// error.
func Register(arch string, load Loader) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if _, dup := registry[arch]; dup || arch == "" || load == nil {
		panic(fmt.Sprintf("models: Register(%q) twice or with nothing", arch))
	}
	registry[arch] = load
}

// Architectures lists the registered architecture names, sorted.
func Architectures() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	names := make([]string, 0, len(registry))
	for n := range registry {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Load binds the architecture named in the file to its weights on the backend.
func Load(f *gguf.File, be graph.Backend) (Model, error) {
	arch, err := f.String("general.architecture")
	if err != nil {
		return nil, err
	}
	registryMu.RLock()
	load := registry[arch]
	registryMu.RUnlock()
	if load == nil {
		return nil, fmt.Errorf("%w: general.architecture = %q is not supported; supported: %s", ErrUnsupportedArchitecture, arch, strings.Join(Architectures(), ", "))
	}
	return load(f, be)
}
