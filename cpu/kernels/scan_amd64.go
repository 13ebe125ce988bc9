//go:build amd64 && !purego

package kernels

import mathbits "math/bits"

// maxAVX2 returns the largest of x[0:n] (n a positive multiple of 32) and the sum of x[i]*0,
// which is NaN exactly when some x[i] is infinite or NaN.
//
//go:noescape
func maxAVX2(x *float32, n uintptr) (mx, zero float32)

// indexAVX2 returns the index of the first element of x[0:n] (n a positive multiple of 8)
// equal to v, or n.
//
//go:noescape
func indexAVX2(x *float32, n uintptr, v float32) uintptr

// atLeastMasksAVX2 sets bit i%64 of masks[i/64] when x[i] >= t, for i < n (n a positive
// multiple of 64); the caller lists the set bits, which are few where a threshold is high.
//
//go:noescape
func atLeastMasksAVX2(x *float32, n uintptr, t float32, masks *uint64)

// useScan installs the scan kernels of the SIMD tiers (AVX2 instructions: the scan is bound
// by reading the values, and AVX-512 adds nothing there).
func useScan() {
	MaxFinite = maxFiniteAVX2
	IndexAtLeast = indexAtLeastAVX2
}

// indexAtLeastAVX2 compares 64 values at a time into a bit mask on the stack and lists its set
// bits; the tail goes through the generic loop.
func indexAtLeastAVX2(x []float32, t float32, dst []int32) int {
	var masks [64]uint64 // 4096 values per kernel call
	cnt := 0
	add := func(i int) {
		if cnt < len(dst) {
			dst[cnt] = int32(i)
		}
		cnt++
	}
	n := len(x) &^ 63
	for lo := 0; lo < n; lo += 4096 {
		m := min(4096, n-lo)
		atLeastMasksAVX2(&x[lo], uintptr(m), t, &masks[0])
		for w, bits := range masks[:m/64] {
			for ; bits != 0; bits &= bits - 1 {
				add(lo + w*64 + mathbits.TrailingZeros64(bits))
			}
		}
	}
	for i := n; i < len(x); i++ {
		if x[i] >= t {
			add(i)
		}
	}
	return cnt
}

// maxFiniteAVX2 finds the maximum and checks finiteness in one vector pass over the whole
// multiples of 32, the rest in Go, then finds the maximum's first index in a second pass.
func maxFiniteAVX2(x []float32) (int, bool) {
	n := len(x) &^ 31
	if n == 0 {
		return maxFiniteGeneric(x)
	}
	mx, zero := maxAVX2(&x[0], uintptr(n))
	if zero != 0 { // NaN: some value is not finite
		return 0, false
	}
	if n < len(x) {
		t, ok := maxFiniteGeneric(x[n:])
		if !ok {
			return 0, false
		}
		if x[n+t] > mx { // larger than everything before it
			return n + t, true
		}
	}
	return int(indexAVX2(&x[0], uintptr(n), mx)), true
}
