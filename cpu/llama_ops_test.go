package cpu

import (
	"math"
	"testing"

	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/quant"
)

// positions makes a static I32 tensor holding pos (the fixture fills inputs with 0..n-1).
func (f *fixture) positions(pos ...int32) *graph.Tensor {
	buf, _ := f.be.Alloc(4 * len(pos))
	t := f.ctx.NewStatic("pos", quant.I32, buf, 0, len(pos))
	copy(t.I32(), pos)
	return t
}

func TestRMSNormAndSwiGLU(t *testing.T) {
	const K, N = 40, 5
	f := newFixture(t, 2)
	x, xv := f.weight(quant.F32, K, N)
	u, uv := f.weight(quant.F32, K, N)
	w, wv := f.weight(quant.F32, K, 1)
	norm := f.ctx.RMSNorm(x, w, 1e-5)
	bare := f.ctx.RMSNorm(x, nil, 1e-5)
	glu := f.ctx.SwiGLU(x, u)
	f.run(norm, bare, glu)
	var wantNorm, wantBare, wantGLU []float64
	for r := 0; r < N; r++ {
		row := xv[r*K : (r+1)*K]
		var ms float64
		for _, v := range row {
			ms += float64(v) * float64(v) / K
		}
		for i, v := range row {
			y := float64(v) / math.Sqrt(ms+1e-5)
			wantBare = append(wantBare, y)
			wantNorm = append(wantNorm, y*float64(wv[i]))
			g := float64(v)
			wantGLU = append(wantGLU, g/(1+math.Exp(-g))*float64(uv[r*K+i]))
		}
	}
	near(t, "rms_norm", norm.F32(), wantNorm, 1e-6)
	near(t, "rms_norm without weight", bare.F32(), wantBare, 1e-6)
	near(t, "swiglu", glu.F32(), wantGLU, 1e-6)
}

// ropeWant rotates row x (heads of hd values, the first dims of each rotated) at position p in
// float64, pairing (2i, 2i+1) or, for NeoX, (i, i+dims/2).
func ropeWant(x []float32, hd, dims int, neox bool, p int32, base, scale float64, factors []float32) []float64 {
	out := make([]float64, len(x))
	for i, v := range x {
		out[i] = float64(v)
	}
	for h := 0; h < len(x); h += hd {
		for i := 0; i < dims/2; i++ {
			theta := float64(p) * scale * math.Pow(base, -float64(2*i)/float64(dims))
			if factors != nil {
				theta /= float64(factors[i])
			}
			a, b := h+2*i, h+2*i+1
			if neox {
				a, b = h+i, h+i+dims/2
			}
			x0, x1 := float64(x[a]), float64(x[b])
			out[a] = x0*math.Cos(theta) - x1*math.Sin(theta)
			out[b] = x0*math.Sin(theta) + x1*math.Cos(theta)
		}
	}
	return out
}

// RoPE in both modes, with part of each head rotated, frequency factors and linear scaling,
// at positions up to 5000, equals the rotation computed in float64.
func TestRoPE(t *testing.T) {
	const hd, H, dims = 10, 3, 8
	pos := []int32{0, 1, 7, 100, 5000}
	for _, neox := range []bool{false, true} {
		for _, withFactors := range []bool{false, true} {
			f := newFixture(t, 2)
			x, xv := f.weight(quant.F32, hd*H, len(pos))
			r := graph.Rope{HeadDim: hd, Dims: dims, FreqBase: 10000, FreqScale: 0.25}
			if neox {
				r.Mode = graph.RopeNeoX
			}
			var fv []float32
			if withFactors {
				r.Factors, fv = f.weight(quant.F32, dims/2)
				for i := range fv { // factors are positive: 1 .. 32 in Llama 3.1
					fv[i] = 1 + float32(i)*3
				}
				copy(r.Factors.F32(), fv)
			}
			y := f.ctx.RoPE(x, f.positions(pos...), r)
			f.run(y)
			var want []float64
			for i, p := range pos {
				want = append(want, ropeWant(xv[i*hd*H:(i+1)*hd*H], hd, dims, neox, p, 10000, 0.25, fv)...)
			}
			near(t, "rope", y.F32(), want, 2e-6)
		}
	}
}

