package cpu

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gorun-dev/gorun/backend"
	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/quant"
)

// fixture builds one graph over host tensors filled with random values and computes it.
type fixture struct {
	t   *testing.T
	ctx *graph.Context
	rng *rand.Rand
	be  *Backend
}

func newFixture(t *testing.T, threads int) *fixture {
	be := New(threads)
	t.Cleanup(func() { be.Close() })
	return &fixture{t: t, ctx: graph.NewContext(256), rng: rand.New(rand.NewPCG(1, 2)), be: be}
}

// weight makes a static f32 tensor with random values, returned with its data.
func (f *fixture) weight(typ quant.Type, ne ...int) (*graph.Tensor, []float32) {
	n := 1
	for _, d := range ne {
		n *= d
	}
	vals := make([]float32, n)
	for i := range vals {
		vals[i] = float32(f.rng.NormFloat64())
	}
	size, _ := typ.RowSize(int64(n))
	buf, _ := f.be.Alloc(int(size))
	if err := quant.QuantizeRow(typ, buf.Host, vals); err != nil {
		f.t.Fatal(err)
	}
	// What the kernel sees is the stored (rounded) value.
	fm, _ := quant.FormatOf(typ)
	fm.Dequantize(vals, buf.Host)
	return f.ctx.NewStatic("w", typ, buf, 0, ne...), vals
}

func (f *fixture) run(outs ...*graph.Tensor) {
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
		if l.Flags&graph.FlagInput != 0 && l.Type == quant.I32 {
			ids := l.I32()
			for i := range ids {
				ids[i] = int32(i)
			}
		}
	}
	if err := f.be.Compute(g); err != nil {
		f.t.Fatal(err)
	}
}

func near(t *testing.T, what string, got []float32, want []float64, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d values, want %d", what, len(got), len(want))
	}
	for i := range got {
		if d := math.Abs(float64(got[i]) - want[i]); d > tol*(1+math.Abs(want[i])) || math.IsNaN(float64(got[i])) {
			t.Fatalf("%s[%d] = %v, want %v", what, i, got[i], want[i])
		}
	}
}

func TestMulMatAgainstReference(t *testing.T) {
	for _, typ := range []quant.Type{quant.F32, quant.F16, quant.BF16} {
		for _, M := range []int{1, 2, 3, 17} {
			for _, threads := range []int{1, 3} {
				f := newFixture(t, threads)
				K, N := 64, 45
				w, wv := f.weight(typ, K, N)
				x, xv := f.weight(quant.F32, K, M)
				y := f.ctx.MulMat(w, x)
				f.run(y)
				want := make([]float64, N*M)
				for m := 0; m < M; m++ {
					for n := 0; n < N; n++ {
						var s float64
						for k := 0; k < K; k++ {
							s += float64(wv[n*K+k]) * float64(xv[m*K+k])
						}
						want[m*N+n] = s
					}
				}
				near(t, "mul_mat "+typ.String(), y.F32(), want, 1e-4)
			}
		}
	}
}

func TestElementwiseOps(t *testing.T) {
	f := newFixture(t, 2)
	a, av := f.weight(quant.F32, 8, 5)
	b, bv := f.weight(quant.F32, 8, 1)
	w, wv := f.weight(quant.F32, 8, 1)
	add := f.ctx.Add(a, b)
	mul := f.ctx.Mul(a, b)
	gelu := f.ctx.GELU(a)
	sc := f.ctx.Scale(a, 0.5)
	ln := f.ctx.LayerNorm(a, w, b, 1e-5)
	f.run(add, mul, gelu, sc, ln)
	var wantAdd, wantMul, wantGelu, wantSc, wantLn []float64
	for r := 0; r < 5; r++ {
		row := av[r*8 : r*8+8]
		var mean, vr float64
		for _, v := range row {
			mean += float64(v) / 8
		}
		for _, v := range row {
			vr += (float64(v) - mean) * (float64(v) - mean) / 8
		}
		for i, v := range row {
			x := float64(v)
			wantAdd = append(wantAdd, x+float64(bv[i]))
			wantMul = append(wantMul, x*float64(bv[i]))
			wantGelu = append(wantGelu, 0.5*x*(1+math.Tanh(math.Sqrt(2/math.Pi)*(x+0.044715*x*x*x))))
			wantSc = append(wantSc, x/2)
			wantLn = append(wantLn, (x-mean)/math.Sqrt(vr+1e-5)*float64(wv[i])+float64(bv[i]))
		}
	}
	near(t, "add", add.F32(), wantAdd, 1e-6)
	near(t, "mul", mul.F32(), wantMul, 1e-6)
	near(t, "gelu", gelu.F32(), wantGelu, 1e-6)
	near(t, "scale", sc.F32(), wantSc, 1e-6)
	near(t, "layer_norm", ln.F32(), wantLn, 1e-5)
}

