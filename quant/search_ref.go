package quant

import "math"

// The reference blocks both searches compare with (keepBest, keepBestSym), computed by exact
// copies of the reference quantizers that are faster. They perform the same float32 operations
// on the same values as the reference code (kquants.go, q6_k.go), so their bytes are the same;
// only the order in which independent candidates are evaluated differs: several candidate
// scales go through one loop over the values, with their own running sums, so that the
// processor overlaps their addition chains instead of waiting on one. TestRefCopiesEqual checks
// them against the reference functions byte for byte.

// qxCandidates is the number of candidate scales makeQXQuants tries after the first
// (is = -9..9 without 0).
const qxCandidates = 18

// refQXQuants is makeQXQuants (rmse_type 1, no weights) with the 18 candidate scales'
// sums computed three at a time; the candidates are then taken in ggml's order.
func refQXQuants(nmax int32, x []float32, L []int8) float32 {
	n := len(x)
	L = L[:n]
	var max, amax float32
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax = a
			max = v
		}
	}
	if amax < groupMaxEps {
		for i := range L {
			L[i] = 0
		}
		return 0
	}
	iscale := float32(-nmax) / max
	var sumlx, suml2 float32
	for i, v := range x {
		l := nearestInt(iscale * v)
		l = max32(-nmax, min(nmax-1, l))
		L[i] = int8(l + nmax)
		w := v * v
		fl := float32(l)
		sumlx += float32(float32(w*v) * fl)
		suml2 += float32(float32(w*fl) * fl)
	}
	var scale float32
	if suml2 != 0 {
		scale = sumlx / suml2
	}
	best := scale * sumlx
	var isc, slx, sl2 [qxCandidates]float32
	for c := range isc {
		is := int32(c) - 9
		if is >= 0 {
			is++
		}
		isc[c] = -(float32(nmax) + float32(0.1*float32(is))) / max
	}
	if useCandAsm {
		var b8 [8]float32
		var sums [16]float32
		for c := 0; c < qxCandidates; c += 8 {
			for i := range b8 {
				b8[i] = isc[min(c+i, qxCandidates-1)]
			}
			qxSums8(x, &b8, nmax, &sums)
			for i := 0; i < 8 && c+i < qxCandidates; i++ {
				slx[c+i], sl2[c+i] = sums[i], sums[8+i]
			}
		}
	}
	for c := 0; c < qxCandidates && !useCandAsm; c += 3 {
		a0, a1, a2 := isc[c], isc[c+1], isc[c+2]
		var x0, x1, x2, q0, q1, q2 float32
		for _, v := range x {
			w := v * v
			wv := float32(w * v)
			l0 := float32(max32(-nmax, min(nmax-1, nearestInt(a0*v))))
			l1 := float32(max32(-nmax, min(nmax-1, nearestInt(a1*v))))
			l2 := float32(max32(-nmax, min(nmax-1, nearestInt(a2*v))))
			x0 += float32(wv * l0)
			x1 += float32(wv * l1)
			x2 += float32(wv * l2)
			q0 += float32(float32(w*l0) * l0)
			q1 += float32(float32(w*l1) * l1)
			q2 += float32(float32(w*l2) * l2)
		}
		slx[c], slx[c+1], slx[c+2] = x0, x1, x2
		sl2[c], sl2[c+1], sl2[c+2] = q0, q1, q2
	}
	for c := range isc {
		sumlx, suml2 = slx[c], sl2[c]
		if suml2 > 0 && float32(sumlx*sumlx) > float32(best*suml2) {
			iscale = isc[c]
			for i, v := range x {
				l := nearestInt(iscale * v)
				L[i] = int8(nmax + max32(-nmax, min(nmax-1, l)))
			}
			scale = sumlx / suml2
			best = scale * sumlx
		}
	}
	return scale
}

