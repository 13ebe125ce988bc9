//go:build cuda

package cuda

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/backend"
	"github.com/gorun-dev/gorun/cpu"
	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/quant"
)

// gpu opens the first GPU for a test, skipping when there is none.
func gpu(t testing.TB) *Backend {
	t.Helper()
	b, err := New(0)
	if err != nil {
		t.Skipf("no usable CUDA GPU: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// input is the data of one input tensor of a test graph.
type input struct {
	t    *graph.Tensor
	data []byte
}

// env creates the tensors of a test graph on one backend.
type env struct {
	be  graph.Backend
	ctx *graph.Context
	t   testing.TB
	ins []input
}

// weight makes a static tensor from host bytes (uploaded on the GPU).
func (e *env) weight(name string, typ quant.Type, host []byte, dims ...int) *graph.Tensor {
	buf, err := e.be.Weights(host)
	if err != nil {
		e.t.Fatal(err)
	}
	return e.ctx.NewStatic(name, typ, buf, 0, dims...)
}

// cache makes a zeroed static tensor.
func (e *env) cache(name string, typ quant.Type, dims ...int) *graph.Tensor {
	n := 1
	for _, d := range dims {
		n *= d
	}
	buf, err := e.be.Alloc(n * typ.TypeSize())
	if err != nil {
		e.t.Fatal(err)
	}
	return e.ctx.NewStatic(name, typ, buf, 0, dims...)
}

func (e *env) inputF32(name string, data []float32, dims ...int) *graph.Tensor {
	t := e.ctx.NewInput(name, quant.F32, dims...)
	e.ins = append(e.ins, input{t, append([]byte(nil), quant.F32Bytes(data)...)})
	return t
}

func (e *env) inputI32(name string, data []int32) *graph.Tensor {
	t := e.ctx.NewInput(name, quant.I32, len(data))
	b := make([]byte, 4*len(data))
	for i, v := range data {
		b[4*i], b[4*i+1], b[4*i+2], b[4*i+3] = byte(v), byte(v>>8), byte(v>>16), byte(v>>24)
	}
	e.ins = append(e.ins, input{t, b})
	return t
}

// nanWord is a quiet NaN: outputs are poisoned with it before the GPU computes, so elements a
// kernel fails to write show up.
const nanWord = 0x7fc00000

// run builds the graph of build on be, computes it (runs times, same inputs) and returns the
// output values.
func run(t testing.TB, be graph.Backend, runs int, build func(e *env) *graph.Tensor) ([]float32, error) {
	t.Helper()
	e := &env{be: be, ctx: graph.NewContext(256), t: t}
	out := build(e)
	if err := e.ctx.Err(); err != nil {
		t.Fatal(err)
	}
	g := graph.NewGraph(256)
	if err := g.Build(out); err != nil {
		t.Fatal(err)
	}
	size, err := g.Plan()
	if err != nil {
		t.Fatal(err)
	}
	arena, err := be.Alloc(size)
	if err != nil {
		t.Fatal(err)
	}
	if err := g.Bind(arena); err != nil {
		t.Fatal(err)
	}
	for r := 0; r < runs; r++ {
		if gb, ok := be.(*Backend); ok {
			if err := gb.Prepare(g); err != nil { // compile first, so the scratch is poisoned too
				return nil, err
			}
			if err := gb.fill(arena, nanWord); err != nil {
				t.Fatal(err)
			}
		}
		for _, in := range e.ins {
			if err := be.Write(in.t, in.data); err != nil {
				t.Fatal(err)
			}
		}
		if err := be.Compute(g); err != nil {
			return nil, err
		}
	}
	res := make([]float32, out.NElements())
	if err := be.Read(out, quant.F32Bytes(res)); err != nil {
		t.Fatal(err)
	}
	return res, nil
}

// compare runs build on the CPU and the GPU and checks the relative L2 error of the GPU's
// output against the CPU's, and that no element is NaN.
func compare(t *testing.T, g *Backend, tol float64, build func(e *env) *graph.Tensor) {
	t.Helper()
	c := cpu.New(2)
	c.SetQuantizedActivations(backend.QuantActOff) // the GPU's arithmetic: float32 activations
	defer c.Close()
	want, err := run(t, c, 1, build)
	if err != nil {
		t.Fatal(err)
	}
	got, err := run(t, g, 2, build)
	if err != nil {
		t.Fatal(err)
	}
	checkClose(t, got, want, tol)
}

func checkClose(t *testing.T, got, want []float32, tol float64) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%d values, want %d", len(got), len(want))
	}
	var num, den float64
	worst, wi := 0.0, 0
	for i := range got {
		if math.IsNaN(float64(got[i])) || math.IsInf(float64(got[i]), 0) {
			t.Fatalf("element %d of %d is %v (want %v): not written or overflowed", i, len(got), got[i], want[i])
		}
		d := float64(got[i]) - float64(want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
		if math.Abs(d) > worst {
			worst, wi = math.Abs(d), i
		}
	}
	rel := math.Sqrt(num / max(den, 1e-30))
	if rel > tol {
		t.Fatalf("relative L2 error %.3g > %.3g (worst element %d: %v, want %v)", rel, tol, wi, got[wi], want[wi])
	}
}

func randF32(rng *rand.Rand, n int, scale float32) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64()) * scale
	}
	return v
}

