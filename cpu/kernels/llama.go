package kernels

import "math"

// The Llama family's elementwise kernels: RMSNorm, RoPE and SwiGLU. They are plain Go on every
// tier (no SIMD version yet), so every tier computes them to the same bits.

// RMSNorm sets dst = x / sqrt(mean(x²) + eps) * w (w nil: no weight). The sum of squares is
// accumulated in float64 in element order, the scale rounded once to float32 (as ggml's
// ggml_compute_forward_rms_norm_f32 does), then applied and multiplied by w in float32.
func RMSNorm(dst, x, w []float32, eps float32) {
	var sum float64
	for _, v := range x {
		sum += float64(v) * float64(v)
	}
	scale := float32(1 / math.Sqrt(sum/float64(len(x))+float64(eps)))
	dst = dst[:len(x)]
	if w == nil {
		for i, v := range x {
			dst[i] = v * scale
		}
		return
	}
	w = w[:len(x)]
	for i, v := range x {
		dst[i] = v * scale * w[i]
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

// RopeAngles sets cs[2i], cs[2i+1] to the cosine and sine of pos * freqs[i] (RopeFreqs), for
// i < len(cs)/2. The angles are computed in float64 and rounded once, so they are as exact as
// float32 allows at any position.
func RopeAngles(cs []float32, pos int, freqs []float64) {
	p := float64(pos)
	freqs = freqs[:len(cs)/2]
	for i, f := range freqs {
		s, c := math.Sincos(p * f)
		cs[2*i], cs[2*i+1] = float32(c), float32(s)
	}
}

// RopeNormal rotates the adjacent pairs (x[2i], x[2i+1]) of one head by the angles of cs
// (RopeAngles, len(cs) = rotated dims) and copies the rest of the head: ggml's normal mode,
// which on the Q/K rows that llama.cpp's converter permutes equals Hugging Face's Llama RoPE.
func RopeNormal(dst, x, cs []float32) {
	n := len(cs)
	for i := 0; i < n; i += 2 {
		c, s := cs[i], cs[i+1]
		x0, x1 := x[i], x[i+1]
		dst[i] = x0*c - x1*s
		dst[i+1] = x0*s + x1*c
	}
	copy(dst[n:len(x)], x[n:])
}

// RopeNeoX rotates the pairs (x[i], x[i+dims/2]) of one head (GPT-NeoX's and Qwen2's layout,
// Hugging Face's rotate_half) by the angles of cs and copies the rest of the head.
func RopeNeoX(dst, x, cs []float32) {
	n := len(cs)
	h := n / 2
	for i := 0; i < h; i++ {
		c, s := cs[2*i], cs[2*i+1]
		x0, x1 := x[i], x[i+h]
		dst[i] = x0*c - x1*s
		dst[i+h] = x0*s + x1*c
	}
	copy(dst[n:len(x)], x[n:])
}

// SwiGLU sets dst = silu(gate) * up, silu(x) = x / (1 + exp(-x)) computed in float64 and
// rounded once.
func SwiGLU(dst, gate, up []float32) {
	gate, up = gate[:len(dst)], up[:len(dst)]
	for i, g := range gate {
		x := float64(g)
		dst[i] = float32(x/(1+math.Exp(-x))) * up[i]
	}
}
