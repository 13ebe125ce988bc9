package quant

import "math"

// The grid search's K-quant super-blocks (Q4_K, Q5_K, Q6_K): the full search's three steps
// (search_kquants.go), with the sub-block fits on grids (gridSymFit, gridAsymFit) and the code
// choices and super-scale refits computed for all sub-blocks at once: the super-block is
// transposed so that each float32 lane holds one sub-block (candT8), and one pass over the
// values evaluates one candidate code (or super-scale) for eight sub-blocks. Errors are summed
// in float32 (the full search sums them in float64).

// candT8Generic is the reference for candT8: lane k is a group of n values xT[8*j+k]
// (weights wT[8*j+k]) with its own candidate offset dm, stored scale ds, inverse id and level
// range; l = clamp(round((x + dm)*id), lo, hi), diff = x - (ds*l - dm), e += (w*diff)*diff,
// summed in j order in float32; lt[8*j+k] receives l.
func candT8Generic(xT, wT []float32, n int, p *candT, e *[8]float32, lt []float32) {
	xT = xT[:8*n]
	wT = wT[:8*n]
	lt = lt[:8*n]
	for k := 0; k < 8; k++ {
		dm, ds, id, lo, hi := p.dm[k], p.ds[k], p.id[k], p.lo[k], p.hi[k]
		var s float32
		for j := 0; j < n; j++ {
			v := xT[8*j+k]
			y := float32(float32(v+dm) * id)
			l := float32(y+roundMagic) - roundMagic
			l = max(lo, min(hi, l))
			lt[8*j+k] = l
			diff := v - float32(float32(ds*l)-dm)
			s += float32(float32(wT[8*j+k]*diff) * diff)
		}
		e[k] = s
	}
}

// candT are eight lanes' candidate parameters for candT8.
type candT struct {
	dm, ds, id, lo, hi [8]float32
}

// set makes lane k the candidate x ≈ ds*l - dm, l in [lo, hi] (id = 1/ds; 0 for ds = 0,
// where every level is 0 and the error is that of x + dm, as for candErr8).
func (p *candT) set(k int, ds, dm float32, lo, hi int32) {
	id := float32(0)
	if ds != 0 {
		id = 1 / ds
	}
	p.ds[k], p.dm[k], p.id[k], p.lo[k], p.hi[k] = ds, dm, id, float32(lo), float32(hi)
}

func candT8(xT, wT []float32, n int, p *candT, e *[8]float32, lt []float32) {
	if useGridAsm && n > 0 {
		_ = xT[8*n-1]
		_ = wT[8*n-1]
		_ = lt[8*n-1]
		candT8Asm(&xT[0], &wT[0], uintptr(n), p, e, &lt[0])
		return
	}
	candT8Generic(xT, wT, n, p, e, lt)
}

// transposeT writes the m groups of n consecutive values of x (m <= 8) lane-wise:
// xT[8*j+k] = x[n*k+j]; lanes beyond m are left alone.
func transposeT(xT []float32, x []float32, n, m int) {
	for k := 0; k < m; k++ {
		for j, v := range x[n*k : n*k+n] {
			xT[8*j+k] = v
		}
	}
}

// gridBlockQ6_K is sweepBlockQ6_K with the grid search.
func gridBlockQ6_K(b *[sizeQ6_K]byte, x, w *[QK_K]float32) {
	var (
		s          [16]float64
		amax, smax float64
		xT, wT     [2][128]float32 // sub-blocks 0-7 and 8-15, transposed
	)
	for j := 0; j < 16; j++ {
		s[j] = gridSymFit(x[16*j:16*j+16], w[16*j:16*j+16], -32, 31, kLo6, kHi6, gridQ6.symSigns, gridQ6.symPerSign)
		if a := math.Abs(s[j]); a > amax {
			amax, smax = a, s[j]
		}
	}
	var best q6State
	best.err = math.Inf(1)
	if amax > 0 {
		for g := 0; g < 2; g++ {
			transposeT(xT[g][:], x[128*g:], 16, 8)
			transposeT(wT[g][:], w[128*g:], 16, 8)
		}
		// Both starting super-scales (the largest sub-block scale at code -128 or at 127)
		// get their codes; only the better one is refined.
		var sts [2]q6State
		for k, d0 := range [2]float64{-smax / 128, smax / 127} {
			st := &sts[k]
			st.d = F16ToF32(F32ToF16(float32(d0)))
			if math.IsInf(float64(st.d), 0) {
				st.d = float32(math.Copysign(65504, float64(st.d)))
			}
			chooseCodesQ6T(st, &xT, &wT, &s)
		}
		st := sts[0]
		if sts[1].err < st.err {
			st = sts[1]
		}
		var cand q6State
		for it := 0; it < gridQ6.kIters; it++ {
			cand = st
			if !refitQ6T(&cand, x, w, &xT, &wT) {
				break
			}
			chooseCodesQ6T(&cand, &xT, &wT, &s)
			if cand.err >= st.err {
				break
			}
			st = cand
		}
		best = st
	}
	packQ6(b, &best)
}

