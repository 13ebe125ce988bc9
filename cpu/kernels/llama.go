package kernels

import "math"

// The Llama family's elementwise kernels: RMSNorm, RoPE and SwiGLU.
//
// RMSNorm and RoPE give the same bits on every tier: RMSNorm sums its squares in float64 in
// the package's 16 lanes and tree (a float64 square of a float32 is exact, so a fused
// multiply-add rounds as an add), and RoPE rounds each product and each sum once, with no fused
// multiply-add, in every tier. SwiGLU's SIMD tiers evaluate exp in float32 (the GELU exp), so
// they agree with the float64 generic kernel to a few float32 ulps, and AVX2 and AVX-512 agree
// with each other bit for bit. Every kernel computes each row on its own, so batched and
// token-by-token evaluation stay identical within a tier.

// The active tier's parts of the Llama kernels (set by useGeneric and the SIMD tiers).
var (
	// squareLanes returns acc[l] = the sum of float64(x[i])² over i ≡ l (mod 16), added in
	// increasing i; len(x) is a multiple of 16.
	squareLanes func(x []float32) [lanes]float64
	// scaleRow sets dst[i] = x[i]*s; scaleMulRow sets dst[i] = x[i]*s*w[i] (two roundings).
	scaleRow    func(dst, x []float32, s float32)
	scaleMulRow func(dst, x, w []float32, s float32)

	// RopeNormal rotates the adjacent pairs (x[2i], x[2i+1]) of one head by the angles of cs
	// (RopeAngles, len(cs) = rotated dims) and copies the rest of the head: ggml's normal mode,
	// which on the Q/K rows that llama.cpp's converter permutes equals Hugging Face's Llama
	// RoPE. dst[2i] = x[2i] cos - x[2i+1] sin, dst[2i+1] = x[2i] sin + x[2i+1] cos.
	RopeNormal func(dst, x, cs []float32)

	// RopeNeoX rotates the pairs (x[i], x[i+dims/2]) of one head (GPT-NeoX's and Qwen2's
	// layout, Hugging Face's rotate_half) by the angles of cs and copies the rest of the head.
	RopeNeoX func(dst, x, cs []float32)

	// SwiGLU sets dst = silu(gate) * up, silu(x) = x / (1 + exp(-x)).
	SwiGLU func(dst, gate, up []float32)
)

func useGenericLlama() {
	squareLanes = squareLanesGeneric
	scaleRow = scaleRowGeneric
	scaleMulRow = scaleMulRowGeneric
	RopeNormal = ropeNormalGeneric
	RopeNeoX = ropeNeoXGeneric
	SwiGLU = swiGLUGeneric
}

// RMSNorm sets dst = x / sqrt(mean(x²) + eps) * w (w nil: no weight). The sum of squares is
// accumulated in float64 (as ggml's ggml_compute_forward_rms_norm_f32 does; here in the
// package's 16 lanes), the scale rounded once to float32, then applied and multiplied by w in
// float32.
func RMSNorm(dst, x, w []float32, eps float32) {
	dst = dst[:len(x)]
	scale := float32(1 / math.Sqrt(sumSquares(x)/float64(len(x))+float64(eps)))
	if w == nil {
		scaleRow(dst, x, scale)
		return
	}
	scaleMulRow(dst, x, w[:len(x)], scale)
}

// sumSquares returns the sum of float64(v)² over x: 16 lanes over the whole groups of 16, the
// fixed tree, then the trailing elements one by one.
func sumSquares(x []float32) float64 {
	var acc [lanes]float64
	n := len(x) &^ (lanes - 1)
	if n > 0 {
		acc = squareLanes(x[:n])
	}
	var s8 [8]float64
	for i := range s8 {
		s8[i] = acc[i] + acc[i+8]
	}
	var s4 [4]float64
	for i := range s4 {
		s4[i] = s8[i] + s8[i+4]
	}
	s := (s4[0] + s4[2]) + (s4[1] + s4[3])
	for _, v := range x[n:] {
		s += float64(v) * float64(v)
	}
	return s
}

