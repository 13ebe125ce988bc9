package quant

import "math"

// QuantizeSearch for the low-bit K-quants Q2_K (x = d*sc*l - dmin*m, 16-value sub-blocks,
// 4-bit sc and m, l in 0..3) and Q3_K (x = d*sc*l, 16-value sub-blocks, 6-bit signed sc,
// l in -4..3). One search serves both kinds of search (SearchGrid and SearchFull give the
// same bytes here): with 16 values of 2 or 3 bits a sub-block's sweep is short (a few dozen
// events), so the full sweep costs little. The steps are those of the other K-quants
// (search_kquants.go):
//  1. every sub-block gets its own best scale (and min) as if they were stored exactly
//     (symFit, asymFit over a wide window: with 4 or 8 levels the best scale often clips the
//     largest value);
//  2. the float16 super-block scale(s) start from the largest sub-block scale (and min) at the
//     largest code, and every sub-block picks its codes among the neighbours of its ideal ones
//     by its actual error, the levels re-chosen under each candidate as they will be stored;
//  3. with codes and levels fixed, the super-block scales are refitted by least squares and
//     rounded to the float16 neighbour with the smallest error; step 2 runs again while the
//     error falls.
//
// Then the reference block (llama.cpp's quantize_row_q2_K_ref / q3_K_ref) is kept when it is
// at least as good by the same weighted error.

// lowKind is the geometry of one of the two types.
type lowKind struct {
	asym       bool  // Q2_K: a min per sub-block; Q3_K: symmetric
	lmin, lmax int32 // the levels
	cmin, cmax int32 // the sub-block scale codes
	mmax       int32 // the min codes 0..mmax (asym only)
}

var (
	kindQ2 = lowKind{asym: true, lmin: 0, lmax: 3, cmin: 0, cmax: 15, mmax: 15}
	kindQ3 = lowKind{lmin: -4, lmax: 3, cmin: -32, cmax: 31}
)

// The sub-block searches' inverse-scale window, relative to the largest scale that clips
// nothing.
const lowKLo, lowKHi = 0.5, 1.6

// lowState is a Q2_K/Q3_K super-block being chosen.
type lowState struct {
	d, dmin float32 // as stored (float16 values)
	sc, mc  [16]int32
	L       [QK_K]int32
	err     float64
}

func searchQ2_K(dst []byte, src, importance []float32, s Search) error {
	return searchLowK(Q2_K, dst, src, importance, s)
}

func searchQ3_K(dst []byte, src, importance []float32, s Search) error {
	return searchLowK(Q3_K, dst, src, importance, s)
}

func searchLowK(t Type, dst []byte, src, importance []float32, s Search) error {
	imp, sigma2, impMean, err := prepRow(src, importance, s)
	if err != nil {
		return err
	}
	k := &kindQ3
	if t == Q2_K {
		k = &kindQ2
	}
	var (
		sp      sweeper
		w       [QK_K]float32
		ref     [sizeQ3_K]byte
		scratch [2 * QK_K]float32
	)
	size := t.TypeSize()
	for i := 0; i < len(src)/QK_K; i++ {
		x := (*[QK_K]float32)(src[i*QK_K:])
		lowKWeights(t, w[:], x[:], sub(imp, i*QK_K, QK_K), sigma2, impMean)
		st := searchBlockLowK(&sp, k, x, &w)
		b := dst[i*size : (i+1)*size]
		if t == Q2_K {
			packQ2(b, &st)
			quantBlockQ2_K((*[sizeQ2_K]byte)(ref[:]), x)
		} else {
			packQ3(b, &st)
			quantBlockQ3_K(&ref, x)
		}
		keepBest(t, b, ref[:size], x[:], w[:], scratch[:])
	}
	return nil
}

// lowKWeights writes the error weights of one block: Q2_K's, and Q3_K's with importance, are
// the default weighting (blockWeights); Q3_K's without importance leave out its per-value
// factor sqrt(sigma2 + x^2) (plain squared error). On held-out text the KL divergence from f16
// was lower so (q3_k_m 0.0823 vs 0.0887, llama-quantize 0.0891; q3_k_s 0.1178 vs 0.1211,
// llama-quantize 0.1257), while with importance (q3_k_m with --gptq: 0.0787 vs 0.0805) and for
// Q2_K the default weighting was the better one (QUALITY.md, "Q2_K and Q3_K").
func lowKWeights(t Type, w, x, imp []float32, sigma2, impMean float32) {
	if t != Q3_K || imp != nil {
		blockWeights(w, x, imp, sigma2, impMean)
		return
	}
	w = w[:len(x)]
	for j := range w {
		w[j] = 1
	}
}