// chooseCodesQ6T is chooseCodesQ6 for eight sub-blocks at a time: each sub-block's scale code
// among the neighbours of its ideal one (the first smallest error in the order -1, 0, +1),
// with its levels.
func chooseCodesQ6T(st *q6State, xT, wT *[2][128]float32, s *[16]float64) {
	var (
		p      candT
		e      [8]float32
		lt     [128]float32
		c0     [8]int32
		bestE  [8]float32
		bestC  [8]int32
		anyWin [8]bool
	)
	st.err = 0
	for g := 0; g < 2; g++ {
		for k := range c0 {
			c0[k] = nearestInt(float32(s[8*g+k] / float64(st.d)))
			bestE[k], anyWin[k] = float32(math.Inf(1)), false
		}
		for dc := int32(-1); dc <= 1; dc++ {
			for k := range c0 {
				c := clampL(c0[k]+dc, -128, 127)
				p.set(k, float32(st.d*float32(c)), 0, -32, 31)
			}
			candT8(xT[g][:], wT[g][:], 16, &p, &e, lt[:])
			for k := range c0 {
				c := clampL(c0[k]+dc, -128, 127)
				if dc != 0 && c == clampL(c0[k], -128, 127) {
					continue
				}
				if e[k] < bestE[k] || !anyWin[k] {
					bestE[k], bestC[k], anyWin[k] = e[k], c, true
				}
			}
		}
		// The winners' levels: their candidates once more, all in one pass.
		for k := range bestC {
			p.set(k, float32(st.d*float32(bestC[k])), 0, -32, 31)
		}
		candT8(xT[g][:], wT[g][:], 16, &p, &e, lt[:])
		for k := 0; k < 8; k++ {
			st.sc[8*g+k] = int8(bestC[k])
			st.err += float64(e[k])
			for j := 0; j < 16; j++ {
				st.L[16*(8*g+k)+j] = int8(lt[8*j+k])
			}
		}
	}
}

// refitQ6T is refitQ6 for the grid search: the least-squares d with codes and levels fixed,
// then the float16 values around it, each evaluated over all sub-blocks with re-chosen levels.
func refitQ6T(st *q6State, x, w *[QK_K]float32, xT, wT *[2][128]float32) bool {
	// Per sub-block sums (sum w l^2, sum w x l), then weighted by the codes: independent
	// chains rather than one long one.
	var saa, sxa float64
	for j := 0; j < 16; j++ {
		var sll, sxl float64
		for i := 16 * j; i < 16*j+16; i++ {
			fw, l := float64(w[i]), float64(st.L[i])
			sll += fw * l * l
			sxl += fw * float64(x[i]) * l
		}
		c := float64(st.sc[j])
		saa += c * c * sll
		sxa += c * sxl
	}
	if saa <= 0 {
		return false
	}
	var (
		p   candT
		e   [8]float32
		lt  [128]float32
		dvs [3]float32
		tot [3]float64
	)
	nc := 0
	for _, dv := range f16Near(float32(sxa / saa)) {
		if dv != 0 {
			dvs[nc] = dv
			nc++
		}
	}
	for c := 0; c < nc; c++ {
		for g := 0; g < 2; g++ {
			for k := 0; k < 8; k++ {
				p.set(k, float32(dvs[c]*float32(st.sc[8*g+k])), 0, -32, 31)
			}
			candT8(xT[g][:], wT[g][:], 16, &p, &e, lt[:])
			for _, v := range e {
				tot[c] += float64(v)
			}
		}
	}
	win := -1
	bestErr := math.Inf(1)
	for c := 0; c < nc; c++ {
		if tot[c] < bestErr {
			bestErr, win = tot[c], c
		}
	}
	if win < 0 {
		return false
	}
	for g := 0; g < 2; g++ {
		for k := 0; k < 8; k++ {
			p.set(k, float32(dvs[win]*float32(st.sc[8*g+k])), 0, -32, 31)
		}
		candT8(xT[g][:], wT[g][:], 16, &p, &e, lt[:])
		for k := 0; k < 8; k++ {
			for j := 0; j < 16; j++ {
				st.L[16*(8*g+k)+j] = int8(lt[8*j+k])
			}
		}
	}
	st.d, st.err = dvs[win], bestErr
	return true
}