// quantized returns random weights of K x N in type typ.
func quantized(t testing.TB, rng *rand.Rand, typ quant.Type, K, N int) []byte {
	src := randF32(rng, K*N, 0.5)
	rs, err := typ.RowSize(int64(K))
	if err != nil {
		t.Fatal(err)
	}
	dst := make([]byte, int(rs)*N)
	switch typ {
	case quant.F32:
		copy(dst, quant.F32Bytes(src))
		return dst
	case quant.F16:
		h := quant.AsU16(dst)
		for i, x := range src {
			h[i] = quant.F32ToF16(x)
		}
		return dst
	case quant.BF16:
		h := quant.AsU16(dst)
		for i, x := range src {
			h[i] = quant.F32ToBF16(x)
		}
		return dst
	}
	f, err := quant.FormatOf(typ)
	if err != nil || f.Quantize == nil {
		t.Fatalf("%v: no quantizer (%v)", typ, err)
	}
	for r := 0; r < N; r++ {
		if err := f.Quantize(dst[r*int(rs):(r+1)*int(rs)], src[r*K:(r+1)*K]); err != nil {
			t.Fatal(err)
		}
	}
	return dst
}

var weightTypes = []quant.Type{quant.F32, quant.F16, quant.BF16, quant.Q4_0, quant.Q4_1, quant.Q5_0, quant.Q5_1, quant.Q8_0,
	quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.IQ4_NL, quant.IQ4_XS}

// Every weight type, mat-vec (M <= 8) and tiled (M > 8) paths, tile edges (N = 67, M = 70).
func TestMulMat(t *testing.T) {
	g := gpu(t)
	const K, N = 512, 67
	for _, typ := range weightTypes {
		rng := rand.New(rand.NewPCG(uint64(typ), 1))
		w := quantized(t, rng, typ, K, N)
		for _, M := range []int{1, 2, 8, 9, 70} {
			x := randF32(rng, K*M, 1)
			t.Run(typ.String()+"/M="+itoa(M), func(t *testing.T) {
				compare(t, g, 2e-5, func(e *env) *graph.Tensor {
					return e.ctx.MulMat(e.weight("w", typ, w, K, N), e.inputF32("x", x, K, M))
				})
			})
		}
	}
	// A product large enough for the 64 x 64 tiles (the small ones above take 32-row tiles).
	for _, typ := range []quant.Type{quant.Q4_K, quant.F16} {
		rng := rand.New(rand.NewPCG(uint64(typ), 4))
		const K, N, M = 256, 1100, 1000
		w := quantized(t, rng, typ, K, N)
		x := randF32(rng, K*M, 1)
		t.Run(typ.String()+"/large", func(t *testing.T) {
			compare(t, g, 2e-5, func(e *env) *graph.Tensor {
				return e.ctx.MulMat(e.weight("w", typ, w, K, N), e.inputF32("x", x, K, M))
			})
		})
	}
	// Long rows (mmf's pipeline over many K steps, split-K), f16 weights read in place and
	// quantized ones split into planes first.
	for _, typ := range []quant.Type{quant.F16, quant.Q8_0, quant.BF16, quant.Q6_K} {
		rng := rand.New(rand.NewPCG(uint64(typ), 5))
		const K, N, M = 2048, 300, 200
		w := quantized(t, rng, typ, K, N)
		x := randF32(rng, K*M, 1)
		t.Run(typ.String()+"/K=2048", func(t *testing.T) {
			compare(t, g, 2e-5, func(e *env) *graph.Tensor {
				return e.ctx.MulMat(e.weight("w", typ, w, K, N), e.inputF32("x", x, K, M))
			})
		})
	}
	// Three products of one input (q, k and v), then one of another: the first split serves
	// the three (mmf's planes), the last must not read them.
	for _, typ := range []quant.Type{quant.F16, quant.Q8_0} {
		rng := rand.New(rand.NewPCG(uint64(typ), 6))
		const K, N, M = 2048, 2048, 40
		ws := [][]byte{quantized(t, rng, typ, K, N), quantized(t, rng, typ, K, N), quantized(t, rng, typ, K, N), quantized(t, rng, quant.F16, N, K)}
		x := randF32(rng, K*M, 1)
		t.Run(typ.String()+"/shared-input", func(t *testing.T) {
			compare(t, g, 2e-5, func(e *env) *graph.Tensor {
				in := e.inputF32("x", x, K, M)
				q := e.ctx.MulMat(e.weight("q", typ, ws[0], K, N), in)
				k := e.ctx.MulMat(e.weight("k", typ, ws[1], K, N), in)
				v := e.ctx.MulMat(e.weight("v", typ, ws[2], K, N), in)
				return e.ctx.MulMat(e.weight("o", quant.F16, ws[3], N, K), e.ctx.Add(e.ctx.Add(q, k), v))
			})
		})
	}
	// Rows of float weights whose length is no multiple of 32: the element-by-element kernels.
	for _, typ := range []quant.Type{quant.F32, quant.F16, quant.BF16} {
		rng := rand.New(rand.NewPCG(uint64(typ), 3))
		w := quantized(t, rng, typ, 100, N)
		for _, M := range []int{1, 3, 20} {
			x := randF32(rng, 100*M, 1)
			t.Run(typ.String()+"/K=100/M="+itoa(M), func(t *testing.T) {
				compare(t, g, 2e-5, func(e *env) *graph.Tensor {
					return e.ctx.MulMat(e.weight("w", typ, w, 100, N), e.inputF32("x", x, 100, M))
				})
			})
		}
	}
}

