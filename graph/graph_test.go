package graph

import (
	"math/rand/v2"
	"testing"

	"github.com/gorun-dev/gorun/quant"
)

// A chain of ops reuses memory: the arena holds a few tensors, not all of them.
func TestPlanReusesMemory(t *testing.T) {
	ctx := NewContext(64)
	x := ctx.NewInput("x", quant.F32, 256, 4)
	y := x
	for i := 0; i < 20; i++ {
		y = ctx.GELU(y)
	}
	if err := ctx.Err(); err != nil {
		t.Fatal(err)
	}
	g := NewGraph(64)
	if err := g.Build(y); err != nil {
		t.Fatal(err)
	}
	size, err := g.Plan()
	if err != nil {
		t.Fatal(err)
	}
	one := 256 * 4 * 4
	if size > 3*one {
		t.Errorf("arena %d bytes for a chain of %d-byte tensors: memory is not reused", size, one)
	}
}

// For random graphs, no two tensors whose contents are needed at the same time overlap, and
// inputs and outputs are never overwritten.
func TestPlanNoLiveOverlap(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for range 200 {
		g := randomGraph(t, rng)
		if _, err := g.Plan(); err != nil {
			t.Fatal(err)
		}
		checkNoOverlap(t, g)
	}
}

// checkNoOverlap simulates execution: at node i, the arena memory written (node i) must not
// overlap any tensor still to be read later (or an input/output).
func checkNoOverlap(t *testing.T, g *Graph) {
	t.Helper()
	last := map[*Tensor]int{}
	for i, n := range g.Nodes {
		for _, s := range n.Src {
			if s != nil {
				last[s.Base()] = i
			}
		}
	}
	live := map[*Tensor]bool{}
	for _, l := range g.Leaves {
		if l.Flags&FlagStatic == 0 { // static leaves (weights, caches) are not in the arena
			live[l] = true
		}
	}
	for i, n := range g.Nodes {
		if !needsArena(n) { // views, and stores into a cache, write no arena memory of their own
			continue
		}
		for o := range live {
			if o == n {
				continue
			}
			keep := last[o] >= i || o.Flags&(FlagInput|FlagOutput) != 0
			if keep && n.Off < o.Off+o.Bytes() && o.Off < n.Off+n.Bytes() {
				t.Fatalf("node %d (%v) at [%d,%d) overlaps live %v at [%d,%d)", i, n.Op, n.Off, n.Off+n.Bytes(), o.Op, o.Off, o.Off+o.Bytes())
			}
		}
		live[n] = true
	}
}

func TestContextErrors(t *testing.T) {
	ctx := NewContext(2)
	a := ctx.NewTensor(quant.F32, 4)
	ctx.NewTensor(quant.F32, 4)
	ctx.GELU(a) // third tensor: pool exhausted
	if ctx.Err() == nil {
		t.Error("exhausted pool not reported")
	}
	ctx.Reset()
	ctx.NewTensor(quant.Q4_0, 31)
	if ctx.Err() == nil {
		t.Error("row of 31 q4_0 elements accepted")
	}
	ctx.Reset()
	w := ctx.NewTensor(quant.F32, 8, 3)
	x := ctx.NewTensor(quant.F32, 7, 2)
	ctx.MulMat(w, x)
	if ctx.Err() == nil {
		t.Error("mismatched mul_mat accepted")
	}
}

// Building a graph from a reset context allocates nothing on the heap once warm.
func TestBuildingOpsDoesNotAllocate(t *testing.T) {
	ctx := NewContext(64)
	allocs := testing.AllocsPerRun(10, func() {
		ctx.Reset()
		x := ctx.NewInput("x", quant.F32, 16, 4)
		w := ctx.NewTensor(quant.F32, 16, 16)
		ctx.GELU(ctx.Add(ctx.MulMat(w, x), x))
	})
	if allocs != 0 {
		t.Errorf("%v allocations per graph build", allocs)
	}
}

// A node reading several views of one tensor frees that tensor once: freeing it twice would
// hand its memory to two later tensors at the same time.
func TestPlanFreesSharedBaseOnce(t *testing.T) {
	ctx := NewContext(64)
	x := ctx.NewInput("x", quant.F32, 64, 3)
	y := ctx.GELU(x)
	a := ctx.Rows(y, 0, 3)
	b := ctx.Rows(y, 0, 3)
	z := ctx.Add(a, b) // reads two views of y; y's last use
	u := ctx.GELU(z)
	v := ctx.GELU(u)
	w := ctx.Add(u, v) // u and v live together
	if err := ctx.Err(); err != nil {
		t.Fatal(err)
	}
	g := NewGraph(64)
	if err := g.Build(w); err != nil {
		t.Fatal(err)
	}
	if _, err := g.Plan(); err != nil {
		t.Fatal(err)
	}
	checkNoOverlap(t, g)
	if u.Off < v.Off+v.Bytes() && v.Off < u.Off+u.Bytes() {
		t.Errorf("u [%d,%d) and v [%d,%d) overlap", u.Off, u.Off+u.Bytes(), v.Off, v.Off+v.Bytes())
	}
}

// Every op has its own name (the compile-time check in ops.go counts them; this finds a hole
// left in the keyed table).
func TestOpNames(t *testing.T) {
	seen := map[string]Op{}
	for o := range opCount {
		name := o.String()
		if name == "" || name == "op?" {
			t.Errorf("op %d has no name", o)
		}
		if p, dup := seen[name]; dup {
			t.Errorf("ops %d and %d are both named %q", p, o, name)
		}
		seen[name] = o
	}
	if s := opCount.String(); s != "op?" {
		t.Errorf("an op past the table is named %q", s)
	}
}
