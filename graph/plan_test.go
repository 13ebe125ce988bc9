package graph

import (
	"fmt"
	"hash/fnv"
	"math/rand/v2"
	"testing"

	"github.com/gorun-dev/gorun/quant"
)

// gpt2Graph builds a GPT-2-shaped graph as models/gpt2.go does (embeddings, per layer: layer
// norm, fused QKV product and its views, stores into the caches, attention, projections with
// residuals, a GELU feed-forward; the output layer over the last rows), with static weights.
func gpt2Graph(t *testing.T, layers, n, logitRows int, rowsCaches bool) *Graph {
	t.Helper()
	const E, V, C, H = 64, 96, 32, 4
	ctx := NewContext(1024)
	w := func(ne ...int) *Tensor { return ctx.NewStatic("w", quant.F32, nil, 0, ne...) }
	tok := ctx.NewInput("tokens", quant.I32, n)
	pos := ctx.NewInput("positions", quant.I32, n)
	x := ctx.Add(ctx.GetRows(w(E, V), tok), ctx.GetRows(w(E, C), pos))
	for range layers {
		h := ctx.LayerNorm(x, w(E), w(E), 1e-5)
		qkv := ctx.Add(ctx.MulMat(w(E, 3*E), h), w(3*E))
		q := ctx.View2D(qkv, E, n, qkv.Nb[1], 0)
		k := ctx.View2D(qkv, E, n, qkv.Nb[1], 4*E)
		v := ctx.View2D(qkv, E, n, qkv.Nb[1], 8*E)
		var a *Tensor
		if rowsCaches {
			kc, vc := make([]*Tensor, n), make([]*Tensor, n)
			for i := range n {
				kc[i], vc[i] = w(E, C), w(E, C)
			}
			a = ctx.AttentionRows(q, ctx.StoreKVRows(kc, k, pos), ctx.StoreKVRows(vc, v, pos), pos, H, 0.125)
		} else {
			a = ctx.Attention(q, ctx.StoreKV(w(E, C), k, pos), ctx.StoreKV(w(E, C), v, pos), pos, H, 0.125)
		}
		x = ctx.Add(x, ctx.Add(ctx.MulMat(w(E, E), a), w(E)))
		h = ctx.LayerNorm(x, w(E), w(E), 1e-5)
		h = ctx.GELU(ctx.Add(ctx.MulMat(w(E, 4*E), h), w(4*E)))
		x = ctx.Add(x, ctx.Add(ctx.MulMat(w(4*E, E), h), w(E)))
	}
	x = ctx.Rows(x, n-logitRows, logitRows)
	logits := ctx.MulMat(w(E, V), ctx.LayerNorm(x, w(E), w(E), 1e-5))
	logits.Flags |= FlagOutput
	if err := ctx.Err(); err != nil {
		t.Fatal(err)
	}
	g := NewGraph(1024)
	if err := g.Build(logits); err != nil {
		t.Fatal(err)
	}
	return g
}

// randomGraph builds a graph of 40 random element-wise ops and row views over three inputs,
// with two outputs.
func randomGraph(t *testing.T, rng *rand.Rand) *Graph {
	t.Helper()
	ctx := NewContext(128)
	var ts []*Tensor
	for range 3 {
		ts = append(ts, ctx.NewInput("in", quant.F32, 8*(1+rng.IntN(4)), 2))
	}
	for range 40 {
		a := ts[rng.IntN(len(ts))]
		var n *Tensor
		switch rng.IntN(4) {
		case 0:
			n = ctx.GELU(a)
		case 1:
			n = ctx.Scale(a, 2)
		case 2:
			b := ts[rng.IntN(len(ts))]
			if b.Ne[0] != a.Ne[0] || (b.NRows() != 1 && b.NRows() != a.NRows()) {
				b = a
			}
			n = ctx.Add(a, b)
		case 3:
			n = ctx.Rows(a, a.NRows()-1, 1)
		}
		ts = append(ts, n)
	}
	if err := ctx.Err(); err != nil {
		t.Fatal(err)
	}
	g := NewGraph(128)
	if err := g.Build(ts[len(ts)-1], ts[len(ts)-5]); err != nil {
		t.Fatal(err)
	}
	return g
}

// planDigest plans g and hashes the arena size and every leaf's and node's offset, in order.
func planDigest(t *testing.T, g *Graph, h interface{ Write([]byte) (int, error) }) {
	t.Helper()
	size, err := g.Plan()
	if err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(h, "arena %d\n", size)
	for _, l := range g.Leaves {
		fmt.Fprintf(h, "leaf %d\n", l.Off)
	}
	for _, n := range g.Nodes {
		fmt.Fprintf(h, "%v %d\n", n.Op, n.Off)
	}
}

// The planner's offsets are pinned: a refactoring of the planner (or of the free list it
// shares with the CUDA backend) must place every tensor exactly where it did.
func TestPlanOffsetsPinned(t *testing.T) {
	cases := []struct {
		name string
		g    func() *Graph
		size int
	}{
		{"decode", func() *Graph { return gpt2Graph(t, 2, 1, 1, false) }, 2944},
		{"prompt", func() *Graph { return gpt2Graph(t, 2, 7, 1, false) }, 19840},
		{"prompt-all-logits", func() *Graph { return gpt2Graph(t, 3, 5, 5, false) }, 14208},
		{"rows", func() *Graph { return gpt2Graph(t, 2, 3, 3, true) }, 8576},
	}
	for _, c := range cases {
		g := c.g()
		size, err := g.Plan()
		if err != nil {
			t.Fatal(err)
		}
		if size != c.size {
			t.Errorf("%s: arena %d bytes, pinned %d", c.name, size, c.size)
		}
		checkNoOverlap(t, g)
	}
	h := fnv.New64a()
	for _, c := range cases {
		planDigest(t, c.g(), h)
	}
	rng := rand.New(rand.NewPCG(11, 13))
	for range 100 {
		planDigest(t, randomGraph(t, rng), h)
	}
	if got, want := h.Sum64(), uint64(0xc35e49b747cfb245); got != want {
		t.Errorf("plan digest %#x, pinned %#x", got, want)
	}
}

// The free list's placements are pinned over a random sequence of allocations and frees.
func TestFreeListPinned(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 5))
	var fl FreeList
	type span struct{ off, size int }
	var live []span
	h := fnv.New64a()
	for range 5000 {
		if len(live) > 0 && rng.IntN(5) < 2 {
			i := rng.IntN(len(live))
			fl.Free(live[i].off, live[i].size)
			live = append(live[:i], live[i+1:]...)
			continue
		}
		size := Alignment * (1 + rng.IntN(64))
		off := fl.Alloc(size)
		for _, s := range live {
			if off < s.off+s.size && s.off < off+size {
				t.Fatalf("[%d,%d) overlaps live [%d,%d)", off, off+size, s.off, s.off+s.size)
			}
		}
		live = append(live, span{off, size})
		fmt.Fprintf(h, "%d %d\n", off, fl.Peak())
	}
	if got, want := h.Sum64(), uint64(0xd359ca37202ece7c); got != want {
		t.Errorf("free list digest %#x, pinned %#x", got, want)
	}
}
