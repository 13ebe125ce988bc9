//go:build amd64 && !purego

package kernels

import (
	"math"

	"github.com/gorun-dev/gorun/quant"
	"github.com/klauspost/cpuid/v2"
)

// Assembly kernels (dot_amd64.s, dequant_amd64.s, act_amd64.s). Lengths they take are whole
// multiples of their vector width; the wrappers below handle the rest.

//go:noescape
func dotAVX512(a, b *float32, n uintptr) float32

//go:noescape
func dot1x4AVX512(x, w *float32, ws, n uintptr, out *[4]float32)

//go:noescape
func dot4x4AVX512(x *float32, xs uintptr, w *float32, ws, n uintptr, out *float32, os uintptr)

//go:noescape
func dotAVX2(a, b *float32, n uintptr) float32

//go:noescape
func dot1x4AVX2(x, w *float32, ws, n uintptr, out *[4]float32)

//go:noescape
func f16ToF32AVX512(dst *float32, src *uint16, n uintptr)

//go:noescape
func f16ToF32AVX2(dst *float32, src *uint16, n uintptr)

//go:noescape
func dequantQ8_0AVX512(dst *float32, src *byte, nb uintptr)

//go:noescape
func dequantQ4_0AVX512(dst *float32, src *byte, nb uintptr)

//go:noescape
func dequantQ4_KAVX512(dst *float32, qs *byte, dm *[16]float32)

//go:noescape
func dequantQ5_KAVX512(dst *float32, qs, qh *byte, dm *[16]float32)

//go:noescape
func dequantQ6_KAVX512(dst *float32, b *byte, sc *[16]float32)

//go:noescape
func geluAVX512(dst, x *float32, n uintptr)

//go:noescape
func layerNormAVX512(dst, x, w, b *float32, n uintptr, eps float32)

//go:noescape
func maxAVX512(s *float32, n uintptr) float32

//go:noescape
func addAVX512(dst, a, b *float32, n uintptr)

//go:noescape
func scoresAVX512(out, q, k *float32, ks, n, d uintptr)

//go:noescape
func expSumAVX512(s *float32, n uintptr, scale, mx float32) float32

//go:noescape
func weightedSum64AVX512(out, p, v *float32, vs, n uintptr)

//go:noescape
func matvecF16x4AVX512(x *float32, w *byte, ws, n uintptr, out *[4]float32)

//go:noescape
func matvecQ8_0x4AVX512(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32)

//go:noescape
func matvecQ4_0x4AVX512(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32, base *[16]float32)

//go:noescape
func matvecQ6_Kx4AVX512(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32)

//go:noescape
func matvecQ6_Kx4VBMI(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32) bool

//go:noescape
func matvecQ5_Kx4VBMI(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32)

//go:noescape
func matvecQ4_Kx4AVX512(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32, base *[16]float32)

//go:noescape
func matvecQ5_Kx4AVX512(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32)

// nibBase is the nibble values 0..15.
var nibBase = [16]float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}

// q4Base is the Q4_0 nibble values q-8 for q = 0..15.
var q4Base = [16]float32{-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7}

var f16Tab = &quant.F16Table()[0]

// hasExtensions reports whether tier t has kernels for instructions beyond its base set on this
// CPU: for AVX512, AVX512_VBMI and GFNI (Ice Lake, Sapphire Rapids, Zen 4 and later; not
// Skylake-SP or Cascade Lake, which run the base kernels); for AVX2, AVX-VNNI (Alder Lake and
// later Intel cores, Zen 5; the base kernels are the integer path's generic ones).
func hasExtensions(t Tier) bool {
	switch t {
	case AVX512:
		return cpuHas(AVX512) && cpuid.CPU.Supports(cpuid.AVX512VBMI, cpuid.GFNI)
	case AVX2:
		return hasAVXVNNI()
	}
	return false
}

func cpuHas(t Tier) bool {
	c := cpuid.CPU
	avx2 := c.Supports(cpuid.AVX2, cpuid.FMA3, cpuid.F16C)
	switch t {
	case Generic:
		return true
	case AVX2:
		return avx2
	case AVX512:
		return avx2 && c.Supports(cpuid.AVX512F, cpuid.AVX512BW, cpuid.AVX512VL, cpuid.AVX512DQ)
	}
	return false
}

