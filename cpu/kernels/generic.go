package kernels

import (
	"math"

	"github.com/gorun-dev/gorun/quant"
)

// lanes is the number of partial sums of every dot product (see the package comment).
const lanes = 16

// useGeneric installs the pure-Go kernels; SIMD tiers then replace what they implement.
func useGeneric() {
	Dot = dotGeneric
	Dot1x4 = dot1x4Generic
	Dot4x4 = dot4x4Generic
	Dot6x4 = dot6x4Split
	GELU = geluGeneric
	LayerNorm = layerNormGeneric
	Scores = scoresGeneric
	Max = maxGeneric
	Add = addGeneric
	ExpSum = expSumGeneric
	WeightedSum = weightedSumGeneric
	WeightedSumAdd = weightedSumAddGeneric
	useGenericLlama()
	useGenericScan()
	useIntGeneric()
	clearMatVecRows()
	for t := range dequant {
		dequant[t] = nil
		matVec4[t] = nil
		f, err := quant.FormatOf(quant.Type(t))
		if err != nil {
			continue
		}
		if f.Dequantize != nil {
			dequant[t] = f.Dequantize
		}
		if f.DotF32 != nil {
			matVec4[t] = dotF32x4(f)
		}
	}
	fuseAll = true
}

// dotF32x4 is the generic tier's fused kernel: quant's own dequantizing dot product per row
// (the pure-Go code gorun had before SIMD, which factors each block's scale out of its sum and
// so does fewer operations than dequantizing first). The generic tier uses it for every number
// of activation rows (FuseAllRows), so its results are still the same whatever the batch.
func dotF32x4(f *quant.Format) func(x []float32, w []byte, ws int, out *[4]float32) {
	t := f.Type
	return func(x []float32, w []byte, ws int, out *[4]float32) {
		rb := len(x) / t.BlockSize() * t.TypeSize()
		for j := range out {
			out[j] = f.DotF32(w[j*ws:j*ws+rb], x)
		}
	}
}

// dotGeneric is the reference dot product in the package's summation order. Products are
// rounded before they are added (float32(a*b)), which keeps the Go compiler from fusing them
// on targets where it may.
func dotGeneric(a, b []float32) float32 {
	k := len(a)
	b = b[:k]
	n := k &^ (lanes - 1)
	// Sixteen named partial sums (not an array) so the compiler keeps them in registers.
	var s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13, s14, s15 float32
	for i := 0; i < n; i += lanes {
		x, y := (*[lanes]float32)(a[i:]), (*[lanes]float32)(b[i:])
		s0 += float32(x[0] * y[0])
		s1 += float32(x[1] * y[1])
		s2 += float32(x[2] * y[2])
		s3 += float32(x[3] * y[3])
		s4 += float32(x[4] * y[4])
		s5 += float32(x[5] * y[5])
		s6 += float32(x[6] * y[6])
		s7 += float32(x[7] * y[7])
		s8 += float32(x[8] * y[8])
		s9 += float32(x[9] * y[9])
		s10 += float32(x[10] * y[10])
		s11 += float32(x[11] * y[11])
		s12 += float32(x[12] * y[12])
		s13 += float32(x[13] * y[13])
		s14 += float32(x[14] * y[14])
		s15 += float32(x[15] * y[15])
	}
	acc := [lanes]float32{s0, s1, s2, s3, s4, s5, s6, s7, s8, s9, s10, s11, s12, s13, s14, s15}
	return tail(reduce(&acc), a[n:], b[n:])
}

// reduce sums 16 lanes with the fixed tree every tier uses.
func reduce(a *[lanes]float32) float32 {
	var s8 [8]float32
	for i := range s8 {
		s8[i] = a[i] + a[i+8]
	}
	var s4 [4]float32
	for i := range s4 {
		s4[i] = s8[i] + s8[i+4]
	}
	return (s4[0] + s4[2]) + (s4[1] + s4[3])
}

// tail adds the products of the trailing elements one by one.
func tail(s float32, a, b []float32) float32 {
	b = b[:len(a)]
	for i, v := range a {
		s += float32(v * b[i])
	}
	return s
}

func dot1x4Generic(x []float32, w []float32, ws int, out *[4]float32) {
	k := len(x)
	for j := range out {
		out[j] = dotGeneric(x, w[j*ws:j*ws+k])
	}
}

func dot4x4Generic(x []float32, xs int, w []float32, ws int, k int, out []float32, os int) {
	for i := 0; i < 4; i++ {
		for j := 0; j < 4; j++ {
			out[i*os+j] = dotGeneric(x[i*xs:i*xs+k], w[j*ws:j*ws+k])
		}
	}
}

// geluGeneric is GPT-2's GELU (tanh approximation) evaluated in float64, so the only rounding
// is the final one: the reference the SIMD versions are measured against.
func geluGeneric(dst, x []float32) {
	const c = 0.7978845608028654 // sqrt(2/pi)
	x = x[:len(dst)]
	for i, v := range x {
		f := float64(v)
		dst[i] = float32(0.5 * f * (1 + math.Tanh(c*(f+0.044715*f*f*f))))
	}
}

// LayerNorm sets dst = (x-mean)/sqrt(var+eps)*w + b over the row x (w and b of the same
// length).
var LayerNorm func(dst, x, w, b []float32, eps float32)

// layerNormGeneric accumulates the mean and variance in float64 (the reference).
func layerNormGeneric(dst, x, w, b []float32, eps float32) {
	x, w, b = x[:len(dst)], w[:len(dst)], b[:len(dst)]
	var sum float64
	for _, v := range x {
		sum += float64(v)
	}
	mean := sum / float64(len(x))
	var sq float64
	for _, v := range x {
		d := float64(v) - mean
		sq += d * d
	}
	rstd := 1 / math.Sqrt(sq/float64(len(x))+float64(eps))
	for i, v := range x {
		y := float32((float64(v) - mean) * rstd)
		dst[i] = float32(y*w[i]) + b[i]
	}
}

// dot6x4Split is Dot6x4 from the tier's Dot4x4 and two Dot1x4 (the same sums, element by
// element), for tiers without a six-row kernel.
func dot6x4Split(x []float32, xs int, w []float32, ws int, k int, out []float32, os int) {
	Dot4x4(x, xs, w, ws, k, out, os)
	var r [4]float32
	for i := 4; i < 6; i++ {
		Dot1x4(x[i*xs:i*xs+k], w, ws, &r)
		copy(out[i*os:i*os+4], r[:])
	}
}
