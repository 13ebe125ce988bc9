package quant

// Q4_0: blocks of 32 values stored as a half scale d and 4-bit quants q in 0..15; x = (q-8)*d.
// Layout (18 bytes): d f16 | qs [16]byte, value j in the low nibble of qs[j], value j+16 in
// the high nibble.

func init() {
	register(&Format{Type: Q4_0, Dequantize: dequantQ4_0, Quantize: quantQ4_0, QuantizeSearch: searchQ4_0,
		DotF32: dotQ4_0, VecDotType: Q8_0, VecDot: vecDotQ4_0})
}

const sizeQ4_0 = 18

// nib0 maps a nibble q to q-8 as float32.
var nib0 = [16]float32{-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7}

// quantQ4_0 is quantize_row_q4_0_ref: d = max/-8 where max is the value of largest magnitude,
// q = min(15, trunc(x/d + 8.5)).
func quantQ4_0(dst []byte, src []float32) error {
	if err := checkFinite(src); err != nil {
		return err
	}
	for i := 0; i < len(src)/32; i++ {
		b := (*[sizeQ4_0]byte)(dst[i*sizeQ4_0:])
		x := (*[32]float32)(src[i*32:])
		var amax, max float32
		for _, v := range x {
			if a := abs32(v); amax < a {
				amax = a
				max = v
			}
		}
		d := max / -8
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putF16(b[0:], d)
		for j := 0; j < 16; j++ {
			x0 := x[j] * id
			x1 := x[16+j] * id
			xi0 := min(15, int8(x0+8.5))
			xi1 := min(15, int8(x1+8.5))
			b[2+j] = uint8(xi0) | uint8(xi1)<<4
		}
	}
	return nil
}

func dequantQ4_0(dst []float32, src []byte) {
	for i := 0; i < len(dst)/32; i++ {
		b := (*[sizeQ4_0]byte)(src[i*sizeQ4_0:])
		y := (*[32]float32)(dst[i*32:])
		d := getF16(b[0:])
		for j := 0; j < 16; j++ {
			y[j] = float32(int32(b[2+j]&15)-8) * d
			y[j+16] = float32(int32(b[2+j]>>4)-8) * d
		}
	}
}

func dotQ4_0(w []byte, x []float32) float32 {
	var acc float32
	for i := 0; i < len(x)/32; i++ {
		b := (*[sizeQ4_0]byte)(w[i*sizeQ4_0:])
		xs := (*[32]float32)(x[i*32:])
		var s0, s1, s2, s3 float32
		for j := 0; j < 16; j += 2 {
			v0, v1 := b[2+j], b[3+j]
			s0 += nib0[v0&15] * xs[j]
			s1 += nib0[v0>>4] * xs[j+16]
			s2 += nib0[v1&15] * xs[j+1]
			s3 += nib0[v1>>4] * xs[j+17]
		}
		acc += getF16(b[0:]) * ((s0 + s1) + (s2 + s3))
	}
	return acc
}

// vecDotQ4_0 is ggml_vec_dot_q4_0_q8_0.
func vecDotQ4_0(w, xq []byte) float32 {
	var sumf float32
	for i := range min(len(w)/sizeQ4_0, len(xq)/sizeQ8_0) {
		a := (*[sizeQ4_0]byte)(w[i*sizeQ4_0:])
		b := (*[sizeQ8_0]byte)(xq[i*sizeQ8_0:])
		var s0, s1 int32
		for j := 0; j < 16; j++ {
			s0 += (int32(a[2+j]&15) - 8) * int32(int8(b[2+j]))
			s1 += (int32(a[2+j]>>4) - 8) * int32(int8(b[18+j]))
		}
		sumf += float32(float32(s0+s1)*getF16(a[0:])) * getF16(b[0:])
	}
	return sumf
}
