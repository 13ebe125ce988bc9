//go:build amd64 && !purego

package kernels

import "github.com/gorun-dev/gorun/quant"

//go:noescape
func dequantQ2_KAVX512(dst *float32, q *byte, dm *[32]float32)

//go:noescape
func dequantQ3_KAVX512(dst *float32, b *byte, sc *[16]float32, base *[16]float32)

// q3Base is the Q3_K quant values q-4 for the 3-bit index q (entries 8-15 unused).
var q3Base = [16]float32{-4, -3, -2, -1, 0, 1, 2, 3}

const (
	sizeQ2_K = 84
	sizeQ3_K = 110
)

func useKQuant23AVX512() {
	dequant[quant.Q2_K] = func(dst []float32, src []byte) {
		var dm [32]float32
		for i := 0; i < len(dst)/256; i++ {
			b := src[i*sizeQ2_K : (i+1)*sizeQ2_K]
			d := quant.F16ToF32(uint16(b[80]) | uint16(b[81])<<8)
			dmin := quant.F16ToF32(uint16(b[82]) | uint16(b[83])<<8)
			for s := 0; s < 16; s++ {
				dm[s] = d * float32(b[s]&0xF)
				dm[16+s] = dmin * float32(b[s]>>4)
			}
			dequantQ2_KAVX512(&dst[i*256], &b[16], &dm)
		}
	}
	dequant[quant.Q3_K] = func(dst []float32, src []byte) {
		var sc [16]float32
		for i := 0; i < len(dst)/256; i++ {
			b := src[i*sizeQ3_K : (i+1)*sizeQ3_K]
			d := quant.F16ToF32(uint16(b[108]) | uint16(b[109])<<8)
			s := quant.Q3Scales((*[12]byte)(b[96:108]))
			for j := range sc {
				sc[j] = d * float32(s[j])
			}
			dequantQ3_KAVX512(&dst[i*256], &b[0], &sc, &q3Base)
		}
	}
}
