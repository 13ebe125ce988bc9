package kernels

import "math"

// Attention over a float32 cache, one query head at a time:
//
//	Scores(s, q, k, ks)       s[j] = Dot(q, k[j*ks : j*ks+len(q)])
//	m := max(s); sum := ExpSum(s, scale, scale*m)   s[j] = exp(scale*s[j] - scale*m)
//	WeightedSum(out, s, v, vs) out[i] = sum_j s[j] * v[j*vs+i]
//
// WeightedSumAdd(out, s, v, vs) adds to out in the same order (out[i] += s[j] * v[j*vs+i], j
// ascending): over a paged cache, clearing out and adding block after block gives the bits
// one WeightedSum over all the rows gives.
var (
	Scores         func(s, q, k []float32, ks int)
	ExpSum         func(s []float32, scale, mx float32) float32
	WeightedSum    func(out, p, v []float32, vs int)
	WeightedSumAdd func(out, p, v []float32, vs int)
)

// scoresGeneric uses the active tier's Dot, so scores equal Dot on every tier.
func scoresGeneric(s, q, k []float32, ks int) {
	d := len(q)
	for j := range s {
		s[j] = Dot(q, k[j*ks:j*ks+d])
	}
}

// expSumGeneric evaluates exp in float64 (rounded once): the reference for the SIMD tiers.
func expSumGeneric(s []float32, scale, mx float32) float32 {
	var acc [lanes]float32
	n := len(s) &^ (lanes - 1)
	for j := range s {
		e := float32(math.Exp(float64(scale*s[j] - mx)))
		s[j] = e
		if j < n {
			acc[j%lanes] += e
		}
	}
	sum := reduce(&acc)
	for _, e := range s[n:] {
		sum += e
	}
	return sum
}

func weightedSumGeneric(out, p, v []float32, vs int) {
	clear(out)
	weightedSumAddGeneric(out, p, v, vs)
}

func weightedSumAddGeneric(out, p, v []float32, vs int) {
	d := len(out)
	for j, pj := range p {
		row := v[j*vs : j*vs+d]
		for i := range out {
			out[i] += float32(pj * row[i])
		}
	}
}

// Max returns the largest element of s (-Inf for none; NaNs are not expected).
var Max = maxGeneric

// Add sets dst[i] = a[i] + b[i].
var Add = addGeneric

func addGeneric(dst, a, b []float32) {
	a, b = a[:len(dst)], b[:len(dst)]
	for i := range dst {
		dst[i] = a[i] + b[i]
	}
}

func maxGeneric(s []float32) float32 {
	m := float32(math.Inf(-1))
	for _, v := range s {
		m = max(m, v)
	}
	return m
}