// mvq, the mat-vec of long weight rows, gives each activation row the bits it gets alone (a
// batched decode step must not change a sequence's tokens), for the Llama-1B shapes'
// warps-per-row splits too (K = 2048 over 512 or 2048 outputs, K = 8192) and a vocabulary-long
// output; here it takes rows of any length.
func TestMatVecRowsBitIdentical(t *testing.T) {
	g := gpu(t)
	g.mvqMinRow = 0
	shapes := [][2]int{{256, 67}, {2048, 512}, {2048, 2048}, {8192, 256}, {512, 20000}}
	for _, typ := range []quant.Type{quant.F32, quant.F16, quant.BF16, quant.Q8_0, quant.Q4_0} { // mvqAlign's types
		for _, sh := range shapes {
			K, N := sh[0], sh[1]
			rng := rand.New(rand.NewPCG(uint64(typ), uint64(K+N)))
			w := quantized(t, rng, typ, K, N)
			const M = 5
			x := randF32(rng, K*M, 1)
			t.Run(fmt.Sprintf("%v/K=%d/N=%d", typ, K, N), func(t *testing.T) {
				all, err := run(t, g, 1, func(e *env) *graph.Tensor {
					return e.ctx.MulMat(e.weight("w", typ, w, K, N), e.inputF32("x", x, K, M))
				})
				if err != nil {
					t.Fatal(err)
				}
				for m := 0; m < M; m++ {
					one, err := run(t, g, 1, func(e *env) *graph.Tensor {
						return e.ctx.MulMat(e.weight("w", typ, w, K, N), e.inputF32("x", x[m*K:(m+1)*K], K, 1))
					})
					if err != nil {
						t.Fatal(err)
					}
					for i, v := range one {
						if math.Float32bits(v) != math.Float32bits(all[m*N+i]) {
							t.Fatalf("row %d, output %d: %v alone, %v among %d rows", m, i, v, all[m*N+i], M)
						}
					}
				}
				if N*K <= 1<<22 {
					compare(t, g, 2e-5, func(e *env) *graph.Tensor {
						return e.ctx.MulMat(e.weight("w", typ, w, K, N), e.inputF32("x", x, K, M))
					})
				}
			})
		}
	}
}

// The fused epilogues: bias, bias + GELU, bias + residual, for both kernels.
func TestMulMatFused(t *testing.T) {
	g := gpu(t)
	const K, N = 256, 96
	rng := rand.New(rand.NewPCG(7, 7))
	w := quantized(t, rng, quant.Q4_K, K, N)
	bias := randF32(rng, N, 1)
	for _, M := range []int{1, 3, 33} {
		x := randF32(rng, K*M, 1)
		res := randF32(rng, N*M, 1)
		for _, kind := range []string{"bias", "gelu", "residual"} {
			t.Run(kind+"/M="+itoa(M), func(t *testing.T) {
				compare(t, g, 2e-5, func(e *env) *graph.Tensor {
					y := e.ctx.Add(e.ctx.MulMat(e.weight("w", quant.Q4_K, w, K, N), e.inputF32("x", x, K, M)),
						e.weight("b", quant.F32, quant.F32Bytes(bias), N))
					switch kind {
					case "gelu":
						y = e.ctx.GELU(y)
					case "residual":
						y = e.ctx.Add(e.inputF32("r", res, N, M), y)
					}
					return y
				})
			})
		}
	}
}

// A product of a layer norm's output, on the mat-vec (M <= 8) and tiled paths.
func TestMulMatLayerNorm(t *testing.T) {
	g := gpu(t)
	const K, N = 256, 80
	rng := rand.New(rand.NewPCG(8, 8))
	w := quantized(t, rng, quant.Q8_0, K, N)
	lw, lb := randF32(rng, K, 1), randF32(rng, K, 1)
	for _, M := range []int{1, 4, 12} {
		x := randF32(rng, K*M, 3)
		for _, affine := range []bool{true, false} {
			t.Run(fmt.Sprintf("M=%d/affine=%v", M, affine), func(t *testing.T) {
				compare(t, g, 2e-5, func(e *env) *graph.Tensor {
					var a, b *graph.Tensor
					if affine {
						a, b = e.weight("lw", quant.F32, quant.F32Bytes(lw), K), e.weight("lb", quant.F32, quant.F32Bytes(lb), K)
					}
					h := e.ctx.LayerNorm(e.inputF32("x", x, K, M), a, b, 1e-5)
					return e.ctx.MulMat(e.weight("w", quant.Q8_0, w, K, N), h)
				})
			})
		}
	}
}