// searchBlockLowK chooses one super-block (err is +Inf when the block is all zero).
func searchBlockLowK(sp *sweeper, k *lowKind, x, w *[QK_K]float32) lowState {
	var (
		s, m [16]float64 // each sub-block's own fit: x ≈ s*l - m
		L0   [QK_K]int32
		L8   [16]int8
		U8   [16]uint8
	)
	var smax, amax, mmax float64
	for j := 0; j < 16; j++ {
		xs, ws := x[16*j:16*j+16], w[16*j:16*j+16]
		if k.asym {
			d, off := sp.asymFit(xs, ws, U8[:], k.lmax, true, lowKLo, lowKHi, offsetsLegacy)
			s[j], m[j] = d, -off
			for i, l := range U8 {
				L0[16*j+i] = int32(l)
			}
		} else {
			s[j] = sp.symFit(xs, ws, L8[:], k.lmin, k.lmax, lowKLo, lowKHi)
			for i, l := range L8 {
				L0[16*j+i] = int32(l)
			}
		}
		if a := math.Abs(s[j]); a > amax {
			amax, smax = a, s[j]
		}
		mmax = max(mmax, m[j])
	}
	var best lowState
	best.err = math.Inf(1)
	if amax == 0 && mmax == 0 {
		return best
	}
	// The starting super-scales: the largest sub-block scale at the largest code (Q3_K: at
	// code -32 or 31, both signs of the level range).
	starts := [2]float64{smax / float64(k.cmax), 0}
	nstart := 1
	if k.cmin < 0 {
		starts[1] = -smax / float64(-k.cmin)
		nstart = 2
	}
	dmin0 := f16Clamp(float32(mmax / float64(max(k.mmax, 1))))
	for _, d0 := range starts[:nstart] {
		var st, cand lowState
		st.d, st.dmin = f16Clamp(float32(d0)), dmin0
		chooseCodesLowK(k, &st, x, w, &s, &m, &L0)
		for it := 0; it < 4; it++ {
			cand = st
			if !refitLowK(k, &cand, x, w) {
				break
			}
			Lref := cand.L
			chooseCodesLowK(k, &cand, x, w, &s, &m, &Lref)
			if cand.err >= st.err {
				break
			}
			st = cand
		}
		if st.err < best.err {
			best = st
		}
	}
	return best
}

// f16Clamp rounds v to float16, the largest finite value for a v beyond the range.
func f16Clamp(v float32) float32 {
	h := F16ToF32(F32ToF16(v))
	if math.IsInf(float64(h), 0) {
		return float32(math.Copysign(65504, float64(v)))
	}
	return h
}

// subErrLowK returns the error of the 16-value sub-block x under the stored scale ds and min
// dm (y = ds*l - dm, as the dequantizers compute it), with the best levels written to L.
func subErrLowK(k *lowKind, x, w []float32, L []int32, ds, dm float32) float64 {
	x = x[:16]
	w = w[:16]
	L = L[:16]
	var e float64
	id := float32(0)
	if ds != 0 {
		id = 1 / ds
	}
	for j, v := range x {
		l := clampL(nearestInt((v+dm)*id), k.lmin, k.lmax)
		if ds == 0 {
			l = 0
		}
		L[j] = l
		diff := float64(v - (float32(ds*float32(l)) - dm))
		e += float64(w[j]) * diff * diff
	}
	return e
}

// chooseCodesLowK picks each sub-block's codes under st.d and st.dmin: the scale codes next to
// its ideal scale s[j] and, with a min, for each the min code that fits the levels Lref best
// and its neighbours; each candidate is scored by its actual error with its own best levels.
func chooseCodesLowK(k *lowKind, st *lowState, x, w *[QK_K]float32, s, m *[16]float64, Lref *[QK_K]int32) {
	var lt [16]int32
	st.err = 0
	for j := 0; j < 16; j++ {
		xs, ws := x[16*j:16*j+16], w[16*j:16*j+16]
		var c0 int32
		if st.d != 0 {
			c0 = int32(math.Round(s[j] / float64(st.d)))
		}
		c0 = clampL(c0, k.cmin, k.cmax)
		best := math.Inf(1)
		for dc := int32(-1); dc <= 1; dc++ {
			c := clampL(c0+dc, k.cmin, k.cmax)
			if dc != 0 && c == c0 {
				continue
			}
			ds := float32(st.d * float32(c))
			if !k.asym {
				if e := subErrLowK(k, xs, ws, lt[:], ds, 0); e < best {
					best, st.sc[j], st.mc[j] = e, c, 0
					copy(st.L[16*j:16*j+16], lt[:])
				}
				continue
			}
			// The min that fits the reference levels best under this scale.
			var sw, sr float64
			for i, v := range xs {
				fw := float64(ws[i])
				sw += fw
				sr += fw * (float64(ds)*float64(Lref[16*j+i]) - float64(v))
			}
			var k0 int32
			if st.dmin > 0 && sw > 0 {
				k0 = int32(math.Round(sr / sw / float64(st.dmin)))
			} else if st.dmin > 0 {
				k0 = int32(math.Round(m[j] / float64(st.dmin)))
			}
			k0 = clampL(k0, 0, k.mmax)
			for dk := int32(-1); dk <= 1; dk++ {
				mc := clampL(k0+dk, 0, k.mmax)
				if dk != 0 && mc == k0 {
					continue
				}
				dm := float32(st.dmin * float32(mc))
				if e := subErrLowK(k, xs, ws, lt[:], ds, dm); e < best {
					best, st.sc[j], st.mc[j] = e, c, mc
					copy(st.L[16*j:16*j+16], lt[:])
				}
			}
		}
		st.err += best
	}
}