func useSIMD(t Tier) {
	switch t {
	case AVX512:
		Dot = dotSIMD(dotAVX512)
		Dot1x4 = dot1x4SIMD(dot1x4AVX512)
		Dot4x4 = dot4x4AVX512Go
		Dot6x4 = dot6x4AVX512Go
		GELU = geluAVX512Go
		LayerNorm = layerNormAVX512Go
		Scores = scoresAVX512Go
		Max = maxAVX512Go
		Add = addAVX512Go
		ExpSum = expSumAVX512Go
		WeightedSum = weightedSumAVX512Go
		WeightedSumAdd = weightedSumAddAVX512Go
		dequant[quant.F16] = f16SIMD(f16ToF32AVX512, 16)
		dequant[quant.Q8_0] = blocksSIMD(dequantQ8_0AVX512, quant.SizeQ8_0)
		dequant[quant.Q4_0] = blocksSIMD(dequantQ4_0AVX512, quant.SizeQ4_0)
		dequant[quant.Q4_K] = dequantQ4_KGo
		dequant[quant.Q5_K] = dequantQ5_KGo
		dequant[quant.Q6_K] = dequantQ6_KGo
		useLegacyAVX512()
		useLlama(true)
		useScan()
		useKQuant23AVX512()
		useIQ4AVX512()
		useVNNI()
		matVec4[quant.F16] = func(x []float32, w []byte, ws int, out *[4]float32) {
			n := len(x) &^ 15
			checkRows(w, ws, 2*len(x))
			matvecF16x4AVX512(&x[0], &w[0], uintptr(ws), uintptr(n), out)
			if n < len(x) {
				tailRows(out, x, w, ws, n, quant.F16ToF32)
			}
		}
		matVec4[quant.Q8_0] = func(x []float32, w []byte, ws int, out *[4]float32) {
			checkRows(w, ws, len(x)/32*quant.SizeQ8_0)
			matvecQ8_0x4AVX512(&x[0], &w[0], uintptr(ws), uintptr(len(x)/32), out, f16Tab)
		}
		matVec4[quant.Q4_0] = func(x []float32, w []byte, ws int, out *[4]float32) {
			checkRows(w, ws, len(x)/32*quant.SizeQ4_0)
			matvecQ4_0x4AVX512(&x[0], &w[0], uintptr(ws), uintptr(len(x)/32), out, f16Tab, &q4Base)
		}
		matVec4[quant.Q4_K] = func(x []float32, w []byte, ws int, out *[4]float32) {
			checkRows(w, ws, len(x)/256*quant.SizeQ4_K)
			matvecQ4_Kx4AVX512(&x[0], &w[0], uintptr(ws), uintptr(len(x)/256), out, f16Tab, &nibBase)
		}
		matVec4[quant.Q5_K] = func(x []float32, w []byte, ws int, out *[4]float32) {
			checkRows(w, ws, len(x)/256*quant.SizeQ5_K)
			matvecQ5_Kx4AVX512(&x[0], &w[0], uintptr(ws), uintptr(len(x)/256), out, f16Tab)
		}
		matVec4[quant.Q6_K] = func(x []float32, w []byte, ws int, out *[4]float32) {
			checkRows(w, ws, len(x)/256*quant.SizeQ6_K)
			matvecQ6_Kx4AVX512(&x[0], &w[0], uintptr(ws), uintptr(len(x)/256), out, f16Tab)
		}
		if hasExtensions(AVX512) && !baseOnly {
			matVec4[quant.Q5_K] = func(x []float32, w []byte, ws int, out *[4]float32) {
				checkRows(w, ws, len(x)/256*quant.SizeQ5_K)
				matvecQ5_Kx4VBMI(&x[0], &w[0], uintptr(ws), uintptr(len(x)/256), out, f16Tab)
			}
			matVec4[quant.Q6_K] = func(x []float32, w []byte, ws int, out *[4]float32) {
				checkRows(w, ws, len(x)/256*quant.SizeQ6_K)
				nb := uintptr(len(x) / 256)
				if !matvecQ6_Kx4VBMI(&x[0], &w[0], uintptr(ws), nb, out, f16Tab) {
					// A block scale is Inf or NaN: the base kernel forms those values as the
					// dequantizer does.
					matvecQ6_Kx4AVX512(&x[0], &w[0], uintptr(ws), nb, out, f16Tab)
				}
			}
		}
		useMultiRowAVX512()
	case AVX2:
		useAVX2()
		useAVXVNNI()
		useMultiRowAVX2()
	}
}

