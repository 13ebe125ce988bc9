package quant

import "math"

// QuantizeSearch for the K-quants Q4_K, Q5_K (x = d*sc*l - dmin*m per 32-value sub-block,
// 6-bit sc and m) and Q6_K (x = d*sc*l per 16-value sub-block, 8-bit signed sc): the row loops
// of both searches, and the full search's super-blocks (the grid search's are in
// search_grid_kquants.go). See search.go.
//
// The full search quantizes a super-block in three steps:
//  1. every sub-block gets its own best scale (and min) as if they were stored exactly;
//  2. the float16 super-block scales are set from the largest of them, and every sub-block
//     picks its codes among the neighbours of its ideal ones by its actual error, the levels
//     re-chosen under each candidate as they will be stored;
//  3. with the codes and levels fixed, the super-block scales are refitted by least squares
//     and rounded to the float16 neighbour with the smallest error, and step 2 runs again;
//     this repeats while the error falls.

// Inverse-scale windows of the K-quant sub-block searches.
const (
	kLo4, kHi4 = 0.7, 1.1
	kLo5, kHi5 = 0.8, 1.06
	kLo6, kHi6 = 0.7, 1.06
)

func searchQ4_K(dst []byte, src, importance []float32, s Search) error {
	return searchKx(Q4_K, dst, src, importance, 15, sizeQ4_K, s)
}

func searchQ5_K(dst []byte, src, importance []float32, s Search) error {
	return searchKx(Q5_K, dst, src, importance, 31, sizeQ5_K, s)
}

func searchKx(t Type, dst []byte, src []float32, importance []float32, nmax int32, size int, s Search) error {
	imp, sigma2, impMean, err := prepRow(src, importance, s)
	if err != nil {
		return err
	}
	var (
		sp      sweeper
		w       [QK_K]float32
		ref     [sizeQ5_K]byte
		scratch [2 * QK_K]float32
	)
	for i := 0; i < len(src)/QK_K; i++ {
		x := (*[QK_K]float32)(src[i*QK_K:])
		blockWeights(w[:], x[:], sub(imp, i*QK_K, QK_K), sigma2, impMean)
		b := dst[i*size : (i+1)*size]
		if s == SearchGrid {
			gridBlockKx(b, x, &w, nmax)
		} else {
			sweepBlockKx(&sp, b, x, &w, nmax)
		}
		refBlockKx(ref[:size], x, nmax) // quantBlockKx's bytes
		keepBest(t, b, ref[:size], x[:], w[:], scratch[:])
	}
	return nil
}

// kxState is a Q4_K/Q5_K super-block being chosen: the super-block scales, the codes and the
// levels.
type kxState struct {
	d, dmin float32 // as stored (float16 values)
	sc, mc  [8]uint8
	L       [QK_K]uint8
	err     float64
}

// sweepBlockKx quantizes one Q4_K (nmax 15) or Q5_K (nmax 31) super-block into b.
func sweepBlockKx(sp *sweeper, b []byte, x, w *[QK_K]float32, nmax int32) {
	var (
		s, m [8]float64 // each sub-block's own fit: x ≈ s*l - m, m >= 0
		L0   [QK_K]uint8
	)
	lo, hi := float32(kLo4), float32(kHi4)
	if nmax == 31 {
		lo, hi = kLo5, kHi5
	}
	var maxS, maxM float64
	for j := 0; j < 8; j++ {
		d, off := sp.asymFit(x[32*j:32*j+32], w[32*j:32*j+32], L0[32*j:32*j+32], nmax, true, lo, hi, offsetsK)
		s[j], m[j] = d, -off
		maxS = max(maxS, s[j])
		maxM = max(maxM, m[j])
	}
	var w64 [QK_K]float64
	for i, v := range w {
		w64[i] = float64(v)
	}
	var st, cand kxState
	st.d = min(F16ToF32(F32ToF16(float32(maxS/63))), 65504)
	st.dmin = min(F16ToF32(F32ToF16(float32(maxM/63))), 65504)
	chooseCodesKx(&st, x, w, &w64, &s, &m, &L0, nmax)
	for it := 0; it < 3; it++ {
		cand = st
		if !refitKx(&cand, x, w, &w64, nmax) {
			break
		}
		chooseCodesKx(&cand, x, w, &w64, &s, &m, &cand.L, nmax)
		if cand.err >= st.err {
			break
		}
		st = cand
	}
	packKx(b, &st, nmax)
}

