package quant

import (
	"fmt"
	"math"
)

// The error-minimizing quantizers: Format.QuantizeSearch, with a Search kind. They write
// ggml's block formats unchanged; only the choice of scales, mins and integer levels differs
// from the reference quantizers. Every block minimizes the weighted squared error
// sum_j w_j (x_j - y_j)^2 of the values y_j as they will be dequantized (float16 scales and
// the dequantizer's float32 arithmetic included), and the reference quantizer's block is kept
// instead whenever it is at least as good under the same weights, so no block is ever worse
// than llama.cpp's by the measure being minimized. See QUALITY.md for the measurements behind
// each choice, SPEED.md for the speed work.
//
// The files: this one holds the full search's sweeps and what both searches share (weighting,
// the float16 choice, keeping the reference block); search_legacy.go and search_kquants.go
// hold each type family's row loop and, for the K-quants, the full search's super-block
// steps; search_grid.go and search_grid_kquants.go the grid search (SearchGrid);
// search_cand.go evaluates eight candidate scales in one pass; search_ref.go computes the
// reference blocks the searches compare with; search_amd64.{go,s} are the AVX2 kernels
// (search_other.go without them).
//
// The full search's building blocks:
//   - symFit: x ≈ d*l with integer levels l in [lmin, lmax] (Q4_0, Q5_0, Q8_0, the Q6_K
//     sub-blocks). The search covers a window of inverse scales completely: it sweeps the points
//     where some level changes, keeping running sums, so each candidate assignment costs O(1)
//     with its least-squares d, and then alternates rounding and refitting.
//   - asymFit: x ≈ d*l + m with l in [0, nmax] (Q4_1, Q5_1, the Q4_K/Q5_K sub-blocks), the same
//     sweep with a least-squares fit of d and m for every level assignment.
//   - the K-quant super-block search (sweepBlockKx, sweepBlockQ6_K): sub-block scales and mins
//     are quantized to their 6- or 8-bit codes by trying the neighbouring codes against the
//     sub-block's actual error, the float16 super-block scales are refitted by least squares
//     once the codes are fixed, and the levels are re-chosen under the final stored scales.

// Search is how thoroughly Format.QuantizeSearch looks for each block's scales.
type Search uint8

const (
	// SearchGrid evaluates a grid of candidate scales: gorun's default (the zero value), several
	// times faster than SearchFull with nearly its error, never worse than the reference
	// quantizer per block; bytes pinned by TestSearchGridPinned (SPEED.md).
	SearchGrid Search = iota
	// SearchFull sweeps every level assignment of a window of scales: slower, a little lower
	// error, the default bytes before issue 20, pinned by TestSearchFullPinned.
	SearchFull
)

func (s Search) String() string {
	switch s {
	case SearchFull:
		return "full"
	case SearchGrid:
		return "grid"
	}
	return fmt.Sprintf("Search(%d)", uint8(s))
}

// ParseSearch reads a search's name: "full" or "grid" ("fast" is accepted for "grid", its
// name before it was called by what it does).
func ParseSearch(name string) (Search, error) {
	switch name {
	case "full":
		return SearchFull, nil
	case "grid", "fast":
		return SearchGrid, nil
	}
	return 0, fmt.Errorf("unknown search %q (want full or grid)", name)
}

// check refuses a Search value that names no search.
func (s Search) check() error {
	if s != SearchFull && s != SearchGrid {
		return fmt.Errorf("unknown quantizer search %v", s)
	}
	return nil
}

// An event marks an inverse scale s at which the level of element j moves one step, from
// magnitude k to k+1; it is stored as s's bits (positive floats order as their bits do) above
// k and j (bits 8..15 and 0..7), so that events sort as plain integers and the sweep finds
// each step's sums' increments without reading the current levels.
func event(s float32, j int, k int32) uint64 {
	return uint64(math.Float32bits(s))<<32 | uint64(uint8(k))<<8 | uint64(j)
}

func eventJ(e uint64) int { return int(uint8(e)) }

func eventK(e uint64) int32 { return int32(uint8(e >> 8)) }

func eventS(e uint64) float32 { return math.Float32frombits(uint32(e >> 32)) }

