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
