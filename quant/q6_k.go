package quant

// Q6_K: super-blocks of 256 values in 16 sub-blocks of 16, each with an int8 scale; the
// super-block has a half scale d; x = d*sc*(q-32) with 6-bit q.
// Layout (210 bytes): ql [128]byte | qh [64]byte | scales [16]int8 | d f16. In half h (128
// values), value 128h+32k+l (k = 0..3, l = 0..31) has its low 4 bits in ql[64h+l] (k = 0, 2:
// low/high nibble) or ql[64h+32+l] (k = 1, 3), and its top 2 bits in bits 2k of qh[32h+l];
// its scale is scales[8h+2k+l/16].

func init() {
	register(&Format{Type: Q6_K, Dequantize: dequantQ6_K, Quantize: quantQ6_K, QuantizeSearch: searchQ6_K,
		DotF32: dotQ6_K, VecDotType: Q8_K, VecDot: vecDotQ6_K})
}

const sizeQ6_K = 210

// quantQ6_K is quantize_row_q6_K_ref (what quantize_q6_K does without an importance matrix).
func quantQ6_K(dst []byte, src []float32) error {
	if err := checkFinite(src); err != nil {
		return err
	}
	for i := 0; i < len(src)/QK_K; i++ {
		quantBlockQ6_K((*[sizeQ6_K]byte)(dst[i*sizeQ6_K:]), (*[QK_K]float32)(src[i*QK_K:]))
	}
	return nil
}

func quantBlockQ6_K(b *[sizeQ6_K]byte, x *[QK_K]float32) {
	var (
		L                     [QK_K]int8
		scales                [16]float32
		maxScale, maxAbsScale float32
	)
	for ib := 0; ib < 16; ib++ {
		s := makeQXQuants(32, x[16*ib:16*ib+16], L[16*ib:])
		scales[ib] = s
		if a := abs32(s); a > maxAbsScale {
			maxAbsScale = a
			maxScale = s
		}
	}
	if maxAbsScale < groupMaxEps {
		clear(b[:])
		return
	}
	iscale := -128 / maxScale
	putF16(b[208:], 1/iscale)
	for ib := 0; ib < 16; ib++ {
		b[192+ib] = uint8(int8(min(127, nearestInt(iscale*scales[ib]))))
	}
	d16 := getF16(b[208:])
	for j := 0; j < 16; j++ {
		d := d16 * float32(int8(b[192+j]))
		if d == 0 {
			continue
		}
		for ii, v := range x[16*j : 16*j+16] {
			l := nearestInt(v / d)
			L[16*j+ii] = int8(max32(-32, min(31, l)) + 32)
		}
	}
	for h := 0; h < 2; h++ {
		ql := (*[64]byte)(b[64*h:])
		qh := (*[32]byte)(b[128+32*h:])
		Lh := (*[128]int8)(L[128*h:])
		for l := 0; l < 32; l++ {
			q1, q2, q3, q4 := uint8(Lh[l]), uint8(Lh[l+32]), uint8(Lh[l+64]), uint8(Lh[l+96])
			ql[l] = q1&15 | (q3&15)<<4
			ql[l+32] = q2&15 | (q4&15)<<4
			qh[l] = q1>>4 | (q2>>4)<<2 | (q3>>4)<<4 | (q4>>4)<<6
		}
	}
}

// q6f maps a 6-bit quant to q-32 as float32.
var q6f = func() (t [64]float32) {
	for i := range t {
		t[i] = float32(i - 32)
	}
	return
}()