func squareLanesGeneric(x []float32) (acc [lanes]float64) {
	for i := 0; i+lanes <= len(x); i += lanes {
		g := (*[lanes]float32)(x[i:])
		for l, v := range g {
			acc[l] += float64(v) * float64(v) // exact product: fused or not, one rounding
		}
	}
	return acc
}

func scaleRowGeneric(dst, x []float32, s float32) {
	x = x[:len(dst)]
	for i, v := range x {
		dst[i] = v * s
	}
}

func scaleMulRowGeneric(dst, x, w []float32, s float32) {
	x, w = x[:len(dst)], w[:len(dst)]
	for i, v := range x {
		dst[i] = float32(v*s) * w[i]
	}
}

// RopeFreqs sets freqs[i] to the angle per position of pair i < len(freqs):
// scale * base^(-2i/dims) / factors[i] (factors nil: 1), in float64.
func RopeFreqs(freqs []float64, dims int, base, scale float32, factors []float32) {
	for i := range freqs {
		f := float64(scale) * math.Pow(float64(base), -float64(2*i)/float64(dims))
		if factors != nil {
			f /= float64(factors[i])
		}
		freqs[i] = f
	}
}

// RopeAngles sets, for the h = len(cs)/2 pairs, cs[i] to the cosine and cs[h+i] to the sine
// of pos * freqs[i] (RopeFreqs). The angles are computed in float64 and rounded once, so they
// are as exact as float32 allows at any position.
func RopeAngles(cs []float32, pos int, freqs []float64) {
	p := float64(pos)
	h := len(cs) / 2
	freqs = freqs[:h]
	cos, sin := cs[:h], cs[h:2*h]
	for i, f := range freqs {
		s, c := math.Sincos(p * f)
		cos[i], sin[i] = float32(c), float32(s)
	}
}

func ropeNormalGeneric(dst, x, cs []float32) {
	ropeNormalPairs(dst, x, cs, 0)
	n := len(cs)
	copy(dst[n:len(x)], x[n:])
}

// ropeNormalPairs rotates the normal-mode pairs from..len(cs)/2 (the reference for the SIMD
// kernels, which leave it the pairs past their vector width). The explicit conversions keep
// the compiler from fusing a product into the sum.
func ropeNormalPairs(dst, x, cs []float32, from int) {
	h := len(cs) / 2
	cos, sin := cs[:h], cs[h:2*h]
	x, dst = x[:2*h], dst[:2*h]
	for i := from; i < h; i++ {
		c, s := cos[i], sin[i]
		x0, x1 := x[2*i], x[2*i+1]
		dst[2*i] = float32(x0*c) - float32(x1*s)
		dst[2*i+1] = float32(x0*s) + float32(x1*c)
	}
}

func ropeNeoXGeneric(dst, x, cs []float32) {
	ropeNeoXPairs(dst, x, cs, 0)
	n := len(cs)
	copy(dst[n:len(x)], x[n:])
}

// ropeNeoXPairs rotates the NeoX pairs (i, i+h) for i in from..h, h = len(cs)/2.
func ropeNeoXPairs(dst, x, cs []float32, from int) {
	h := len(cs) / 2
	cos, sin := cs[:h], cs[h:2*h]
	x0s, x1s := x[:h], x[h:2*h]
	d0, d1 := dst[:h], dst[h:2*h]
	for i := from; i < h; i++ {
		c, s := cos[i], sin[i]
		x0, x1 := x0s[i], x1s[i]
		d0[i] = float32(x0*c) - float32(x1*s)
		d1[i] = float32(x0*s) + float32(x1*c)
	}
}

// swiGLUGeneric computes silu in float64 and rounds it once.
func swiGLUGeneric(dst, gate, up []float32) {
	gate, up = gate[:len(dst)], up[:len(dst)]
	for i, g := range gate {
		x := float64(g)
		dst[i] = float32(x/(1+math.Exp(-x))) * up[i]
	}
}