// refBlockQ6_K is quantBlockQ6_K with refQXQuants.
func refBlockQ6_K(b *[sizeQ6_K]byte, x *[QK_K]float32) {
	var (
		L                     [QK_K]int8
		scales                [16]float32
		maxScale, maxAbsScale float32
	)
	for ib := 0; ib < 16; ib++ {
		s := refQXQuants(32, x[16*ib:16*ib+16], L[16*ib:])
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

// refQKX2Quants is makeQKX2Quants with useMad false (as quantBlockKx calls it), the candidate
// scales taken two at a time: both candidates' sums and errors are computed in one loop each,
// then compared in ggml's order. ggml moves the min to the winner's (the next candidates round
// relative to it), so when the first of a pair wins, the second is computed again.
func refQKX2Quants(nmax int32, x, weights []float32, L []uint8, rmin, rdelta float32, nstep int32) (float32, float32) {
	n := len(x)
	weights = weights[:n]
	L = L[:n]
	lo, hi := x[0], x[0]
	sumW := weights[0]
	sumX := sumW * x[0]
	for i := 1; i < n; i++ {
		v := x[i]
		if v < lo {
			lo = v
		}
		if v > hi {
			hi = v
		}
		w := weights[i]
		sumW += w
		sumX += float32(w * v)
	}
	if lo > 0 {
		lo = 0
	}
	if hi == lo {
		for i := range L {
			L[i] = 0
		}
		return 0, -lo
	}
	fmax := float32(nmax)
	iscale := fmax / (hi - lo)
	scale := 1 / iscale
	var bestMad float32
	for i, v := range x {
		l := nearestInt(iscale * (v - lo))
		L[i] = uint8(max32(0, min(nmax, l)))
		diff := float32(scale*float32(L[i])) + lo - v
		diff = diff * diff
		bestMad += float32(weights[i] * diff)
	}
	if nstep < 1 {
		return scale, -lo
	}
	if useCandAsm && n <= 32 {
		return qkx2Batches(nmax, x, weights, L, rmin, rdelta, nstep, fmax, lo, hi, sumW, sumX, scale, bestMad)
	}
	var la, lb [32]uint8
	la2, lb2 := la[:n], lb[:n]
	for is := int32(0); is <= nstep; {
		ia := (rmin + float32(rdelta*float32(is)) + fmax) / (hi - lo)
		ib := (rmin + float32(rdelta*float32(is+1)) + fmax) / (hi - lo)
		var aL, aL2, aXL, bL, bL2, bXL float32
		for i, v := range x {
			w := weights[i]
			d := v - lo
			l := max32(0, min(nmax, nearestInt(ia*d)))
			m := max32(0, min(nmax, nearestInt(ib*d)))
			la2[i], lb2[i] = uint8(l), uint8(m)
			wl, wm := w*float32(l), w*float32(m)
			aL += wl
			bL += wm
			aL2 += float32(wl * float32(l))
			bL2 += float32(wm * float32(m))
			aXL += float32(wl * v)
			bXL += float32(wm * v)
		}
		aOK, aScale, aMin := qkx2Fit(sumW, sumX, aL, aL2, aXL)
		bOK, bScale, bMin := qkx2Fit(sumW, sumX, bL, bL2, bXL)
		bOK = bOK && is < nstep
		var aMad, bMad float32
		for i, v := range x {
			w := weights[i]
			da := float32(aScale*float32(la2[i])) + aMin - v
			db := float32(bScale*float32(lb2[i])) + bMin - v
			da = da * da
			db = db * db
			aMad += float32(w * da)
			bMad += float32(w * db)
		}
		if aOK && aMad < bestMad {
			copy(L, la2)
			bestMad, scale, lo = aMad, aScale, aMin
			is++ // the second candidate rounds relative to the new min: computed again
			continue
		}
		if bOK && bMad < bestMad {
			copy(L, lb2)
			bestMad, scale, lo = bMad, bScale, bMin
		}
		is += 2
	}
	return scale, -lo
}

// qkx2Fit is makeQKX2Quants' least-squares scale and min of one candidate (ok false when its
// determinant is not positive).
func qkx2Fit(sumW, sumX, sumL, sumL2, sumXL float32) (ok bool, scale, mn float32) {
	D := float32(sumW*sumL2) - float32(sumL*sumL)
	if !(D > 0) {
		return false, 0, 0
	}
	scale = (float32(sumW*sumXL) - float32(sumX*sumL)) / D
	mn = (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
	if mn > 0 {
		mn = 0
		scale = sumXL / sumL2
	}
	return true, scale, mn
}

// refBlockKx is quantBlockKx (Q4_K nmax 15, Q5_K nmax 31) with refQKX2Quants.
func refBlockKx(b []byte, x *[QK_K]float32, nmax int32) {
	var (
		L              [QK_K]uint8
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
		scales[j], mins[j] = refQKX2Quants(nmax, xs, weights[:], L[32*j:], rmin, 0.1, nstep)
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

// qkx2Batches is the candidate loop of refQKX2Quants eight candidates at a time, with the
// assembly kernels: the sums and errors of candidates is..is+7 under the current min, then the
// first of them that beats the best (in ggml's order) is taken and the next batch starts right
// after it, relative to its min; without a winner all eight are done.
func qkx2Batches(nmax int32, x, weights []float32, L []uint8, rmin, rdelta float32, nstep int32, fmax, lo, hi, sumW, sumX, scale, bestMad float32) (float32, float32) {
	var (
		isc, sc, mn, mad [8]float32
		sums             [24]float32
		ok               [8]bool
		lt               [256]int32
	)
	for is := int32(0); is <= nstep; {
		nc := min(8, int(nstep-is+1))
		for c := 0; c < 8; c++ {
			k := is + int32(min(c, nc-1)) // unused lanes repeat the last candidate
			isc[c] = (rmin + float32(rdelta*float32(k)) + fmax) / (hi - lo)
		}
		qkx2Sums8(x, weights, lo, &isc, nmax, &sums, &lt)
		for c := 0; c < 8; c++ {
			ok[c], sc[c], mn[c] = qkx2Fit(sumW, sumX, sums[c], sums[8+c], sums[16+c])
		}
		qkx2Mad8(x, weights, &sc, &mn, &lt, &mad)
		won := -1
		for c := 0; c < nc; c++ {
			if ok[c] && mad[c] < bestMad {
				won = c
				break
			}
		}
		if won < 0 {
			is += int32(nc)
			continue
		}
		for i := range L {
			L[i] = uint8(lt[8*i+won])
		}
		bestMad, scale, lo = mad[won], sc[won], mn[won]
		is += int32(won) + 1
	}
	return scale, -lo
}

// refQ8_0 is quantBlockQ8_0 (the reference block: d = amax/127, q = roundf(x/d)) with the
// rounding of the 32 values in AVX2 where available (the same values: TestRefQ8_0Tiers).
func refQ8_0(b *[sizeQ8_0]byte, x *[32]float32) {
	if !useGridAsm {
		quantBlockQ8_0(b, x)
		return
	}
	amax := abs32(absMaxFirst32Asm(x))
	d := amax / 127
	var id float32
	if d != 0 {
		id = 1 / d
	}
	if math.IsInf(float64(id), 0) { // d subnormal: x*id overflows, which the scalar code converts its own way
		quantBlockQ8_0(b, x)
		return
	}
	putF16(b[0:], d)
	roundAway32Asm(x, id, (*[32]byte)(b[2:]))
}

// refQ4_0 is quantQ4_0's block (d = max/-8 for the value of largest magnitude,
// q = min(15, trunc(x/d + 8.5))) with the 32 values' rounding in AVX2 where available (the same
// bytes: TestRefQ4_0Tiers).
func refQ4_0(b []byte, x []float32) {
	if !useGridAsm {
		quantQ4_0(b, x)
		return
	}
	b = b[:sizeQ4_0]
	max := absMaxFirst32Asm((*[32]float32)(x))
	d := max / -8
	var id float32
	if d != 0 {
		id = 1 / d
	}
	if math.IsInf(float64(id), 0) { // as in refQ8_0
		quantQ4_0(b, x)
		return
	}
	putF16(b[0:], d)
	q4RefAsm((*[32]float32)(x), id, (*[16]byte)(b[2:]))
}