// subErrKx returns the error of sub-block x (32 values) under the stored scale ds and min dm,
// with the levels that are best for them written to L.
func subErrKx(x, w []float32, L []uint8, ds, dm float32, nmax int32) float64 {
	x = x[:32]
	w = w[:32]
	L = L[:32]
	var e float64
	if ds == 0 {
		for j, v := range x {
			L[j] = 0
			diff := float64(v + dm)
			e += float64(w[j]) * diff * diff
		}
		return e
	}
	id := 1 / ds
	for j, v := range x {
		l := clampL(nearestInt((v+dm)*id), 0, nmax)
		L[j] = uint8(l)
		diff := float64(v - (float32(ds*float32(l)) - dm))
		e += float64(w[j]) * diff * diff
	}
	return e
}

// chooseCodesKx picks each sub-block's scale and min codes under st.d and st.dmin: for the
// scale codes next to its ideal scale s[j], the min that fits the ideal levels Lref best, and
// the min codes next to that, each tried with its own best levels.
//
// The candidates (at most 9 per sub-block) are listed in the order the search visits them and
// their errors computed together by candErr8; the first with the smallest error wins, as when
// they were computed one by one (subErrKx).
func chooseCodesKx(st *kxState, x, w *[QK_K]float32, w64 *[QK_K]float64, s, m *[8]float64, Lref *[QK_K]uint8, nmax int32) {
	var (
		cl      kxCands
		lt, lt2 [256]int32
	)
	st.err = 0
	for j := 0; j < 8; j++ {
		xs, ws := x[32*j:32*j+32], w[32*j:32*j+32]
		var lr [32]uint8 // Lref may be st.L, rewritten below
		copy(lr[:], Lref[32*j:32*j+32])
		cl.n = 0
		var c0 int32
		if st.d > 0 {
			c0 = nearestInt(float32(s[j] / float64(st.d)))
		}
		for dc := int32(-1); dc <= 1; dc++ {
			c := clampL(c0+dc, 0, 63)
			if dc != 0 && c == clampL(c0, 0, 63) {
				continue
			}
			ds := float32(st.d * float32(c))
			// The min that fits the ideal levels best under this scale.
			var sw, sr float64
			for i, v := range xs {
				fw := float64(ws[i])
				sw += fw
				sr += fw * (float64(ds)*float64(lr[i]) - float64(v))
			}
			var k0 int32
			if st.dmin > 0 && sw > 0 {
				k0 = nearestInt(float32(sr / sw / float64(st.dmin)))
			} else if st.dmin > 0 {
				k0 = nearestInt(float32(m[j] / float64(st.dmin)))
			}
			for dk := int32(-1); dk <= 1; dk++ {
				k := clampL(k0+dk, 0, 63)
				if dk != 0 && k == clampL(k0, 0, 63) {
					continue
				}
				cl.add(ds, float32(st.dmin*float32(k)), nmax, uint8(c), uint8(k))
			}
		}
		var e [9]float64
		cl.eval(xs, w64[32*j:32*j+32], &e, &lt, &lt2)
		best := math.Inf(1)
		win := -1
		for i := 0; i < cl.n; i++ {
			if e[i] < best {
				best, win = e[i], i
			}
		}
		var bsc, bmc uint8
		if win >= 0 {
			bsc, bmc = cl.a[win], cl.b[win]
			src, lane := &lt, win
			if win >= 8 {
				src, lane = &lt2, win-8
			}
			for i := 0; i < 32; i++ {
				st.L[32*j+i] = uint8(src[8*i+lane])
			}
		}
		st.sc[j], st.mc[j] = bsc, bmc
		st.err += best
	}
}

// kxCands lists up to 9 candidate stored scales ds and offsets dm of one group, with the codes
// (or indices) a, b they come from.
type kxCands struct {
	n    int
	p, q candParams // candidates 0-7 and 8
	a, b [9]uint8
}