// The decode shape: one row of 768 normalized inside the mat-vec kernel (mvsln), F16 and Q6_K
// weights, with the bias + GELU epilogue.
func TestMulMatLayerNormDecode(t *testing.T) {
	g := gpu(t)
	const K, N = 768, 300
	rng := rand.New(rand.NewPCG(8, 9))
	lw, lb, bias := randF32(rng, K, 1), randF32(rng, K, 1), randF32(rng, N, 1)
	x := randF32(rng, K, 3)
	for _, typ := range []quant.Type{quant.F16, quant.Q6_K, quant.Q5_0} {
		w := quantized(t, rng, typ, K, N)
		t.Run(typ.String(), func(t *testing.T) {
			compare(t, g, 2e-5, func(e *env) *graph.Tensor {
				h := e.ctx.LayerNorm(e.inputF32("x", x, K, 1), e.weight("lw", quant.F32, quant.F32Bytes(lw), K),
					e.weight("lb", quant.F32, quant.F32Bytes(lb), K), 1e-5)
				y := e.ctx.Add(e.ctx.MulMat(e.weight("w", typ, w, K, N), h), e.weight("b", quant.F32, quant.F32Bytes(bias), N))
				return e.ctx.GELU(y)
			})
		})
	}
}

// Vocabulary-sized outputs: each warp stages four rows.
func TestMulMatLong(t *testing.T) {
	g := gpu(t)
	const N = 16411 // a partial last group of rows
	rng := rand.New(rand.NewPCG(9, 8))
	for _, c := range []struct {
		typ quant.Type
		K   int
	}{{quant.Q6_K, 256}, {quant.Q4_0, 256}, {quant.F16, 256}, {quant.Q6_K, 768}, {quant.Q8_0, 768}, {quant.F16, 768}} {
		typ, K := c.typ, c.K
		w := quantized(t, rng, typ, K, N)
		x := randF32(rng, K, 1)
		t.Run(fmt.Sprintf("%v_K%d", typ, K), func(t *testing.T) {
			compare(t, g, 2e-5, func(e *env) *graph.Tensor {
				return e.ctx.MulMat(e.weight("w", typ, w, K, N), e.inputF32("x", x, K, 1))
			})
		})
	}
}

func TestGetRows(t *testing.T) {
	g := gpu(t)
	const K, R = 512, 10
	ids := []int32{3, 0, 9, 3, 7}
	for _, typ := range weightTypes {
		rng := rand.New(rand.NewPCG(uint64(typ), 2))
		w := quantized(t, rng, typ, K, R)
		t.Run(typ.String(), func(t *testing.T) {
			compare(t, g, 1e-6, func(e *env) *graph.Tensor {
				return e.ctx.GetRows(e.weight("table", typ, w, K, R), e.inputI32("ids", ids))
			})
		})
	}
	// The embedding pattern (token rows + float32 position rows) is one fused launch (embed).
	rng := rand.New(rand.NewPCG(7, 7))
	posTab := randF32(rng, K*8, 1)
	pos := []int32{0, 1, 7, 2, 5}
	for _, typ := range weightTypes {
		w := quantized(t, rand.New(rand.NewPCG(uint64(typ), 3)), typ, K, R)
		t.Run("embed_"+typ.String(), func(t *testing.T) {
			compare(t, g, 1e-6, func(e *env) *graph.Tensor {
				tok := e.ctx.GetRows(e.weight("table", typ, w, K, R), e.inputI32("ids", ids))
				p := e.ctx.GetRows(e.weight("pos", quant.F32, quant.F32Bytes(posTab), K, 8), e.inputI32("pos", pos))
				return e.ctx.Add(tok, p)
			})
		})
	}
}