// sortEvents orders the events by inverse scale, approximately: a counting sort into buckets
// a fraction of the window wide. The sweeps stay exact for whatever order they get (each step
// moves one level and the sums follow), so the order only decides which assignments are
// visited, and with several buckets per event nearly all ties between buckets are real ones.
// out receives the ordered events.
func (sp *sweeper) sortEvents(ne int, sa, sb float32) {
	ev, out, key := sp.evs[:ne], sp.ev[:ne], sp.key[:ne]
	nb := int32(64)
	for nb < 2*int32(ne) {
		nb *= 2
	}
	count := sp.count[:nb+1]
	clear(count)
	scale := float32(nb) / (sb - sa)
	for i, e := range ev {
		b := int32((eventS(e) - sa) * scale)
		b = max(0, min(nb-1, b))
		key[i] = uint16(b)
		count[b+1]++
	}
	// Running sum in a register: a store-to-load chain through count[b-1] costs several cycles
	// per bucket.
	var run uint16
	for b := range count {
		run += count[b]
		count[b] = run
	}
	for i, e := range ev {
		b := key[i]
		out[count[b]] = e
		count[b]++
	}
}

// sweeper holds the scratch space of the sweeps (kept out of the solvers' frames, so that
// one zeroing serves a whole row).
type sweeper struct {
	evs, ev [maxEvents]uint64
	key     [maxEvents]uint16
	count   [2*maxEvents + 1]uint16
}

// sweepLimit is the number of sorted events a sweep takes: all of them, or when the window was
// cut short at sb (maxEvents), those before the first one beyond it.
func (sp *sweeper) sweepLimit(ne int, cut bool, sb float32) int {
	if !cut {
		return ne // every event was generated at or below sb
	}
	for k := 0; k < ne; k++ {
		if eventS(sp.ev[k]) > sb {
			return k
		}
	}
	return ne
}

// maxEvents bounds the events one sweep considers; the window is cut short where it would
// need more. It never does for the windows used here: an element has at most
// (whi-wlo)*(levels on its side) + 1 events, n*(0.07*128.5+1) = 320 for Q8_0, the most.
const maxEvents = 512

func clampL(l, lo, hi int32) int32 { return max(lo, min(hi, l)) }

// meanSquare is the mean of x^2 (the scale of a typical value of a row).
func meanSquare(x []float32) float32 {
	var s float64
	for _, v := range x {
		s += float64(v) * float64(v)
	}
	if len(x) == 0 {
		return 0
	}
	return float32(s / float64(len(x)))
}

// checkImportance rejects importance vectors that cannot weight an error: wrong length,
// negative, NaN or Inf entries.
func checkImportance(imp []float32, n int) error {
	if imp == nil {
		return nil
	}
	if len(imp) != n {
		return fmt.Errorf("importance has %d values for %d weights", len(imp), n)
	}
	for i, v := range imp {
		if !(v >= 0) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("importance %v at element %d", v, i)
		}
	}
	return nil
}

// rowStats returns what the weights of a row's blocks depend on: the row's mean square and
// the mean of its importance (0 without importance).
func rowStats(x, imp []float32) (sigma2, impMean float32) {
	sigma2 = meanSquare(x)
	if imp != nil {
		var s float64
		for _, v := range imp {
			s += float64(v)
		}
		impMean = float32(s / float64(len(imp)))
	}
	return
}

// blockWeights writes the error weight of each element of one block: without importance the
// default weighting, else the importance (floored at a small fraction of the row's mean, so
// that a column never seen active in calibration still counts a little) times the same
// per-value factor.
func blockWeights(w, x, imp []float32, sigma2, impMean float32) {
	w = w[:len(x)]
	for j, v := range x {
		w[j] = defaultWeight(v, sigma2)
	}
	if imp == nil {
		return
	}
	floor := impFloor * impMean
	for j := range w {
		w[j] *= max(imp[j], floor)
	}
}

// impFloor is the fraction of the row's mean importance below which a column's importance is
// raised.
const impFloor = 1e-3

// defaultWeight is the weight of a value's error without importance: sqrt(sigma2 + v^2),
// sigma2 the row's mean square. It leans towards the large weights of a row (whose errors
// measured as harmful beyond their square: plain w = 1 gave a lower RMSE but a larger KL
// divergence from the f16 model, see QUALITY.md) while keeping the small ones' errors in
// play, and it is the per-value factor llama.cpp applies to importance.
func defaultWeight(v, sigma2 float32) float32 { return sqrt32(sigma2 + v*v) }

