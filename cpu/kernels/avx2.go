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
}