func TestElementwise(t *testing.T) {
	g := gpu(t)
	rng := rand.New(rand.NewPCG(3, 3))
	const K, M = 300, 7
	a, b, row := randF32(rng, K*M, 1), randF32(rng, K*M, 1), randF32(rng, K, 1)
	wide := randF32(rng, 3*K*M, 1)
	cases := map[string]func(e *env) *graph.Tensor{
		"add":           func(e *env) *graph.Tensor { return e.ctx.Add(e.inputF32("a", a, K, M), e.inputF32("b", b, K, M)) },
		"add_broadcast": func(e *env) *graph.Tensor { return e.ctx.Add(e.inputF32("a", a, K, M), e.inputF32("r", row, K)) },
		"mul":           func(e *env) *graph.Tensor { return e.ctx.Mul(e.inputF32("a", a, K, M), e.inputF32("b", b, K, M)) },
		"mul_broadcast": func(e *env) *graph.Tensor { return e.ctx.Mul(e.inputF32("a", a, K, M), e.inputF32("r", row, K)) },
		"gelu":          func(e *env) *graph.Tensor { return e.ctx.GELU(e.inputF32("a", a, K, M)) },
		"scale":         func(e *env) *graph.Tensor { return e.ctx.Scale(e.inputF32("a", a, K, M), 0.37) },
		"copy_view": func(e *env) *graph.Tensor {
			w := e.inputF32("w", wide, 3*K, M)
			return e.ctx.Copy(e.ctx.View2D(w, K, M, w.Nb[1], 4*K))
		},
		"gelu_of_view": func(e *env) *graph.Tensor {
			w := e.inputF32("w", wide, 3*K, M)
			return e.ctx.GELU(e.ctx.View2D(w, K, M, w.Nb[1], 8*K))
		},
		"layer_norm": func(e *env) *graph.Tensor {
			return e.ctx.LayerNorm(e.inputF32("a", a, K, M), e.weight("w", quant.F32, quant.F32Bytes(row), K),
				e.weight("b", quant.F32, quant.F32Bytes(b[:K]), K), 1e-5)
		},
		"layer_norm_plain_rows": func(e *env) *graph.Tensor {
			return e.ctx.LayerNorm(e.ctx.Rows(e.inputF32("a", a, K, M), 2, 4), nil, nil, 1e-5)
		},
	}
	for name, build := range cases {
		t.Run(name, func(t *testing.T) { compare(t, g, 1e-6, build) })
	}
}

// Stores into the cache and attention over it, from the fused QKV rows as GPT-2 lays them out,
// for a prompt batch and then single tokens after it (the cache persists between graphs).
func TestAttention(t *testing.T) { testAttention(t, 64, []int{13, 1, 1, 6}) }

// Prompt batches longer than one tile of 32 queries and keys (the online softmax across key
// tiles, partial tiles, a second batch continuing the cache), then a decode step.
func TestAttentionLong(t *testing.T) { testAttention(t, 200, []int{77, 45, 1, 40}) }

func testAttention(t *testing.T, C int, sizes []int) {
	g := gpu(t)
	c := cpu.New(2)
	c.SetQuantizedActivations(backend.QuantActOff) // the GPU's arithmetic: float32 activations
	defer c.Close()
	const E, heads = 128, 2
	rng := rand.New(rand.NewPCG(5, 5))
	type step struct {
		qkv []float32
		pos []int32
	}
	var steps []step
	for _, n := range sizes {
		first := 0
		if len(steps) > 0 {
			last := steps[len(steps)-1]
			first = int(last.pos[len(last.pos)-1]) + 1
		}
		pos := make([]int32, n)
		for i := range pos {
			pos[i] = int32(first + i)
		}
		steps = append(steps, step{randF32(rng, 3*E*n, 1), pos})
	}
	results := map[graph.Backend][][]float32{}
	for _, be := range []graph.Backend{c, g} {
		e := &env{be: be, ctx: graph.NewContext(64), t: t}
		kc, vc := e.cache("k", quant.F32, E, C), e.cache("v", quant.F32, E, C)
		for _, s := range steps {
			n := len(s.pos)
			got, err := run(t, be, 1, func(e2 *env) *graph.Tensor {
				qkv := e2.inputF32("qkv", s.qkv, 3*E, n)
				pos := e2.inputI32("pos", s.pos)
				q := e2.ctx.View2D(qkv, E, n, qkv.Nb[1], 0)
				k := e2.ctx.View2D(qkv, E, n, qkv.Nb[1], 4*E)
				v := e2.ctx.View2D(qkv, E, n, qkv.Nb[1], 8*E)
				return e2.ctx.Attention(q, e2.ctx.StoreKV(kc, k, pos), e2.ctx.StoreKV(vc, v, pos), pos, heads, 0.125)
			})
			if err != nil {
				t.Fatal(err)
			}
			results[be] = append(results[be], got)
		}
	}
	for i := range steps {
		checkClose(t, results[g][i], results[c][i], 1e-5)
	}
}

// Bad ids and positions surface as errors, not as garbage.
func TestBadInput(t *testing.T) {
	g := gpu(t)
	rng := rand.New(rand.NewPCG(1, 1))
	table := quantized(t, rng, quant.Q8_0, 64, 4)
	_, err := run(t, g, 1, func(e *env) *graph.Tensor {
		return e.ctx.GetRows(e.weight("t", quant.Q8_0, table, 64, 4), e.inputI32("ids", []int32{1, 4}))
	})
	if err == nil || !strings.Contains(err.Error(), "outside") {
		t.Fatalf("id out of range: error %v", err)
	}
	// The backend works on after the error.
	got, err := run(t, g, 1, func(e *env) *graph.Tensor {
		return e.ctx.GetRows(e.weight("t", quant.Q8_0, table, 64, 4), e.inputI32("ids", []int32{1, 3}))
	})
	if err != nil || len(got) != 128 {
		t.Fatalf("after an error: %v", err)
	}
}

