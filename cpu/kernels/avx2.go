//go:build amd64 && !purego

package kernels

import (
	"math"

	"github.com/gorun-dev/gorun/quant"
)

// useAVX2 installs the AVX2 tier (AVX2 + FMA + F16C, 256-bit registers). Its dot products keep
// the package's 16 lanes in two registers, so they are bit-identical to the AVX-512 tier's.
// Kernels it lacks stay generic.
func useAVX2() {
	Dot = dotSIMD(dotAVX2)
	Dot1x4 = dot1x4SIMD(dot1x4AVX2)
	Dot4x4 = dot4x4AVX2Go
	GELU = geluAVX2Go
	Scores = scoresAVX2Go
	ExpSum = expSumAVX2Go
	WeightedSum = weightedSumAVX2Go
	WeightedSumAdd = weightedSumAddAVX2Go
	dequant[quant.F16] = f16SIMD(f16ToF32AVX2, 8)
	dequant[quant.Q8_0] = blocksTabAVX2(dequantQ8_0AVX2, 32, quant.SizeQ8_0)
	dequant[quant.Q4_0] = blocksTabAVX2(dequantQ4_0AVX2, 32, quant.SizeQ4_0)
	dequant[quant.Q4_K] = blocksTabAVX2(dequantQ4_KAVX2, 256, quant.SizeQ4_K)
	dequant[quant.Q5_K] = blocksTabAVX2(dequantQ5_KAVX2, 256, quant.SizeQ5_K)
	dequant[quant.Q6_K] = blocksTabAVX2(dequantQ6_KAVX2, 256, quant.SizeQ6_K)
	matVec4[quant.F16] = func(x []float32, w []byte, ws int, out *[4]float32) {
		n := len(x) &^ 15
		checkRows(w, ws, 2*len(x))
		matvecF16x4AVX2(&x[0], &w[0], uintptr(ws), uintptr(n), out)
		if n < len(x) {
			tailRows(out, x, w, ws, n, quant.F16ToF32)
		}
	}
	matVec4[quant.Q8_0] = matVecBlocksAVX2(matvecQ8_0x4AVX2, 32, quant.SizeQ8_0)
	matVec4[quant.Q4_0] = matVecBlocksAVX2(matvecQ4_0x4AVX2, 32, quant.SizeQ4_0)
	matVec4[quant.Q4_K] = matVecBlocksAVX2(matvecQ4_Kx4AVX2, 256, quant.SizeQ4_K)
	matVec4[quant.Q5_K] = matVecBlocksAVX2(matvecQ5_Kx4AVX2, 256, quant.SizeQ5_K)
	matVec4[quant.Q6_K] = matVecBlocksAVX2(matvecQ6_Kx4AVX2, 256, quant.SizeQ6_K)
	useLegacyAVX2()
	useIQ4AVX2()
	useLlama(false)
	useScan()
}

// useLegacyAVX2 installs the AVX2 kernels of avx2_legacy_amd64.s: BF16, Q4_1, Q5_0, Q5_1.
func useLegacyAVX2() {
	for _, k := range []struct {
		t    quant.Type
		size int
		mv   func(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32)
		dq   func(dst *float32, src *byte, nb uintptr, tab *float32)
	}{
		{quant.Q4_1, 20, matvecQ4_1x4AVX2, dequantQ4_1AVX2},
		{quant.Q5_0, 22, matvecQ5_0x4AVX2, dequantQ5_0AVX2},
		{quant.Q5_1, 24, matvecQ5_1x4AVX2, dequantQ5_1AVX2},
	} {
		matVec4[k.t] = matVecBlocksAVX2(k.mv, 32, k.size)
		dequant[k.t] = blocksTabAVX2(k.dq, 32, k.size)
	}
	generic := dequant[quant.BF16]
	dequant[quant.BF16] = func(dst []float32, src []byte) {
		h := quant.AsU16(src[:2*len(dst)])
		n := len(dst) &^ 7
		if n > 0 {
			bf16ToF32AVX2(&dst[0], &h[0], uintptr(n))
		}
		if n < len(dst) {
			generic(dst[n:], src[2*n:])
		}
	}
	matVec4[quant.BF16] = func(x []float32, w []byte, ws int, out *[4]float32) {
		n := len(x) &^ 15
		checkRows(w, ws, 2*len(x))
		matvecBF16x4AVX2(&x[0], &w[0], uintptr(ws), uintptr(n), out)
		for j := range out {
			row := quant.AsU16(w[j*ws : j*ws+2*len(x)])
			for i := n; i < len(x); i++ {
				out[j] += float32(quant.BF16ToF32(row[i]) * x[i])
			}
		}
	}
}

// Assembly kernels of the AVX2 tier (avx2_*_amd64.s). The dequantizers take whole blocks and
// read block scales through quant's half-to-float table.

//go:noescape
func dequantQ8_0AVX2(dst *float32, src *byte, nb uintptr, tab *float32)

//go:noescape
func dequantQ4_0AVX2(dst *float32, src *byte, nb uintptr, tab *float32)

//go:noescape
func dequantQ4_KAVX2(dst *float32, src *byte, nb uintptr, tab *float32)

//go:noescape
func dequantQ5_KAVX2(dst *float32, src *byte, nb uintptr, tab *float32)

//go:noescape
func dequantQ6_KAVX2(dst *float32, src *byte, nb uintptr, tab *float32)

