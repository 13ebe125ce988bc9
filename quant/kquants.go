package quant

// Helpers shared by the K-quant reference quantizers (ggml's make_qx_quants, make_q3_quants,
// make_qkx2_quants and get_scale_min_k4). They reproduce ggml's float32 arithmetic operation by
// operation: every product that ggml adds to something is rounded to float32 first (the
// explicit conversions), so no fused multiply-add can change a result.

// groupMaxEps is ggml's GROUP_MAX_EPS: a group whose largest magnitude is below it is all zero.
const groupMaxEps = 1e-15

// makeQXQuants is make_qx_quants with rmse_type 1 and no importance weights (the only way the
// reference quantizers call it): it picks the scale of a symmetric nmax-level grid that
// minimises the x²-weighted squared error over 19 candidate scales. L receives q+nmax in
// 0..2*nmax-1; the result is the scale (0 for an all-zero group).
func makeQXQuants(nmax int32, x []float32, L []int8) float32 {
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
	for is := int32(-9); is <= 9; is++ {
		if is == 0 {
			continue
		}
		iscale = -(float32(nmax) + float32(0.1*float32(is))) / max
		sumlx, suml2 = 0, 0
		for _, v := range x {
			l := nearestInt(iscale * v)
			l = max32(-nmax, min(nmax-1, l))
			w := v * v
			fl := float32(l)
			sumlx += float32(float32(w*v) * fl)
			suml2 += float32(float32(w*fl) * fl)
		}
		if suml2 > 0 && float32(sumlx*sumlx) > float32(best*suml2) {
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

// makeQ3Quants is make_q3_quants with do_rmse set (as quantize_row_q3_K_ref calls it): a
// symmetric grid refined by coordinate descent on the x²-weighted error. L receives q+nmax.
func makeQ3Quants(nmax int32, x []float32, L []int8) float32 {
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
		L[i] = int8(l)
		w := v * v
		fl := float32(l)
		sumlx += float32(float32(w*v) * fl)
		suml2 += float32(float32(w*fl) * fl)
	}
	for itry := 0; itry < 5; itry++ {
		changed := 0
		for i, v := range x {
			w := v * v
			li := float32(L[i])
			slx := sumlx - float32(float32(w*v)*li)
			if slx > 0 {
				sl2 := suml2 - float32(float32(w*li)*li)
				newl := nearestInt(float32(v*sl2) / slx)
				newl = max32(-nmax, min(nmax-1, newl))
				if newl != int32(L[i]) {
					fn := float32(newl)
					slx += float32(float32(w*v) * fn)
					sl2 += float32(float32(w*fn) * fn)
					if sl2 > 0 && float32(float32(slx*slx)*suml2) > float32(float32(sumlx*sumlx)*sl2) {
						L[i] = int8(newl)
						sumlx = slx
						suml2 = sl2
						changed++
					}
				}
			}
		}
		if changed == 0 {
			break
		}
	}
	for i := range L {
		L[i] += int8(nmax)
	}
	return sumlx / suml2
}

// makeQKX2Quants is make_qkx2_quants: an asymmetric grid x ≈ scale*L - min with L in 0..nmax,
// searching nstep+1 candidate scales and refitting scale and min by weighted least squares.
// It returns the scale and the (non-negative) min; L receives the quants, Laux is scratch.
func makeQKX2Quants(nmax int32, x, weights []float32, L, Laux []uint8, rmin, rdelta float32, nstep int32, useMad bool) (float32, float32) {
	n := len(x)
	weights = weights[:n]
	L = L[:n]
	Laux = Laux[:n]
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
		if useMad {
			diff = abs32(diff)
		} else {
			diff = diff * diff
		}
		bestMad += float32(weights[i] * diff)
	}
	if nstep < 1 {
		return scale, -lo
	}
	for is := int32(0); is <= nstep; is++ {
		iscale = (rmin + float32(rdelta*float32(is)) + fmax) / (hi - lo)
		var sumL, sumL2, sumXL float32
		for i, v := range x {
			l := nearestInt(iscale * (v - lo))
			l = max32(0, min(nmax, l))
			Laux[i] = uint8(l)
			w := weights[i]
			wl := w * float32(l)
			sumL += wl
			sumL2 += float32(wl * float32(l))
			sumXL += float32(wl * v)
		}
		D := float32(sumW*sumL2) - float32(sumL*sumL)
		if D > 0 {
			thisScale := (float32(sumW*sumXL) - float32(sumX*sumL)) / D
			thisMin := (float32(sumL2*sumX) - float32(sumL*sumXL)) / D
			if thisMin > 0 {
				thisMin = 0
				thisScale = sumXL / sumL2
			}
			var mad float32
			for i, v := range x {
				diff := float32(thisScale*float32(Laux[i])) + thisMin - v
				if useMad {
					diff = abs32(diff)
				} else {
					diff = diff * diff
				}
				mad += float32(weights[i] * diff)
			}
			if mad < bestMad {
				copy(L, Laux)
				bestMad = mad
				scale = thisScale
				lo = thisMin
			}
		}
	}
	return scale, -lo
}

func max32(a, b int32) int32 {
	if a > b {
		return a
	}
	return b
}

// getScaleMinK4 unpacks the 6-bit scale and min of sub-block j from the 12 packed bytes of a
// Q4_K or Q5_K block (ggml's get_scale_min_k4).
func getScaleMinK4(j int, q []byte) (d, m uint8) {
	if j < 4 {
		return q[j] & 63, q[j+4] & 63
	}
	return q[j+4]&0xF | (q[j-4]>>6)<<4, q[j+4]>>4 | (q[j]>>6)<<4
}

// putScaleMinK4 packs the 6-bit scales and mins of the 8 sub-blocks into 12 bytes, the inverse
// of getScaleMinK4.
func putScaleMinK4(q []byte, ls, lm *[8]uint8) {
	q = q[:12]
	for j := 0; j < 8; j++ {
		if j < 4 {
			q[j] = ls[j]
			q[j+4] = lm[j]
		} else {
			q[j+4] = ls[j]&0xF | (lm[j]&0xF)<<4
			q[j-4] |= (ls[j] >> 4) << 6
			q[j] |= (lm[j] >> 4) << 6
		}
	}
}

// kScales unpacks all 8 scales and mins of a Q4_K/Q5_K block.
func kScales(q []byte) (sc, mn [8]uint8) {
	for j := 0; j < 8; j++ {
		sc[j], mn[j] = getScaleMinK4(j, q)
	}
	return
}

// laneSums and addLanes give the K-quant integer dots ggml's scalar float arithmetic: a block's
// integer products are summed into 8 lanes (element index mod 8), each lane is scaled by the
// block's d into its own float32 running sum, and the lanes are added in order at the end,
// after the min terms. The integer sums are exact in any order; only the float steps matter.
func laneSums(sums *[8]float32, aux *[8]int32, d float32) {
	for l, v := range aux {
		sums[l] += float32(d * float32(v))
	}
}

func addLanes(sumf float32, sums *[8]float32) float32 {
	for _, v := range sums {
		sumf += v
	}
	return sumf
}
