package graph

import (
	"fmt"
	"sort"
)

// Alignment of every tensor placed in an arena (a cache line; also what SIMD loads like).
const Alignment = 64

func alignUp(n, a int) int { return (n + a - 1) / a * a }

// needsArena reports whether the planner places t: not a view, not static, no memory yet.
func needsArena(t *Tensor) bool {
	return t.viewOf == nil && t.Flags&FlagStatic == 0 && t.Op != OpView
}

// Plan gives every tensor of the graph that needs memory an offset in one arena, reusing the
// memory of intermediate results once their last reader has run, and returns the arena size.
// Inputs and outputs keep their memory for the whole graph. Call Bind with a buffer at least
// that large before computing.
func (g *Graph) Plan() (int, error) {
	lastUse := map[*Tensor]int{} // planning happens once per graph, not per token
	for i, n := range g.Nodes {
		for _, s := range n.Src {
			if s != nil {
				lastUse[s.Base()] = i
			}
		}
	}
	var fl FreeList
	g.planned = g.planned[:0]
	place := func(t *Tensor) {
		t.Off = fl.Alloc(alignUp(t.Bytes(), Alignment))
		g.planned = append(g.planned, t)
	}
	for _, l := range g.Leaves {
		if l.Flags&FlagStatic == 0 {
			if l.Flags&FlagInput == 0 {
				return 0, fmt.Errorf("graph: leaf %q is neither an input nor static", l.Name)
			}
			place(l)
		}
	}
	for i, n := range g.Nodes {
		if needsArena(n) {
			place(n)
		}
		for j, s := range n.Src {
			// Free each base once, however many of the sources are views of it.
			if s == nil || srcList(n.Src[:j]).containsBase(s.Base()) {
				continue
			}
			b := s.Base()
			if lastUse[b] == i && needsArena(b) && b.Flags&(FlagInput|FlagOutput) == 0 {
				fl.Free(b.Off, alignUp(b.Bytes(), Alignment))
			}
		}
	}
	g.arena = fl.Peak()
	return g.arena, nil
}

type srcList []*Tensor

func (s srcList) containsBase(b *Tensor) bool {
	for _, x := range s {
		if x != nil && x.Base() == b {
			return true
		}
	}
	return false
}

// Bind points every planned tensor (and every view of one) into buf.
func (g *Graph) Bind(buf *Buffer) error {
	if buf.Size < g.arena {
		return fmt.Errorf("graph: arena of %d bytes, plan needs %d", buf.Size, g.arena)
	}
	g.version = versions.Add(1)
	for _, t := range g.planned {
		t.Buf = buf
	}
	for _, n := range g.Nodes {
		if n.viewOf != nil && n.Op == OpView {
			n.Buf = n.viewOf.Buf
			n.Off = n.viewOf.Off + n.IParams[0]
		} else if n.Op == OpStoreKV || n.Op == OpStoreKVRows || n.Op == OpStoreKVPaged {
			n.Buf, n.Off = n.viewOf.Buf, n.viewOf.Off
		}
	}
	return nil
}

// ArenaSize is the size computed by the last Plan.
func (g *Graph) ArenaSize() int { return g.arena }

// FreeList is a best-fit allocator of offsets in one arena that tracks the arena's high-water
// mark. Alloc takes the smallest free block that fits (its low end), or grows the arena; Free
// returns a block, merging it with its free neighbours. Both graph planners use it (Graph.Plan
// and the CUDA backend's scratch plan), so equal sequences of calls give equal offsets.
type FreeList struct {
	blocks []freeBlock // free blocks, sorted by offset
	end    int         // end of the used region
	peak   int
}

type freeBlock struct{ off, size int }

// Peak is the arena size the allocations so far needed.
func (f *FreeList) Peak() int { return f.peak }

// Alloc returns the offset of size free bytes.
func (f *FreeList) Alloc(size int) int {
	best := -1
	for i, b := range f.blocks {
		if b.size >= size && (best < 0 || b.size < f.blocks[best].size) {
			best = i
		}
	}
	if best < 0 {
		// Grow from the end, absorbing a free block that touches it.
		off := f.end
		if n := len(f.blocks); n > 0 && f.blocks[n-1].off+f.blocks[n-1].size == f.end {
			off = f.blocks[n-1].off
			f.blocks = f.blocks[:n-1]
		}
		f.end = off + size
		f.peak = max(f.peak, f.end)
		return off
	}
	b := &f.blocks[best]
	off := b.off
	b.off += size
	b.size -= size
	if b.size == 0 {
		f.blocks = append(f.blocks[:best], f.blocks[best+1:]...)
	}
	return off
}

// Free returns the size bytes at off, which an Alloc of that size gave.
func (f *FreeList) Free(off, size int) {
	i := sort.Search(len(f.blocks), func(i int) bool { return f.blocks[i].off > off })
	f.blocks = append(f.blocks, freeBlock{})
	copy(f.blocks[i+1:], f.blocks[i:])
	f.blocks[i] = freeBlock{off, size}
	// Merge with the next and the previous block when they touch.
	if i+1 < len(f.blocks) && f.blocks[i].off+f.blocks[i].size == f.blocks[i+1].off {
		f.blocks[i].size += f.blocks[i+1].size
		f.blocks = append(f.blocks[:i+1], f.blocks[i+2:]...)
	}
	if i > 0 && f.blocks[i-1].off+f.blocks[i-1].size == f.blocks[i].off {
		f.blocks[i-1].size += f.blocks[i].size
		f.blocks = append(f.blocks[:i], f.blocks[i+1:]...)
	}
	// A free block at the end shrinks the used region.
	if n := len(f.blocks); n > 0 && f.blocks[n-1].off+f.blocks[n-1].size == f.end {
		f.end = f.blocks[n-1].off
		f.blocks = f.blocks[:n-1]
	}
}
