//go:build amd64 && !purego

package kernels

import (
	"math"

	"github.com/gorun-dev/gorun/quant"
)

// The AVX-512 kernels of legacy_amd64.s: Q4_1, Q5_0, Q5_1 and BF16.

//go:noescape
func matvecQ4_1x4AVX512(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32, consts *[96]uint32)

//go:noescape
func dequantQ4_1AVX512(dst *float32, src *byte, nb uintptr, tab *float32, consts *[96]uint32)

//go:noescape
func matvecQ5_0x4AVX512(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32, consts *[96]uint32)

//go:noescape
func dequantQ5_0AVX512(dst *float32, src *byte, nb uintptr, tab *float32, consts *[96]uint32)

//go:noescape
func matvecQ5_1x4AVX512(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32, consts *[96]uint32)

//go:noescape
func dequantQ5_1AVX512(dst *float32, src *byte, nb uintptr, tab *float32, consts *[96]uint32)

//go:noescape
func matvecBF16x4AVX512(x *float32, w *byte, ws, n uintptr, out *[4]float32)

//go:noescape
func bf16ToF32AVX512(dst *float32, src *uint16, n uintptr)

// legacyConsts: lane shifts 0..15 and 16..31 (int32), then float32 tables 0..15, 16..31,
// -16..-1, 0..15 (the layout legacy_amd64.s's SETUP reads).
var legacyConsts = func() (c [96]uint32) {
	f := math.Float32bits
	for i := 0; i < 16; i++ {
		c[i], c[16+i] = uint32(i), uint32(16+i)
		c[32+i], c[48+i], c[64+i], c[80+i] = f(float32(i)), f(float32(16+i)), f(float32(i-16)), f(float32(i))
	}
	return
}()

func useLegacyAVX512() {
	type kern = func(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32, consts *[96]uint32)
	type deq = func(dst *float32, src *byte, nb uintptr, tab *float32, consts *[96]uint32)
	for _, k := range []struct {
		t    quant.Type
		size int
		mv   kern
		dq   deq
	}{
		{quant.Q4_1, 20, matvecQ4_1x4AVX512, dequantQ4_1AVX512},
		{quant.Q5_0, 22, matvecQ5_0x4AVX512, dequantQ5_0AVX512},
		{quant.Q5_1, 24, matvecQ5_1x4AVX512, dequantQ5_1AVX512},
	} {
		matVec4[k.t] = func(x []float32, w []byte, ws int, out *[4]float32) {
			checkRows(w, ws, len(x)/32*k.size)
			k.mv(&x[0], &w[0], uintptr(ws), uintptr(len(x)/32), out, f16Tab, &legacyConsts)
		}
		dequant[k.t] = func(dst []float32, src []byte) {
			nb := len(dst) / 32
			if nb == 0 {
				return
			}
			_ = src[nb*k.size-1]
			k.dq(&dst[0], &src[0], uintptr(nb), f16Tab, &legacyConsts)
		}
	}
	dequant[quant.BF16] = bf16SIMD(dequant[quant.BF16])
	matVec4[quant.BF16] = func(x []float32, w []byte, ws int, out *[4]float32) {
		n := len(x) &^ 15
		checkRows(w, ws, 2*len(x))
		matvecBF16x4AVX512(&x[0], &w[0], uintptr(ws), uintptr(n), out)
		tailRows(out, x, w, ws, n, quant.BF16ToF32)
	}
}

func bf16SIMD(generic func(dst []float32, src []byte)) func(dst []float32, src []byte) {
	return func(dst []float32, src []byte) {
		h := quant.AsU16(src[:2*len(dst)])
		n := len(dst) &^ 15
		if n > 0 {
			bf16ToF32AVX512(&dst[0], &h[0], uintptr(n))
		}
		if n < len(dst) {
			generic(dst[n:], src[2*n:])
		}
	}
}