// add appends a candidate x ≈ ds*l - dm, l in [0, nmax]; with dm = 0 and lmin < 0 the
// symmetric x ≈ ds*l, l in [lmin, nmax] (addSym).
func (cl *kxCands) add(ds, dm float32, nmax int32, a, b uint8) {
	cl.addRange(ds, dm, 0, nmax, a, b)
}

func (cl *kxCands) addRange(ds, dm float32, lmin, lmax int32, a, b uint8) {
	p, c := &cl.p, cl.n
	if c >= 8 {
		p, c = &cl.q, c-8
	}
	// The scalar loops' division: 1/0 is +Inf for the asymmetric form (every level rounds to 0
	// and the error is that of x + dm); the symmetric one (lmin < 0) takes id = 0, which also
	// gives level 0.
	id := float32(0)
	if ds != 0 || lmin >= 0 {
		id = 1 / ds
	}
	p.ds[c], p.dm[c], p.id[c], p.lmin[c], p.lmax[c] = ds, dm, id, lmin, lmax
	cl.a[cl.n], cl.b[cl.n] = a, b
	cl.n++
}

// eval computes the candidates' errors over the group x (weights w) into e and their levels
// into lt (candidates 0-7) and lt2 (candidate 8), as candErr8 lays them out.
func (cl *kxCands) eval(x []float32, w []float64, e *[9]float64, lt, lt2 *[256]int32) {
	var e8 [8]float64
	n := len(x)
	candErr8(x, w, &cl.p, &e8, lt[:8*n])
	copy(e[:], e8[:])
	if cl.n > 8 {
		candErr8(x, w, &cl.q, &e8, lt2[:8*n])
		e[8] = e8[0]
	}
}

// refitKx refits st.d and st.dmin by least squares with the codes and levels fixed
// (x ≈ d*sc*l - dmin*m), tries the float16 values around the fit with re-chosen levels, and
// keeps the best in st. It reports whether the fit was possible.
func refitKx(st *kxState, x, w *[QK_K]float32, w64 *[QK_K]float64, nmax int32) bool {
	var saa, sab, sbb, sxa, sxb float64
	for i, v := range x {
		fw := float64(w[i])
		a := float64(st.sc[i/32]) * float64(st.L[i])
		bb := float64(st.mc[i/32])
		saa += fw * a * a
		sab += fw * a * bb
		sbb += fw * bb * bb
		sxa += fw * float64(v) * a
		sxb += fw * float64(v) * bb
	}
	// Minimize sum w (x - d*a + e*b)^2 over d and e (= dmin).
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
	// The float16 pairs around the fit, in the order they are tried; each one's total error is
	// summed over the sub-blocks in order, all pairs at once (candErr8). The scalar search
	// stopped adding a pair's sub-blocks once its partial sum reached the best so far; the
	// errors are not negative, so such a pair could not have won anyway.
	var dvs, evs [9]float32
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
	var (
		tot     [9]float64
		cl      kxCands
		lt, lt2 [256]int32
	)
	for j := 0; j < 8; j++ {
		cl.n = 0
		for c := 0; c < nc; c++ {
			cl.add(float32(dvs[c]*float32(st.sc[j])), float32(evs[c]*float32(st.mc[j])), nmax, 0, 0)
		}
		var ej [9]float64
		cl.eval(x[32*j:32*j+32], w64[32*j:32*j+32], &ej, &lt, &lt2)
		for c := 0; c < nc; c++ {
			tot[c] += ej[c]
		}
	}
	bestErr := math.Inf(1)
	win := -1
	for c := 0; c < nc; c++ {
		if tot[c] < bestErr {
			bestErr, win = tot[c], c
		}
	}
	if win < 0 {
		return false
	}
	bestD, bestE := dvs[win], evs[win]
	for j := 0; j < 8; j++ {
		ds := float32(bestD * float32(st.sc[j]))
		dm := float32(bestE * float32(st.mc[j]))
		subErrKx(x[32*j:32*j+32], w[32*j:32*j+32], st.L[32*j:32*j+32], ds, dm, nmax)
	}
	st.d, st.dmin, st.err = bestD, bestE, bestErr
	return true
}