func dotSIMD(kern func(a, b *float32, n uintptr) float32) func(a, b []float32) float32 {
	return func(a, b []float32) float32 {
		k := len(a)
		b = b[:k]
		n := k &^ (lanes - 1)
		var s float32
		if n > 0 {
			s = kern(&a[0], &b[0], uintptr(n))
		}
		return tail(s, a[n:], b[n:])
	}
}

func dot1x4SIMD(kern func(x, w *float32, ws, n uintptr, out *[4]float32)) func(x []float32, w []float32, ws int, out *[4]float32) {
	return func(x []float32, w []float32, ws int, out *[4]float32) {
		k := len(x)
		if k == 0 {
			*out = [4]float32{}
			return
		}
		_ = w[3*ws+k-1] // the four rows are in range
		n := k &^ (lanes - 1)
		if n > 0 {
			kern(&x[0], &w[0], uintptr(ws*4), uintptr(n), out)
		} else {
			*out = [4]float32{}
		}
		if n < k {
			for j := range out {
				out[j] = tail(out[j], x[n:], w[j*ws+n:j*ws+k])
			}
		}
	}
}

func dot4x4AVX512Go(x []float32, xs int, w []float32, ws int, k int, out []float32, os int) {
	_ = out[3*os+3]
	if k > 0 {
		_ = x[3*xs+k-1]
		_ = w[3*ws+k-1]
	}
	n := k &^ (lanes - 1)
	if n > 0 {
		dot4x4AVX512(&x[0], uintptr(xs*4), &w[0], uintptr(ws*4), uintptr(n), &out[0], uintptr(os*4))
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

// dot4x4Via1x4 builds the 4x4 tile from four 1x4 products (same per-element order).
func dot4x4Via1x4(x []float32, xs int, w []float32, ws int, k int, out []float32, os int) {
	var r [4]float32
	for i := 0; i < 4; i++ {
		Dot1x4(x[i*xs:i*xs+k], w, ws, &r)
		copy(out[i*os:i*os+4], r[:])
	}
}

func f16SIMD(kern func(dst *float32, src *uint16, n uintptr), width int) func(dst []float32, src []byte) {
	generic := dequant[quant.F16]
	return func(dst []float32, src []byte) {
		h := quant.AsU16(src[:2*len(dst)])
		n := len(dst) &^ (width - 1)
		if n > 0 {
			kern(&dst[0], &h[0], uintptr(n))
		}
		if n < len(dst) {
			generic(dst[n:], src[2*n:])
		}
	}
}

// blocksSIMD wraps a kernel over whole 32-value blocks of size bytes each.
func blocksSIMD(kern func(dst *float32, src *byte, nb uintptr), size int) func(dst []float32, src []byte) {
	return func(dst []float32, src []byte) {
		nb := len(dst) / 32
		if nb == 0 {
			return
		}
		_ = src[nb*size-1]
		kern(&dst[0], &src[0], uintptr(nb))
	}
}

// kScaleTable computes, for a Q4_K/Q5_K super-block, each sub-block's float32 scale and offset
// exactly as the generic dequantizer does: d*float32(sc), dmin*float32(m).
func kScaleTable(b []byte, dm *[16]float32) {
	d, dmin := quant.F16ToF32(uint16(b[0])|uint16(b[1])<<8), quant.F16ToF32(uint16(b[2])|uint16(b[3])<<8)
	sc, mn := quant.KScales(b[4:16])
	for s := 0; s < 8; s++ {
		dm[2*s] = d * float32(sc[s])
		dm[2*s+1] = dmin * float32(mn[s])
	}
}

func dequantQ4_KGo(dst []float32, src []byte) {
	var dm [16]float32
	for i := 0; i < len(dst)/256; i++ {
		b := src[i*quant.SizeQ4_K : (i+1)*quant.SizeQ4_K]
		y := dst[i*256 : (i+1)*256]
		kScaleTable(b, &dm)
		dequantQ4_KAVX512(&y[0], &b[16], &dm)
	}
}

func dequantQ5_KGo(dst []float32, src []byte) {
	var dm [16]float32
	for i := 0; i < len(dst)/256; i++ {
		b := src[i*quant.SizeQ5_K : (i+1)*quant.SizeQ5_K]
		y := dst[i*256 : (i+1)*256]
		kScaleTable(b, &dm)
		dequantQ5_KAVX512(&y[0], &b[48], &b[16], &dm)
	}
}

func dequantQ6_KGo(dst []float32, src []byte) {
	var sc [16]float32
	for i := 0; i < len(dst)/256; i++ {
		b := src[i*quant.SizeQ6_K : (i+1)*quant.SizeQ6_K]
		y := dst[i*256 : (i+1)*256]
		d := quant.F16ToF32(uint16(b[208]) | uint16(b[209])<<8)
		for j := range sc {
			sc[j] = d * float32(int8(b[192+j]))
		}
		dequantQ6_KAVX512(&y[0], &b[0], &sc)
	}
}

func geluAVX512Go(dst, x []float32) {
	x = x[:len(dst)]
	n := len(dst) &^ 15
	if n > 0 {
		geluAVX512(&dst[0], &x[0], uintptr(n))
	}
	if n < len(dst) {
		geluGeneric(dst[n:], x[n:])
	}
}

// checkRows panics unless w holds four rows of rowBytes at stride ws (the kernels read them
// without bounds checks).
func checkRows(w []byte, ws, rowBytes int) {
	if rowBytes <= 0 || 3*ws+rowBytes > len(w) {
		panic("kernels: weight rows out of range")
	}
}

// tailRows adds the products of elements n.. of four 16-bit float rows (F16 or BF16, as
// conv converts them), one by one as Dot's tail does.
func tailRows(out *[4]float32, x []float32, w []byte, ws, n int, conv func(uint16) float32) {
	for j := range out {
		row := quant.AsU16(w[j*ws : j*ws+2*len(x)])
		for i := n; i < len(x); i++ {
			out[j] += float32(conv(row[i]) * x[i])
		}
	}
}

func scoresAVX512Go(s, q, k []float32, ks int) {
	d := len(q)
	if d%16 != 0 || d == 0 || len(s) == 0 {
		scoresGeneric(s, q, k, ks)
		return
	}
	_ = k[(len(s)-1)*ks+d-1]
	scoresAVX512(&s[0], &q[0], &k[0], uintptr(4*ks), uintptr(len(s)), uintptr(d))
}

func expSumAVX512Go(s []float32, scale, mx float32) float32 {
	n := len(s) &^ 15
	var sum float32
	if n > 0 {
		sum = expSumAVX512(&s[0], uintptr(n), scale, mx)
	}
	for j := n; j < len(s); j++ {
		e := float32(math.Exp(float64(scale*s[j] - mx)))
		s[j] = e
		sum += e
	}
	return sum
}

func weightedSumAVX512Go(out, p, v []float32, vs int) {
	if len(out) != 64 || len(p) == 0 {
		weightedSumGeneric(out, p, v, vs)
		return
	}
	_ = v[(len(p)-1)*vs+63]
	weightedSum64AVX512(&out[0], &p[0], &v[0], uintptr(4*vs), uintptr(len(p)))
}

func maxAVX512Go(s []float32) float32 {
	n := len(s) &^ 15
	if n == 0 {
		return maxGeneric(s)
	}
	return max(maxAVX512(&s[0], uintptr(n)), maxGeneric(s[n:]))
}

func addAVX512Go(dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	n := len(dst) &^ 15
	if n > 0 {
		addAVX512(&dst[0], &a[0], &b[0], uintptr(n))
	}
	for i := n; i < len(dst); i++ {
		dst[i] = a[i] + b[i]
	}
}

func layerNormAVX512Go(dst, x, w, b []float32, eps float32) {
	n := len(dst)
	if n == 0 || n%16 != 0 {
		layerNormGeneric(dst, x, w, b, eps)
		return
	}
	x, w, b = x[:n], w[:n], b[:n]
	layerNormAVX512(&dst[0], &x[0], &w[0], &b[0], uintptr(n), eps)
}

//go:noescape
func dot6x4AVX512(x *float32, xs uintptr, w *float32, ws, n uintptr, out *float32, os uintptr)

func dot6x4AVX512Go(x []float32, xs int, w []float32, ws int, k int, out []float32, os int) {
	_ = out[5*os+3]
	if k > 0 {
		_ = x[5*xs+k-1]
		_ = w[3*ws+k-1]
	}
	n := k &^ (lanes - 1)
	if n > 0 {
		dot6x4AVX512(&x[0], uintptr(xs*4), &w[0], uintptr(ws*4), uintptr(n), &out[0], uintptr(os*4))
	} else {
		for i := 0; i < 6; i++ {
			clear(out[i*os : i*os+4])
		}
	}
	if n < k {
		for i := 0; i < 6; i++ {
			for j := 0; j < 4; j++ {
				out[i*os+j] = tail(out[i*os+j], x[i*xs+n:i*xs+k], w[j*ws+n:j*ws+k])
			}
		}
	}
}
