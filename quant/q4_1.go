package quant

// Q4_1: blocks of 32 values stored as a half scale d, a half minimum m and 4-bit quants q;
// x = q*d + m.
// Layout (20 bytes): d f16 | m f16 | qs [16]byte (value j low nibble, j+16 high nibble).

func init() {
	register(&Format{Type: Q4_1, Dequantize: dequantQ4_1, Quantize: quantQ4_1, QuantizeSearch: searchQ4_1,
		DotF32: dotQ4_1, VecDotType: Q8_1, VecDot: vecDotQ4_1})
}

const sizeQ4_1 = 20

// nib1 maps a nibble to its value as float32.
var nib1 = [16]float32{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15}

// minMax32 is the min/max scan of quantize_row_q4_1_ref and q5_1 (starting from ±FLT_MAX).
func minMax32(x *[32]float32) (lo, hi float32) {
	lo, hi = maxFloat32, -maxFloat32
	for _, v := range x {
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
	}
	return lo, hi
}

const maxFloat32 = 3.40282346638528859811704183484516925440e+38

// quantQ4_1 is quantize_row_q4_1_ref: d = (max-min)/15, m = min, q = min(15, trunc((x-min)/d + 0.5)).
func quantQ4_1(dst []byte, src []float32) error {
	if err := checkFinite(src); err != nil {
		return err
	}
	for i := 0; i < len(src)/32; i++ {
		b := (*[sizeQ4_1]byte)(dst[i*sizeQ4_1:])
		x := (*[32]float32)(src[i*32:])
		lo, hi := minMax32(x)
		d := (hi - lo) / 15
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putF16(b[0:], d)
		putF16(b[2:], lo)
		for j := 0; j < 16; j++ {
			x0 := (x[j] - lo) * id
			x1 := (x[16+j] - lo) * id
			xi0 := min(15, int8(x0+0.5))
			xi1 := min(15, int8(x1+0.5))
			b[4+j] = uint8(xi0) | uint8(xi1)<<4
		}
	}
	return nil
}

func dequantQ4_1(dst []float32, src []byte) {
	for i := 0; i < len(dst)/32; i++ {
		b := (*[sizeQ4_1]byte)(src[i*sizeQ4_1:])
		y := (*[32]float32)(dst[i*32:])
		d, m := getF16(b[0:]), getF16(b[2:])
		for j := 0; j < 16; j++ {
			y[j] = float32(float32(b[4+j]&15)*d) + m
			y[j+16] = float32(float32(b[4+j]>>4)*d) + m
		}
	}
}

func dotQ4_1(w []byte, x []float32) float32 {
	var acc float32
	for i := 0; i < len(x)/32; i++ {
		b := (*[sizeQ4_1]byte)(w[i*sizeQ4_1:])
		xs := (*[32]float32)(x[i*32:])
		var s0, s1, s2, s3, t0, t1 float32
		for j := 0; j < 16; j += 2 {
			v0, v1 := b[4+j], b[5+j]
			s0 += nib1[v0&15] * xs[j]
			s1 += nib1[v0>>4] * xs[j+16]
			s2 += nib1[v1&15] * xs[j+1]
			s3 += nib1[v1>>4] * xs[j+17]
			t0 += xs[j] + xs[j+16]
			t1 += xs[j+1] + xs[j+17]
		}
		acc += getF16(b[0:])*((s0+s1)+(s2+s3)) + getF16(b[2:])*(t0+t1)
	}
	return acc
}

// vecDotQ4_1 is ggml_vec_dot_q4_1_q8_1: d_x*d_y*sum(q_x*q_y) + m_x*s_y per block.
func vecDotQ4_1(w, xq []byte) float32 {
	var sumf float32
	for i := range min(len(w)/sizeQ4_1, len(xq)/sizeQ8_1) {
		a := (*[sizeQ4_1]byte)(w[i*sizeQ4_1:])
		b := (*[sizeQ8_1]byte)(xq[i*sizeQ8_1:])
		var s0, s1 int32
		for j := 0; j < 16; j++ {
			s0 += int32(a[4+j]&15) * int32(int8(b[4+j]))
			s1 += int32(a[4+j]>>4) * int32(int8(b[20+j]))
		}
		sumf += float32(float32(getF16(a[0:])*getF16(b[0:]))*float32(s0+s1)) + float32(getF16(a[2:])*getF16(b[2:]))
	}
	return sumf
}