// packKx writes a chosen Q4_K/Q5_K super-block in ggml's layout.
func packKx(b []byte, st *kxState, nmax int32) {
	putF16(b[0:], st.d)
	putF16(b[2:], st.dmin)
	sb := b[4:16]
	clear(sb)
	putScaleMinK4(sb, &st.sc, &st.mc)
	L := &st.L
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
	for c := 0; c < 4; c++ {
		for j := 0; j < 32; j++ {
			l1, l2 := L[64*c+j], L[64*c+j+32]
			qh[j] |= (l1>>4)<<(2*c) | (l2>>4)<<(2*c+1)
			ql[32*c+j] = l1&15 | (l2&15)<<4
		}
	}
}

func searchQ6_K(dst []byte, src, importance []float32, s Search) error {
	imp, sigma2, impMean, err := prepRow(src, importance, s)
	if err != nil {
		return err
	}
	var (
		sp      sweeper
		w       [QK_K]float32
		ref     [sizeQ6_K]byte
		scratch [2 * QK_K]float32
	)
	for i := 0; i < len(src)/QK_K; i++ {
		x := (*[QK_K]float32)(src[i*QK_K:])
		blockWeights(w[:], x[:], sub(imp, i*QK_K, QK_K), sigma2, impMean)
		b := (*[sizeQ6_K]byte)(dst[i*sizeQ6_K:])
		if s == SearchGrid {
			gridBlockQ6_K(b, x, &w)
		} else {
			sweepBlockQ6_K(&sp, b, x, &w)
		}
		refBlockQ6_K(&ref, x) // quantBlockQ6_K's bytes
		keepBest(Q6_K, b[:], ref[:], x[:], w[:], scratch[:])
	}
	return nil
}

// q6State is a Q6_K super-block being chosen.
type q6State struct {
	d   float32
	sc  [16]int8
	L   [QK_K]int8 // levels in -32..31
	err float64
}

func sweepBlockQ6_K(sp *sweeper, b *[sizeQ6_K]byte, x, w *[QK_K]float32) {
	var (
		s    [16]float64
		L0   [QK_K]int8
		amax float64
		smax float64
	)
	for j := 0; j < 16; j++ {
		s[j] = sp.symFit(x[16*j:16*j+16], w[16*j:16*j+16], L0[16*j:16*j+16], -32, 31, kLo6, kHi6)
		if a := math.Abs(s[j]); a > amax {
			amax, smax = a, s[j]
		}
	}
	var w64 [QK_K]float64
	for i, v := range w {
		w64[i] = float64(v)
	}
	var best q6State
	best.err = math.Inf(1)
	if amax > 0 {
		// The largest sub-block scale at code -128 or at 127.
		for _, d0 := range [2]float64{-smax / 128, smax / 127} {
			var st, cand q6State
			st.d = F16ToF32(F32ToF16(float32(d0)))
			if math.IsInf(float64(st.d), 0) {
				st.d = float32(math.Copysign(65504, float64(st.d)))
			}
			chooseCodesQ6(&st, x, &w64, &s)
			for it := 0; it < 3; it++ {
				cand = st
				if !refitQ6(&cand, x, w, &w64) {
					break
				}
				chooseCodesQ6(&cand, x, &w64, &s)
				if cand.err >= st.err {
					break
				}
				st = cand
			}
			if st.err < best.err {
				best = st
			}
		}
	}
	packQ6(b, &best)
}

// packQ6 writes a chosen Q6_K super-block in ggml's layout (all zero when none was chosen:
// err +Inf).
func packQ6(b *[sizeQ6_K]byte, best *q6State) {
	if math.IsInf(best.err, 1) { // all zero
		clear(b[:])
		return
	}
	putF16(b[208:], best.d)
	for j, c := range best.sc {
		b[192+j] = uint8(c)
	}
	for h := 0; h < 2; h++ {
		ql := (*[64]byte)(b[64*h:])
		qh := (*[32]byte)(b[128+32*h:])
		Lh := (*[128]int8)(best.L[128*h:])
		for l := 0; l < 32; l++ {
			q1, q2, q3, q4 := uint8(Lh[l]+32), uint8(Lh[l+32]+32), uint8(Lh[l+64]+32), uint8(Lh[l+96]+32)
			ql[l] = q1&15 | (q3&15)<<4
			ql[l+32] = q2&15 | (q4&15)<<4
			qh[l] = q1>>4 | (q2>>4)<<2 | (q3>>4)<<4 | (q4>>4)<<6
		}
	}
}

