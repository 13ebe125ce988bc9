package quant

// Q3_K: super-blocks of 256 values in 16 sub-blocks of 16, each with a 6-bit signed scale
// (stored +32); the super-block has a half scale d; x = d*(sc-32)*(q-4) with 3-bit q.
// Layout (110 bytes): hmask [32]byte | qs [64]byte | scales [12]byte | d f16. Value
// 128c+32j+l (j = 0..3, l = 0..31) has its low 2 bits in bits 2j of qs[32c+l] and its high bit
// (set means q >= 4) in bit 4c+j of hmask[l]. Scale k has its low 4 bits in scales[k] (k < 8,
// low nibble) or scales[k-8] (high nibble), its top 2 bits in bits 2(k/4) of scales[8+k%4].

func init() {
	register(&Format{Type: Q3_K, Dequantize: dequantQ3_K, Quantize: quantQ3_K, QuantizeSearch: searchQ3_K, DotF32: dotQ3_K,
		VecDotType: Q8_K, VecDot: vecDotQ3_K})
}

const sizeQ3_K = 110

// quantQ3_K is quantize_row_q3_K_ref (what quantize_q3_K does without an importance matrix).
func quantQ3_K(dst []byte, src []float32) error {
	if err := checkFinite(src); err != nil {
		return err
	}
	for i := 0; i < len(src)/QK_K; i++ {
		quantBlockQ3_K((*[sizeQ3_K]byte)(dst[i*sizeQ3_K:]), (*[QK_K]float32)(src[i*QK_K:]))
	}
	return nil
}

func quantBlockQ3_K(b *[sizeQ3_K]byte, x *[QK_K]float32) {
	var (
		L              [QK_K]int8
		scales         [16]float32
		maxScale, amax float32
	)
	for j := 0; j < 16; j++ {
		scales[j] = makeQ3Quants(4, x[16*j:16*j+16], L[16*j:])
		if s := abs32(scales[j]); s > amax {
			amax = s
			maxScale = scales[j]
		}
	}
	sb := (*[12]byte)(b[96:])
	clear(sb[:])
	if maxScale != 0 {
		iscale := -32 / maxScale
		for j := 0; j < 16; j++ {
			l := int8(nearestInt(iscale * scales[j]))
			l = max(-32, min(31, l)) + 32
			if j < 8 {
				sb[j] = uint8(l) & 0xF
			} else {
				sb[j-8] |= (uint8(l) & 0xF) << 4
			}
			l >>= 4
			sb[j%4+8] |= uint8(l) << (2 * (j / 4))
		}
		putF16(b[108:], 1/iscale)
	} else {
		putF16(b[108:], 0)
	}
	sc := q3Scales(sb)
	d16 := getF16(b[108:])
	for j := 0; j < 16; j++ {
		d := d16 * float32(sc[j])
		if d == 0 {
			continue
		}
		for ii, v := range x[16*j : 16*j+16] {
			l := nearestInt(v / d)
			L[16*j+ii] = int8(max32(-4, min(3, l)) + 4)
		}
	}
	hm := (*[32]byte)(b[0:])
	clear(hm[:])
	for j := 0; j < QK_K; j++ {
		if L[j] > 3 {
			hm[j%32] |= 1 << (j / 32)
			L[j] -= 4
		}
	}
	for c := 0; c < 2; c++ {
		for l := 0; l < 32; l++ {
			k := 128*c + l
			b[32+32*c+l] = uint8(L[k]) | uint8(L[k+32])<<2 | uint8(L[k+64])<<4 | uint8(L[k+96])<<6
		}
	}
}

// q3Scales unpacks the 16 signed 6-bit scales of a Q3_K block (already minus 32).
func q3Scales(s *[12]byte) (sc [16]int8) {
	for j := 0; j < 16; j++ {
		var lo uint8
		if j < 8 {
			lo = s[j] & 0xF
		} else {
			lo = s[j-8] >> 4
		}
		hi := (s[8+j%4] >> (2 * (j / 4))) & 3
		sc[j] = int8(lo|hi<<4) - 32
	}
	return
}

// q3f maps a 3-bit quant (2 low bits plus the hmask bit as 4) to q-4 as float32.
var q3f = [8]float32{-4, -3, -2, -1, 0, 1, 2, 3}

