package quant

// Q8_0: blocks of 32 values stored as a half scale d and 32 int8 quants q; x = q*d.
// Layout (34 bytes): d f16 | qs [32]int8.

func init() {
	register(&Format{Type: Q8_0, Dequantize: dequantQ8_0, Quantize: quantQ8_0, QuantizeSearch: searchQ8_0,
		DotF32: dotQ8_0, VecDotType: Q8_0, VecDot: vecDotQ8_0})
}

const sizeQ8_0 = 34

func quantQ8_0(dst []byte, src []float32) error {
	if err := checkFinite(src); err != nil {
		return err
	}
	for i := 0; i < len(src)/32; i++ {
		quantBlockQ8_0((*[sizeQ8_0]byte)(dst[i*sizeQ8_0:]), (*[32]float32)(src[i*32:]))
	}
	return nil
}

// quantBlockQ8_0 is quantize_row_q8_0_ref for one block: d = amax/127, q = roundf(x/d).
func quantBlockQ8_0(b *[sizeQ8_0]byte, x *[32]float32) {
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
	for j, v := range x {
		b[2+j] = uint8(int8(roundAway(v * id)))
	}
}

func dequantQ8_0(dst []float32, src []byte) {
	for i := 0; i < len(dst)/32; i++ {
		b := (*[sizeQ8_0]byte)(src[i*sizeQ8_0:])
		y := (*[32]float32)(dst[i*32:])
		d := getF16(b[0:])
		for j := range y {
			y[j] = i8f[b[2+j]] * d
		}
	}
}

func dotQ8_0(w []byte, x []float32) float32 {
	var acc float32
	for i := 0; i < len(x)/32; i++ {
		b := (*[sizeQ8_0]byte)(w[i*sizeQ8_0:])
		xs := (*[32]float32)(x[i*32:])
		var s0, s1, s2, s3 float32
		for j := 0; j < 32; j += 4 {
			s0 += i8f[b[2+j]] * xs[j]
			s1 += i8f[b[3+j]] * xs[j+1]
			s2 += i8f[b[4+j]] * xs[j+2]
			s3 += i8f[b[5+j]] * xs[j+3]
		}
		acc += getF16(b[0:]) * ((s0 + s1) + (s2 + s3))
	}
	return acc
}

// vecDotQ8_0 is ggml_vec_dot_q8_0_q8_0: per block an integer dot, scaled by dx*dy.
func vecDotQ8_0(w, xq []byte) float32 {
	var sumf float32
	for i := range min(len(w)/sizeQ8_0, len(xq)/sizeQ8_0) {
		a := (*[sizeQ8_0]byte)(w[i*sizeQ8_0:])
		b := (*[sizeQ8_0]byte)(xq[i*sizeQ8_0:])
		var s0, s1 int32
		for j := 2; j < sizeQ8_0; j += 2 {
			s0 += int32(int8(a[j])) * int32(int8(b[j]))
			s1 += int32(int8(a[j+1])) * int32(int8(b[j+1]))
		}
		sumf += float32(s0+s1) * (getF16(a[0:]) * getF16(b[0:]))
	}
	return sumf
}
