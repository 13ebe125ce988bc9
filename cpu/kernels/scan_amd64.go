//go:build amd64 && !purego

package kernels

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

// useScan installs the scan kernels of the SIMD tiers (AVX2 instructions: the scan is bound
// by reading the values, and AVX-512 adds nothing there).
func useScan() { MaxFinite = maxFiniteAVX2 }

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
