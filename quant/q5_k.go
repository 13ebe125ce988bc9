package quant

// Q5_K: as Q4_K with 5-bit quants: the fifth bits live in qh.
// Layout (176 bytes): d f16 | dmin f16 | scales [12]byte | qh [32]byte | qs [128]byte. Value
// 64c+l has its low 4 bits in the low nibble of qs[32c+l] and its fifth bit in bit 2c of qh[l];
// value 64c+32+l the high nibble and bit 2c+1.

func init() {
	register(&Format{Type: Q5_K, Dequantize: dequantQ5_K, Quantize: quantQ5_K, QuantizeSearch: searchQ5_K,
		DotF32: dotQ5_K, VecDotType: Q8_K, VecDot: vecDotQ5_K})
}

const sizeQ5_K = 176

// quantQ5_K is quantize_row_q5_K_ref (what quantize_q5_K does without an importance matrix).
func quantQ5_K(dst []byte, src []float32) error {
	if err := checkFinite(src); err != nil {
		return err
	}
	for i := 0; i < len(src)/QK_K; i++ {
		quantBlockKx((*[sizeQ5_K]byte)(dst[i*sizeQ5_K:])[:], (*[QK_K]float32)(src[i*QK_K:]), 31)
	}
	return nil
}

func dequantQ5_K(dst []float32, src []byte) {
	for i := 0; i < len(dst)/QK_K; i++ {
		b := (*[sizeQ5_K]byte)(src[i*sizeQ5_K:])
		y := (*[QK_K]float32)(dst[i*QK_K:])
		d, dmin := getF16(b[0:]), getF16(b[2:])
		sc, mn := kScales(b[4:16])
		qh := (*[32]byte)(b[16:])
		for c := 0; c < 4; c++ {
			d1, m1 := d*float32(sc[2*c]), dmin*float32(mn[2*c])
			d2, m2 := d*float32(sc[2*c+1]), dmin*float32(mn[2*c+1])
			q := (*[32]byte)(b[48+32*c:])
			ya := (*[32]float32)(y[64*c:])
			yb := (*[32]float32)(y[64*c+32:])
			s := uint(2 * c)
			for l, v := range q {
				h := qh[l] >> s
				ya[l] = float32(d1*float32(v&15|(h&1)<<4)) - m1
				yb[l] = float32(d2*float32(v>>4|(h&2)<<3)) - m2
			}
		}
	}
}

func dotQ5_K(w []byte, x []float32) float32 {
	var acc float32
	for i := 0; i < len(x)/QK_K; i++ {
		b := (*[sizeQ5_K]byte)(w[i*sizeQ5_K:])
		sc, mn := kScales(b[4:16])
		qh := (*[32]byte)(b[16:])
		var sumq, summ float32
		for c := 0; c < 4; c++ {
			q := (*[32]byte)(b[48+32*c:])
			xa := (*[32]float32)(x[i*QK_K+64*c:])
			xb := (*[32]float32)(x[i*QK_K+64*c+32:])
			s := uint(2 * c)
			var a0, a1, b0, b1, ta, tb float32
			for l := 0; l < 32; l += 2 {
				v0, v1 := q[l], q[l+1]
				h0, h1 := qh[l]>>s, qh[l+1]>>s
				a0 += float32(v0&15|(h0&1)<<4) * xa[l]
				a1 += float32(v1&15|(h1&1)<<4) * xa[l+1]
				b0 += float32(v0>>4|(h0&2)<<3) * xb[l]
				b1 += float32(v1>>4|(h1&2)<<3) * xb[l+1]
				ta += xa[l] + xa[l+1]
				tb += xb[l] + xb[l+1]
			}
			sumq += float32(sc[2*c])*(a0+a1) + float32(sc[2*c+1])*(b0+b1)
			summ += float32(mn[2*c])*ta + float32(mn[2*c+1])*tb
		}
		acc += getF16(b[0:])*sumq - getF16(b[2:])*summ
	}
	return acc
}

// vecDotQ5_K is ggml_vec_dot_q5_K_q8_K (its scalar version, to the bit); see laneSums.
func vecDotQ5_K(w, xq []byte) float32 {
	var sums [8]float32
	var sumf float32
	for i := range min(len(w)/sizeQ5_K, len(xq)/sizeQ8_K) {
		a := (*[sizeQ5_K]byte)(w[i*sizeQ5_K:])
		yb := (*[sizeQ8_K]byte)(xq[i*sizeQ8_K:])
		dy, q8 := q8K(yb)
		sc, mn := kScales(a[4:16])
		qh := (*[32]byte)(a[16:])
		var summ int32
		for j := 0; j < 16; j++ {
			summ += bsum(yb, j) * int32(mn[j/2])
		}
		var aux [8]int32
		for c := 0; c < 4; c++ {
			q := (*[32]byte)(a[48+32*c:])
			ya := (*[32]byte)(q8[64*c:])
			yc := (*[32]byte)(q8[64*c+32:])
			s := uint(2 * c)
			s0, s1 := int32(sc[2*c]), int32(sc[2*c+1])
			for k := 0; k < 8; k += 2 {
				var lo0, hi0, lo1, hi1 int32
				for l := k; l < 32; l += 8 {
					h0, h1 := qh[l]>>s, qh[l+1]>>s
					lo0 += int32(q[l]&15|(h0&1)<<4) * int32(int8(ya[l]))
					hi0 += int32(q[l]>>4|(h0&2)<<3) * int32(int8(yc[l]))
					lo1 += int32(q[l+1]&15|(h1&1)<<4) * int32(int8(ya[l+1]))
					hi1 += int32(q[l+1]>>4|(h1&2)<<3) * int32(int8(yc[l+1]))
				}
				aux[k] += s0*lo0 + s1*hi0
				aux[k+1] += s0*lo1 + s1*hi1
			}
		}
		laneSums(&sums, &aux, getF16(a[0:])*dy)
		sumf -= float32(getF16(a[2:])*dy) * float32(summ)
	}
	return addLanes(sumf, &sums)
}
