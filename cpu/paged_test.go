package cpu

import (
	"math"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/quant"
)

// computeWith builds, plans and binds a graph of outs, writes its I32 inputs by name, and
// computes it, returning the computation's error.
func (f *fixture) computeWith(inputs map[string][]int32, outs ...*graph.Tensor) error {
	f.t.Helper()
	if err := f.ctx.Err(); err != nil {
		f.t.Fatal(err)
	}
	g := graph.NewGraph(256)
	if err := g.Build(outs...); err != nil {
		f.t.Fatal(err)
	}
	size, err := g.Plan()
	if err != nil {
		f.t.Fatal(err)
	}
	buf, _ := f.be.Alloc(size)
	if err := g.Bind(buf); err != nil {
		f.t.Fatal(err)
	}
	for _, l := range g.Leaves {
		if l.Flags&graph.FlagInput != 0 {
			vals, ok := inputs[l.Name]
			if !ok || len(vals) != l.NElements() {
				f.t.Fatalf("input %q: %d values for %d elements", l.Name, len(vals), l.NElements())
			}
			copy(l.I32(), vals)
		}
	}
	return f.be.Compute(g)
}

// scatter copies the first n rows of a contiguous cache into the pool's blocks per table.
func scatter(pool, cache *graph.Tensor, table []int32, n int) {
	const B = graph.KVBlockSize
	for j := 0; j < n; j++ {
		dst := pool.Row(int(table[j/B])*B + j%B)
		copy(dst, cache.Row(j))
	}
}

func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
			t.Fatalf("%s: element %d = %v paged, %v contiguous", what, i, got[i], want[i])
		}
	}
}

// A prompt batch stored and attended through a block table (rows scattered over the pool's
// blocks) gives bit-identical outputs, and stores the same rows, as a contiguous cache, for
// f32 (the SIMD path) and f16 caches, multi-head and grouped-query attention.
func TestAttentionPagedPromptBitIdentical(t *testing.T) {
	for _, typ := range []quant.Type{quant.F32, quant.F16} {
		for _, heads := range [][2]int{{2, 2}, {4, 2}, {2, 1}} {
			const D, C, N, first = 64, 48, 7, 29 // rows first..first+N-1 cross a block boundary
			H, KVH := heads[0], heads[1]
			f := newFixture(t, 2)
			q, _ := f.weight(quant.F32, H*D, N)
			k, _ := f.weight(quant.F32, KVH*D, N)
			v, _ := f.weight(quant.F32, KVH*D, N)
			kc, _ := f.weight(typ, KVH*D, C)
			vc, _ := f.weight(typ, KVH*D, C)
			kp, _ := f.weight(typ, KVH*D, 8*graph.KVBlockSize)
			vp, _ := f.weight(typ, KVH*D, 8*graph.KVBlockSize)
			table := []int32{5, 1, 7}
			if KVH == 1 {
				table = []int32{2, 3, 4} // one run of consecutive blocks
			}
			scatter(kp, kc, table, first)
			scatter(vp, vc, table, first)
			pos := f.ctx.NewInput("pos", quant.I32, N)
			tables := f.ctx.NewInput("tables", quant.I32, len(table), 1)
			want := f.ctx.AttentionGQA(q, f.ctx.StoreKV(kc, k, pos), f.ctx.StoreKV(vc, v, pos), pos, H, KVH, 0.125)
			ks, vs := f.ctx.StoreKVPaged(kp, k, pos, tables), f.ctx.StoreKVPaged(vp, v, pos, tables)
			got := f.ctx.AttentionPaged(q, ks, vs, pos, H, KVH, 0.125)
			positions := make([]int32, N)
			for i := range positions {
				positions[i] = int32(first + i)
			}
			if err := f.computeWith(map[string][]int32{"pos": positions, "tables": table}, want, got); err != nil {
				t.Fatal(err)
			}
			sameBits(t, typ.String()+" attention", got.F32(), want.F32())
			for j := 0; j < first+N; j++ {
				row := int(table[j/16])*16 + j%16
				if string(kp.Row(row)) != string(kc.Row(j)) || string(vp.Row(row)) != string(vc.Row(j)) {
					t.Fatalf("%v: position %d stored differently", typ, j)
				}
			}
		}
	}
}