// symFit fits x ≈ d*l with integer l in [lmin, lmax] (lmin < 0 < lmax), minimizing
// sum_j w_j (x_j - d*l_j)^2 over both signs of d. For each sign it sweeps every inverse scale
// s in [wlo*s0, whi*s0], where s0 is the largest at which no value rounds beyond the range:
// the levels round(s*x) change at known points, and running sums give the least-squares d of
// each assignment and its error in O(1). The best assignment is then refined by alternating
// rounding and refitting. L receives the levels; the result is d, unrounded (0 when the block
// is all zero).
func (sp *sweeper) symFit(x, w []float32, L []int8, lmin, lmax int32, wlo, whi float32) float64 {
	n := len(x)
	L = L[:n]
	w = w[:n]
	var pmax, nmax float32
	for _, v := range x {
		pmax = max(pmax, v)
		nmax = max(nmax, -v)
	}
	if max(pmax, nmax) < groupMaxEps {
		clear(L)
		return 0
	}
	var (
		evs, ev   = &sp.evs, &sp.ev
		lv, bestL [32]int32
		ax        [32]float64 // w*|y| of each element
		step      [32]int32   // the direction of its level's steps
		bestN     = 0.0       // the best score is bestN/bestD: sxl^2/sll, error = sxx - score
		bestD     = 1.0
		bestSign  float64
		sxx       float64
	)
	for j, v := range x {
		sxx += float64(w[j]) * float64(v) * float64(v)
	}
	for _, sg := range [2]float32{1, -1} {
		P, N := pmax, nmax
		if sg < 0 {
			P, N = nmax, pmax
		}
		s0 := float32(math.MaxFloat32)
		if P > 0 {
			s0 = (float32(lmax) + 0.5) / P
		}
		if N > 0 {
			s0 = min(s0, (float32(-lmin)+0.5)/N)
		}
		sa, sb := s0*wlo, s0*whi
		var sxl, sll float64
		ne := 0
		cut := false
		for j, v := range x {
			y := sg * v
			l := clampL(nearestInt(sa*y), lmin, lmax)
			fw := float64(w[j])
			sxl += fw * float64(y) * float64(l)
			sll += fw * float64(l) * float64(l)
			if y == 0 {
				continue
			}
			// Selects rather than branches: the signs of a block's values are random.
			k, kend, ay, dir := l, lmax, y, int32(1)
			if y < 0 {
				k = -l
			}
			if y < 0 {
				kend = -lmin
			}
			if y < 0 {
				ay = -y
			}
			if y < 0 {
				dir = -1
			}
			step[j] = dir
			// A step away from zero adds w*|y| to sum w*y*l (exactly the old +w*y or -w*y)
			// and w*(2k+1) to sum w*l^2, k the magnitude before the step.
			ax[j] = fw * float64(ay)
			iy := 1 / ay
			for ; k < kend; k++ {
				s := (float32(k) + 0.5) * iy
				if s > sb {
					break
				}
				if ne == maxEvents {
					sb = s // keep the sweep exact: stop before the first event left out
					cut = true
					break
				}
				evs[ne] = event(s, j, k)
				ne++
			}
		}
		sp.sortEvents(ne, sa, sb)
		bestK := -2
		if sxl > 0 && sll > 0 && sxl*sxl*bestD > bestN*sll {
			bestN, bestD, bestK = sxl*sxl, sll, -1
		}
		lim := sp.sweepLimit(ne, cut, sb)
		for k, e := range ev[:lim] {
			j := eventJ(e)
			sxl += ax[j]
			sll += float64(w[j]) * float64(2*eventK(e)+1)
			if sxl > 0 && sll > 0 && sxl*sxl*bestD > bestN*sll {
				bestN, bestD, bestK = sxl*sxl, sll, k
			}
		}
		if bestK == -2 {
			continue
		}
		// Replay the sweep up to the best event.
		bestSign = float64(sg)
		for j, v := range x {
			bestL[j] = clampL(nearestInt(sa*sg*v), lmin, lmax)
		}
		for _, e := range ev[:bestK+1] {
			j := eventJ(e)
			bestL[j] += step[j] // away from zero
		}
	}
	if bestN <= 0 {
		clear(L)
		return 0
	}
	// x = sign*y ≈ sign*d*l: the levels stay, the scale takes the sign.
	var sxl, sll float64
	for j, v := range x {
		l := float64(bestL[j])
		sxl += float64(w[j]) * bestSign * float64(v) * l
		sll += float64(w[j]) * l * l
	}
	d := bestSign * sxl / sll
	errBest := sxx - sxl*sxl/sll
	// Alternate rounding under d and refitting d while the error falls.
	for it := 0; it < 4; it++ {
		id := 1 / d
		var a, b float64
		for j, v := range x {
			l := clampL(nearestInt(float32(float64(v)*id)), lmin, lmax)
			lv[j] = l
			a += float64(w[j]) * float64(v) * float64(l)
			b += float64(w[j]) * float64(l) * float64(l)
		}
		if b <= 0 {
			break
		}
		e := sxx - a*a/b
		if e >= errBest {
			break
		}
		errBest, d = e, a/b
		copy(bestL[:n], lv[:n])
	}
	for j := range L {
		L[j] = int8(bestL[j])
	}
	return d
}

