// Package cpu is gorun's CPU backend: it executes graphs on host memory with a persistent pool
// of threads. Every thread walks the same node list; each node's work is split among the
// threads, and a barrier separates nodes (ggml's execution model).
package cpu

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/gorun-dev/gorun/backend"
	"github.com/gorun-dev/gorun/cpu/kernels"
	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/internal/osutil"
	"github.com/gorun-dev/gorun/quant"
)

// Backend computes graphs on the CPU.
type Backend struct {
	threads int
	pool    *pool
	bar     barrier

	g      *graph.Graph
	chunks []atomic.Int64 // per-node work counters, for ops split dynamically

	// The graph last checked by prepare, so a static graph is checked once, not per token.
	prepared        *graph.Graph
	preparedVersion uint64
	preparedQAct    backend.QuantAct
	scratch         []threadScratch

	errMu sync.Mutex
	err   error

	observe func(n *graph.Tensor) // called after each node, on one thread, when set

	// quantAct chooses which matrix multiplications quantize the activations to Q8_0, as
	// ggml does, and use integer dot products (see intKernel); iact holds them.
	quantAct backend.QuantAct
	iact     kernels.IntAct
}

// SetQuantizedActivations chooses which matmuls take ggml's integer dot path (activations
// quantized to 8 bits per matmul) instead of float32 activations: backend.QuantActAuto (the
// zero value) where the weight type's integer path meets the accuracy gate and the tier has
// SIMD integer kernels, QuantActOn for every type with integer kernels, QuantActOff for none.
func (b *Backend) SetQuantizedActivations(q backend.QuantAct) { b.quantAct = q }

// SetObserver makes Compute call f after each node with the node's result and inputs still in
// memory (calibration and debugging use it, like ggml's eval callback). nil turns it off.
func (b *Backend) SetObserver(f func(n *graph.Tensor)) { b.observe = f }

// threadScratch is per-thread working memory, grown (rarely) before a Compute, never during.
type threadScratch struct {
	tile      []float32 // dequantized weight rows for batched matmul
	scores    []float32 // attention scores of one query
	rope      []float32 // cosines and sines of one row's RoPE angles
	ropeFreqs []float64 // RoPE's angle per position of each pair
	o4        [4]float32
	iact      kernels.IntAct                   // this thread's view of the activations for the current matmul
	iactOwn   kernels.IntAct                   // the thread's own quantized rows for generation's matmuls
	itile     kernels.IntTile                  // weight rows repacked for the integer tile kernel
	o128      [8 * kernels.IntTileRows]float32 // a partial integer tile's results
}

// New starts a backend with the given number of threads (<= 0: one per physical core).
func New(threads int) *Backend {
	if threads <= 0 {
		threads = DefaultThreads()
	}
	b := &Backend{threads: threads, pool: newPool(threads), scratch: make([]threadScratch, threads)}
	b.bar.n = int32(threads)
	b.bar.cond.L = &b.bar.mu
	return b
}

// DefaultThreads is the number of threads used when none is asked for: one per physical core
// (osutil.DefaultThreads).
func DefaultThreads() int { return osutil.DefaultThreads() }

// Threads is the number of threads the backend runs.
func (b *Backend) Threads() int { return b.threads }

func (b *Backend) Name() string { return "cpu" }

func (b *Backend) Alloc(size int) (*graph.Buffer, error) {
	if size < 0 {
		return nil, fmt.Errorf("cpu: negative allocation %d", size)
	}
	return &graph.Buffer{Host: alignedBytes(size), Size: size}, nil
}

// alignedBytes returns zeroed memory whose start is aligned to graph.Alignment, so float32 and
// SIMD loads of tensors placed at aligned offsets are aligned too.
func alignedBytes(size int) []byte {
	raw := make([]byte, size+graph.Alignment)
	off := 0
	if r := int(uintptrOf(raw)) % graph.Alignment; r != 0 {
		off = graph.Alignment - r
	}
	return raw[off : off+size : off+size]
}

func (b *Backend) Weights(host []byte) (*graph.Buffer, error) {
	return &graph.Buffer{Host: host, Size: len(host)}, nil
}

func (b *Backend) Write(t *graph.Tensor, src []byte) error {
	if !t.Contiguous() || len(src) != t.Bytes() {
		return fmt.Errorf("cpu: write of %d bytes to %q (%d bytes)", len(src), t.Name, t.Bytes())
	}
	copy(t.Data(), src)
	return nil
}

func (b *Backend) Read(t *graph.Tensor, dst []byte) error {
	if !t.Contiguous() || len(dst) != t.Bytes() {
		return fmt.Errorf("cpu: read of %d bytes from %q (%d bytes)", len(dst), t.Name, t.Bytes())
	}
	copy(dst, t.Data())
	return nil
}

func (b *Backend) Close() error {
	b.pool.Close()
	return nil
}

// Compute runs the graph. It fails before running anything when a node uses a type or op the
// backend does not support, and after running when a kernel met bad input (such as a token id
// or position out of range), which leaves that kernel's output unwritten but memory untouched.
func (b *Backend) Compute(g *graph.Graph) error {
	if g != b.prepared || g.Version() != b.preparedVersion || b.quantAct != b.preparedQAct {
		if err := b.prepare(g); err != nil {
			return err
		}
		b.prepared, b.preparedVersion, b.preparedQAct = g, g.Version(), b.quantAct
	}
	for i := range g.Nodes {
		b.chunks[i].Store(0)
	}
	b.g = g
	b.err = nil
	b.pool.Run(b)
	b.g = nil
	return b.err
}

