package quant

import (
	"encoding/binary"
	"math"
)

// Q8_K: the activation type of the K-quants. Super-blocks of 256 values: a float32 scale d,
// 256 int8 quants and the sums of each 16 quants (so K-quant dots can apply their mins without
// touching the quants); x = q*d.
// Layout (292 bytes): d f32 | qs [256]int8 | bsums [16]int16.

func init() {
	register(&Format{Type: Q8_K, Dequantize: dequantQ8_K, Quantize: quantQ8_K})
}

const sizeQ8_K = 292

// quantQ8_K is quantize_row_q8_K_ref: d = 1/iscale, iscale = -127/max (max the value of largest
// magnitude), q = min(127, nearest_int(iscale*x)). An all-zero block stores d = 0 and zero
// quants; ggml leaves its bsums unwritten there, we write zeros.
func quantQ8_K(dst []byte, src []float32) error {
	if err := checkFinite(src); err != nil {
		return err
	}
	for i := 0; i < len(src)/QK_K; i++ {
		b := (*[sizeQ8_K]byte)(dst[i*sizeQ8_K:])
		x := (*[QK_K]float32)(src[i*QK_K:])
		var max, amax float32
		for _, v := range x {
			if a := abs32(v); a > amax {
				amax = a
				max = v
			}
		}
		if amax == 0 {
			clear(b[:])
			continue
		}
		iscale := -127 / max
		q := (*[QK_K]byte)(b[4:])
		for j, v := range x {
			q[j] = uint8(int8(min(127, nearestInt(iscale*v))))
		}
		for j := 0; j < QK_K/16; j++ {
			var sum int32
			for _, v := range q[16*j : 16*j+16] {
				sum += int32(int8(v))
			}
			binary.LittleEndian.PutUint16(b[260+2*j:], uint16(int16(sum)))
		}
		binary.LittleEndian.PutUint32(b[0:], math.Float32bits(1/iscale))
	}
	return nil
}

func dequantQ8_K(dst []float32, src []byte) {
	for i := 0; i < len(dst)/QK_K; i++ {
		b := (*[sizeQ8_K]byte)(src[i*sizeQ8_K:])
		y := (*[QK_K]float32)(dst[i*QK_K:])
		d := math.Float32frombits(binary.LittleEndian.Uint32(b[0:]))
		for j := range y {
			y[j] = d * i8f[b[4+j]]
		}
	}
}

// q8K views the parts of one Q8_K block.
func q8K(b *[sizeQ8_K]byte) (d float32, q *[QK_K]byte) {
	return math.Float32frombits(binary.LittleEndian.Uint32(b[0:])), (*[QK_K]byte)(b[4:])
}

// bsum is the sum of quants j*16..j*16+15 of a Q8_K block.
func bsum(b *[sizeQ8_K]byte, j int) int32 {
	return int32(int16(binary.LittleEndian.Uint16(b[260+2*j:])))
}