// f16Near returns the float16 values nearest d: the rounded value and its two neighbours of
// the same sign, all finite (a d beyond float16's range gives its largest values).
func f16Near(d float32) [3]float32 {
	h := F32ToF16(d)
	sign := h & 0x8000
	m := h & 0x7fff
	if m >= 0x7c00 {
		m = 0x7bff
	}
	lo, hi := m, m
	if lo > 0 {
		lo--
	}
	if hi < 0x7bff {
		hi++
	}
	return [3]float32{F16ToF32(sign | m), F16ToF32(sign | lo), F16ToF32(sign | hi)}
}

// symStore picks the float16 scale near d whose re-rounded levels give the smallest error,
// writing the levels (in [lmin, lmax]) to L; it returns the scale as stored. The (at most 3)
// candidates' errors are computed together (candErr8, w64 = the weights as float64); the first
// smallest wins.
func symStore(x []float32, w64 []float64, L []int8, d float64, lmin, lmax int32) float32 {
	n := len(x)
	L = L[:n]
	if d == 0 {
		clear(L)
		return 0
	}
	var (
		cl      kxCands
		lt, lt2 [256]int32
		e       [9]float64
		dvs     [3]float32
	)
	for _, dv := range f16Near(float32(d)) {
		if dv == 0 {
			continue
		}
		dvs[cl.n] = dv
		cl.addRange(dv, 0, lmin, lmax, 0, 0)
	}
	if cl.n == 0 {
		clear(L)
		return 0
	}
	cl.eval(x, w64[:n], &e, &lt, &lt2)
	bestErr := math.Inf(1)
	win := -1
	for c := 0; c < cl.n; c++ {
		if e[c] < bestErr {
			bestErr, win = e[c], c
		}
	}
	if win < 0 {
		clear(L)
		return 0
	}
	for j := range L {
		L[j] = int8(lt[8*j+win])
	}
	return dvs[win]
}

