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
