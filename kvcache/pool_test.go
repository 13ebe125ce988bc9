package kvcache

import (
	"errors"
	"testing"

	"github.com/gorun-dev/gorun/cpu"
	"github.com/gorun-dev/gorun/quant"
)

// Sequences take blocks as they grow and give them back when truncated or released; a request
// the pool cannot meet takes nothing and says so; every block is accounted for.
func TestPoolBlocks(t *testing.T) {
	be := cpu.New(1)
	defer be.Close()
	p, err := NewPool(be, Shape{Layers: 2, Width: 8}, 5, 100, quant.F32)
	if err != nil {
		t.Fatal(err)
	}
	if p.TableLen != 7 || p.Bytes() != 2*2*8*4*5*BlockSize || p.K[1].Ne[1] != 5*BlockSize {
		t.Fatalf("table %d, %d bytes, K[1] %v", p.TableLen, p.Bytes(), p.K[1].Ne)
	}
	a, b := p.NewSeq(), p.NewSeq()
	if err := a.Grow(17); err != nil || len(a.Table()) != 2 {
		t.Fatalf("grow to 17: %v, table %v", err, a.Table())
	}
	if err := a.Grow(32); err != nil || len(a.Table()) != 2 {
		t.Fatalf("grow within the blocks: %v, table %v", err, a.Table())
	}
	if err := b.Grow(48); err != nil || p.Free() != 0 {
		t.Fatalf("grow b: %v, %d free", err, p.Free())
	}
	if err := a.Grow(33); !errors.Is(err, ErrPoolFull) || len(a.Table()) != 2 {
		t.Fatalf("grow past the pool: %v, table %v", err, a.Table())
	}
	seen := map[int32]bool{}
	for _, blk := range append(append([]int32{}, a.Table()...), b.Table()...) {
		if seen[blk] || blk < 0 || blk >= 5 {
			t.Fatalf("block %d handed out twice or outside the pool: %v %v", blk, a.Table(), b.Table())
		}
		seen[blk] = true
	}
	b.Truncate(17)
	if len(b.Table()) != 2 || p.Free() != 1 {
		t.Fatalf("truncate to 17: table %v, %d free", b.Table(), p.Free())
	}
	if err := a.Grow(33); err != nil {
		t.Fatal(err)
	}
	a.Release()
	a.Release()
	b.Release()
	st := p.Stats()
	if st.Free != 5 || st.Sequences != 0 || st.Peak != 5 || st.Denied != 1 {
		t.Fatalf("after release: %+v", st)
	}
	if err := a.Grow(1); err == nil {
		t.Fatal("a released sequence grew")
	}
	c := p.NewSeq()
	if err := c.Grow(7*BlockSize + 1); err == nil {
		t.Fatal("a sequence grew past its table")
	}
	c.Release()
}

// HostRows hands out a sequence's rows block by block, in position order.
func TestPoolHostRows(t *testing.T) {
	be := cpu.New(1)
	defer be.Close()
	p, err := NewPool(be, Shape{Layers: 1, Width: 4}, 4, 64, quant.F32)
	if err != nil {
		t.Fatal(err)
	}
	s := p.NewSeq()
	defer s.Release()
	if err := s.Grow(20); err != nil {
		t.Fatal(err)
	}
	for j := 0; j < 20; j++ { // tag each position's row with its position
		row := int(s.Table()[j/BlockSize])*BlockSize + j%BlockSize
		p.V[0].Row(row)[0] = byte(j)
	}
	var got []byte
	if err := s.HostRows(0, true, 20, func(b []byte) error {
		for i := 0; i < len(b); i += 16 {
			got = append(got, b[i])
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	for j, x := range got {
		if int(x) != j {
			t.Fatalf("row %d holds position %d's tag", j, x)
		}
	}
	if len(got) != 20 {
		t.Fatalf("%d rows", len(got))
	}
	if s.HostRows(0, false, 33, func([]byte) error { return nil }) == nil {
		t.Fatal("rows past the sequence's blocks")
	}
}

// Committed full blocks are found by content (the same ids after the same prefix, never other
// ids or another prefix), shared with refcounts, cached when released, copied before a write
// into a shared one, and reused for new data only when no free block is left.
func TestPoolPrefixBlocks(t *testing.T) {
	be := cpu.New(1)
	defer be.Close()
	p, err := NewPool(be, Shape{Layers: 1, Width: 4}, 4, 128, quant.F32)
	if err != nil {
		t.Fatal(err)
	}
	ids := make([]int32, 40)
	for i := range ids {
		ids[i] = int32(i)
	}
	a := p.NewSeq()
	if err := a.Prepare(0, 40); err != nil {
		t.Fatal(err)
	}
	p.V[0].Row(int(a.Table()[1]) * BlockSize)[0] = 77 // tag a's second block
	a.Commit(ids, 40)
	b := p.NewSeq()
	if n := b.Adopt(ids, 0, 39); n != 32 || b.Table()[0] != a.Table()[0] || b.Table()[1] != a.Table()[1] {
		t.Fatalf("adopted up to %d, tables %v %v", n, a.Table(), b.Table())
	}
	other := append([]int32{99}, ids[1:]...)
	c := p.NewSeq()
	if n := c.Adopt(other, 0, 39); n != 0 {
		t.Fatalf("another first block matched: %d", n)
	}
	c.Release()
	// b writes into its second block (shared with a): it gets a copy of it.
	if err := b.Prepare(20, 21); err != nil {
		t.Fatal(err)
	}
	if b.Table()[1] == a.Table()[1] || p.V[0].Row(int(b.Table()[1]) * BlockSize)[0] != 77 {
		t.Fatalf("no copy before writing into a shared block: %v %v", a.Table(), b.Table())
	}
	b.Release()
	a.Release()
	st := p.Stats()
	if st.Free != 4 || st.Cached != 2 || st.Hits != 2 {
		t.Fatalf("after release: %+v", st)
	}
	d := p.NewSeq()
	if n := d.Adopt(ids, 0, 39); n != 32 {
		t.Fatalf("cached blocks not found: %d", n)
	}
	d.Release()
	e := p.NewSeq()
	if err := e.Grow(4 * BlockSize); err != nil { // takes the free blocks, then the cached ones
		t.Fatal(err)
	}
	if st := p.Stats(); st.Free != 0 || st.Cached != 0 {
		t.Fatalf("with the pool full: %+v", st)
	}
	e.Release()
	f := p.NewSeq()
	if n := f.Adopt(ids, 0, 39); n != 0 {
		t.Fatalf("an overwritten block was still found: %d", n)
	}
	f.Release()
	if st := p.Stats(); st.Free != 4 || st.Sequences != 0 {
		t.Fatalf("at the end: %+v", st)
	}
}
