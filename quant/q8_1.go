package quant

// Q8_1: the activation type paired with Q4_1 and Q5_1. Blocks of 32 values: a half scale d, a
// half s = d*sum(q), and 32 int8 quants; x = q*d.
// Layout (36 bytes): d f16 | s f16 | qs [32]int8.

func init() {
	register(&Format{Type: Q8_1, Dequantize: dequantQ8_1, Quantize: quantQ8_1})
}

const sizeQ8_1 = 36

// quantQ8_1 is quantize_row_q8_1_ref.
func quantQ8_1(dst []byte, src []float32) error {
	if err := checkFinite(src); err != nil {
		return err
	}
	for i := 0; i < len(src)/32; i++ {
		b := (*[sizeQ8_1]byte)(dst[i*sizeQ8_1:])
		x := (*[32]float32)(src[i*32:])
		var amax float32
		for _, v := range x {
			if a := abs32(v); a > amax {
				amax = a
			}
		}
		d := amax / 127
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putF16(b[0:], d)
		var sum int32
		for j := 0; j < 16; j++ {
			q0 := int8(roundAway(x[j] * id))
			q1 := int8(roundAway(x[16+j] * id))
			b[4+j] = uint8(q0)
			b[20+j] = uint8(q1)
			sum += int32(q0) + int32(q1)
		}
		putF16(b[2:], float32(sum)*d)
	}
	return nil
}

func dequantQ8_1(dst []float32, src []byte) {
	for i := 0; i < len(dst)/32; i++ {
		b := (*[sizeQ8_1]byte)(src[i*sizeQ8_1:])
		y := (*[32]float32)(dst[i*32:])
		d := getF16(b[0:])
		for j := range y {
			y[j] = i8f[b[4+j]] * d
		}
	}
}
