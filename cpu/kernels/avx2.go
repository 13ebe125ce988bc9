//go:build amd64 && !purego

package kernels

import "github.com/gorun-dev/gorun/quant"

// useAVX2 installs the AVX2 tier (AVX2 + FMA + F16C, 256-bit registers). Its dot products keep
// the package's 16 lanes in two registers, so they are bit-identical to the AVX-512 tier's.
// Kernels it lacks stay generic.
func useAVX2() {
	Dot = dotSIMD(dotAVX2)
	Dot1x4 = dot1x4SIMD(dot1x4AVX2)
	Dot4x4 = dot4x4Via1x4
	dequant[quant.F16] = f16SIMD(f16ToF32AVX2, 8)
	dequant[quant.Q8_0] = blocksTabAVX2(dequantQ8_0AVX2, 32, quant.SizeQ8_0)
	dequant[quant.Q4_0] = blocksTabAVX2(dequantQ4_0AVX2, 32, quant.SizeQ4_0)
	dequant[quant.Q4_K] = blocksTabAVX2(dequantQ4_KAVX2, 256, quant.SizeQ4_K)
	dequant[quant.Q5_K] = blocksTabAVX2(dequantQ5_KAVX2, 256, quant.SizeQ5_K)
	dequant[quant.Q6_K] = blocksTabAVX2(dequantQ6_KAVX2, 256, quant.SizeQ6_K)
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
