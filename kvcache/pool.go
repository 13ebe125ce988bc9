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
// Prefix caching: a full block whose positions a sequence has evaluated is content-addressed
// (Seq.Commit): its hash chains the previous block's hash and its BlockSize token ids, since
// the keys and values of a position depend on every token up to it. A sequence whose next
// tokens hash to a cached block takes it (Seq.Adopt) instead of computing it: blocks are
// refcounted and shared read-only, and a sequence about to write into a shared or hashed block
// copies it first or drops its hash (Seq.Prepare). A hashed block no sequence holds stays
// cached, least recently released last in an LRU list, and is reused for new data only when
// no free block is left.
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
	free   []int32 // stack of free blocks (no sequence, no hash)
	info   []blockInfo
	byHash map[uint64]int32 // hashed blocks
	// The LRU list of cached blocks (hashed, held by no sequence): oldest at head.
	lruHead, lruTail int32
	cached           int
	peak             int // most blocks held at once
	seqs             int // live sequences
	denied           int // block requests refused (the pool was full)
	hits             int // blocks adopted from the cache
}

// blockInfo is the pool's record of a block.
type blockInfo struct {
	refs       int32 // sequences holding it
	hashed     bool  // in byHash: its content is that of ids after the prefix parent
	hash       uint64
	parent     uint64 // the previous block's hash (0 for the first block)
	ids        [BlockSize]int32
	prev, next int32 // LRU links (-1: none), while cached
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
	p := &Pool{Shape: shape, Blocks: blocks, TableLen: (nctx + BlockSize - 1) / BlockSize, buf: buf,
		info: make([]blockInfo, blocks), byHash: map[uint64]int32{}, lruHead: -1, lruTail: -1}
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
	Blocks int // blocks in all
	Free   int // blocks no sequence holds (free, or cached for a later prefix)
	Cached int // of those, blocks keeping a prefix's keys and values for a later sequence
	Peak   int // most blocks held by sequences at once
	// Sequences is the number of live sequences (created and not released).
	Sequences int
	Denied    int // block requests refused because the pool was full
	Hits      int // blocks sequences took from the cache instead of computing them
}

// Stats reports the pool's use.
func (p *Pool) Stats() Stats {
	p.mu.Lock()
	defer p.mu.Unlock()
	return Stats{Blocks: p.Blocks, Free: len(p.free) + p.cached, Cached: p.cached, Peak: p.peak,
		Sequences: p.seqs, Denied: p.denied, Hits: p.hits}
}

// Free is the number of blocks no sequence holds.
func (p *Pool) Free() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.free) + p.cached
}

// NewSeq starts an empty sequence over the pool.
func (p *Pool) NewSeq() *Seq {
	p.mu.Lock()
	p.seqs++
	p.mu.Unlock()
	return &Seq{pool: p}
}

// takeLocked appends n blocks to dst, held once each: free ones first, then the cached blocks
// released longest ago (their hash is forgotten). It takes none when fewer are available.
func (p *Pool) takeLocked(dst []int32, n int) ([]int32, error) {
	if n > len(p.free)+p.cached {
		p.denied++
		return dst, fmt.Errorf("%w: %d blocks of %d positions needed, %d of %d free", ErrPoolFull, n, BlockSize, len(p.free)+p.cached, p.Blocks)
	}
	for range n {
		var b int32
		if k := len(p.free); k > 0 {
			b, p.free = p.free[k-1], p.free[:k-1]
		} else {
			b = p.lruHead
			p.unlinkLocked(b)
			p.unhashLocked(b)
		}
		p.info[b].refs = 1
		dst = append(dst, b)
	}
	p.peak = max(p.peak, p.Blocks-len(p.free)-p.cached)
	return dst, nil
}

// dropLocked lets go of one hold on b: a block no sequence holds is cached when hashed, free
// otherwise.
func (p *Pool) dropLocked(b int32) {
	in := &p.info[b]
	if in.refs--; in.refs > 0 {
		return
	}
	if !in.hashed {
		p.free = append(p.free, b)
		return
	}
	in.prev, in.next = p.lruTail, -1
	if p.lruTail >= 0 {
		p.info[p.lruTail].next = b
	} else {
		p.lruHead = b
	}
	p.lruTail = b
	p.cached++
}

// unlinkLocked takes a cached block out of the LRU list.
func (p *Pool) unlinkLocked(b int32) {
	in := &p.info[b]
	if in.prev >= 0 {
		p.info[in.prev].next = in.next
	} else {
		p.lruHead = in.next
	}
	if in.next >= 0 {
		p.info[in.next].prev = in.prev
	} else {
		p.lruTail = in.prev
	}
	in.prev, in.next = -1, -1
	p.cached--
}

// unhashLocked forgets b's content address.
func (p *Pool) unhashLocked(b int32) {
	in := &p.info[b]
	if in.hashed {
		delete(p.byHash, in.hash)
		in.hashed = false
	}
}

// copyBlockLocked copies block src's keys and values (every layer) into block dst.
func (p *Pool) copyBlockLocked(dst, src int32) error {
	if p.buf.Host == nil {
		return errors.New("the KV pool is not in host memory: shared blocks cannot be copied")
	}
	for _, ts := range [][]*graph.Tensor{p.K, p.V} {
		for _, t := range ts {
			n := BlockSize * t.Nb[1]
			copy(t.Buf.Host[t.Off+int(dst)*n:t.Off+int(dst+1)*n], t.Buf.Host[t.Off+int(src)*n:t.Off+int(src+1)*n])
		}
	}
	return nil
}

