//go:build !amd64 || purego || amd64.v3

package quant

// Without assembly (another architecture, -tags purego, or GOAMD64=v3 and above, where the Go
// compiler contracts the generic loops' x*y+z into fused multiply-adds, which the unfused
// assembly would not match) the generic loops run.

const candAsmAvailable = false

func candErr8Asm(x *float32, w *float64, n uintptr, p *candParams, e *[8]float64, lt *int32) {
	panic("quant: no assembly candErr8")
}

func qkx2Sums8(x, w []float32, lo float32, isc *[8]float32, nmax int32, sums *[24]float32, lt *[256]int32) {
	panic("quant: no assembly qkx2Sums8")
}

func qkx2Mad8(x, w []float32, scale, mn *[8]float32, lt *[256]int32, mad *[8]float32) {
	panic("quant: no assembly qkx2Mad8")
}

func qxSums8(x []float32, isc *[8]float32, nmax int32, sums *[16]float32) {
	panic("quant: no assembly qxSums8")
}

func symGridAsm(x, w *float32, n uintptr, s *float32, groups uintptr, lo, hi, sxx float32, res *gridBest) {
	panic("quant: no assembly symGrid")
}

func blockStatsAsm(x, w *float32, n8 uintptr, out *[3]float32) {
	panic("quant: no assembly blockStats")
}

func asymGrid8Asm(x, w *float32, n uintptr, s, m0 *[8]float32, hi float32, sums *[24]float32) {
	panic("quant: no assembly asymGrid8")
}

func symFixed8Asm(x, w *float32, n uintptr, ds, id *[8]float32, lo, hi float32, e *[8]float32) {
	panic("quant: no assembly symFixed8")
}

func roundAway32Asm(x *[32]float32, id float32, q *[32]byte) {
	panic("quant: no assembly roundAway32")
}

func symErr2Asm(x, w *float32, la, lb *[32]int8, da, db float32, out *[2]float64) {
	panic("quant: no assembly symErr2")
}

func candT8Asm(xT, wT *float32, n uintptr, p *candT, e *[8]float32, lt *float32) {
	panic("quant: no assembly candT8")
}

func q4RefAsm(x *[32]float32, id float32, q *[16]byte) {
	panic("quant: no assembly q4Ref")
}

func symLevels32Asm(x *[32]float32, id, lo, hi float32, L *[32]int8) {
	panic("quant: no assembly symLevels32")
}

func absMaxFirst32Asm(x *[32]float32) float32 {
	panic("quant: no assembly absMaxFirst32")
}