func dequantQ3_K(dst []float32, src []byte) {
	for i := 0; i < len(dst)/QK_K; i++ {
		b := (*[sizeQ3_K]byte)(src[i*sizeQ3_K:])
		dAll := getF16(b[108:])
		sc := q3Scales((*[12]byte)(b[96:]))
		hm := (*[32]byte)(b[0:])
		for c := 0; c < 2; c++ {
			q := (*[32]byte)(b[32+32*c:])
			for j := 0; j < 4; j++ {
				s := uint(2 * j)
				hs := uint(4*c + j)
				y := (*[32]float32)(dst[i*QK_K+128*c+32*j:])
				dl := dAll * float32(sc[8*c+2*j])
				for l := 0; l < 16; l++ {
					y[l] = dl * q3f[q[l]>>s&3|(hm[l]>>hs&1)<<2]
				}
				dl = dAll * float32(sc[8*c+2*j+1])
				for l := 16; l < 32; l++ {
					y[l] = dl * q3f[q[l]>>s&3|(hm[l]>>hs&1)<<2]
				}
			}
		}
	}
}

func dotQ3_K(w []byte, x []float32) float32 {
	var acc float32
	for i := 0; i < len(x)/QK_K; i++ {
		b := (*[sizeQ3_K]byte)(w[i*sizeQ3_K:])
		sc := q3Scales((*[12]byte)(b[96:]))
		hm := (*[32]byte)(b[0:])
		var sum float32
		for c := 0; c < 2; c++ {
			q := (*[32]byte)(b[32+32*c:])
			for j := 0; j < 4; j++ {
				s := uint(2 * j)
				hs := uint(4*c + j)
				y := (*[32]float32)(x[i*QK_K+128*c+32*j:])
				var a0, a1, b0, b1 float32
				for l := 0; l < 16; l += 2 {
					a0 += q3f[q[l]>>s&3|(hm[l]>>hs&1)<<2] * y[l]
					a1 += q3f[q[l+1]>>s&3|(hm[l+1]>>hs&1)<<2] * y[l+1]
					b0 += q3f[q[l+16]>>s&3|(hm[l+16]>>hs&1)<<2] * y[l+16]
					b1 += q3f[q[l+17]>>s&3|(hm[l+17]>>hs&1)<<2] * y[l+17]
				}
				sum += float32(sc[8*c+2*j])*(a0+a1) + float32(sc[8*c+2*j+1])*(b0+b1)
			}
		}
		acc += getF16(b[108:]) * sum
	}
	return acc
}

// vecDotQ3_K is ggml_vec_dot_q3_K_q8_K (its scalar version, to the bit); see laneSums.
func vecDotQ3_K(w, xq []byte) float32 {
	var sums [8]float32
	for i := range min(len(w)/sizeQ3_K, len(xq)/sizeQ8_K) {
		a := (*[sizeQ3_K]byte)(w[i*sizeQ3_K:])
		yb := (*[sizeQ8_K]byte)(xq[i*sizeQ8_K:])
		dy, q8 := q8K(yb)
		sc := q3Scales((*[12]byte)(a[96:]))
		hm := (*[32]byte)(a[0:])
		var aux [8]int32
		for c := 0; c < 2; c++ {
			q := (*[32]byte)(a[32+32*c:])
			for j := 0; j < 4; j++ {
				s := uint(2 * j)
				hs := uint(4*c + j)
				y := (*[32]byte)(q8[128*c+32*j:])
				s0, s1 := int32(sc[8*c+2*j]), int32(sc[8*c+2*j+1])
				for k := 0; k < 8; k++ {
					p0 := (int32(q[k]>>s&3|(hm[k]>>hs&1)<<2)-4)*int32(int8(y[k])) +
						(int32(q[k+8]>>s&3|(hm[k+8]>>hs&1)<<2)-4)*int32(int8(y[k+8]))
					p1 := (int32(q[k+16]>>s&3|(hm[k+16]>>hs&1)<<2)-4)*int32(int8(y[k+16])) +
						(int32(q[k+24]>>s&3|(hm[k+24]>>hs&1)<<2)-4)*int32(int8(y[k+24]))
					aux[k] += s0*p0 + s1*p1
				}
			}
		}
		laneSums(&sums, &aux, getF16(a[108:])*dy)
	}
	return addLanes(0, &sums)
}