// Rows of several sequences (one block table each) attend each over its own blocks,
// bit-identical to attention_rows over contiguous per-sequence caches.
func TestAttentionPagedRowsBitIdentical(t *testing.T) {
	const D, H, C = 64, 2, 48
	f := newFixture(t, 2)
	q, _ := f.weight(quant.F32, H*D, 2)
	k, _ := f.weight(quant.F32, H*D, 2)
	v, _ := f.weight(quant.F32, H*D, 2)
	kc0, _ := f.weight(quant.F32, H*D, C)
	vc0, _ := f.weight(quant.F32, H*D, C)
	kc1, _ := f.weight(quant.F32, H*D, C)
	vc1, _ := f.weight(quant.F32, H*D, C)
	kp, _ := f.weight(quant.F32, H*D, 8*graph.KVBlockSize)
	vp, _ := f.weight(quant.F32, H*D, 8*graph.KVBlockSize)
	t0, t1 := []int32{3, 4, 6}, []int32{2, 7, 5} // t0 has a run of consecutive blocks
	positions := []int32{40, 17}
	scatter(kp, kc0, t0, 40)
	scatter(vp, vc0, t0, 40)
	scatter(kp, kc1, t1, 17)
	scatter(vp, vc1, t1, 17)
	pos := f.ctx.NewInput("pos", quant.I32, 2)
	tables := f.ctx.NewInput("tables", quant.I32, 3, 2)
	kr := f.ctx.StoreKVRows([]*graph.Tensor{kc0, kc1}, k, pos)
	vr := f.ctx.StoreKVRows([]*graph.Tensor{vc0, vc1}, v, pos)
	want := f.ctx.AttentionRows(q, kr, vr, pos, H, 0.125)
	got := f.ctx.AttentionPaged(q, f.ctx.StoreKVPaged(kp, k, pos, tables), f.ctx.StoreKVPaged(vp, v, pos, tables), pos, H, 0, 0.125)
	if err := f.computeWith(map[string][]int32{"pos": positions, "tables": append(append([]int32{}, t0...), t1...)}, want, got); err != nil {
		t.Fatal(err)
	}
	sameBits(t, "attention rows", got.F32(), want.F32())
}

// A table entry outside the pool or a position past the table fails the computation with an
// error naming it, and writes nothing out of bounds.
func TestAttentionPagedRefusesBadTables(t *testing.T) {
	for _, c := range []struct {
		table []int32
		pos   int32
		want  string
	}{
		{[]int32{0, 9}, 20, "outside the pool"},
		{[]int32{0, -1}, 16, "outside the pool"},
		{[]int32{0, 1}, 32, "outside a block table"},
		{[]int32{0, 1}, -1, "outside a block table"},
	} {
		f := newFixture(t, 1)
		q, _ := f.weight(quant.F32, 16, 1)
		k, _ := f.weight(quant.F32, 16, 1)
		kp, _ := f.weight(quant.F32, 16, 4*graph.KVBlockSize)
		pos := f.ctx.NewInput("pos", quant.I32, 1)
		tables := f.ctx.NewInput("tables", quant.I32, 2, 1)
		ks := f.ctx.StoreKVPaged(kp, k, pos, tables)
		out := f.ctx.AttentionPaged(q, ks, ks, pos, 2, 0, 1)
		err := f.computeWith(map[string][]int32{"pos": {c.pos}, "tables": c.table}, out)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("table %v position %d: error %v, want one saying %q", c.table, c.pos, err, c.want)
		}
	}
}
