//go:build amd64 && !purego && !amd64.v3

package quant

import "github.com/klauspost/cpuid/v2"

// candAsmAvailable: candErr8AVX2 needs AVX2 (no FMA: its products and sums are unfused, like
// the generic loop's as the Go compiler builds it for GOAMD64=v1 and v2; from v3 on, the
// compiler fuses x*y+z in the generic loops, so the assembly is left out there: search_other.go).
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

//go:noescape
func symGridAVX2(x, w *float32, n uintptr, s *float32, groups uintptr, lo, hi, sxx float32, res *gridBest)

func symGridAsm(x, w *float32, n uintptr, s *float32, groups uintptr, lo, hi, sxx float32, res *gridBest) {
	symGridAVX2(x, w, n, s, groups, lo, hi, sxx, res)
}

//go:noescape
func blockStatsAVX2(x, w *float32, n8 uintptr, out *[3]float32)

func blockStatsAsm(x, w *float32, n8 uintptr, out *[3]float32) {
	blockStatsAVX2(x, w, n8, out)
}

//go:noescape
func asymGrid8AVX2(x, w *float32, n uintptr, s, m0 *[8]float32, hi float32, sums *[24]float32)

func asymGrid8Asm(x, w *float32, n uintptr, s, m0 *[8]float32, hi float32, sums *[24]float32) {
	asymGrid8AVX2(x, w, n, s, m0, hi, sums)
}

//go:noescape
func symFixed8AVX2(x, w *float32, n uintptr, ds, id *[8]float32, lo, hi float32, e *[8]float32)

func symFixed8Asm(x, w *float32, n uintptr, ds, id *[8]float32, lo, hi float32, e *[8]float32) {
	symFixed8AVX2(x, w, n, ds, id, lo, hi, e)
}

//go:noescape
func roundAway32AVX2(x *[32]float32, id float32, q *[32]byte)

func roundAway32Asm(x *[32]float32, id float32, q *[32]byte) { roundAway32AVX2(x, id, q) }

//go:noescape
func symErr2AVX2(x, w *float32, la, lb *[32]int8, da, db float32, out *[2]float64)

func symErr2Asm(x, w *float32, la, lb *[32]int8, da, db float32, out *[2]float64) {
	symErr2AVX2(x, w, la, lb, da, db, out)
}

//go:noescape
func candT8AVX2(xT, wT *float32, n uintptr, p *candT, e *[8]float32, lt *float32)

func candT8Asm(xT, wT *float32, n uintptr, p *candT, e *[8]float32, lt *float32) {
	candT8AVX2(xT, wT, n, p, e, lt)
}

//go:noescape
func q4RefAVX2(x *[32]float32, id float32, q *[16]byte)

func q4RefAsm(x *[32]float32, id float32, q *[16]byte) { q4RefAVX2(x, id, q) }

//go:noescape
func symLevels32AVX2(x *[32]float32, id, lo, hi float32, L *[32]int8)

func symLevels32Asm(x *[32]float32, id, lo, hi float32, L *[32]int8) {
	symLevels32AVX2(x, id, lo, hi, L)
}

//go:noescape
func absMaxFirst32AVX2(x *[32]float32) float32

// absMaxFirst32Asm is the value of largest magnitude, the first of equal ones (+0 when all
// are zero), as the reference quantizers find it.
func absMaxFirst32Asm(x *[32]float32) float32 { return absMaxFirst32AVX2(x) }
