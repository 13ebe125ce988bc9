package kernels

import (
	"math"
	"math/rand/v2"
	"slices"
	"testing"
)

// llamaLengths are row lengths around every tier's vector widths, and the Llama-3.2-1B ones.
var llamaLengths = []int{1, 2, 7, 8, 9, 15, 16, 17, 31, 32, 33, 40, 100, 2048, 2049, 8192}

// sameBits fails unless got and want hold the same float32 bits (NaNs of any payload match).
func sameBits(t *testing.T, what string, got, want []float32) {
	t.Helper()
	for i := range want {
		a, b := got[i], want[i]
		if math.Float32bits(a) != math.Float32bits(b) && !(a != a && b != b) {
			t.Fatalf("%s: element %d of %d: got %v, want %v", what, i, len(want), a, b)
		}
	}
}

// llamaInputs is a row of normal values with the edge cases in front: zeros of both signs,
// tiny and huge magnitudes, infinities.
func llamaInputs(rng *rand.Rand, n int, scale float32) []float32 {
	x := randVec(rng, n)
	for i := range x {
		x[i] *= scale
	}
	special := []float32{0, float32(math.Copysign(0, -1)), 1e-30, -1e-30, 1e-40, 3e38, -3e38,
		float32(math.Inf(1)), float32(math.Inf(-1)), 88, -88, 89, -89, 100, -100, 101, -101, 1000, -1000}
	copy(x, special[:min(len(x), len(special))])
	return x
}

// RMSNorm gives the generic kernel's bits on every tier, with and without a weight, and
// matches the float64 formula to float32 rounding.
func TestRMSNormTiersExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(21, 21))
	for _, n := range llamaLengths {
		x, w := randVec(rng, n), randVec(rng, n)
		x[0] = 1e-20 // a tiny value beside normal ones (float64 squares keep it)
		Use(Generic)
		want, wantBare := make([]float32, n), make([]float32, n)
		RMSNorm(want, x, w, 1e-5)
		RMSNorm(wantBare, x, nil, 1e-5)
		var ms float64
		for _, v := range x {
			ms += float64(v) * float64(v) / float64(n)
		}
		for i, v := range x {
			exact := float64(v) / math.Sqrt(ms+1e-5) * float64(w[i])
			if d := math.Abs(float64(want[i]) - exact); d > 1e-6*math.Abs(exact)+1e-30 {
				t.Fatalf("n=%d: generic rms_norm[%d] = %v, exact %v", n, i, want[i], exact)
			}
		}
		forEachTier(t, func(t *testing.T, tier Tier) {
			got, gotBare := make([]float32, n+3), make([]float32, n+3)
			RMSNorm(got[:n], x, w, 1e-5)
			RMSNorm(gotBare[:n], x, nil, 1e-5)
			sameBits(t, "rms_norm", got, append(slices.Clone(want), 0, 0, 0))
			wantBare := append(slices.Clone(wantBare), 0, 0, 0)
			sameBits(t, "rms_norm without weight", gotBare, wantBare)
		})
	}
	Use(Best())
}

// ropeCase is a head of hd values whose first dims are rotated.
type ropeCase struct{ hd, dims int }

var ropeCases = []ropeCase{{2, 2}, {8, 6}, {16, 16}, {32, 32}, {40, 32}, {64, 64}, {64, 48},
	{128, 128}, {80, 80}, {34, 34}}

// RoPE in both modes gives the generic kernel's bits on every tier (heads of every size,
// partial rotation), and the generic kernel is the rotation rounded as it states.
func TestRopeTiersExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(22, 22))
	freqs := make([]float64, 64)
	for _, c := range ropeCases {
		x := llamaInputs(rng, c.hd, 3)
		RopeFreqs(freqs[:c.dims/2], c.dims, 500000, 1, nil)
		for _, pos := range []int{0, 1, 17, 4095, 131071} {
			cs := make([]float32, c.dims)
			RopeAngles(cs, pos, freqs)
			for _, neox := range []bool{false, true} {
				Use(Generic)
				want := make([]float32, c.hd)
				rope(neox)(want, x, cs)
				checkRopeFormula(t, want, x, cs, neox)
				forEachTier(t, func(t *testing.T, tier Tier) {
					got := make([]float32, c.hd+2)
					rope(neox)(got[:c.hd], x, cs)
					sameBits(t, "rope", got, append(slices.Clone(want), 0, 0))
				})
			}
		}
	}
	Use(Best())
}