// asymFit fits x ≈ d*l + m with integer l in [0, nmax] and d > 0, minimizing
// sum_j w_j (x_j - d*l_j - m)^2; with nonPosMin, m is held at or below zero (the K-quants store
// the offset as -dmin*code). The search sweeps the inverse scales s in [wlo*s0, whi*s0]
// (s0 = nmax/(max-m0)) of the assignments l = round(s*(x-m0)), for a few offsets m0 at and
// below the block's minimum, fitting d and m by least squares for each; the best is refined by
// alternating rounding and refitting. L receives the levels; the results are d and m,
// unrounded.
func (sp *sweeper) asymFit(x, w []float32, L []uint8, nmax int32, nonPosMin bool, wlo, whi float32, offsets []float32) (float64, float64) {
	n := len(x)
	L = L[:n]
	w = w[:n]
	lo, hi, sw, sx, sxx, fd, fm, flat := asymPrelude(x, w, L, nmax, nonPosMin)
	if flat {
		return fd, fm
	}
	var (
		evs, ev = &sp.evs, &sp.ev
		bestL   [32]int32
		wx      [32]float64 // w*x of each element
		bestN   = 0.0       // the best error reduction is bestN/bestD
		bestD   = 1.0
		found   bool
	)
	// score returns the error reduction sxx - error of the least-squares d and m of an
	// assignment, as a fraction num/den with den > 0; ok is false when the fit has no positive
	// d. With nonPosMin, a positive m is replaced by the fit with m = 0.
	score := func(sl, sll, sxl float64) (num, den float64, ok bool) {
		D := sll*sw - sl*sl
		if D > 1e-9*sll*sw {
			dn := sw*sxl - sl*sx  // d*D
			mn := sll*sx - sl*sxl // m*D
			if dn > 0 && (!nonPosMin || mn <= 0) {
				return dn*sxl + mn*sx, D, true
			}
		}
		if nonPosMin && sxl > 0 && sll > 0 {
			return sxl * sxl, sll, true
		}
		return 0, 1, false
	}
	fmax := float32(nmax)
	step := (hi - lo) / fmax
	for _, phi := range offsets {
		m0 := lo - phi*step
		if nonPosMin && m0 > 0 {
			m0 = 0
		}
		s0 := fmax / (hi - m0)
		sa, sb := s0*wlo, s0*whi
		var sl, sll, sxl float64
		ne := 0
		cut := false
		for j, v := range x {
			y := v - m0
			l := clampL(nearestInt(sa*y), 0, nmax)
			fw := float64(w[j])
			sl += fw * float64(l)
			sll += fw * float64(l) * float64(l)
			sxl += fw * float64(v) * float64(l)
			if y <= 0 {
				continue
			}
			wx[j] = fw * float64(v) // a step adds w to sum w*l, w*(2k+1) to sum w*l^2, w*x to sum w*x*l
			iy := 1 / y
			for k := l; k < nmax; k++ {
				s := (float32(k) + 0.5) * iy
				if s > sb {
					break
				}
				if ne == maxEvents {
					sb = s
					cut = true
					break
				}
				evs[ne] = event(s, j, k)
				ne++
			}
		}
		sp.sortEvents(ne, sa, sb)
		bestK := -2
		if num, den, ok := score(sl, sll, sxl); ok && num*bestD > bestN*den {
			bestN, bestD, bestK = num, den, -1
		}
		lim := sp.sweepLimit(ne, cut, sb)
		for k, e := range ev[:lim] {
			j := eventJ(e)
			fw := float64(w[j])
			sl += fw
			sll += fw * float64(2*eventK(e)+1)
			sxl += wx[j]
			if num, den, ok := score(sl, sll, sxl); ok && num*bestD > bestN*den {
				bestN, bestD, bestK = num, den, k
			}
		}
		if bestK == -2 {
			continue
		}
		found = true
		for j, v := range x {
			bestL[j] = clampL(nearestInt(sa*(v-m0)), 0, nmax)
		}
		for _, e := range ev[:bestK+1] {
			bestL[eventJ(e)]++
		}
	}
	if !found {
		clear(L)
		if nonPosMin {
			return 0, min(0, sx/sw)
		}
		return 0, sx / sw
	}
	d, m, _ := asymRefine(x, w, &bestL, nmax, nonPosMin, sw, sx, sxx, 4)
	for j := range L {
		L[j] = uint8(bestL[j])
	}
	return d, m
}

// asymPrelude computes what both asymmetric fits (asymFit, gridAsymFit) start from: the
// block's range (lo raised to 0 with nonPosMin) and its weighted sums. flat reports a block
// with no range to fit; its levels (written to L) and d, m are then final.
func asymPrelude(x, w []float32, L []uint8, nmax int32, nonPosMin bool) (lo, hi float32, sw, sx, sxx, d, m float64, flat bool) {
	lo, hi = x[0], x[0]
	for j, v := range x {
		lo = min(lo, v)
		hi = max(hi, v)
		fw := float64(w[j])
		sw += fw
		sx += fw * float64(v)
		sxx += fw * float64(v) * float64(v)
	}
	if nonPosMin && lo > 0 {
		lo = 0
	}
	if hi-lo <= groupMaxEps*max(1, abs32(hi)) || sw <= 0 {
		clear(L)
		if nonPosMin && hi > 0 { // all values equal and positive: d*l at the top level
			for j := range L {
				L[j] = uint8(nmax)
			}
			return lo, hi, sw, sx, sxx, float64(hi) / float64(nmax), 0, true
		}
		return lo, hi, sw, sx, sxx, 0, float64(lo), true
	}
	return lo, hi, sw, sx, sxx, 0, 0, false
}