// After Close the backend refuses work with an error, and releasing its buffers is harmless.
func TestClosed(t *testing.T) {
	b, err := New(0)
	if err != nil {
		t.Skipf("no usable CUDA GPU: %v", err)
	}
	buf, err := b.Alloc(1024)
	if err != nil {
		t.Fatal(err)
	}
	b.Close()
	b.Close()
	buf.Release()
	if _, err := b.Alloc(16); !errors.Is(err, errClosed) {
		t.Fatalf("Alloc after Close: %v", err)
	}
	if err := b.Compute(graph.NewGraph(1)); !errors.Is(err, errClosed) {
		t.Fatalf("Compute after Close: %v", err)
	}
}

// CUDA failures are Go errors carrying CUDA's error name.
func TestCUDAError(t *testing.T) {
	g := gpu(t)
	_, err := g.Alloc(1 << 50)
	var ce *Error
	if !errors.As(err, &ce) || ce.Name != "CUDA_ERROR_OUT_OF_MEMORY" {
		t.Fatalf("allocating 1 PiB: %v", err)
	}
	t.Logf("as reported: %v", err)
}

func itoa(n int) string {
	if n == 0 {
		return "0"
	}
	s := ""
	for ; n > 0; n /= 10 {
		s = string(rune('0'+n%10)) + s
	}
	return s
}

// The embedded, compressed PTX inflates to nvcc's module text (no GPU needed).
func TestEmbeddedPTX(t *testing.T) {
	ptx, err := embeddedPTX()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(ptx[:min(len(ptx), 4096)], []byte(".version")) || !bytes.Contains(ptx, []byte(".entry")) {
		t.Fatalf("embedded kernels are not PTX (%d bytes)", len(ptx))
	}
}

// The Llama family's ops.

// RMS norm rows (with and without a weight, a view of rows, rows longer than the fused
// kernel's registers hold), alone and in front of products: one-row products normalize the
// row themselves (mvsln, here three products sharing one norm as Llama's Q, K and V do), batches
// take the rms_norm launch.
func TestRMSNorm(t *testing.T) {
	g := gpu(t)
	rng := rand.New(rand.NewPCG(16, 1))
	for _, K := range []int{64, 300, 2048, 2500} {
		const M = 5
		x, w := randF32(rng, K*M, 3), randF32(rng, K, 1)
		t.Run(fmt.Sprintf("K=%d", K), func(t *testing.T) {
			compare(t, g, 1e-6, func(e *env) *graph.Tensor {
				return e.ctx.RMSNorm(e.inputF32("x", x, K, M), e.weight("w", quant.F32, quant.F32Bytes(w), K), 1e-5)
			})
		})
		t.Run(fmt.Sprintf("K=%d/plain_rows", K), func(t *testing.T) {
			compare(t, g, 1e-6, func(e *env) *graph.Tensor {
				return e.ctx.RMSNorm(e.ctx.Rows(e.inputF32("x", x, K, M), 1, 3), nil, 1e-6)
			})
		})
	}
	// Q, K and V products of one norm, added up (the residual fusion: each product's epilogue
	// adds the sum so far).
	const K, N = 512, 256
	lw := randF32(rng, K, 1)
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q8_0, quant.F16, quant.Q4_K} {
		wq, wk, wv := quantized(t, rng, typ, K, N), quantized(t, rng, typ, K, N), quantized(t, rng, typ, K, N)
		for _, M := range []int{1, 3, 20} {
			x := randF32(rng, K*M, 2)
			t.Run(fmt.Sprintf("qkv_%v/M=%d", typ, M), func(t *testing.T) {
				compare(t, g, 2e-5, func(e *env) *graph.Tensor {
					h := e.ctx.RMSNorm(e.inputF32("x", x, K, M), e.weight("lw", quant.F32, quant.F32Bytes(lw), K), 1e-5)
					q := e.ctx.MulMat(e.weight("wq", typ, wq, K, N), h)
					k := e.ctx.MulMat(e.weight("wk", typ, wk, K, N), h)
					v := e.ctx.MulMat(e.weight("wv", typ, wv, K, N), h)
					return e.ctx.Add(e.ctx.Add(q, k), v)
				})
			})
		}
		// The products with outputs of their own (no epilogue operand): one launch (mvsln3)
		// computes the three, or two when the third has another type (q4_k_m's V).
		x := randF32(rng, K, 2)
		wv6 := quantized(t, rng, quant.Q6_K, K, N)
		for _, third := range []quant.Type{typ, quant.Q6_K} {
			t.Run(fmt.Sprintf("siblings_%v_%v", typ, third), func(t *testing.T) {
				compare(t, g, 2e-5, func(e *env) *graph.Tensor {
					h := e.ctx.RMSNorm(e.inputF32("x", x, K, 1), e.weight("lw", quant.F32, quant.F32Bytes(lw), K), 1e-5)
					q := e.ctx.MulMat(e.weight("wq", typ, wq, K, N), h)
					k := e.ctx.MulMat(e.weight("wk", typ, wk, K, N), h)
					wt, wb := typ, wv
					if third != typ {
						wt, wb = third, wv6
					}
					v := e.ctx.MulMat(e.weight("wv", wt, wb, K, N), h)
					return e.ctx.Add(e.ctx.Add(e.ctx.GELU(q), e.ctx.GELU(k)), e.ctx.GELU(v))
				})
			})
		}
	}
}

