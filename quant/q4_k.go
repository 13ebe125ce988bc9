package quant

// Q4_K: super-blocks of 256 values in 8 sub-blocks of 32. Each sub-block has a 6-bit scale sc
// and a 6-bit min m; the super-block has half scales d and dmin for them; x = d*sc*q - dmin*m
// with 4-bit q.
// Layout (144 bytes): d f16 | dmin f16 | scales [12]byte (packed, see getScaleMinK4) |
// qs [128]byte: values 64c+l (low nibble) and 64c+32+l (high nibble) in qs[32c+l].

func init() {
	register(&Format{Type: Q4_K, Dequantize: dequantQ4_K, Quantize: quantQ4_K, QuantizeSearch: searchQ4_K,
		DotF32: dotQ4_K, VecDotType: Q8_K, VecDot: vecDotQ4_K})
}

const sizeQ4_K = 144

// quantQ4_K is quantize_row_q4_K_ref (what quantize_q4_K does without an importance matrix).
func quantQ4_K(dst []byte, src []float32) error {
	if err := checkFinite(src); err != nil {
		return err
	}
	for i := 0; i < len(src)/QK_K; i++ {
		quantBlockKx((*[sizeQ4_K]byte)(dst[i*sizeQ4_K:])[:], (*[QK_K]float32)(src[i*QK_K:]), 15)
	}
	return nil
}

// quantBlockKx quantizes one Q4_K (nmax 15) or Q5_K (nmax 31) super-block: the two reference
// quantizers differ only in the search parameters and in how the quants are stored.
func quantBlockKx(b []byte, x *[QK_K]float32, nmax int32) {
	var (
		L              [QK_K]uint8
		laux           [32]uint8
		weights        [32]float32
		scales, mins   [8]float32
		maxScale, maxM float32
	)
	rmin, nstep := float32(-1), int32(20)
	if nmax == 31 {
		rmin, nstep = -0.5, 15
	}
	for j := 0; j < 8; j++ {
		xs := x[32*j : 32*j+32]
		var sumX2 float32
		for _, v := range xs {
			sumX2 += float32(v * v)
		}
		avX := sqrt32(sumX2 / 32)
		for l, v := range xs {
			weights[l] = avX + abs32(v)
		}
		scales[j], mins[j] = makeQKX2Quants(nmax, xs, weights[:], L[32*j:], laux[:], rmin, 0.1, nstep, false)
		if scales[j] > maxScale {
			maxScale = scales[j]
		}
		if mins[j] > maxM {
			maxM = mins[j]
		}
	}
	var invScale, invMin float32
	if maxScale > 0 {
		invScale = 63 / maxScale
	}
	if maxM > 0 {
		invMin = 63 / maxM
	}
	var ls, lm [8]uint8
	for j := 0; j < 8; j++ {
		ls[j] = min(63, uint8(nearestInt(invScale*scales[j])))
		lm[j] = min(63, uint8(nearestInt(invMin*mins[j])))
	}
	sb := b[4:16]
	clear(sb)
	putScaleMinK4(sb, &ls, &lm)
	putF16(b[0:], maxScale/63)
	putF16(b[2:], maxM/63)
	d, dmin := getF16(b[0:]), getF16(b[2:])
	for j := 0; j < 8; j++ {
		sc, m := getScaleMinK4(j, sb)
		dd := d * float32(sc)
		if dd == 0 {
			continue
		}
		dm := dmin * float32(m)
		for ii, v := range x[32*j : 32*j+32] {
			l := nearestInt((v + dm) / dd)
			L[32*j+ii] = uint8(max32(0, min(nmax, l)))
		}
	}
	if nmax == 15 {
		q := b[16:144]
		for c := 0; c < 4; c++ {
			for l := 0; l < 32; l++ {
				q[32*c+l] = L[64*c+l] | L[64*c+l+32]<<4
			}
		}
		return
	}
	qh := b[16:48]
	ql := b[48:176]
	clear(qh)
	m1, m2 := uint8(1), uint8(2)
	for c := 0; c < 4; c++ {
		for j := 0; j < 32; j++ {
			l1 := L[64*c+j]
			if l1 > 15 {
				l1 -= 16
				qh[j] |= m1
			}
			l2 := L[64*c+j+32]
			if l2 > 15 {
				l2 -= 16
				qh[j] |= m2
			}
			ql[32*c+j] = l1 | l2<<4
		}
		m1 <<= 2
		m2 <<= 2
	}
}

