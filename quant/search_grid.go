package quant

import "math"

// The grid search (SearchGrid): the full search's quantizers (search.go) with cheaper
// searches, choosing among fewer candidates, measured in quant/SPEED.md:
//   - the symmetric fits (Q4_0, Q5_0, Q8_0, the Q6_K sub-blocks) try a grid of inverse scales
//     (gridSymFit: for one or both signs of d, evenly over symFit's window), each scored by the
//     least-squares error of its rounding, from float32 sums of the rounding residuals
//     (symGrid: eight candidates per pass over the block); the float16 scale is then chosen
//     among eight values around the fit (symStoreGrid);
//   - the asymmetric fits (Q4_1, Q5_1, the Q4_K/Q5_K sub-blocks) try a grid over asymFit's
//     offsets and window (gridAsymFit, asymGrid8), then alternate rounding and refitting;
//   - the K-quant super-blocks choose codes and refit their scales with the super-block
//     transposed, one sub-block per float32 lane (search_grid_kquants.go), errors summed in float32;
//   - every block is still compared with the reference block, which is kept when it is no
//     worse under the weighted error (keepBest, keepBestSym): no block is worse than
//     llama.cpp's by the measure minimized.
//
// The bytes differ from SearchFull's. The grids' sizes (gridCfg) were chosen on the trained
// fixture (SPEED.md). Every kernel has a generic Go version doing the same float32 or float64
// operations in the same order, unfused; the AVX2 versions equal them bit for bit (the Tiers
// tests), so the bytes are the same with and without the assembly.

// roundMagic is 1.5*2^23: (y + roundMagic) - roundMagic rounds a float32 |y| < 2^22 to the
// nearest integer, ties to even (nearestInt's trick, kept in floating point).
const roundMagic = 12582912

// gridBest is what symGrid leaves: per lane, the best candidate among those of the lane
// (candidates c = 8*g + lane), by the strictly smallest error e (the earliest on ties), with its
// least-squares scale d (idx -1, e +Inf, d 0 when none of them fits); and the best of all, bi
// and bd, as pick returns them.
type gridBest struct {
	e, d [8]float32
	idx  [8]int32
	bi   int32
	bd   float32
}

// pick returns the best of the lanes' bests: the smallest error, the lowest candidate index
// on ties; -1 when no candidate fits.
func (g *gridBest) pick() (int32, float32) {
	bi, be, bd := int32(-1), float32(math.Inf(1)), float32(0)
	for l := 0; l < 8; l++ {
		if g.idx[l] < 0 {
			continue
		}
		if e := g.e[l]; e < be || (e == be && g.idx[l] < bi) || bi < 0 {
			bi, be, bd = g.idx[l], e, g.d[l]
		}
	}
	return bi, bd
}

// symGridGeneric is the reference for symGrid: for each candidate inverse scale s[c]
// (len(s) a multiple of 8), the levels l = clamp(round(s*x), lo, hi) and the residuals
// r = s*x - l (in level units) are summed in j order in float32: srl = sum w r l,
// srr = sum w r^2. With sum w l^2 = s^2 sxx - 2 srl - srr (sxx = sum w x^2; y = s*x = l + r),
// the assignment's least-squares scale and error are
//
//	d = (1 + q)/s,  e = (srr - srl*q)/s^2,  q = srl / sum w l^2
//
// (no fit when sum w l^2 <= 0 or d would change sign). The large terms cancel exactly in the
// identity, so the float32 sums of the small residuals keep their relative precision. Every
// operation is a float32 operation in this order, unfused (the explicit conversions stop the
// compiler from contracting them), which the assembly repeats lane by lane.
func symGridGeneric(x, w []float32, s []float32, lo, hi, sxx float32, res *gridBest) {
	w = w[:len(x)]
	for l := range res.e {
		res.e[l], res.d[l], res.idx[l] = float32(math.Inf(1)), 0, -1
	}
	for c, sc := range s {
		var srl, srr float32
		for j, v := range x {
			y := float32(sc * v)
			l := float32(y+roundMagic) - roundMagic
			l = max(lo, min(hi, l))
			r := y - l
			wr := float32(w[j] * r)
			srl += float32(wr * l)
			srr += float32(wr * r)
		}
		s2 := float32(sc * sc)
		sll := float32(float32(s2*sxx)-float32(srl+srl)) - srr
		if !(sll > 0) || !(float32(sll+srl) > 0) {
			continue
		}
		q := srl / sll
		e := float32(srr-float32(srl*q)) / s2
		if l := c % 8; e < res.e[l] {
			res.e[l], res.d[l], res.idx[l] = e, float32(1+q)/sc, int32(c)
		}
	}
	res.bi, res.bd = res.pick()
}

