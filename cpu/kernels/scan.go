package kernels

import "math"

// MaxFinite returns the index of the first largest element of x and whether every element is
// finite (no NaN, no infinity); with a non-finite element the index means nothing. It is the
// sampler's greedy pick over a vocabulary of logits: 50k values a token, which a scalar loop
// scans in tens of microseconds, a tenth of a GPU step of a small model. x must not be empty.
// Every tier gives the same answer.
var MaxFinite func(x []float32) (int, bool)

// IndexAtLeast writes to dst, in increasing order, the indexes i of x with x[i] >= t (NaN is
// never at least t), as many as fit, and returns how many there are in all (which may exceed
// len(dst)): the sampler's top-k keeps only the logits above a threshold. Every tier gives the
// same answer.
var IndexAtLeast func(x []float32, t float32, dst []int32) int

func useGenericScan() {
	MaxFinite = maxFiniteGeneric
	IndexAtLeast = indexAtLeastGeneric
}

func indexAtLeastGeneric(x []float32, t float32, dst []int32) int {
	n := 0
	for i, v := range x {
		if v >= t {
			if n < len(dst) {
				dst[n] = int32(i)
			}
			n++
		}
	}
	return n
}

func maxFiniteGeneric(x []float32) (int, bool) {
	const exponent = 0x7f800000 // all ones: infinite or NaN
	best, mx := 0, x[0]
	for i, v := range x {
		if math.Float32bits(v)&exponent == exponent {
			return i, false
		}
		if v > mx {
			best, mx = i, v
		}
	}
	return best, true
}