// RoPE in both modes, head sizes 64 and 128, every dimension or part of each head rotated,
// with and without frequency factors and linear scaling, at positions up to 100000; the input
// a view (rows of a wider tensor), as a Q slice of fused rows would be.
func TestRoPE(t *testing.T) {
	g := gpu(t)
	rng := rand.New(rand.NewPCG(16, 2))
	const heads, M = 3, 7
	pos := []int32{0, 1, 17, 511, 4095, 31000, 100000}
	for _, hd := range []int{64, 128} {
		for _, mode := range []int{graph.RopeNormal, graph.RopeNeoX} {
			for _, c := range []struct {
				name    string
				dims    int
				scale   float32
				factors bool
			}{{"full", hd, 1, false}, {"half_dims", hd / 2, 1, false}, {"factors_scaled", hd, 0.25, true}} {
				E := heads * hd
				x := randF32(rng, 2*E*M, 1)
				fac := make([]float32, c.dims/2)
				for i := range fac {
					fac[i] = 1 + 7*rng.Float32()
				}
				t.Run(fmt.Sprintf("hd=%d/mode=%d/%s", hd, mode, c.name), func(t *testing.T) {
					compare(t, g, 1e-6, func(e *env) *graph.Tensor {
						wide := e.inputF32("x", x, 2*E, M)
						r := graph.Rope{HeadDim: hd, Dims: c.dims, Mode: mode, FreqBase: 500000, FreqScale: c.scale}
						if c.factors {
							r.Factors = e.weight("f", quant.F32, quant.F32Bytes(fac), c.dims/2)
						}
						return e.ctx.RoPE(e.ctx.View2D(wide, E, M, wide.Nb[1], 4*E), e.inputI32("pos", pos), r)
					})
				})
			}
		}
	}
}

// SwiGLU alone, and of gate and up products (fused into the epilogue of the later product:
// one-row, few-row and tiled, with and without split K), then the down product adding the
// residual.
func TestSwiGLU(t *testing.T) {
	g := gpu(t)
	rng := rand.New(rand.NewPCG(16, 3))
	const K, M = 300, 6
	a, b := randF32(rng, K*M, 3), randF32(rng, K*M, 1)
	t.Run("alone", func(t *testing.T) {
		compare(t, g, 1e-6, func(e *env) *graph.Tensor { return e.ctx.SwiGLU(e.inputF32("a", a, K, M), e.inputF32("b", b, K, M)) })
	})
	const E, F = 256, 512
	for _, typ := range []quant.Type{quant.Q4_0, quant.Q8_0, quant.F16} {
		wg, wu, wd := quantized(t, rng, typ, E, F), quantized(t, rng, typ, E, F), quantized(t, rng, typ, F, E)
		for _, M := range []int{1, 4, 40, 300} {
			x := randF32(rng, E*M, 1)
			for _, upFirst := range []bool{false, true} {
				t.Run(fmt.Sprintf("ffn_%v/M=%d/up_first=%v", typ, M, upFirst), func(t *testing.T) {
					compare(t, g, 2e-5, func(e *env) *graph.Tensor {
						h := e.inputF32("x", x, E, M)
						var gate, up *graph.Tensor
						if upFirst { // the product computed later is the gate (act 3)
							up = e.ctx.MulMat(e.weight("wu", typ, wu, E, F), h)
							gate = e.ctx.MulMat(e.weight("wg", typ, wg, E, F), h)
						} else {
							gate = e.ctx.MulMat(e.weight("wg", typ, wg, E, F), h)
							up = e.ctx.MulMat(e.weight("wu", typ, wu, E, F), h)
						}
						return e.ctx.Add(h, e.ctx.MulMat(e.weight("wd", typ, wd, F, E), e.ctx.SwiGLU(gate, up)))
					})
				})
			}
		}
	}
}

// Grouped-query attention: heads/kvHeads = 1, 2, 4, head sizes 64 (the tiled prompt kernels)
// and 128 (the per-query kernel), f32 and f16 caches; a prompt batch, decode steps (with the
// K/V store fused into the attention) and a second batch, the cache carried between graphs;
// queries, keys and values from separate products (separate inputs here).
func TestAttentionGQA(t *testing.T) {
	for _, hd := range []int{64, 128} {
		for _, group := range []int{1, 2, 4} {
			for _, ct := range []quant.Type{quant.F32, quant.F16} {
				t.Run(fmt.Sprintf("hd=%d/group=%d/%v", hd, group, ct), func(t *testing.T) {
					testAttentionGQA(t, hd, 4, 4/group, ct, 160, []int{45, 1, 1, 37})
				})
			}
		}
	}
}