// gridBlockKx is sweepBlockKx with the grid search.
func gridBlockKx(b []byte, x, w *[QK_K]float32, nmax int32) {
	var (
		s, m   [8]float64
		L0     [QK_K]uint8
		xT, wT [256]float32
	)
	lo, hi := float32(kLo4), float32(kHi4)
	if nmax == 31 {
		lo, hi = kLo5, kHi5
	}
	var maxS, maxM float64
	for j := 0; j < 8; j++ {
		d, off := gridAsymFit(x[32*j:32*j+32], w[32*j:32*j+32], L0[32*j:32*j+32], nmax, true, lo, hi, offsetsK, gridK.asymPoints, gridK.asymIters)
		s[j], m[j] = d, -off
		maxS = max(maxS, s[j])
		maxM = max(maxM, m[j])
	}
	transposeT(xT[:], x[:], 32, 8)
	transposeT(wT[:], w[:], 32, 8)
	var st, cand kxState
	st.d = min(F16ToF32(F32ToF16(float32(maxS/63))), 65504)
	st.dmin = min(F16ToF32(F32ToF16(float32(maxM/63))), 65504)
	chooseCodesKxT(&st, x, w, &xT, &wT, &s, &m, &L0, nmax)
	for it := 0; it < gridK.kIters; it++ {
		cand = st
		if !refitKxT(&cand, x, w, &xT, &wT, nmax) {
			break
		}
		chooseCodesKxT(&cand, x, w, &xT, &wT, &s, &m, &cand.L, nmax)
		if cand.err >= st.err {
			break
		}
		st = cand
	}
	packKx(b, &st, nmax)
}

// chooseCodesKxT is chooseCodesKx for the eight sub-blocks at once (one lane each): for each
// of the scale codes next to a sub-block's ideal scale, the min code that fits its ideal
// levels Lref best and that code's neighbours; the first smallest error wins, in
// chooseCodesKx's order.
func chooseCodesKxT(st *kxState, x, w *[QK_K]float32, xT, wT *[256]float32, s, m *[8]float64, Lref *[QK_K]uint8, nmax int32) {
	var (
		sw, swl, swx [8]float64 // per sub-block: sum w, sum w*lref, sum w*x
		c0           [8]int32
		p            candT
		e, bestE     [8]float32
		bestC, bestK [8]int32
		found        [8]bool
		lt           [256]float32
	)
	for k := 0; k < 8; k++ {
		for i := 32 * k; i < 32*k+32; i++ {
			fw := float64(w[i])
			sw[k] += fw
			swl[k] += fw * float64(Lref[i])
			swx[k] += fw * float64(x[i])
		}
		if st.d > 0 {
			c0[k] = nearestInt(float32(s[k] / float64(st.d)))
		}
		bestE[k] = float32(math.Inf(1))
	}
	// The candidates: scale code c0+dc, min code k0(dc)+dk; a lane whose candidate repeats
	// an earlier one of its own (clamped codes) skips it.
	for dc := int32(-1); dc <= 1; dc++ {
		var k0 [8]int32
		var cc [8]int32
		for k := range k0 {
			cc[k] = clampL(c0[k]+dc, 0, 63)
			ds := float32(st.d * float32(cc[k]))
			if st.dmin > 0 && sw[k] > 0 {
				k0[k] = nearestInt(float32((float64(ds)*swl[k] - swx[k]) / sw[k] / float64(st.dmin)))
			} else if st.dmin > 0 {
				k0[k] = nearestInt(float32(m[k] / float64(st.dmin)))
			}
		}
		for dk := int32(-1); dk <= 1; dk++ {
			for k := range k0 {
				mc := clampL(k0[k]+dk, 0, 63)
				p.set(k, float32(st.d*float32(cc[k])), float32(st.dmin*float32(mc)), 0, nmax)
			}
			candT8(xT[:], wT[:], 32, &p, &e, lt[:])
			for k := range k0 {
				if dc != 0 && cc[k] == clampL(c0[k], 0, 63) {
					continue
				}
				mc := clampL(k0[k]+dk, 0, 63)
				if dk != 0 && mc == clampL(k0[k], 0, 63) {
					continue
				}
				if e[k] < bestE[k] || !found[k] {
					bestE[k], bestC[k], bestK[k], found[k] = e[k], cc[k], mc, true
				}
			}
		}
	}
	for k := range bestC {
		p.set(k, float32(st.d*float32(bestC[k])), float32(st.dmin*float32(bestK[k])), 0, nmax)
	}
	candT8(xT[:], wT[:], 32, &p, &e, lt[:])
	st.err = 0
	for k := 0; k < 8; k++ {
		st.sc[k], st.mc[k] = uint8(bestC[k]), uint8(bestK[k])
		st.err += float64(e[k])
		for j := 0; j < 32; j++ {
			st.L[32*k+j] = uint8(lt[8*j+k])
		}
	}
}

