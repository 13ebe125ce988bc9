//go:build amd64 && !purego

package kernels

//go:noescape
func weightedSumAdd64AVX512(out, p, v *float32, vs, n uintptr)

//go:noescape
func weightedSumAdd64AVX2(out, p, v *float32, vs, n uintptr)

func weightedSumAddAVX512Go(out, p, v []float32, vs int) {
	if len(out) != 64 || len(p) == 0 {
		weightedSumAddGeneric(out, p, v, vs)
		return
	}
	_ = v[(len(p)-1)*vs+63]
	weightedSumAdd64AVX512(&out[0], &p[0], &v[0], uintptr(4*vs), uintptr(len(p)))
}

func weightedSumAddAVX2Go(out, p, v []float32, vs int) {
	if len(out) != 64 || len(p) == 0 {
		weightedSumAddGeneric(out, p, v, vs)
		return
	}
	_ = v[(len(p)-1)*vs+63]
	weightedSumAdd64AVX2(&out[0], &p[0], &v[0], uintptr(4*vs), uintptr(len(p)))
}
