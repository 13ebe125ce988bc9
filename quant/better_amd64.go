//go:build amd64 && !purego && !amd64.v3

package quant

import "github.com/klauspost/cpuid/v2"

// candAsmAvailable: candErr8AVX2 needs AVX2 (no FMA: its products and sums are unfused, like
// the generic loop's as the Go compiler builds it for GOAMD64=v1 and v2; from v3 on, the
// compiler fuses x*y+z in the generic loops, so the assembly is left out there: better_other.go).
var candAsmAvailable = cpuid.CPU.Supports(cpuid.AVX, cpuid.AVX2)

//go:noescape
func candErr8AVX2(x *float32, w *float64, n uintptr, p *candParams, e *[8]float64, lt *int32)

func candErr8Asm(x *float32, w *float64, n uintptr, p *candParams, e *[8]float64, lt *int32) {
	candErr8AVX2(x, w, n, p, e, lt)
}

//go:noescape
func qkx2Sums8AVX2(x, w *float32, n uintptr, lo float32, isc *[8]float32, nmax int32, sums *[24]float32, lt *int32)

//go:noescape
func qkx2Mad8AVX2(x, w *float32, n uintptr, scale, mn *[8]float32, lt *int32, mad *[8]float32)

func qkx2Sums8(x, w []float32, lo float32, isc *[8]float32, nmax int32, sums *[24]float32, lt *[256]int32) {
	_ = w[len(x)-1]
	qkx2Sums8AVX2(&x[0], &w[0], uintptr(len(x)), lo, isc, nmax, sums, &lt[0])
}

func qkx2Mad8(x, w []float32, scale, mn *[8]float32, lt *[256]int32, mad *[8]float32) {
	_ = w[len(x)-1]
	qkx2Mad8AVX2(&x[0], &w[0], uintptr(len(x)), scale, mn, &lt[0], mad)
}

//go:noescape
func qxSums8AVX2(x *float32, n uintptr, isc *[8]float32, nmax int32, sums *[16]float32)

func qxSums8(x []float32, isc *[8]float32, nmax int32, sums *[16]float32) {
	qxSums8AVX2(&x[0], uintptr(len(x)), isc, nmax, sums)
}
