package quant

import "encoding/binary"

// QuantizeBetter for the 32-value block types Q4_0, Q5_0, Q8_0 (x = d*l) and Q4_1, Q5_1
// (x = d*l + m). See better.go.

// Inverse-scale windows of the symmetric searches, relative to the largest inverse scale that
// clips nothing: wider for fewer levels, where the best scale strays further.
const (
	symLoQ4, symHiQ4 = 0.72, 1.1
	symLoQ5, symHiQ5 = 0.75, 1.1
	symLoQ8, symHiQ8 = 0.95, 1.02
)

// sub returns imp[off:off+n], or nil when there is no importance.
func sub(imp []float32, off, n int) []float32 {
	if imp == nil {
		return nil
	}
	return imp[off : off+n]
}

// prepRow validates a row and its importance and returns the weighting's row statistics;
// an importance that is zero everywhere is treated as absent.
func prepRow(src, imp []float32) ([]float32, float32, float32, error) {
	if err := checkFinite(src); err != nil {
		return nil, 0, 0, err
	}
	if err := checkImportance(imp, len(src)); err != nil {
		return nil, 0, 0, err
	}
	sigma2, impMean := rowStats(src, imp)
	if impMean <= 0 {
		imp = nil
	}
	return imp, sigma2, impMean, nil
}

func betterQ4_0(dst []byte, src []float32, importance []float32) error {
	imp, sigma2, impMean, err := prepRow(src, importance)
	if err != nil {
		return err
	}
	var (
		sp      sweeper
		w       [32]float32
		L       [32]int8
		ref     [sizeQ4_0]byte
		scratch [64]float32
	)
	for i := 0; i < len(src)/32; i++ {
		x := src[32*i : 32*i+32]
		blockWeights(w[:], x, sub(imp, 32*i, 32), sigma2, impMean)
		d := sp.symFit(x, w[:], L[:], -8, 7, symLoQ4, symHiQ4)
		ds := symStore(x, w[:], L[:], d, -8, 7)
		b := dst[i*sizeQ4_0 : (i+1)*sizeQ4_0]
		putF16(b, ds)
		for j := 0; j < 16; j++ {
			b[2+j] = uint8(L[j]+8) | uint8(L[j+16]+8)<<4
		}
		quantQ4_0(ref[:], x)
		keepBetter(Q4_0, b, ref[:], x, w[:], scratch[:])
	}
	return nil
}

func betterQ5_0(dst []byte, src []float32, importance []float32) error {
	imp, sigma2, impMean, err := prepRow(src, importance)
	if err != nil {
		return err
	}
	var (
		sp      sweeper
		w       [32]float32
		L       [32]int8
		ref     [sizeQ5_0]byte
		scratch [64]float32
	)
	for i := 0; i < len(src)/32; i++ {
		x := src[32*i : 32*i+32]
		blockWeights(w[:], x, sub(imp, 32*i, 32), sigma2, impMean)
		d := sp.symFit(x, w[:], L[:], -16, 15, symLoQ5, symHiQ5)
		ds := symStore(x, w[:], L[:], d, -16, 15)
		b := dst[i*sizeQ5_0 : (i+1)*sizeQ5_0]
		putF16(b, ds)
		var qh uint32
		for j := 0; j < 16; j++ {
			q0, q1 := uint8(L[j]+16), uint8(L[j+16]+16)
			b[6+j] = q0&15 | (q1&15)<<4
			qh |= uint32(q0>>4) << j
			qh |= uint32(q1>>4) << (j + 16)
		}
		binary.LittleEndian.PutUint32(b[2:], qh)
		quantQ5_0(ref[:], x)
		keepBetter(Q5_0, b, ref[:], x, w[:], scratch[:])
	}
	return nil
}

func betterQ8_0(dst []byte, src []float32, importance []float32) error {
	imp, sigma2, impMean, err := prepRow(src, importance)
	if err != nil {
		return err
	}
	var (
		sp      sweeper
		w       [32]float32
		L       [32]int8
		ref     [sizeQ8_0]byte
		scratch [64]float32
	)
	for i := 0; i < len(src)/32; i++ {
		x := src[32*i : 32*i+32]
		blockWeights(w[:], x, sub(imp, 32*i, 32), sigma2, impMean)
		d := sp.symFit(x, w[:], L[:], -128, 127, symLoQ8, symHiQ8)
		ds := symStore(x, w[:], L[:], d, -128, 127)
		b := dst[i*sizeQ8_0 : (i+1)*sizeQ8_0]
		putF16(b, ds)
		for j, l := range L {
			b[2+j] = uint8(l)
		}
		quantBlockQ8_0(&ref, (*[32]float32)(x))
		keepBetter(Q8_0, b, ref[:], x, w[:], scratch[:])
	}
	return nil
}