func symGrid(x, w []float32, s []float32, lo, hi, sxx float32, res *gridBest) {
	if useGridAsm && len(x) > 0 && len(s) > 0 {
		_ = w[len(x)-1]
		symGridAsm(&x[0], &w[0], uintptr(len(x)), &s[0], uintptr(len(s)/8), lo, hi, sxx, res)
		return
	}
	symGridGeneric(x, w, s, lo, hi, sxx, res)
}

// blockStatsGeneric is the reference for blockStats: the largest value and the largest
// negated value of x (at least 0) and sum w x^2, summed in eight interleaved float32 partial
// sums (element j into sum j%8) reduced as ((0+4) + (2+6)) + ((1+5) + (3+7)). len(x) is a
// multiple of 8.
func blockStatsGeneric(x, w []float32) (pmax, nmax, sxx float32) {
	w = w[:len(x)]
	var acc [8]float32
	for j := 0; j+8 <= len(x); j += 8 {
		for l := 0; l < 8; l++ {
			v := x[j+l]
			pmax = max(pmax, v)
			nmax = max(nmax, -v)
			acc[l] += float32(float32(w[j+l]*v) * v)
		}
	}
	sxx = float32(float32(acc[0]+acc[4])+float32(acc[2]+acc[6])) + float32(float32(acc[1]+acc[5])+float32(acc[3]+acc[7]))
	return
}

func blockStats(x, w []float32) (pmax, nmax, sxx float32) {
	if useGridAsm && len(x) >= 8 {
		_ = w[len(x)-1]
		var out [3]float32
		blockStatsAsm(&x[0], &w[0], uintptr(len(x)/8), &out)
		return out[0], out[1], out[2]
	}
	return blockStatsGeneric(x, w)
}

// asymGrid8Generic is the reference for asymGrid8: for eight candidates (inverse scale s[c],
// offset m0[c]), y = (x - m0)*s, l = clamp(round(y), 0, hi), r = y - l, summed in j order in
// float32: sums[c] = sum w r, [8+c] = sum w r l, [16+c] = sum w r^2 (sum w l and sum w l^2
// follow from them and the block's sums of w, w*x and w*x^2, as for symGrid8).
func asymGrid8Generic(x, w []float32, s, m0 *[8]float32, hi float32, sums *[24]float32) {
	w = w[:len(x)]
	for c := 0; c < 8; c++ {
		sc, mc := s[c], m0[c]
		var sr, srl, srr float32
		for j, v := range x {
			y := float32(float32(v-mc) * sc)
			l := float32(y+roundMagic) - roundMagic
			l = max(0, min(hi, l))
			r := y - l
			wr := float32(w[j] * r)
			sr += wr
			srl += float32(wr * l)
			srr += float32(wr * r)
		}
		sums[c], sums[8+c], sums[16+c] = sr, srl, srr
	}
}

func asymGrid8(x, w []float32, s, m0 *[8]float32, hi float32, sums *[24]float32) {
	if useGridAsm && len(x) > 0 {
		_ = w[len(x)-1]
		asymGrid8Asm(&x[0], &w[0], uintptr(len(x)), s, m0, hi, sums)
		return
	}
	asymGrid8Generic(x, w, s, m0, hi, sums)
}

// useGridAsm selects the grid search's assembly kernels (as useCandAsm; tests switch it).
var useGridAsm = useCandAsm