// refitKxT is refitKx for the grid search: the least-squares d and dmin with codes and levels
// fixed, then the float16 pairs around them, each evaluated over the eight sub-blocks at once.
func refitKxT(st *kxState, x, w *[QK_K]float32, xT, wT *[256]float32, nmax int32) bool {
	// Per sub-block sums (sum w, w l, w l^2, w x, w x l), then weighted by the codes.
	var saa, sab, sbb, sxa, sxb float64
	for k := 0; k < 8; k++ {
		var sw, sl, sll, sx, sxl float64
		for i := 32 * k; i < 32*k+32; i++ {
			fw, l, v := float64(w[i]), float64(st.L[i]), float64(x[i])
			sw += fw
			sl += fw * l
			sll += fw * l * l
			sx += fw * v
			sxl += fw * v * l
		}
		a, bb := float64(st.sc[k]), float64(st.mc[k])
		saa += a * a * sll
		sab += a * bb * sl
		sbb += bb * bb * sw
		sxa += a * sxl
		sxb += bb * sx
	}
	var d, e float64
	D := saa*sbb - sab*sab
	switch {
	case D > 1e-12*saa*sbb && saa > 0:
		d = (sxa*sbb - sxb*sab) / D
		e = (sxa*sab - sxb*saa) / D
	case saa > 0:
		d, e = sxa/saa, float64(st.dmin)
	default:
		return false
	}
	if d <= 0 || e < 0 || math.IsNaN(d) || math.IsNaN(e) {
		return false
	}
	var (
		dvs, evs [9]float32
		tot      [9]float64
		p        candT
		ek       [8]float32
		lt       [256]float32
	)
	nc := 0
	for _, dv := range f16Near(float32(d)) {
		for _, ev := range f16Near(float32(e)) {
			if dv <= 0 || ev < 0 {
				continue
			}
			dvs[nc], evs[nc] = dv, ev
			nc++
		}
	}
	for c := 0; c < nc; c++ {
		for k := 0; k < 8; k++ {
			p.set(k, float32(dvs[c]*float32(st.sc[k])), float32(evs[c]*float32(st.mc[k])), 0, nmax)
		}
		candT8(xT[:], wT[:], 32, &p, &ek, lt[:])
		for _, v := range ek {
			tot[c] += float64(v)
		}
	}
	win := -1
	bestErr := math.Inf(1)
	for c := 0; c < nc; c++ {
		if tot[c] < bestErr {
			bestErr, win = tot[c], c
		}
	}
	if win < 0 {
		return false
	}
	for k := 0; k < 8; k++ {
		p.set(k, float32(dvs[win]*float32(st.sc[k])), float32(evs[win]*float32(st.mc[k])), 0, nmax)
	}
	candT8(xT[:], wT[:], 32, &p, &ek, lt[:])
	for k := 0; k < 8; k++ {
		for j := 0; j < 32; j++ {
			st.L[32*k+j] = uint8(lt[8*j+k])
		}
	}
	st.d, st.dmin, st.err = dvs[win], evs[win], bestErr
	return true
}
