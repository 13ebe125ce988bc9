package quant

import (
	"encoding/binary"
	"math"
)

// The error-minimizing quantizers of IQ4_NL and IQ4_XS. The levels are a fixed table, so a
// block's only free parameter is its scale: the search tries more trial inverse scales than
// ggml (both signs: the largest value mapped near the table's -127 end or near its +113 end),
// refits the least-squares scale of the best assignment until the levels stop changing, and
// then stores the float16 scale (and for IQ4_XS the 6-bit block codes) whose re-chosen levels
// give the smallest weighted error as dequantized. Weights are blockWeights' (importance times
// sqrt(sigma2 + x^2)); every block is compared with the reference quantizer's, kept when no
// worse (keepBest). SearchGrid tries fewer trial scales.

// iq4Trials returns the trial offsets of a search: SearchFull 21 per sign, SearchGrid 15 on
// ggml's side and 7 on the other.
func iq4Trials(s Search) (main, other int) {
	if s == SearchGrid {
		return 7, 3
	}
	return 10, 10
}

// iq4Fit returns the weighted least-squares scale d of x ≈ d*level (levels the IQ4 table)
// after the trial search and refinement, or 0 for an all-zero block.
func iq4Fit(x, w []float32, s Search) float32 {
	var amax, max float32
	for _, v := range x {
		if a := abs32(v); a > amax {
			amax, max = a, v
		}
	}
	if amax < groupMaxEps {
		return 0
	}
	main, other := iq4Trials(s)
	var bestD float32
	bestScore := -1.0
	try := func(id float32) {
		d, score := iq4Assign(x, w, id)
		if score > bestScore {
			bestD, bestScore = d, score
		}
	}
	for t := -main; t <= main; t++ {
		try(float32(t+int(kvaluesIQ4NL[0])) / max)
	}
	for t := -other; t <= other; t++ {
		try(float32(t+int(kvaluesIQ4NL[15])) / max)
	}
	// Refit: levels re-chosen at the fitted scale, refitted, while that improves.
	for it := 0; it < 4 && bestD != 0; it++ {
		d, score := iq4Assign(x, w, 1/bestD)
		if score <= bestScore {
			break
		}
		bestD, bestScore = d, score
	}
	return bestD
}

// iq4Assign picks each value's level nearest id*x and returns the least-squares scale of that
// assignment and its score (sumqx^2/sumq2: the error is sum w x^2 minus it).
func iq4Assign(x, w []float32, id float32) (d float32, score float64) {
	var sumqx, sumq2 float64
	for j, v := range x {
		q := float64(iq4Levels[bestIndexIQ4(id*v)])
		sumqx += float64(w[j]) * q * float64(v)
		sumq2 += float64(w[j]) * q * q
	}
	if sumq2 <= 0 {
		return 0, -1
	}
	return float32(sumqx / sumq2), sumqx * sumqx / sumq2
}

// iq4Store picks, for the stored scale s of a block (as the dequantizer forms it), each
// value's level whose dequantized value float32(s*level) is nearest, writing the indices to L,
// and returns the weighted squared error.
func iq4Store(x, w []float32, L []uint8, s float32) float64 {
	var e float64
	var is float32
	if s != 0 {
		is = 1 / s
	}
	for j, v := range x {
		k := int(bestIndexIQ4(is * v))
		best, bestK := math.Inf(1), k
		for c := max(0, k-1); c <= min(15, k+1); c++ {
			dv := float64(v) - float64(s*iq4Levels[c])
			if dv*dv < best {
				best, bestK = dv*dv, c
			}
		}
		L[j] = uint8(bestK)
		e += float64(w[j]) * best
	}
	return e
}

// iq4StoreNL writes the block of x with the float16 scale near d whose levels give the
// smallest error.
func iq4StoreNL(b []byte, x, w []float32, d float32) {
	var L, bestL [32]uint8
	bestErr := math.Inf(1)
	var bestH uint16
	for _, dv := range f16Near(d) {
		if e := iq4Store(x, w, L[:], dv); e < bestErr {
			bestErr, bestL, bestH = e, L, F32ToF16(dv)
		}
	}
	binary.LittleEndian.PutUint16(b[0:], bestH)
	packIQ4(b[2:18], bestL[:])
}