// gridCfg holds the grid search's grid sizes and refinement counts per type family.
type gridCfg struct {
	symPerSign int // grid points per sign of d
	symSigns   int // signs of d searched: 2, or 1 (the largest magnitude on the long side)
	asymPoints int // grid points per offset (a multiple of 8 / offsets)
	asymIters  int
	kIters     int // K-quant super-scale refits (the full search: up to 3)
	store      int // groups of 8 float16 scales tried around the fitted one (symStoreGrid)
}

var (
	gridLegacy = gridCfg{symPerSign: 16, symSigns: 1, asymPoints: 16, asymIters: 2, store: 1}
	gridQ8     = gridCfg{symPerSign: 12, symSigns: 2, store: 1}
	gridK      = gridCfg{asymPoints: 24, asymIters: 2, kIters: 2}
	gridQ6     = gridCfg{symPerSign: 16, symSigns: 2, kIters: 1}
)

// gridSymFit is symFit with the sweep replaced by a grid: perSign inverse scales evenly
// spaced over [wlo*s0, whi*s0] for one or both signs of d, each scored by the error of its
// assignment's least-squares d (symGrid). With one sign, the block's largest magnitude goes to
// the long side of the level range (-lmin > lmax), as the reference quantizers put it. It
// returns the least-squares d of the best assignment (0 when the block is all zero); the levels
// are left to the float16 choice, which re-rounds them anyway.
func gridSymFit(x, w []float32, lmin, lmax int32, wlo, whi float32, signs, perSign int) float64 {
	pmax, nmax, sxx := blockStats(x, w)
	if max(pmax, nmax) < groupMaxEps {
		return 0
	}
	var (
		grid [64]float32 // the candidates' signed inverse scales
		fac  [32]float32
		res  gridBest
		sgs  = [2]float32{1, -1}
	)
	if signs == 1 && pmax > nmax {
		sgs[0] = -1 // y = -x: the largest value on the -lmin side
	}
	step := (whi - wlo) / float32(max(1, perSign-1))
	for g := range fac[:perSign] {
		fac[g] = wlo + step*float32(g)
	}
	for k := 0; k < signs; k++ {
		P, N := pmax, nmax
		if sgs[k] < 0 {
			P, N = nmax, pmax
		}
		s0 := float32(math.MaxFloat32)
		if P > 0 {
			s0 = (float32(lmax) + 0.5) / P
		}
		if N > 0 {
			s0 = min(s0, (float32(-lmin)+0.5)/N)
		}
		s0 *= sgs[k]
		g := grid[k*perSign : (k+1)*perSign]
		for i, f := range fac[:perSign] {
			g[i] = s0 * f
		}
	}
	total := signs * perSign
	padded := (total + 7) &^ 7
	for c := total; c < padded; c++ {
		grid[c] = grid[total-1] // repeats never win: the first of equal errors does
	}
	symGrid(x, w, grid[:padded], float32(lmin), float32(lmax), sxx, &res)
	if res.bi >= 0 {
		return float64(res.bd)
	}
	return 0
}

// symFixed8Generic is the reference for symFixed8: the weighted squared errors of eight
// stored scales ds[c] (id[c] = 1/ds[c], or 0 for ds 0), each with the levels
// l = clamp(round(x*id), lo, hi), summed in j order in float32: diff = x - ds*l,
// e[c] += (w*diff)*diff.
func symFixed8Generic(x, w []float32, ds, id *[8]float32, lo, hi float32, e *[8]float32) {
	w = w[:len(x)]
	for c := 0; c < 8; c++ {
		var s float32
		for j, v := range x {
			y := float32(v * id[c])
			l := float32(y+roundMagic) - roundMagic
			l = max(lo, min(hi, l))
			diff := v - float32(ds[c]*l)
			s += float32(float32(w[j]*diff) * diff)
		}
		e[c] = s
	}
}

func symFixed8(x, w []float32, ds, id *[8]float32, lo, hi float32, e *[8]float32) {
	if useGridAsm && len(x) > 0 {
		_ = w[len(x)-1]
		symFixed8Asm(&x[0], &w[0], uintptr(len(x)), ds, id, lo, hi, e)
		return
	}
	symFixed8Generic(x, w, ds, id, lo, hi, e)
}