// blockHash is the content address of a block of ids following the prefix whose last block
// hashed to parent (FNV-1a, 64 bits; matches are checked against the ids and the parent).
func blockHash(parent uint64, ids []int32) uint64 {
	const prime = 1099511628211
	h := uint64(14695981039346656037)
	for i := 0; i < 8; i++ {
		h = (h ^ (parent >> (8 * i) & 0xff)) * prime
	}
	for _, id := range ids {
		for i := 0; i < 4; i++ {
			h = (h ^ uint64(uint32(id)>>(8*i)&0xff)) * prime
		}
	}
	return h
}

// Seq is one sequence's share of a pool: its block table. It is not safe for concurrent use
// (its session serializes its calls); the pool is.
type Seq struct {
	pool     *Pool
	table    []int32  // logical block -> physical block
	hashes   []uint64 // content addresses of the leading full blocks (committed or adopted)
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
	p := s.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	var err error
	s.table, err = p.takeLocked(s.table, need-len(s.table))
	return err
}

// Prepare readies positions from..to-1 to be written: it grows the sequence to hold them, and
// a block among them that another sequence shares is replaced by a private copy, one that is
// content-addressed loses its address (its content is about to change). Neither happens on the
// usual path (new positions in blocks of the sequence's own), only after a rewind into a full
// block.
func (s *Seq) Prepare(from, to int) error {
	if err := s.Grow(to); err != nil {
		return err
	}
	p := s.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	for j := from / BlockSize; j < BlocksFor(to); j++ {
		b := s.table[j]
		in := &p.info[b]
		if in.refs > 1 {
			fresh, err := p.takeLocked(nil, 1)
			if err != nil {
				return err
			}
			if err := p.copyBlockLocked(fresh[0], b); err != nil {
				p.dropLocked(fresh[0])
				return err
			}
			p.dropLocked(b)
			s.table[j] = fresh[0]
		} else {
			p.unhashLocked(b)
		}
	}
	s.hashes = s.hashes[:min(len(s.hashes), from/BlockSize)]
	return nil
}

// Commit content-addresses the sequence's full blocks among positions 0..n-1 (n positions
// evaluated, their token ids in tokens[:n]) that are not yet, so that later sequences starting
// with the same tokens can take them. A block whose content another block already caches
// stays private.
func (s *Seq) Commit(tokens []int32, n int) {
	if len(s.hashes) >= n/BlockSize {
		return
	}
	p := s.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	for j := len(s.hashes); (j+1)*BlockSize <= n && j < len(s.table); j++ {
		parent := uint64(0)
		if j > 0 {
			parent = s.hashes[j-1]
		}
		ids := tokens[j*BlockSize : (j+1)*BlockSize]
		h := blockHash(parent, ids)
		s.hashes = append(s.hashes, h)
		b := s.table[j]
		in := &p.info[b]
		if in.hashed {
			continue // taken from the cache: addressed already
		}
		if _, dup := p.byHash[h]; dup {
			continue
		}
		in.hashed, in.hash, in.parent = true, h, parent
		copy(in.ids[:], ids)
		p.byHash[h] = b
	}
}

// Adopt takes from the cache the blocks that hold the keys and values of tokens[from:limit],
// block by block while they are cached (from must be the sequence's evaluated positions, at a
// block boundary, with every block before it committed), and returns the positions the
// sequence now holds evaluated: from, or more by whole blocks. Blocks the sequence had reserved
// at those places go back to the pool.
func (s *Seq) Adopt(tokens []int32, from, limit int) int {
	if s.released || from%BlockSize != 0 || len(s.hashes) != from/BlockSize {
		return from
	}
	p := s.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	n := from
	for ; n+BlockSize <= limit; n += BlockSize {
		j := n / BlockSize
		parent := uint64(0)
		if j > 0 {
			parent = s.hashes[j-1]
		}
		ids := tokens[n : n+BlockSize]
		h := blockHash(parent, ids)
		b, ok := p.byHash[h]
		if !ok || p.info[b].parent != parent || [BlockSize]int32(ids) != p.info[b].ids {
			break
		}
		if p.info[b].refs == 0 {
			p.unlinkLocked(b)
		}
		p.info[b].refs++
		if j < len(s.table) {
			p.dropLocked(s.table[j])
			s.table[j] = b
		} else {
			s.table = append(s.table, b)
		}
		s.hashes = append(s.hashes, h)
		p.hits++
	}
	p.peak = max(p.peak, p.Blocks-len(p.free)-p.cached)
	return n
}

// Truncate keeps the blocks that hold positions 0..n-1 and lets go of the others (to the
// cache when they are content-addressed, else free).
func (s *Seq) Truncate(n int) {
	keep := BlocksFor(max(n, 0))
	s.hashes = s.hashes[:min(len(s.hashes), max(n, 0)/BlockSize)]
	if keep >= len(s.table) {
		return
	}
	p := s.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, b := range s.table[keep:] {
		p.dropLocked(b)
	}
	s.table = s.table[:keep]
}

// Release lets go of every block and ends the sequence. It is safe to call again, and from a
// cleanup running after the sequence's owner is gone.
func (s *Seq) Release() {
	p := s.pool
	p.mu.Lock()
	defer p.mu.Unlock()
	if s.released {
		return
	}
	s.released = true
	for _, b := range s.table {
		p.dropLocked(b)
	}
	s.table, s.hashes = nil, nil
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
