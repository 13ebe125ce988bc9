package kvcache

import (
	"errors"
	"fmt"
	"sync"

	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/quant"
)

// BlockSize is the number of positions in a block of a Pool (the graph's paged ops read it).
const BlockSize = graph.KVBlockSize

// ErrPoolFull is returned when a sequence needs a block and the pool has none free.
var ErrPoolFull = errors.New("KV pool exhausted")

// Pool is the KV memory of every sequence of a model on one backend: per layer one K and one V
// tensor of Blocks x BlockSize rows, handed out to sequences a block (BlockSize positions) at
// a time. Block b of every layer is rows b*BlockSize .. b*BlockSize+BlockSize-1 of that
// layer's tensors, so one block number covers a position's keys and values in all layers. A
// sequence (Seq) maps its logical blocks (position / BlockSize) to physical ones through its
// block table; the graph's paged ops (graph.StoreKVPaged, graph.AttentionPaged) read and
// write through it.
//
// Free blocks are a stack: the most recently freed block is reused first, so the memory a
// server touches stays that of its peak use (the CPU backend's memory is committed by the
// system on first write).
type Pool struct {
	K, V  []*graph.Tensor // [Width, Blocks*BlockSize] per layer
	Shape Shape
	// Blocks is the number of blocks; TableLen the most blocks one sequence holds (its
	// context length in blocks, rounded up), the length of a block table.
	Blocks, TableLen int
	buf              *graph.Buffer

	mu     sync.Mutex
	free   []int32 // stack of free blocks
	peak   int     // most blocks in use at once
	seqs   int     // live sequences
	denied int     // block requests refused (the pool was full)
}

// NewPool allocates on be a pool of blocks blocks for sequences of at most nctx positions.
func NewPool(be graph.Backend, shape Shape, blocks, nctx int, typ quant.Type) (*Pool, error) {
	if shape.Layers < 1 || shape.Width < 1 || blocks < 1 || nctx < 1 {
		return nil, fmt.Errorf("KV pool of %d layers x %d values x %d blocks for contexts of %d", shape.Layers, shape.Width, blocks, nctx)
	}
	if blocks > 1<<31/BlockSize {
		return nil, fmt.Errorf("KV pool of %d blocks: at most %d", blocks, 1<<31/BlockSize)
	}
	row, err := typ.RowSize(int64(shape.Width))
	if err != nil {
		return nil, err
	}
	per := int(row) * blocks * BlockSize
	buf, err := be.Alloc(2 * shape.Layers * per)
	if err != nil {
		return nil, fmt.Errorf("allocating the KV pool: %w", err)
	}
	p := &Pool{Shape: shape, Blocks: blocks, TableLen: (nctx + BlockSize - 1) / BlockSize, buf: buf}
	ctx := graph.NewContext(2 * shape.Layers)
	for l := 0; l < shape.Layers; l++ {
		p.K = append(p.K, ctx.NewStatic(fmt.Sprintf("pool_k.%d", l), typ, buf, (2*l)*per, shape.Width, blocks*BlockSize))
		p.V = append(p.V, ctx.NewStatic(fmt.Sprintf("pool_v.%d", l), typ, buf, (2*l+1)*per, shape.Width, blocks*BlockSize))
	}
	p.free = make([]int32, blocks)
	for i := range p.free {
		p.free[i] = int32(blocks - 1 - i) // block 0 on top
	}
	return p, ctx.Err()
}

// BlocksFor is the number of blocks that hold n positions.
func BlocksFor(n int) int { return (n + BlockSize - 1) / BlockSize }

// Fits reports whether the pool has the shape a model needs.
func (p *Pool) Fits(shape Shape) bool {
	return p != nil && p.Shape == shape && len(p.K) == shape.Layers
}

// Type is the element type of the keys and values.
func (p *Pool) Type() quant.Type { return p.K[0].Type }

// Bytes is the memory the pool holds.
func (p *Pool) Bytes() int { return p.buf.Size }

// Stats is a snapshot of the pool's use.
type Stats struct {
	Blocks, Free, Peak int // blocks in all, free now, most in use at once
	Sequences          int // live sequences (created and not released)
	Denied             int // block requests refused because the pool was full
}

// Stats reports the pool's use.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Stats{Blocks: p.Blocks, Free: len(p.free), Peak: p.peak, Sequences: p.seqs, Denied: p.denied}
}

