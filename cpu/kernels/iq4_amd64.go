//go:build amd64 && !purego

package kernels

import "github.com/gorun-dev/gorun/quant"

// IQ4_NL and IQ4_XS on the SIMD tiers (iq4_amd64.s): each value is its block's scale (IQ4_NL's
// half d; IQ4_XS's d*float32(ls-32)) times a level of the fixed 16-entry table, picked by
// VPERMPS from the float32 levels (AVX-512) or VPSHUFB from the int8 ones (AVX2). On AVX-512
// IQ4_NL's fused kernel is Q4_0's with the IQ4 levels as its table: both formats are a half
// scale times a 16-entry table picked by the same nibbles.

//go:noescape
func matvecIQ4XSx4AVX512(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32, base *[16]float32, consts *[40]uint32)

//go:noescape
func dequantIQ4NLAVX512(dst *float32, src *byte, nb uintptr, tab *float32, base *[16]float32)

//go:noescape
func dequantIQ4XSAVX512(dst *float32, src *byte, nb uintptr, tab *float32, base *[16]float32, consts *[40]uint32)

//go:noescape
func matvecIQ4NLx4AVX2(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32, levels *[16]int8)

//go:noescape
func dequantIQ4NLAVX2(dst *float32, src *byte, nb uintptr, tab *float32, levels *[16]int8)

//go:noescape
func matvecIQ4XSx4AVX2(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32, levels *[16]int8, consts *[40]uint32)

//go:noescape
func dequantIQ4XSAVX2(dst *float32, src *byte, nb uintptr, tab *float32, levels *[16]int8, consts *[40]uint32)

var (
	iq4Levels = quant.IQ4Levels() // float32, for VPERMPS
	iq4Values = quant.IQ4Values() // int8, for VPSHUFB
)

// xsConsts is what XSSCALES unpacks an IQ4_XS super-block's 6-bit codes with: the shifts 4ib
// of scales_l and 2ib of scales_h for the 8 blocks ib, then the masks 15 and 3 and the offset
// 32, 8 lanes each.
var xsConsts = func() (c [40]uint32) {
	for ib := uint32(0); ib < 8; ib++ {
		c[ib], c[8+ib], c[16+ib], c[24+ib], c[32+ib] = 4*ib, 2*ib, 15, 3, 32
	}
	return
}()

func useIQ4AVX512() {
	dequant[quant.IQ4_NL] = func(dst []float32, src []byte) {
		if nb := iq4Blocks(dst, src, 32, quant.SizeIQ4_NL); nb > 0 {
			dequantIQ4NLAVX512(&dst[0], &src[0], uintptr(nb), f16Tab, &iq4Levels)
		}
	}
	dequant[quant.IQ4_XS] = func(dst []float32, src []byte) {
		if nb := iq4Blocks(dst, src, 256, quant.SizeIQ4_XS); nb > 0 {
			dequantIQ4XSAVX512(&dst[0], &src[0], uintptr(nb), f16Tab, &iq4Levels, &xsConsts)
		}
	}
	matVec4[quant.IQ4_NL] = func(x []float32, w []byte, ws int, out *[4]float32) {
		checkRows(w, ws, len(x)/32*quant.SizeIQ4_NL)
		matvecQ4_0x4AVX512(&x[0], &w[0], uintptr(ws), uintptr(len(x)/32), out, f16Tab, &iq4Levels)
	}
	matVec4[quant.IQ4_XS] = func(x []float32, w []byte, ws int, out *[4]float32) {
		checkRows(w, ws, len(x)/256*quant.SizeIQ4_XS)
		matvecIQ4XSx4AVX512(&x[0], &w[0], uintptr(ws), uintptr(len(x)/256), out, f16Tab, &iq4Levels, &xsConsts)
	}
}

func useIQ4AVX2() {
	dequant[quant.IQ4_NL] = func(dst []float32, src []byte) {
		if nb := iq4Blocks(dst, src, 32, quant.SizeIQ4_NL); nb > 0 {
			dequantIQ4NLAVX2(&dst[0], &src[0], uintptr(nb), f16Tab, &iq4Values)
		}
	}
	dequant[quant.IQ4_XS] = func(dst []float32, src []byte) {
		if nb := iq4Blocks(dst, src, 256, quant.SizeIQ4_XS); nb > 0 {
			dequantIQ4XSAVX2(&dst[0], &src[0], uintptr(nb), f16Tab, &iq4Values, &xsConsts)
		}
	}
	matVec4[quant.IQ4_NL] = func(x []float32, w []byte, ws int, out *[4]float32) {
		checkRows(w, ws, len(x)/32*quant.SizeIQ4_NL)
		matvecIQ4NLx4AVX2(&x[0], &w[0], uintptr(ws), uintptr(len(x)/32), out, f16Tab, &iq4Values)
	}
	matVec4[quant.IQ4_XS] = func(x []float32, w []byte, ws int, out *[4]float32) {
		checkRows(w, ws, len(x)/256*quant.SizeIQ4_XS)
		matvecIQ4XSx4AVX2(&x[0], &w[0], uintptr(ws), uintptr(len(x)/256), out, f16Tab, &iq4Values, &xsConsts)
	}
}

// iq4Blocks returns the number of whole blocks of bs values (size bytes each) in dst, having
// checked that src holds them (the kernels read without bounds checks).
func iq4Blocks(dst []float32, src []byte, bs, size int) int {
	nb := len(dst) / bs
	if nb > 0 {
		_ = src[nb*size-1]
	}
	return nb
}
