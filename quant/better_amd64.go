//go:build amd64 && !purego

package quant

import "github.com/klauspost/cpuid/v2"

// candAsmAvailable: candErr8AVX2 needs AVX2 (no FMA: its products and sums are unfused, like
// the generic loop's).
var candAsmAvailable = cpuid.CPU.Supports(cpuid.AVX, cpuid.AVX2)

//go:noescape
func candErr8AVX2(x *float32, w *float64, n uintptr, p *candParams, e *[8]float64, lt *int32)

func candErr8Asm(x *float32, w *float64, n uintptr, p *candParams, e *[8]float64, lt *int32) {
	candErr8AVX2(x, w, n, p, e, lt)
}