// Attention over a cache written by StoreKV equals a direct causal softmax attention.
func TestAttentionCausal(t *testing.T) {
	const E, H, N, C = 16, 4, 6, 10
	f := newFixture(t, 2)
	q, qv := f.weight(quant.F32, E, N)
	k, kv := f.weight(quant.F32, E, N)
	v, vv := f.weight(quant.F32, E, N)
	kc, _ := f.weight(quant.F32, E, C)
	vc, _ := f.weight(quant.F32, E, C)
	pos := f.ctx.NewInput("pos", quant.I32, N)
	ks := f.ctx.StoreKV(kc, k, pos)
	vs := f.ctx.StoreKV(vc, v, pos)
	out := f.ctx.Attention(q, ks, vs, pos, H, 0.5)
	f.run(out) // positions are 0..N-1
	D := E / H
	want := make([]float64, E*N)
	for i := 0; i < N; i++ {
		for h := 0; h < H; h++ {
			sc := make([]float64, i+1)
			mx := math.Inf(-1)
			for j := 0; j <= i; j++ {
				for d := 0; d < D; d++ {
					sc[j] += float64(qv[i*E+h*D+d]) * float64(kv[j*E+h*D+d])
				}
				sc[j] *= 0.5
				mx = math.Max(mx, sc[j])
			}
			var sum float64
			for j := range sc {
				sc[j] = math.Exp(sc[j] - mx)
				sum += sc[j]
			}
			for j := range sc {
				for d := 0; d < D; d++ {
					want[i*E+h*D+d] += sc[j] / sum * float64(vv[j*E+h*D+d])
				}
			}
		}
	}
	near(t, "attention", out.F32(), want, 1e-5)
}

// Every row of a matmul is the same bits whether it is computed alone (generation's fused
// path) or among many rows (the tile path), for every weight type the backend multiplies,
// and on the float path it is close to the float64 product of the stored weights. The
// integer path (Q8_0, Q4_0) must be independent of the batch too.
func TestMulMatRowsIndependentOfBatch(t *testing.T) {
	types := []quant.Type{quant.F32, quant.F16, quant.BF16, quant.Q8_0, quant.Q4_0, quant.Q4_1, quant.Q5_0,
		quant.Q5_1, quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.IQ4_NL, quant.IQ4_XS}
	// N = 1203: generation's fused path claims 32 rows at a time on two threads (fusedClaim),
	// the last claim partial and ending in three rows the tile path's single-row dot makes.
	for _, typ := range types {
		for _, N := range []int{45, 1203} {
			testRowsIndependentOfBatch(t, typ, N, backend.QuantActOff)
		}
	}
	for _, typ := range []quant.Type{quant.Q8_0, quant.Q4_0} {
		for _, N := range []int{45, 1203} {
			testRowsIndependentOfBatch(t, typ, N, backend.QuantActOn)
		}
	}
}

// testRowsIndependentOfBatch checks one weight type; on the integer path (qact on) only for
// bits, since 8-bit activations are not within the float path's tolerance.
func testRowsIndependentOfBatch(t *testing.T, typ quant.Type, N int, qact backend.QuantAct) {
	f := newFixture(t, 2)
	f.be.SetQuantizedActivations(qact)
	K, M := 512, 6
	w, wv := f.weight(typ, K, N)
	x, xv := f.weight(quant.F32, K, M)
	all := f.ctx.MulMat(w, x)
	var one []*graph.Tensor
	for m := 0; m < M; m++ {
		one = append(one, f.ctx.MulMat(w, f.ctx.View2D(x, K, 1, 4*K, m*K*4)))
	}
	f.run(append([]*graph.Tensor{all}, one...)...)
	for m := 0; m < M; m++ {
		got := one[m].F32()
		for n := 0; n < N; n++ {
			if b := all.F32()[m*N+n]; got[n] != b {
				t.Fatalf("%v, quantized activations %v: row %d col %d: alone %v, in a batch of %d %v", typ, qact, m, n, got[n], M, b)
			}
			if qact != backend.QuantActOff {
				continue
			}
			var s, abs float64
			for k := 0; k < K; k++ {
				p := float64(wv[n*K+k]) * float64(xv[m*K+k])
				s += p
				abs += math.Abs(p)
			}
			if d := math.Abs(float64(got[n]) - s); d > 1e-5*abs {
				t.Fatalf("%v: row %d col %d: %v, float64 %v", typ, m, n, got[n], s)
			}
		}
	}
}
