package quant

// Q2_K: super-blocks of 256 values in 16 sub-blocks of 16, each with a 4-bit scale and a 4-bit
// min; the super-block has half scales d and dmin; x = d*sc*q - dmin*m with 2-bit q.
// Layout (84 bytes): scales [16]byte (scale low nibble, min high nibble) | qs [64]byte | d f16 |
// dmin f16. Value 128c+32j+l (j = 0..3, l = 0..31) is bits 2j of qs[32c+l]; sub-block
// (128c+32j+l)/16 = 8c+2j+l/16.

func init() {
	register(&Format{Type: Q2_K, Dequantize: dequantQ2_K, Quantize: quantQ2_K, QuantizeSearch: searchQ2_K, DotF32: dotQ2_K,
		VecDotType: Q8_K, VecDot: vecDotQ2_K})
}

const sizeQ2_K = 84

// quantQ2_K is quantize_row_q2_K_ref (what quantize_q2_K does without an importance matrix).
func quantQ2_K(dst []byte, src []float32) error {
	if err := checkFinite(src); err != nil {
		return err
	}
	for i := 0; i < len(src)/QK_K; i++ {
		quantBlockQ2_K((*[sizeQ2_K]byte)(dst[i*sizeQ2_K:]), (*[QK_K]float32)(src[i*QK_K:]))
	}
	return nil
}

func quantBlockQ2_K(b *[sizeQ2_K]byte, x *[QK_K]float32) {
	const q4scale = 15
	var (
		L                [QK_K]uint8
		laux             [16]uint8
		weights          [16]float32
		scales, mins     [16]float32
		maxScale, maxMin float32
	)
	for j := 0; j < 16; j++ {
		xs := x[16*j : 16*j+16]
		for l, v := range xs {
			weights[l] = abs32(v)
		}
		scales[j], mins[j] = makeQKX2Quants(3, xs, weights[:], L[16*j:], laux[:], -0.5, 0.1, 15, true)
		if scales[j] > maxScale {
			maxScale = scales[j]
		}
		if mins[j] > maxMin {
			maxMin = mins[j]
		}
	}
	sc := (*[16]byte)(b[0:])
	if maxScale > 0 {
		iscale := q4scale / maxScale
		for j := range sc {
			sc[j] = uint8(nearestInt(iscale * scales[j]))
		}
		putF16(b[80:], maxScale/q4scale)
	} else {
		clear(sc[:])
		putF16(b[80:], 0)
	}
	if maxMin > 0 {
		iscale := q4scale / maxMin
		for j := range sc {
			sc[j] |= uint8(nearestInt(iscale*mins[j]) << 4)
		}
		putF16(b[82:], maxMin/q4scale)
	} else {
		putF16(b[82:], 0)
	}
	d16, m16 := getF16(b[80:]), getF16(b[82:])
	for j := 0; j < 16; j++ {
		d := d16 * float32(sc[j]&0xF)
		if d == 0 {
			continue
		}
		dm := m16 * float32(sc[j]>>4)
		for ii, v := range x[16*j : 16*j+16] {
			l := nearestInt((v + dm) / d)
			L[16*j+ii] = uint8(max32(0, min(3, l)))
		}
	}
	for c := 0; c < 2; c++ {
		for l := 0; l < 32; l++ {
			k := 128*c + l
			b[16+32*c+l] = L[k] | L[k+32]<<2 | L[k+64]<<4 | L[k+96]<<6
		}
	}
}

// q2f maps a 2-bit quant to float32.
var q2f = [4]float32{0, 1, 2, 3}

func dequantQ2_K(dst []float32, src []byte) {
	for i := 0; i < len(dst)/QK_K; i++ {
		b := (*[sizeQ2_K]byte)(src[i*sizeQ2_K:])
		d, dmin := getF16(b[80:]), getF16(b[82:])
		for c := 0; c < 2; c++ {
			q := (*[32]byte)(b[16+32*c:])
			for j := 0; j < 4; j++ {
				s := uint(2 * j)
				y := (*[32]float32)(dst[i*QK_K+128*c+32*j:])
				sc := b[8*c+2*j]
				dl, ml := d*float32(sc&0xF), dmin*float32(sc>>4)
				for l := 0; l < 16; l++ {
					y[l] = float32(dl*q2f[q[l]>>s&3]) - ml
				}
				sc = b[8*c+2*j+1]
				dl, ml = d*float32(sc&0xF), dmin*float32(sc>>4)
				for l := 16; l < 32; l++ {
					y[l] = float32(dl*q2f[q[l]>>s&3]) - ml
				}
			}
		}
	}
}

func dotQ2_K(w []byte, x []float32) float32 {
	var acc float32
	for i := 0; i < len(x)/QK_K; i++ {
		b := (*[sizeQ2_K]byte)(w[i*sizeQ2_K:])
		var sumq, summ float32
		for c := 0; c < 2; c++ {
			q := (*[32]byte)(b[16+32*c:])
			for j := 0; j < 4; j++ {
				s := uint(2 * j)
				y := (*[32]float32)(x[i*QK_K+128*c+32*j:])
				var a0, a1, b0, b1, ta, tb float32
				for l := 0; l < 16; l += 2 {
					a0 += q2f[q[l]>>s&3] * y[l]
					a1 += q2f[q[l+1]>>s&3] * y[l+1]
					b0 += q2f[q[l+16]>>s&3] * y[l+16]
					b1 += q2f[q[l+17]>>s&3] * y[l+17]
					ta += y[l] + y[l+1]
					tb += y[l+16] + y[l+17]
				}
				sa, sb := b[8*c+2*j], b[8*c+2*j+1]
				sumq += float32(sa&0xF)*(a0+a1) + float32(sb&0xF)*(b0+b1)
				summ += float32(sa>>4)*ta + float32(sb>>4)*tb
			}
		}
		acc += getF16(b[80:])*sumq - getF16(b[82:])*summ
	}
	return acc
}

// vecDotQ2_K is ggml_vec_dot_q2_K_q8_K.
func vecDotQ2_K(w, xq []byte) float32 {
	var sumf float32
	for i := range min(len(w)/sizeQ2_K, len(xq)/sizeQ8_K) {
		a := (*[sizeQ2_K]byte)(w[i*sizeQ2_K:])
		yb := (*[sizeQ8_K]byte)(xq[i*sizeQ8_K:])
		dy, q8 := q8K(yb)
		var summs int32
		for j := 0; j < 16; j++ {
			summs += bsum(yb, j) * int32(a[j]>>4)
		}
		var isum int32
		for c := 0; c < 2; c++ {
			q := (*[32]byte)(a[16+32*c:])
			for j := 0; j < 4; j++ {
				s := uint(2 * j)
				y := (*[32]byte)(q8[128*c+32*j:])
				var s0, s1 int32
				for l := 0; l < 16; l++ {
					s0 += int32(int8(y[l])) * int32(q[l]>>s&3)
					s1 += int32(int8(y[l+16])) * int32(q[l+16]>>s&3)
				}
				isum += int32(a[8*c+2*j]&0xF)*s0 + int32(a[8*c+2*j+1]&0xF)*s1
			}
		}
		dall := dy * getF16(a[80:])
		dmin := dy * getF16(a[82:])
		sumf += float32(dall*float32(isum)) - float32(dmin*float32(summs))
	}
	return sumf
}