// symStoreGrid is symStore for the fast search, with more float16 candidates: the value
// nearest d and its neighbours alternately below and above, 8*groups in all (in that order
// of preference), eight at a time by symFixed8 (float32 sums); the first smallest error wins.
// It writes the levels (in [lmin, lmax]) to L and returns the scale as stored.
func symStoreGrid(x, w []float32, L []int8, d float64, lmin, lmax int32, groups int) float32 {
	n := len(x)
	L = L[:n]
	h := F32ToF16(float32(d))
	sign, m := h&0x8000, int32(h&0x7fff)
	if d == 0 || m == 0 {
		clear(L)
		return 0
	}
	m = min(m, 0x7bff)
	lo, hi := float32(lmin), float32(lmax)
	var (
		ds, id, e [8]float32
		best      = float32(math.Inf(1))
		bestD     float32
		bestID    float32
	)
	for g := 0; g < groups; g++ {
		nc := 0
		for i := 0; i < 8; i++ {
			k := int32(8*g+i+1) / 2 // 0, -1, 1, -2, 2, ... (odd i below, even above)
			if (8*g+i)%2 == 1 {
				k = -k
			}
			if mk := m + k; mk > 0 && mk <= 0x7bff {
				ds[nc] = F16ToF32(sign | uint16(mk))
				id[nc] = 1 / ds[nc]
				nc++
			}
		}
		if nc == 0 {
			break
		}
		for c := nc; c < 8; c++ {
			ds[c], id[c] = ds[0], id[0]
		}
		symFixed8(x, w, &ds, &id, lo, hi, &e)
		for c := 0; c < nc; c++ {
			if e[c] < best || bestD == 0 {
				best, bestD, bestID = e[c], ds[c], id[c]
			}
		}
	}
	symLevels(x, bestID, lo, hi, L)
	return bestD
}

// symLevels writes clamp(round(x*id), lo, hi) to L (32 values with AVX2, else one by one).
func symLevels(x []float32, id, lo, hi float32, L []int8) {
	if useGridAsm && len(x) == 32 {
		symLevels32Asm((*[32]float32)(x), id, lo, hi, (*[32]int8)(L))
		return
	}
	L = L[:len(x)]
	for j, v := range x {
		L[j] = int8(clampL(nearestInt(v*id), int32(lo), int32(hi)))
	}
}