func dequantQ4_K(dst []float32, src []byte) {
	for i := 0; i < len(dst)/QK_K; i++ {
		b := (*[sizeQ4_K]byte)(src[i*sizeQ4_K:])
		y := (*[QK_K]float32)(dst[i*QK_K:])
		d, dmin := getF16(b[0:]), getF16(b[2:])
		sc, mn := kScales(b[4:16])
		for c := 0; c < 4; c++ {
			d1, m1 := d*float32(sc[2*c]), dmin*float32(mn[2*c])
			d2, m2 := d*float32(sc[2*c+1]), dmin*float32(mn[2*c+1])
			q := (*[32]byte)(b[16+32*c:])
			ya := (*[32]float32)(y[64*c:])
			yb := (*[32]float32)(y[64*c+32:])
			for l, v := range q {
				ya[l] = float32(d1*nib1[v&15]) - m1
				yb[l] = float32(d2*nib1[v>>4]) - m2
			}
		}
	}
}

func dotQ4_K(w []byte, x []float32) float32 {
	var acc float32
	for i := 0; i < len(x)/QK_K; i++ {
		b := (*[sizeQ4_K]byte)(w[i*sizeQ4_K:])
		sc, mn := kScales(b[4:16])
		var sumq, summ float32
		for c := 0; c < 4; c++ {
			q := (*[32]byte)(b[16+32*c:])
			xa := (*[32]float32)(x[i*QK_K+64*c:])
			xb := (*[32]float32)(x[i*QK_K+64*c+32:])
			var a0, a1, b0, b1, ta, tb float32
			for l := 0; l < 32; l += 2 {
				v0, v1 := q[l], q[l+1]
				a0 += nib1[v0&15] * xa[l]
				a1 += nib1[v1&15] * xa[l+1]
				b0 += nib1[v0>>4] * xb[l]
				b1 += nib1[v1>>4] * xb[l+1]
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

// vecDotQ4_K is ggml_vec_dot_q4_K_q8_K (its scalar version, to the bit): integer sums per
// sub-block, the mins applied through the activation block sums; see laneSums.
func vecDotQ4_K(w, xq []byte) float32 {
	var sums [8]float32
	var sumf float32
	for i := range min(len(w)/sizeQ4_K, len(xq)/sizeQ8_K) {
		a := (*[sizeQ4_K]byte)(w[i*sizeQ4_K:])
		yb := (*[sizeQ8_K]byte)(xq[i*sizeQ8_K:])
		dy, q8 := q8K(yb)
		sc, mn := kScales(a[4:16])
		var summ int32
		for j := 0; j < 16; j++ {
			summ += bsum(yb, j) * int32(mn[j/2])
		}
		var aux [8]int32
		for c := 0; c < 4; c++ {
			q := (*[32]byte)(a[16+32*c:])
			ya := (*[32]byte)(q8[64*c:])
			yc := (*[32]byte)(q8[64*c+32:])
			s0, s1 := int32(sc[2*c]), int32(sc[2*c+1])
			for k := 0; k < 8; k += 2 {
				var lo0, hi0, lo1, hi1 int32
				for l := k; l < 32; l += 8 {
					lo0 += int32(q[l]&15) * int32(int8(ya[l]))
					hi0 += int32(q[l]>>4) * int32(int8(yc[l]))
					lo1 += int32(q[l+1]&15) * int32(int8(ya[l+1]))
					hi1 += int32(q[l+1]>>4) * int32(int8(yc[l+1]))
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