// asymStore picks float16 d and m near the fitted ones whose re-rounded levels (in
// [0, nmax]) give the smallest error, as Q4_1/Q5_1 dequantize them: float32(l*d) + m.
func asymStore(x, w []float32, L []uint8, d, m float64, nmax int32) (float32, float32) {
	n := len(x)
	L = L[:n]
	var lv [32]uint8
	bestErr := -1.0
	var bd, bm float32
	for _, dv := range f16Near(float32(d)) {
		for _, mv := range f16Near(float32(m)) {
			var id float32
			if dv != 0 {
				id = 1 / dv
			}
			var e float64
			for j, v := range x {
				l := clampL(nearestInt((v-mv)*id), 0, nmax)
				lv[j] = uint8(l)
				diff := float64(v - (float32(float32(l)*dv) + mv))
				e += float64(w[j]) * diff * diff
			}
			if bestErr < 0 || e < bestErr {
				bestErr, bd, bm = e, dv, mv
				copy(L, lv[:n])
			}
		}
	}
	return bd, bm
}

func betterQ4_1(dst []byte, src []float32, importance []float32) error {
	imp, sigma2, impMean, err := prepRow(src, importance)
	if err != nil {
		return err
	}
	var (
		sp      sweeper
		w       [32]float32
		L       [32]uint8
		ref     [sizeQ4_1]byte
		scratch [64]float32
	)
	for i := 0; i < len(src)/32; i++ {
		x := src[32*i : 32*i+32]
		blockWeights(w[:], x, sub(imp, 32*i, 32), sigma2, impMean)
		d, m := sp.asymFit(x, w[:], L[:], 15, false, asymLo4, asymHi4, offsetsLegacy)
		ds, ms := asymStore(x, w[:], L[:], d, m, 15)
		b := dst[i*sizeQ4_1 : (i+1)*sizeQ4_1]
		putF16(b, ds)
		putF16(b[2:], ms)
		for j := 0; j < 16; j++ {
			b[4+j] = L[j] | L[j+16]<<4
		}
		quantQ4_1(ref[:], x)
		keepBetter(Q4_1, b, ref[:], x, w[:], scratch[:])
	}
	return nil
}

func betterQ5_1(dst []byte, src []float32, importance []float32) error {
	imp, sigma2, impMean, err := prepRow(src, importance)
	if err != nil {
		return err
	}
	var (
		sp      sweeper
		w       [32]float32
		L       [32]uint8
		ref     [sizeQ5_1]byte
		scratch [64]float32
	)
	for i := 0; i < len(src)/32; i++ {
		x := src[32*i : 32*i+32]
		blockWeights(w[:], x, sub(imp, 32*i, 32), sigma2, impMean)
		d, m := sp.asymFit(x, w[:], L[:], 31, false, asymLo5, asymHi5, offsetsLegacy)
		ds, ms := asymStore(x, w[:], L[:], d, m, 31)
		b := dst[i*sizeQ5_1 : (i+1)*sizeQ5_1]
		putF16(b, ds)
		putF16(b[2:], ms)
		var qh uint32
		for j := 0; j < 16; j++ {
			q0, q1 := L[j], L[j+16]
			b[8+j] = q0&15 | (q1&15)<<4
			qh |= uint32(q0>>4) << j
			qh |= uint32(q1>>4) << (j + 16)
		}
		binary.LittleEndian.PutUint32(b[4:], qh)
		quantQ5_1(ref[:], x)
		keepBetter(Q5_1, b, ref[:], x, w[:], scratch[:])
	}
	return nil
}

// Inverse-scale windows of the asymmetric searches (relative to nmax/(max-min)).
const (
	asymLo4, asymHi4 = 0.7, 1.1
	asymLo5, asymHi5 = 0.8, 1.06
)