// Free is the number of free blocks.
func (p *Pool) Free() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.free)
}

// NewSeq starts an empty sequence over the pool.
func (p *Pool) NewSeq() *Seq {
	p.mu.Lock()
	p.seqs++
	p.mu.Unlock()
	return &Seq{pool: p}
}

// take moves n free blocks to dst, or none when fewer are free.
func (p *Pool) take(dst []int32, n int) ([]int32, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if n > len(p.free) {
		p.denied++
		return dst, fmt.Errorf("%w: %d blocks of %d positions needed, %d of %d free", ErrPoolFull, n, BlockSize, len(p.free), p.Blocks)
	}
	top := len(p.free) - n
	for i := len(p.free) - 1; i >= top; i-- {
		dst = append(dst, p.free[i])
	}
	p.free = p.free[:top]
	p.peak = max(p.peak, p.Blocks-len(p.free))
	return dst, nil
}

// give returns blocks to the free stack, the last one on top.
func (p *Pool) give(blocks []int32) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(blocks) - 1; i >= 0; i-- {
		p.free = append(p.free, blocks[i])
	}
}

// Seq is one sequence's share of a pool: its block table. It is not safe for concurrent use
// (its session serializes its calls); the pool is.
type Seq struct {
	pool     *Pool
	table    []int32 // logical block -> physical block
	released bool
}

// Table is the sequence's block table (logical block i is physical block Table()[i]). The
// slice is the sequence's: valid until its next Grow, Truncate or Release.
func (s *Seq) Table() []int32 { return s.table }

// Pool is the pool the sequence draws from.
func (s *Seq) Pool() *Pool { return s.pool }

// Grow makes the sequence hold positions 0..n-1, taking the blocks it lacks from the pool. When
// the pool has too few free blocks it takes none and returns an error matching ErrPoolFull.
func (s *Seq) Grow(n int) error {
	if s.released {
		return errors.New("the KV sequence was released")
	}
	need := BlocksFor(n)
	if need > s.pool.TableLen {
		return fmt.Errorf("%d positions exceed a sequence's %d blocks of %d", n, s.pool.TableLen, BlockSize)
	}
	if need <= len(s.table) {
		return nil
	}
	var err error
	s.table, err = s.pool.take(s.table, need-len(s.table))
	return err
}

// Truncate keeps the blocks that hold positions 0..n-1 and returns the others to the pool.
func (s *Seq) Truncate(n int) {
	keep := BlocksFor(max(n, 0))
	if keep >= len(s.table) {
		return
	}
	s.pool.give(s.table[keep:])
	s.table = s.table[:keep]
}

// Release returns every block to the pool and ends the sequence. It is safe to call again,
// and from a cleanup running after the sequence's owner is gone.
func (s *Seq) Release() {
	p := s.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	if s.released {
		return
	}
	s.released = true
	for i := len(s.table) - 1; i >= 0; i-- {
		p.free = append(p.free, s.table[i])
	}
	s.table = nil
	p.seqs--
}

// PadTable writes the block table into dst (the pool's TableLen entries), unused entries -1.
func (s *Seq) PadTable(dst []int32) {
	n := copy(dst, s.table)
	for i := n; i < len(dst); i++ {
		dst[i] = -1
	}
}

// HostRows calls fn with the bytes of positions 0..n-1 of layer l's keys (v false) or values (v
// true), one block's rows at a time, in order. It fails when the pool is not in host memory or
// the sequence holds fewer positions.
func (s *Seq) HostRows(l int, v bool, n int, fn func([]byte) error) error {
	t := s.pool.K[l]
	if v {
		t = s.pool.V[l]
	}
	if t.Buf == nil || t.Buf.Host == nil {
		return errors.New("the KV pool is not in host memory")
	}
	if n < 0 || BlocksFor(n) > len(s.table) {
		return fmt.Errorf("%d positions of a sequence holding %d blocks", n, len(s.table))
	}
	for j := 0; j*BlockSize < n; j++ {
		rows := min(BlockSize, n-j*BlockSize)
		start := t.Off + int(s.table[j])*BlockSize*t.Nb[1]
		if err := fn(t.Buf.Host[start : start+rows*t.Nb[1]]); err != nil {
			return err
		}
	}
	return nil
}