// On the Q/K rows llama.cpp's converter permutes (row half*d/2 + i of a head moves to 2i +
// half), the normal mode gives, bit for bit, the permuted result of the NeoX mode on the
// original rows, which is Hugging Face's Llama RoPE: the reason llama files use the normal mode.
func TestRoPENormalOnPermutedRowsIsNeoX(t *testing.T) {
	const hd, H = 16, 2
	pos := []int32{3, 41, 700}
	f := newFixture(t, 1)
	x, xv := f.weight(quant.F32, hd*H, len(pos))
	xp, _ := f.weight(quant.F32, hd*H, len(pos))
	perm := func(j int) int { // the element of a permuted row that holds element j of the original
		h, k := j/hd, j%hd
		half, i := k/(hd/2), k%(hd/2)
		return h*hd + 2*i + half
	}
	xpv := xp.F32()
	for r := range pos {
		for j := 0; j < hd*H; j++ {
			xpv[r*hd*H+perm(j)] = xv[r*hd*H+j]
		}
	}
	r := graph.Rope{HeadDim: hd, Dims: hd, FreqBase: 10000, FreqScale: 1}
	normal := f.ctx.RoPE(xp, f.positions(pos...), r)
	r.Mode = graph.RopeNeoX
	neox := f.ctx.RoPE(x, f.positions(pos...), r)
	f.run(normal, neox)
	for row := range pos {
		for j := 0; j < hd*H; j++ {
			a, b := normal.F32()[row*hd*H+perm(j)], neox.F32()[row*hd*H+j]
			if a != b {
				t.Fatalf("row %d element %d: normal mode on permuted rows %v, NeoX %v", row, j, a, b)
			}
		}
	}
}

// Grouped-query attention (4 query heads over 2 key/value heads) equals, bit for bit,
// multi-head attention over caches whose key/value heads are repeated for each query head.
func TestAttentionGQA(t *testing.T) {
	const D, H, KVH, N, C = 8, 4, 2, 5, 9
	f := newFixture(t, 2)
	q, _ := f.weight(quant.F32, H*D, N)
	k, kv := f.weight(quant.F32, KVH*D, N)
	v, vv := f.weight(quant.F32, KVH*D, N)
	// The same keys and values, each key/value head repeated H/KVH times.
	kr, _ := f.weight(quant.F32, H*D, N)
	vr, _ := f.weight(quant.F32, H*D, N)
	for _, p := range []struct{ dst, src []float32 }{{kr.F32(), kv}, {vr.F32(), vv}} {
		for i := 0; i < N; i++ {
			for h := 0; h < H; h++ {
				g := h / (H / KVH)
				copy(p.dst[i*H*D+h*D:i*H*D+(h+1)*D], p.src[i*KVH*D+g*D:i*KVH*D+(g+1)*D])
			}
		}
	}
	kc, _ := f.weight(quant.F32, KVH*D, C)
	vc, _ := f.weight(quant.F32, KVH*D, C)
	krc, _ := f.weight(quant.F32, H*D, C)
	vrc, _ := f.weight(quant.F32, H*D, C)
	pos := f.ctx.NewInput("pos", quant.I32, N)
	gqa := f.ctx.AttentionGQA(q, f.ctx.StoreKV(kc, k, pos), f.ctx.StoreKV(vc, v, pos), pos, H, KVH, 0.3)
	mha := f.ctx.Attention(q, f.ctx.StoreKV(krc, kr, pos), f.ctx.StoreKV(vrc, vr, pos), pos, H, 0.3)
	f.run(gqa, mha)
	for i, a := range gqa.F32() {
		if b := mha.F32()[i]; a != b {
			t.Fatalf("element %d: grouped-query %v, repeated heads %v", i, a, b)
		}
	}
}

// Shapes that do not fit are refused when the graph is built.
func TestLlamaOpsRefuseBadShapes(t *testing.T) {
	f := newFixture(t, 1)
	x, _ := f.weight(quant.F32, 12, 2)
	kv, _ := f.weight(quant.F32, 8, 4)
	pos := f.ctx.NewInput("pos", quant.I32, 2)
	bad := []func(c *graph.Context){
		func(c *graph.Context) { c.RoPE(x, pos, graph.Rope{HeadDim: 5, Dims: 4, FreqBase: 1e4, FreqScale: 1}) },
		func(c *graph.Context) { c.RoPE(x, pos, graph.Rope{HeadDim: 6, Dims: 8, FreqBase: 1e4, FreqScale: 1}) },
		func(c *graph.Context) { c.RoPE(x, pos, graph.Rope{HeadDim: 6, Dims: 3, FreqBase: 1e4, FreqScale: 1}) },
		func(c *graph.Context) { c.RoPE(x, pos, graph.Rope{HeadDim: 6, Dims: 6, FreqBase: 0, FreqScale: 1}) },
		func(c *graph.Context) {
			c.RoPE(x, pos, graph.Rope{HeadDim: 6, Dims: 6, Mode: 1, FreqBase: 1e4, FreqScale: 1})
		},
		func(c *graph.Context) { c.AttentionGQA(x, kv, kv, pos, 3, 2, 1) }, // 3 heads over 2
		func(c *graph.Context) { c.AttentionGQA(x, kv, kv, pos, 6, 2, 1) }, // heads of 2, caches of 2x4
		func(c *graph.Context) { c.SwiGLU(x, kv) },
	}
	for i, build := range bad {
		c := graph.NewContext(8)
		build(c)
		if c.Err() == nil {
			t.Errorf("case %d: no error", i)
		}
	}
}