// Supports reports whether the CPU computes node n (see supports).
func (b *Backend) Supports(n *graph.Tensor) error { return supports(n) }

// supports reports whether the CPU computes node n: every op of the graph package, with
// weights of any type that has a dequantizer (the one the kernels call).
func supports(n *graph.Tensor) error {
	switch n.Op {
	case graph.OpMulMat, graph.OpGetRows:
		if kernels.Dequantizer(n.Src[0].Type) == nil {
			return fmt.Errorf("cpu: %v of %q: tensor type %v is not supported", n.Op, n.Src[0].Name, n.Src[0].Type)
		}
	case graph.OpNone, graph.OpView, graph.OpAdd, graph.OpMul, graph.OpLayerNorm, graph.OpGELU, graph.OpScale,
		graph.OpStoreKV, graph.OpCopy, graph.OpAttention, graph.OpStoreKVRows, graph.OpAttentionRows,
		graph.OpRMSNorm, graph.OpRoPE, graph.OpSwiGLU, graph.OpStoreKVPaged, graph.OpAttentionPaged:
	default:
		return fmt.Errorf("cpu: op %v is not supported", n.Op)
	}
	return nil
}

// prepare checks the graph and sizes the scratch memory and counters it needs (once per built
// graph).
func (b *Backend) prepare(g *graph.Graph) error {
	if len(b.chunks) < len(g.Nodes) {
		b.chunks = make([]atomic.Int64, len(g.Nodes))
	}
	tile, scores, rope, iact, ik := 0, 0, 0, 0, 0
	for _, n := range g.Nodes {
		if n.Buf == nil {
			return fmt.Errorf("cpu: node %q (%v) has no memory: graph not bound", n.Name, n.Op)
		}
		if err := b.Supports(n); err != nil {
			return err
		}
		switch n.Op {
		case graph.OpMulMat, graph.OpGetRows:
			tile = max(tile, tileRows*n.Src[0].Ne[0])
			if n.Op == graph.OpMulMat && b.intKernel(n) != nil {
				iact = max(iact, n.Src[0].Ne[0]/32*32*n.Src[1].NRows())
				ik = max(ik, n.Src[0].Ne[0]/32*32)
			}
		case graph.OpAttention:
			scores = max(scores, n.Src[1].Ne[1])
		case graph.OpAttentionRows:
			scores = max(scores, attentionRowsScores(n))
		case graph.OpAttentionPaged:
			scores = max(scores, attentionPagedScores(n))
		case graph.OpRoPE:
			rope = max(rope, n.IParams[1])
		}
	}
	if len(b.iact.Q) < iact {
		b.iact.Size(1, iact)
	}
	for i := range b.scratch {
		s := &b.scratch[i]
		if len(s.tile) < tile {
			s.tile = make([]float32, tile)
		}
		if len(s.itile.Q) < ik/32*512 {
			s.itile.Size(ik)
			s.iactOwn.Size(intTileMin-1, ik)
		}
		if len(s.scores) < scores {
			s.scores = make([]float32, scores)
		}
		if len(s.rope) < rope {
			s.rope = make([]float32, rope)
			s.ropeFreqs = make([]float64, rope/2)
		}
	}
	return nil
}

// run is one thread's walk over the graph.
func (b *Backend) run(ith, nth int) {
	for i, n := range b.g.Nodes {
		if n.Op == graph.OpView {
			continue
		}
		b.compute(i, n, ith, nth)
		b.bar.wait()
		if b.observe != nil {
			if ith == 0 {
				b.observe(n)
			}
			b.bar.wait()
		}
	}
}

func (b *Backend) compute(idx int, n *graph.Tensor, ith, nth int) {
	switch n.Op {
	case graph.OpGetRows:
		b.getRows(n, ith, nth)
	case graph.OpAdd:
		binary(n, ith, nth, addRow)
	case graph.OpMul:
		binary(n, ith, nth, mulRow)
	case graph.OpLayerNorm:
		layerNorm(n, ith, nth)
	case graph.OpMulMat:
		b.mulMat(idx, n, ith, nth)
	case graph.OpGELU:
		unary(n, ith, nth, kernels.GELU)
	case graph.OpScale:
		scale(n, ith, nth)
	case graph.OpStoreKV:
		b.storeKV(n, ith, nth)
	case graph.OpAttention:
		b.attention(idx, n, ith)
	case graph.OpCopy:
		unary(n, ith, nth, copyRow)
	case graph.OpStoreKVRows:
		b.storeKVRows(n, ith, nth)
	case graph.OpAttentionRows:
		b.attentionRows(idx, n, ith)
	case graph.OpStoreKVPaged:
		b.storeKVPaged(n, ith, nth)
	case graph.OpAttentionPaged:
		b.attentionPaged(idx, n, ith)
	case graph.OpRMSNorm:
		rmsNorm(n, ith, nth)
	case graph.OpRoPE:
		b.rope(n, ith, nth)
	case graph.OpSwiGLU:
		swiGLU(n, ith, nth)
	}
}

// fail records the first kernel error of a Compute.
func (b *Backend) fail(err error) {
	b.errMu.Lock()
	if b.err == nil {
		b.err = err
	}
	b.errMu.Unlock()
}

// formatTable indexes quant formats by type without a map lookup in kernels.
var formatTable [64]*quant.Format

func init() {
	for t := range formatTable {
		if f, err := quant.FormatOf(quant.Type(t)); err == nil {
			formatTable[t] = f
		}
	}
}

// split returns the share [lo, hi) of n items for thread ith of nth.
func split(n, ith, nth int) (int, int) {
	per := (n + nth - 1) / nth
	lo := min(n, ith*per)
	return lo, min(n, lo+per)
}