// blocksTabAVX2 wraps a dequantizer of whole blocks of bs values and size bytes each.
func blocksTabAVX2(kern func(dst *float32, src *byte, nb uintptr, tab *float32), bs, size int) func(dst []float32, src []byte) {
	return func(dst []float32, src []byte) {
		nb := len(dst) / bs
		if nb == 0 {
			return
		}
		_ = src[nb*size-1]
		kern(&dst[0], &src[0], uintptr(nb), f16Tab)
	}
}

//go:noescape
func matvecF16x4AVX2(x *float32, w *byte, ws, n uintptr, out *[4]float32)

//go:noescape
func matvecQ8_0x4AVX2(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32)

//go:noescape
func matvecQ4_0x4AVX2(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32)

//go:noescape
func matvecQ4_Kx4AVX2(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32)

//go:noescape
func matvecQ5_Kx4AVX2(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32)

//go:noescape
func matvecQ6_Kx4AVX2(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32)

// matVecBlocksAVX2 wraps a fused kernel over rows of whole blocks of bs values, size bytes.
func matVecBlocksAVX2(kern func(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32), bs, size int) func(x []float32, w []byte, ws int, out *[4]float32) {
	return func(x []float32, w []byte, ws int, out *[4]float32) {
		nb := len(x) / bs
		checkRows(w, ws, nb*size)
		kern(&x[0], &w[0], uintptr(ws), uintptr(nb), out, f16Tab)
	}
}

//go:noescape
func dot2x4AVX2(x *float32, xs uintptr, w *float32, ws, n uintptr, out *float32, os uintptr)

//go:noescape
func geluAVX2(dst, x *float32, n uintptr)

//go:noescape
func expSumAVX2(s *float32, n uintptr, scale, mx float32) float32

//go:noescape
func scoresAVX2(out, q, k *float32, ks, n, d uintptr)

//go:noescape
func scores64AVX2(out, q, k *float32, ks, n uintptr)

//go:noescape
func weightedSum64AVX2(out, p, v *float32, vs, n uintptr)

// dot4x4AVX2Go computes the 4x4 tile as two 2x4 tiles (dot2x4AVX2), in Dot's order.
func dot4x4AVX2Go(x []float32, xs int, w []float32, ws int, k int, out []float32, os int) {
	_ = out[3*os+3]
	if k > 0 {
		_ = x[3*xs+k-1]
		_ = w[3*ws+k-1]
	}
	n := k &^ (lanes - 1)
	if n > 0 {
		dot2x4AVX2(&x[0], uintptr(xs*4), &w[0], uintptr(ws*4), uintptr(n), &out[0], uintptr(os*4))
		dot2x4AVX2(&x[2*xs], uintptr(xs*4), &w[0], uintptr(ws*4), uintptr(n), &out[2*os], uintptr(os*4))
	} else {
		for i := 0; i < 4; i++ {
			clear(out[i*os : i*os+4])
		}
	}
	if n < k {
		for i := 0; i < 4; i++ {
			for j := 0; j < 4; j++ {
				out[i*os+j] = tail(out[i*os+j], x[i*xs+n:i*xs+k], w[j*ws+n:j*ws+k])
			}
		}
	}
}

func geluAVX2Go(dst, x []float32) {
	x = x[:len(dst)]
	n := len(dst) &^ 7
	if n > 0 {
		geluAVX2(&dst[0], &x[0], uintptr(n))
	}
	if n < len(dst) {
		geluGeneric(dst[n:], x[n:])
	}
}

func scoresAVX2Go(s, q, k []float32, ks int) {
	d := len(q)
	if d%16 != 0 || d == 0 || len(s) == 0 {
		scoresGeneric(s, q, k, ks)
		return
	}
	_ = k[(len(s)-1)*ks+d-1]
	if d == 64 {
		scores64AVX2(&s[0], &q[0], &k[0], uintptr(4*ks), uintptr(len(s)))
		return
	}
	scoresAVX2(&s[0], &q[0], &k[0], uintptr(4*ks), uintptr(len(s)), uintptr(d))
}

func expSumAVX2Go(s []float32, scale, mx float32) float32 {
	n := len(s) &^ 15
	var sum float32
	if n > 0 {
		sum = expSumAVX2(&s[0], uintptr(n), scale, mx)
	}
	for j := n; j < len(s); j++ {
		e := float32(math.Exp(float64(scale*s[j] - mx)))
		s[j] = e
		sum += e
	}
	return sum
}

func weightedSumAVX2Go(out, p, v []float32, vs int) {
	if len(out) != 64 || len(p) == 0 {
		weightedSumGeneric(out, p, v, vs)
		return
	}
	_ = v[(len(p)-1)*vs+63]
	weightedSum64AVX2(&out[0], &p[0], &v[0], uintptr(4*vs), uintptr(len(p)))
}

//go:noescape
func bf16ToF32AVX2(dst *float32, src *uint16, n uintptr)

//go:noescape
func matvecBF16x4AVX2(x *float32, w *byte, ws, n uintptr, out *[4]float32)

//go:noescape
func matvecQ4_1x4AVX2(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32)

//go:noescape
func matvecQ5_0x4AVX2(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32)

//go:noescape
func matvecQ5_1x4AVX2(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32)

//go:noescape
func dequantQ4_1AVX2(dst *float32, src *byte, nb uintptr, tab *float32)

//go:noescape
func dequantQ5_0AVX2(dst *float32, src *byte, nb uintptr, tab *float32)

//go:noescape
func dequantQ5_1AVX2(dst *float32, src *byte, nb uintptr, tab *float32)