// gridAsymFit is asymFit with the sweep replaced by a grid: for each offset m0 (as asymFit's),
// points inverse scales evenly spaced over [wlo*s0, whi*s0], each scored by the error of its
// least-squares d and m (with nonPosMin, m <= 0); the best is refined by alternate rounding
// and refitting (iters times at most). L receives the levels; the results are d and m,
// unrounded.
func gridAsymFit(x, w []float32, L []uint8, nmax int32, nonPosMin bool, wlo, whi float32, offsets []float32, points, iters int) (float64, float64) {
	n := len(x)
	L = L[:n]
	w = w[:n]
	lo, hi, sw, sx, sxx, fd, fm, flat := asymPrelude(x, w, L, nmax, nonPosMin)
	if flat {
		return fd, fm
	}
	fmax := float32(nmax)
	step := (hi - lo) / fmax
	var (
		s, m0 [8]float32
		sums  [24]float32
		nl    int
	)
	bestErr := math.Inf(1)
	var bestS, bestM0 float32
	found := false
	// score evaluates the filled lanes (nl of them).
	score := func() {
		for c := 0; c < nl; c++ {
			sr, srl, srr := float64(sums[c]), float64(sums[8+c]), float64(sums[16+c])
			sc, mc := float64(s[c]), float64(m0[c])
			// sum w y = sum w l + sr and sum w y^2 = sum w l^2 + 2 srl + srr, y = s*(x - m0)
			sl := sc*(sx-mc*sw) - sr
			sll := sc*sc*(sxx-2*mc*sx+mc*mc*sw) - 2*srl - srr
			// In level units y = s*(x - m0) = l + r; fit y ≈ a*l + b, i.e. r ≈ (a-1)*l + b.
			var e float64
			ok := false
			D := sll*sw - sl*sl
			if D > 1e-9*sll*sw {
				A := (sw*srl - sl*sr) / D // a - 1
				B := (sll*sr - sl*srl) / D
				m := float64(m0[c]) + B/sc
				if A > -1 && (!nonPosMin || m <= 0) {
					e, ok = srr-A*srl-B*sr, true
				}
			}
			if !ok && nonPosMin && sll > 0 {
				// m = 0: with m0 = 0 the symmetric form; otherwise exactly, in float64.
				if m0[c] == 0 {
					if srl > -sll { // a = 1 + srl/sll > 0
						e, ok = srr-srl*srl/sll, true
					}
				} else {
					var a, b float64
					for j, v := range x {
						l := float64(clampL(nearestInt(float32(float32(v-m0[c])*s[c])), 0, nmax))
						a += float64(w[j]) * float64(v) * l
						b += float64(w[j]) * l * l
					}
					if a > 0 && b > 0 {
						e, ok = (sxx-a*a/b)*sc*sc, true
					}
				}
			}
			if !ok {
				continue
			}
			e /= sc * sc
			if e < bestErr {
				bestErr, bestS, bestM0, found = e, s[c], m0[c], true
			}
		}
		nl = 0
	}
	for _, phi := range offsets {
		mo := lo - phi*step
		if nonPosMin && mo > 0 {
			mo = 0
		}
		s0 := fmax / (hi - mo)
		for g := 0; g < points; g++ {
			t := float32(g) / float32(max(1, points-1))
			s[nl], m0[nl] = s0*(wlo+(whi-wlo)*t), mo
			nl++
			if nl == 8 {
				asymGrid8(x, w, &s, &m0, fmax, &sums)
				score()
			}
		}
	}
	if nl > 0 {
		for c := nl; c < 8; c++ {
			s[c], m0[c] = s[0], m0[0]
		}
		asymGrid8(x, w, &s, &m0, fmax, &sums)
		score()
	}
	if !found {
		clear(L)
		if nonPosMin {
			return 0, min(0, sx/sw)
		}
		return 0, sx / sw
	}
	var bestL [32]int32
	for j, v := range x {
		bestL[j] = clampL(nearestInt(float32(float32(v-bestM0)*bestS)), 0, nmax)
	}
	d, m, errBest := asymRefine(x, w, &bestL, nmax, nonPosMin, sw, sx, sxx, iters)
	if math.IsInf(errBest, 1) {
		clear(L)
		if nonPosMin {
			return 0, min(0, sx/sw)
		}
		return 0, sx / sw
	}
	for j := range L {
		L[j] = uint8(bestL[j])
	}
	return d, m
}

// symErr2Generic is the reference for symErr2: the weighted squared errors of two 32-value
// blocks with levels la, lb and scales da, db, over the values float32(l)*d: per value
// diff = float64(x) - float64(float32(l)*d), term (float64(w)*diff)*diff, summed in four
// interleaved float64 partial sums (value j into sum j%4) reduced as (0+2) + (1+3).
func symErr2Generic(x, w []float32, la, lb *[32]int8, da, db float32) (ea, eb float64) {
	x = x[:32]
	w = w[:32]
	var sa, sb [4]float64
	for j, v := range x {
		fw := float64(w[j])
		d := float64(v) - float64(float32(la[j])*da)
		sa[j%4] += float64(float64(fw*d) * d)
		d = float64(v) - float64(float32(lb[j])*db)
		sb[j%4] += float64(float64(fw*d) * d)
	}
	return (sa[0] + sa[2]) + (sa[1] + sa[3]), (sb[0] + sb[2]) + (sb[1] + sb[3])
}

func symErr2(x, w []float32, la, lb *[32]int8, da, db float32) (float64, float64) {
	if useGridAsm {
		_ = x[31]
		_ = w[31]
		var out [2]float64
		symErr2Asm(&x[0], &w[0], la, lb, da, db, &out)
		return out[0], out[1]
	}
	return symErr2Generic(x, w, la, lb, da, db)
}
