//go:build !amd64 || purego

package quant

// Without assembly (another architecture, or -tags purego) candErr8 is the generic loop.

const candAsmAvailable = false

func candErr8Asm(x *float32, w *float64, n uintptr, p *candParams, e *[8]float64, lt *int32) {
	panic("quant: no assembly candErr8")
}