func rope(neox bool) func(dst, x, cs []float32) {
	if neox {
		return RopeNeoX
	}
	return RopeNormal
}

// checkRopeFormula checks a rotated head against x0 c - x1 s, x0 s + x1 c with each product
// and each sum rounded to float32, and the unrotated rest copied.
func checkRopeFormula(t *testing.T, got, x, cs []float32, neox bool) {
	t.Helper()
	h := len(cs) / 2
	for i := 0; i < h; i++ {
		a, b := 2*i, 2*i+1
		if neox {
			a, b = i, i+h
		}
		c, s := cs[i], cs[h+i]
		p0, p1 := float32(float64(x[a])*float64(c)), float32(float64(x[b])*float64(s))
		q0, q1 := float32(float64(x[a])*float64(s)), float32(float64(x[b])*float64(c))
		want := []float32{float32(float64(p0) - float64(p1)), float32(float64(q0) + float64(q1))}
		sameBits(t, "rope formula", []float32{got[a], got[b]}, want)
	}
	sameBits(t, "rope copies the rest", got[len(cs):], x[len(cs):])
}

// RopeAngles stores the cosines, then the sines, each rounded once from float64.
func TestRopeAngles(t *testing.T) {
	freqs := []float64{1, 0.1, 0.001}
	cs := make([]float32, 6)
	RopeAngles(cs, 1000, freqs)
	for i, f := range freqs {
		if cs[i] != float32(math.Cos(1000*f)) || cs[3+i] != float32(math.Sin(1000*f)) {
			t.Fatalf("pair %d: %v %v, want cos/sin of %v", i, cs[i], cs[3+i], 1000*f)
		}
	}
}

// SwiGLU: the SIMD tiers' float32 exp agrees with the float64 generic kernel to a few float32
// ulps (relative 4e-7; 3.1e-7 is the worst seen over 2^20 random inputs), or to 1e-30
// absolute: where exp(-g) overflows float32 (g < -88.7) the SIMD result is -0 while the exact
// one is g e^g up, below 1e-34 in magnitude here; and AVX2 and AVX-512 agree bit for bit.
func TestSwiGLUTiers(t *testing.T) {
	rng := rand.New(rand.NewPCG(23, 23))
	for _, n := range llamaLengths {
		g, u := llamaInputs(rng, n, 6), randVec(rng, n)
		for i := range u {
			u[i] *= 2
		}
		Use(Generic)
		want := make([]float32, n)
		SwiGLU(want, g, u)
		outs := map[Tier][]float32{}
		forEachTier(t, func(t *testing.T, tier Tier) {
			got := make([]float32, n+3)
			SwiGLU(got[:n], g, u)
			sameBits(t, "swiglu past dst", got[n:], []float32{0, 0, 0})
			got = got[:n]
			outs[tier] = got
			if tier == Generic {
				sameBits(t, "swiglu", got, want)
				return
			}
			for i := range want {
				a, b := float64(got[i]), float64(want[i])
				if math.IsNaN(b) || math.IsInf(b, 0) {
					if !(math.IsNaN(a) && math.IsNaN(b) || a == b) {
						t.Fatalf("swiglu(%v, %v) = %v, want %v", g[i], u[i], a, b)
					}
					continue
				}
				if d := math.Abs(a - b); d > 4e-7*math.Abs(b)+1e-30 {
					t.Fatalf("swiglu(%v, %v) = %v, want %v (error %.3g)", g[i], u[i], a, b, d)
				}
			}
		})
		if a2, a5 := outs[AVX2], outs[AVX512]; a2 != nil && a5 != nil {
			sameBits(t, "swiglu avx2 vs avx512", a2, a5)
		}
	}
	Use(Best())
}