func testAttentionGQA(t *testing.T, hd, heads, kvHeads int, ct quant.Type, C int, sizes []int) {
	g := gpu(t)
	c := cpu.New(2)
	c.SetQuantizedActivations(backend.QuantActOff) // the GPU's arithmetic: float32 activations
	defer c.Close()
	E, KV := heads*hd, kvHeads*hd
	rng := rand.New(rand.NewPCG(uint64(hd), uint64(kvHeads)))
	type step struct {
		q, k, v []float32
		pos     []int32
	}
	var steps []step
	next := 0
	for _, n := range sizes {
		pos := make([]int32, n)
		for i := range pos {
			pos[i] = int32(next + i)
		}
		next += n
		steps = append(steps, step{randF32(rng, E*n, 1), randF32(rng, KV*n, 1), randF32(rng, KV*n, 1), pos})
	}
	results := map[graph.Backend][][]float32{}
	for _, be := range []graph.Backend{c, g} {
		e := &env{be: be, ctx: graph.NewContext(64), t: t}
		kc, vc := e.cache("k", ct, KV, C), e.cache("v", ct, KV, C)
		for _, s := range steps {
			n := len(s.pos)
			got, err := run(t, be, 1, func(e2 *env) *graph.Tensor {
				pos := e2.inputI32("pos", s.pos)
				q, k, v := e2.inputF32("q", s.q, E, n), e2.inputF32("k", s.k, KV, n), e2.inputF32("v", s.v, KV, n)
				return e2.ctx.AttentionGQA(q, e2.ctx.StoreKV(kc, k, pos), e2.ctx.StoreKV(vc, v, pos), pos, heads, kvHeads, 0.125)
			})
			if err != nil {
				t.Fatal(err)
			}
			results[be] = append(results[be], got)
		}
	}
	for i := range steps {
		checkClose(t, results[g][i], results[c][i], 1e-5)
	}
}

// Batched decoding of several sequences: each row stores into and attends over its own caches
// (store_kv_rows, attention_rows), at its own position, as the CPU computes it; grouped-query
// heads and f16 caches too.
func TestAttentionRows(t *testing.T) {
	for _, tc := range []struct {
		name          string
		typ           quant.Type
		heads, kvHead int
		tol           float64
	}{{"f32", quant.F32, 4, 4, 1e-5}, {"gqa_f32", quant.F32, 4, 2, 1e-5}, {"gqa_f16", quant.F16, 4, 2, 1e-5}} {
		t.Run(tc.name, func(t *testing.T) { testAttentionRows(t, tc.typ, tc.heads, tc.kvHead, tc.tol) })
	}
}

func testAttentionRows(t *testing.T, typ quant.Type, heads, kvHeads int, tol float64) {
	g := gpu(t)
	c := cpu.New(2)
	c.SetQuantizedActivations(backend.QuantActOff) // the GPU's arithmetic: float32 activations
	defer c.Close()
	const D, C, R, steps = 32, 24, 3, 6
	E, KV := heads*D, kvHeads*D
	rng := rand.New(rand.NewPCG(9, 9))
	type step struct {
		q, k, v []float32
		pos     []int32
	}
	var ss []step
	for s := range steps {
		pos := make([]int32, R)
		for i := range pos {
			pos[i] = int32(s + 3*i) // every row at its own place in its own cache
		}
		ss = append(ss, step{randF32(rng, E*R, 1), randF32(rng, KV*R, 1), randF32(rng, KV*R, 1), pos})
	}
	results := map[graph.Backend][][]float32{}
	for _, be := range []graph.Backend{c, g} {
		e := &env{be: be, ctx: graph.NewContext(64), t: t}
		var kc, vc []*graph.Tensor
		for i := range R {
			kc = append(kc, e.cache(fmt.Sprintf("k%d", i), typ, KV, C))
			vc = append(vc, e.cache(fmt.Sprintf("v%d", i), typ, KV, C))
		}
		for _, s := range ss {
			got, err := run(t, be, 1, func(e2 *env) *graph.Tensor {
				pos := e2.inputI32("pos", s.pos)
				k := e2.ctx.StoreKVRows(kc, e2.inputF32("k", s.k, KV, R), pos)
				v := e2.ctx.StoreKVRows(vc, e2.inputF32("v", s.v, KV, R), pos)
				return e2.ctx.AttentionRowsGQA(e2.inputF32("q", s.q, E, R), k, v, pos, heads, kvHeads, 0.125)
			})
			if err != nil {
				t.Fatal(err)
			}
			results[be] = append(results[be], got)
		}
	}
	for i := range ss {
		checkClose(t, results[g][i], results[c][i], tol)
	}
}