// subErrQ6 returns the error of a 16-value sub-block under the stored scale ds (d*sc), with
// the best levels for it written to L.
func subErrQ6(x, w []float32, L []int8, ds float32) float64 {
	x = x[:16]
	w = w[:16]
	L = L[:16]
	var e float64
	if ds == 0 {
		for j, v := range x {
			L[j] = 0
			e += float64(w[j]) * float64(v) * float64(v)
		}
		return e
	}
	id := 1 / ds
	for j, v := range x {
		l := clampL(nearestInt(v*id), -32, 31)
		L[j] = int8(l)
		diff := float64(v - float32(ds*float32(l)))
		e += float64(w[j]) * diff * diff
	}
	return e
}

// chooseCodesQ6 picks each sub-block's scale code among the neighbours of its ideal one.
// The (at most 3) candidates' errors are computed together (candErr8); the first smallest wins,
// as when subErrQ6 computed them one by one.
func chooseCodesQ6(st *q6State, x *[QK_K]float32, w64 *[QK_K]float64, s *[16]float64) {
	var (
		cl      kxCands
		lt, lt2 [256]int32
	)
	st.err = 0
	for j := 0; j < 16; j++ {
		c0 := nearestInt(float32(s[j] / float64(st.d)))
		cl.n = 0
		for dc := int32(-1); dc <= 1; dc++ {
			c := clampL(c0+dc, -128, 127)
			if dc != 0 && c == clampL(c0, -128, 127) {
				continue
			}
			cl.addRange(float32(st.d*float32(c)), 0, -32, 31, uint8(int8(c)), 0)
		}
		var e [9]float64
		cl.eval(x[16*j:16*j+16], w64[16*j:16*j+16], &e, &lt, &lt2)
		best := math.Inf(1)
		win := -1
		for i := 0; i < cl.n; i++ {
			if e[i] < best {
				best, win = e[i], i
			}
		}
		var bc int8
		if win >= 0 {
			bc = int8(cl.a[win])
			for i := 0; i < 16; i++ {
				st.L[16*j+i] = int8(lt[8*i+win])
			}
		}
		st.sc[j] = bc
		st.err += best
	}
}

// refitQ6 refits st.d by least squares with codes and levels fixed and keeps the float16
// value around it with the smallest error (levels re-chosen).
func refitQ6(st *q6State, x, w *[QK_K]float32, w64 *[QK_K]float64) bool {
	var saa, sxa float64
	for i, v := range x {
		a := float64(st.sc[i/16]) * float64(st.L[i])
		saa += float64(w[i]) * a * a
		sxa += float64(w[i]) * float64(v) * a
	}
	if saa <= 0 {
		return false
	}
	d := sxa / saa
	// The float16 values around the fit, all summed over the sub-blocks at once (candErr8);
	// see refitKx for why the scalar search's early stop changes nothing.
	var dvs [3]float32
	nc := 0
	for _, dv := range f16Near(float32(d)) {
		if dv != 0 {
			dvs[nc] = dv
			nc++
		}
	}
	var (
		tot     [3]float64
		cl      kxCands
		lt, lt2 [256]int32
	)
	for j := 0; j < 16; j++ {
		cl.n = 0
		for c := 0; c < nc; c++ {
			cl.addRange(float32(dvs[c]*float32(st.sc[j])), 0, -32, 31, 0, 0)
		}
		var ej [9]float64
		cl.eval(x[16*j:16*j+16], w64[16*j:16*j+16], &ej, &lt, &lt2)
		for c := 0; c < nc; c++ {
			tot[c] += ej[c]
		}
	}
	bestErr := math.Inf(1)
	win := -1
	for c := 0; c < nc; c++ {
		if tot[c] < bestErr {
			bestErr, win = tot[c], c
		}
	}
	if win < 0 {
		return false
	}
	bestD := dvs[win]
	for j := 0; j < 16; j++ {
		subErrQ6(x[16*j:16*j+16], w[16*j:16*j+16], st.L[16*j:16*j+16], float32(bestD*float32(st.sc[j])))
	}
	st.d, st.err = bestD, bestErr
	return true
}