func searchIQ4_NL(dst []byte, src, importance []float32, s Search) error {
	imp, sigma2, impMean, err := prepRow(src, importance, s)
	if err != nil {
		return err
	}
	var (
		w       [32]float32
		ref     [sizeIQ4_NL]byte
		scratch [64]float32
	)
	for i := 0; i < len(src)/32; i++ {
		x := src[i*32 : i*32+32]
		var ib []float32
		if imp != nil {
			ib = imp[i*32 : i*32+32]
		}
		blockWeights(w[:], x, ib, sigma2, impMean)
		b := dst[i*sizeIQ4_NL : (i+1)*sizeIQ4_NL]
		iq4StoreNL(b, x, w[:], iq4Fit(x, w[:], s))
		out := iq4Blocks{qs: ref[2:18]}
		iq4Quantize(&out, x, nil)
		binary.LittleEndian.PutUint16(ref[0:], out.dh)
		keepBest(IQ4_NL, b, ref[:], x, w[:], scratch[:])
	}
	return nil
}

func searchIQ4_XS(dst []byte, src, importance []float32, s Search) error {
	imp, sigma2, impMean, err := prepRow(src, importance, s)
	if err != nil {
		return err
	}
	var (
		w       [QK_K]float32
		ref     [sizeIQ4_XS]byte
		scratch [2 * QK_K]float32
	)
	for i := 0; i < len(src)/QK_K; i++ {
		x := src[i*QK_K : (i+1)*QK_K]
		var ib []float32
		if imp != nil {
			ib = imp[i*QK_K : (i+1)*QK_K]
		}
		for k := 0; k < 8; k++ {
			blockWeights(w[32*k:32*k+32], x[32*k:32*k+32], sub(ib, 32*k, 32), sigma2, impMean)
		}
		b := dst[i*sizeIQ4_XS : (i+1)*sizeIQ4_XS]
		iq4StoreXS(b, x, w[:], s)
		iq4xsBlock(ref[:], x, nil)
		keepBest(IQ4_XS, b, ref[:], x, w[:], scratch[:])
	}
	return nil
}

// iq4StoreXS fits each block's scale, then tries float16 super-block scales near the two
// natural choices (the largest block scale as code -32, ggml's, or as +31) and, for each,
// every block's nearest code and its neighbours against the block's error as stored; the
// super-block scale with the smallest total error is written.
func iq4StoreXS(b []byte, x, w []float32, s Search) {
	var scales [8]float32
	var maxS, amaxS float32
	for k := 0; k < 8; k++ {
		scales[k] = iq4Fit(x[32*k:32*k+32], w[32*k:32*k+32], s)
		if a := abs32(scales[k]); a > amaxS {
			amaxS, maxS = a, scales[k]
		}
	}
	var (
		L, bestL    [QK_K]uint8
		codes, best [8]int32
		bestH       uint16
		bestErr     = math.Inf(1)
	)
	for _, d := range [2]float32{-maxS / 32, maxS / 31} {
		for _, dh := range f16Near(d) {
			e := iq4Codes(x, w, dh, &scales, &L, &codes)
			if e < bestErr {
				bestErr, bestL, best, bestH = e, L, codes, F32ToF16(dh)
			}
		}
	}
	var scalesL [4]byte
	var scalesH uint16
	for ib, l := range best {
		l += 32
		scalesL[ib/2] |= uint8(l&0xf) << (4 * (ib % 2))
		scalesH |= uint16(l>>4) << (2 * ib)
	}
	binary.LittleEndian.PutUint16(b[0:], bestH)
	binary.LittleEndian.PutUint16(b[2:], scalesH)
	copy(b[4:8], scalesL[:])
	packIQ4(b[8:136], bestL[:])
}

// iq4Codes chooses each block's code l in -32..31 near scales[k]/dh (the one of the nearest
// and its neighbours whose stored scale dh*l gives the smallest error) with its levels, and
// returns the super-block's total error.
func iq4Codes(x, w []float32, dh float32, scales *[8]float32, L *[QK_K]uint8, codes *[8]int32) float64 {
	var total float64
	var Lk [32]uint8
	for k := 0; k < 8; k++ {
		xk, wk := x[32*k:32*k+32], w[32*k:32*k+32]
		l0 := int32(0)
		if dh != 0 {
			l0 = max32(-32, min(31, nearestInt(scales[k]/dh)))
		}
		bestErr := math.Inf(1)
		for l := max32(-32, l0-1); l <= min(31, l0+1); l++ {
			e := iq4Store(xk, wk, Lk[:], dh*float32(l))
			if e < bestErr {
				bestErr, codes[k] = e, l
				copy(L[32*k:32*k+32], Lk[:])
			}
		}
		total += bestErr
	}
	return total
}