// asymRefine fits (d, m) by least squares to the levels in bestL, then alternates rounding
// under (d, m) and refitting for at most iters rounds while the error falls, leaving the best
// levels in bestL. errBest is +Inf when no assignment gave a usable fit (then d = 0). sw, sx and
// sxx are sum w, sum w*x and sum w*x^2 of the block.
func asymRefine(x, w []float32, bestL *[32]int32, nmax int32, nonPosMin bool, sw, sx, sxx float64, iters int) (d, m, errBest float64) {
	n := len(x)
	var lv [32]int32
	// fit returns the least-squares (d, m) of an assignment and its error.
	fit := func(sl, sll, sxl float64) (d, m, e float64) {
		D := sll*sw - sl*sl
		if D > 1e-9*sll*sw {
			d = (sw*sxl - sl*sx) / D
			m = (sll*sx - sl*sxl) / D
			if d > 0 && (!nonPosMin || m <= 0) {
				return d, m, sxx - d*sxl - m*sx
			}
		}
		if nonPosMin && sxl > 0 && sll > 0 {
			d = sxl / sll
			return d, 0, sxx - d*sxl
		}
		return 0, 0, math.Inf(1)
	}
	var sl, sll, sxl float64
	for j, v := range x {
		l := float64(bestL[j])
		fw := float64(w[j])
		sl += fw * l
		sll += fw * l * l
		sxl += fw * float64(v) * l
	}
	d, m, errBest = fit(sl, sll, sxl)
	for it := 0; it < iters && d > 0; it++ {
		id := 1 / d
		sl, sll, sxl = 0, 0, 0
		for j, v := range x {
			l := clampL(nearestInt(float32((float64(v)-m)*id)), 0, nmax)
			lv[j] = l
			fw := float64(w[j])
			sl += fw * float64(l)
			sll += fw * float64(l) * float64(l)
			sxl += fw * float64(v) * float64(l)
		}
		d2, m2, e := fit(sl, sll, sxl)
		if d2 <= 0 || e >= errBest {
			break
		}
		d, m, errBest = d2, m2, e
		copy(bestL[:n], lv[:n])
	}
	return d, m, errBest
}

// The offsets m0 (in steps of (max-min)/nmax below the minimum) whose roundings asymFit
// sweeps: a few for Q4_1/Q5_1, one for the K-quant sub-blocks (whose mins are rounded to 6 bits
// anyway; more offsets gained 0.3% in RMSE there at twice the time).
var (
	offsetsLegacy = []float32{0, 0.25, -0.25, 0.5}
	offsetsK      = []float32{0}
)

// werr is the weighted squared error sum_j w_j (x_j - y_j)^2.
func werr(x, y, w []float32) float64 {
	y = y[:len(x)]
	w = w[:len(x)]
	var e float64
	for j, v := range x {
		d := float64(v) - float64(y[j])
		e += float64(w[j]) * d * d
	}
	return e
}

// keepBest replaces the block b of type t by the reference block ref when ref's weighted
// error is no larger (so ties keep llama.cpp's bytes). scratch holds at least 2*len(x) values.
func keepBest(t Type, b, ref []byte, x, w, scratch []float32) {
	n := len(x)
	yb, yr := scratch[:n], scratch[n:2*n]
	// Static calls: a function value would make b and ref escape, costing allocations.
	switch t {
	case Q4_0:
		dequantQ4_0(yb, b)
		dequantQ4_0(yr, ref)
	case Q4_1:
		dequantQ4_1(yb, b)
		dequantQ4_1(yr, ref)
	case Q5_0:
		dequantQ5_0(yb, b)
		dequantQ5_0(yr, ref)
	case Q5_1:
		dequantQ5_1(yb, b)
		dequantQ5_1(yr, ref)
	case Q8_0:
		dequantQ8_0(yb, b)
		dequantQ8_0(yr, ref)
	case Q4_K:
		dequantQ4_K(yb, b)
		dequantQ4_K(yr, ref)
	case Q5_K:
		dequantQ5_K(yb, b)
		dequantQ5_K(yr, ref)
	case Q6_K:
		dequantQ6_K(yb, b)
		dequantQ6_K(yr, ref)
	case Q2_K:
		dequantQ2_K(yb, b)
		dequantQ2_K(yr, ref)
	case Q3_K:
		dequantQ3_K(yb, b)
		dequantQ3_K(yr, ref)
	case IQ4_NL:
		dequantIQ4_NL(yb, b)
		dequantIQ4_NL(yr, ref)
	case IQ4_XS:
		dequantIQ4_XS(yb, b)
		dequantIQ4_XS(yr, ref)
	default:
		panic("keepBest: " + t.String())
	}
	if werr(x, yr, w) <= werr(x, yb, w) {
		copy(b, ref)
	}
}