func dequantQ6_K(dst []float32, src []byte) {
	for i := 0; i < len(dst)/QK_K; i++ {
		b := (*[sizeQ6_K]byte)(src[i*sizeQ6_K:])
		d := getF16(b[208:])
		for h := 0; h < 2; h++ {
			ql := (*[64]byte)(b[64*h:])
			qh := (*[32]byte)(b[128+32*h:])
			sc := (*[8]byte)(b[192+8*h:])
			y := (*[128]float32)(dst[i*QK_K+128*h:])
			for l := 0; l < 32; l++ {
				is := l / 16
				q1 := ql[l]&15 | (qh[l]&3)<<4
				q2 := ql[l+32]&15 | (qh[l]>>2&3)<<4
				q3 := ql[l]>>4 | (qh[l]>>4&3)<<4
				q4 := ql[l+32]>>4 | (qh[l]>>6)<<4
				y[l] = float32(d*i8f[sc[is]]) * q6f[q1]
				y[l+32] = float32(d*i8f[sc[is+2]]) * q6f[q2]
				y[l+64] = float32(d*i8f[sc[is+4]]) * q6f[q3]
				y[l+96] = float32(d*i8f[sc[is+6]]) * q6f[q4]
			}
		}
	}
}

func dotQ6_K(w []byte, x []float32) float32 {
	var acc float32
	for i := 0; i < len(x)/QK_K; i++ {
		b := (*[sizeQ6_K]byte)(w[i*sizeQ6_K:])
		var sum float32
		for h := 0; h < 2; h++ {
			ql := (*[64]byte)(b[64*h:])
			qh := (*[32]byte)(b[128+32*h:])
			sc := (*[8]byte)(b[192+8*h:])
			y := (*[128]float32)(x[i*QK_K+128*h:])
			for half := 0; half < 2; half++ {
				var s1, s2, s3, s4 float32
				for l := 16 * half; l < 16*half+16; l++ {
					hb := qh[l]
					s1 += q6f[ql[l]&15|(hb&3)<<4] * y[l]
					s2 += q6f[ql[l+32]&15|(hb>>2&3)<<4] * y[l+32]
					s3 += q6f[ql[l]>>4|(hb>>4&3)<<4] * y[l+64]
					s4 += q6f[ql[l+32]>>4|(hb>>6)<<4] * y[l+96]
				}
				sum += i8f[sc[half]]*s1 + i8f[sc[half+2]]*s2 + i8f[sc[half+4]]*s3 + i8f[sc[half+6]]*s4
			}
		}
		acc += getF16(b[208:]) * sum
	}
	return acc
}

// vecDotQ6_K is ggml_vec_dot_q6_K_q8_K (its scalar version, to the bit); see laneSums.
func vecDotQ6_K(w, xq []byte) float32 {
	var sums [8]float32
	for i := range min(len(w)/sizeQ6_K, len(xq)/sizeQ8_K) {
		a := (*[sizeQ6_K]byte)(w[i*sizeQ6_K:])
		yb := (*[sizeQ8_K]byte)(xq[i*sizeQ8_K:])
		dy, q8 := q8K(yb)
		var aux [8]int32
		for h := 0; h < 2; h++ {
			ql := (*[64]byte)(a[64*h:])
			qh := (*[32]byte)(a[128+32*h:])
			sc := (*[8]byte)(a[192+8*h:])
			y := (*[128]byte)(q8[128*h:])
			for is := 0; is < 2; is++ { // values 16is..16is+15 of each quarter
				s0, s2 := int32(int8(sc[is])), int32(int8(sc[is+2]))
				s4, s6 := int32(int8(sc[is+4])), int32(int8(sc[is+6]))
				for k := 16 * is; k < 16*is+8; k++ {
					var p1, p2, p3, p4 int32
					for _, l := range [2]int{k, k + 8} {
						hb := qh[l]
						p1 += (int32(ql[l]&15|(hb&3)<<4) - 32) * int32(int8(y[l]))
						p2 += (int32(ql[l+32]&15|(hb>>2&3)<<4) - 32) * int32(int8(y[l+32]))
						p3 += (int32(ql[l]>>4|(hb>>4&3)<<4) - 32) * int32(int8(y[l+64]))
						p4 += (int32(ql[l+32]>>4|(hb>>6)<<4) - 32) * int32(int8(y[l+96]))
					}
					aux[k&7] += s0*p1 + s2*p2 + s4*p3 + s6*p4
				}
			}
		}
		laneSums(&sums, &aux, getF16(a[208:])*dy)
	}
	return addLanes(0, &sums)
}