// refitLowK refits st.d (and st.dmin) by least squares with the codes and levels fixed
// (x ≈ d*sc*l - dmin*mc), tries the float16 values around the fit with re-chosen levels, and
// keeps the best in st. It reports whether the fit was possible.
func refitLowK(k *lowKind, st *lowState, x, w *[QK_K]float32) bool {
	var saa, sab, sbb, sxa, sxb float64
	for i, v := range x {
		fw := float64(w[i])
		a := float64(st.sc[i/16]) * float64(st.L[i])
		b := float64(st.mc[i/16])
		saa += fw * a * a
		sab += fw * a * b
		sbb += fw * b * b
		sxa += fw * float64(v) * a
		sxb += fw * float64(v) * b
	}
	if saa <= 0 {
		return false
	}
	d, e := sxa/saa, float64(st.dmin)
	if D := saa*sbb - sab*sab; k.asym && D > 1e-12*saa*sbb {
		d = (sxa*sbb - sxb*sab) / D
		e = (sxa*sab - sxb*saa) / D
	}
	if math.IsNaN(d) || math.IsNaN(e) || (k.asym && (d <= 0 || e < 0)) {
		return false
	}
	dvs := f16Near(float32(d))
	evs := [3]float32{st.dmin, st.dmin, st.dmin}
	if k.asym {
		evs = f16Near(float32(e))
	}
	var lt [16]int32
	bestErr := math.Inf(1)
	var bestD, bestE float32
	for _, dv := range dvs {
		for ie, ev := range evs {
			if dv == 0 || ev < 0 || (!k.asym && ie > 0) {
				continue
			}
			var tot float64
			for j := 0; j < 16 && tot < bestErr; j++ {
				ds := float32(dv * float32(st.sc[j]))
				dm := float32(ev * float32(st.mc[j]))
				tot += subErrLowK(k, x[16*j:16*j+16], w[16*j:16*j+16], lt[:], ds, dm)
			}
			if tot < bestErr {
				bestErr, bestD, bestE = tot, dv, ev
			}
		}
	}
	if math.IsInf(bestErr, 1) {
		return false
	}
	for j := 0; j < 16; j++ {
		ds := float32(bestD * float32(st.sc[j]))
		dm := float32(bestE * float32(st.mc[j]))
		subErrLowK(k, x[16*j:16*j+16], w[16*j:16*j+16], st.L[16*j:16*j+16], ds, dm)
	}
	st.d, st.dmin, st.err = bestD, bestE, bestErr
	return true
}

// packQ2 writes a chosen Q2_K super-block in ggml's layout (all zero when none was chosen).
func packQ2(b []byte, st *lowState) {
	b = b[:sizeQ2_K]
	clear(b)
	if math.IsInf(st.err, 1) {
		return
	}
	for j := 0; j < 16; j++ {
		b[j] = uint8(st.sc[j]) | uint8(st.mc[j])<<4
	}
	L := &st.L
	for c := 0; c < 2; c++ {
		for l := 0; l < 32; l++ {
			i := 128*c + l
			b[16+32*c+l] = uint8(L[i]) | uint8(L[i+32])<<2 | uint8(L[i+64])<<4 | uint8(L[i+96])<<6
		}
	}
	putF16(b[80:], st.d)
	putF16(b[82:], st.dmin)
}

// packQ3 writes a chosen Q3_K super-block in ggml's layout (all zero when none was chosen).
func packQ3(b []byte, st *lowState) {
	b = b[:sizeQ3_K]
	clear(b)
	if math.IsInf(st.err, 1) {
		return
	}
	sb := b[96:108]
	for j := 0; j < 16; j++ {
		c := uint8(st.sc[j] + 32)
		if j < 8 {
			sb[j] |= c & 0xF
		} else {
			sb[j-8] |= (c & 0xF) << 4
		}
		sb[8+j%4] |= (c >> 4) << (2 * (j / 4))
	}
	putF16(b[108:], st.d)
	var q [QK_K]uint8
	hm := b[0:32]
	for i, l := range st.L {
		u := uint8(l + 4)
		if u > 3 {
			hm[i%32] |= 1 << (i / 32)
			u -= 4
		}
		q[i] = u
	}
	for c := 0; c < 2; c++ {
		for l := 0; l < 32; l++ {
			i := 128*c + l
			b[32+32*c+l] = q[i] | q[i+32]<<2 | q[i+64]<<4 | q[i+96]<<6
		}
	}
}
