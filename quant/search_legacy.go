package quant

import "encoding/binary"

// QuantizeSearch for the 32-value block types Q4_0, Q5_0, Q8_0 (x = d*l) and Q4_1, Q5_1
// (x = d*l + m). See search.go.

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

// prepRow validates a row, its importance and the search kind, and returns the weighting's row
// statistics; an importance that is zero everywhere is treated as absent.
func prepRow(src, imp []float32, s Search) ([]float32, float32, float32, error) {
	if err := s.check(); err != nil {
		return nil, 0, 0, err
	}
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

func searchQ4_0(dst []byte, src, importance []float32, s Search) error {
	return searchLegacy(Q4_0, dst, src, importance, s)
}

func searchQ5_0(dst []byte, src, importance []float32, s Search) error {
	return searchLegacy(Q5_0, dst, src, importance, s)
}

func searchQ8_0(dst []byte, src, importance []float32, s Search) error {
	return searchLegacy(Q8_0, dst, src, importance, s)
}

func searchQ4_1(dst []byte, src, importance []float32, s Search) error {
	return searchLegacy(Q4_1, dst, src, importance, s)
}

func searchQ5_1(dst []byte, src, importance []float32, s Search) error {
	return searchLegacy(Q5_1, dst, src, importance, s)
}

// searchLegacy quantizes a row of 32-value blocks of type t (Q4_0, Q5_0, Q8_0: x = d*l;
// Q4_1, Q5_1: x = d*l + m): the search, the float16 choice, packing, and the per-block
// fallback to the reference block. The types differ only in level ranges, search windows and
// packing, chosen by switches (function values would make the scratch arrays escape).
func searchLegacy(t Type, dst []byte, src, importance []float32, s Search) error {
	imp, sigma2, impMean, err := prepRow(src, importance, s)
	if err != nil {
		return err
	}
	grid := s == SearchGrid
	var (
		sp      sweeper
		w       [32]float32
		w64     [32]float64
		L       [32]int8  // symmetric levels
		U       [32]uint8 // asymmetric levels, and the stored (offset) levels of both
		ref     [sizeQ8_0]byte
		scratch [64]float32
	)
	size := t.TypeSize()
	for i := 0; i < len(src)/32; i++ {
		x := src[32*i : 32*i+32]
		blockWeights(w[:], x, sub(imp, 32*i, 32), sigma2, impMean)
		b := dst[i*size : (i+1)*size]
		lo, hi, wlo, whi, sym := legacyLevels(t)
		if grid && sym {
			cfg := gridLegacy
			if t == Q8_0 {
				cfg = gridQ8
			}
			d := gridSymFit(x, w[:], lo, hi, wlo, whi, cfg.symSigns, cfg.symPerSign)
			ds := symStoreGrid(x, w[:], L[:], d, lo, hi, cfg.store)
			putF16(b, ds)
			bias := uint8(-lo)
			if t == Q8_0 {
				bias = 0
			}
			for j, l := range L {
				U[j] = uint8(l) + bias
			}
			packLegacy(t, b, &U)
			switch t {
			case Q8_0:
				refQ8_0(&ref, (*[32]float32)(x))
			case Q4_0:
				refQ4_0(ref[:size], x)
			default:
				refLegacy(t, ref[:size], x)
			}
			keepBestSym(t, b, ref[:size], x, w[:], &L, ds)
			continue
		}
		if sym {
			d := sp.symFit(x, w[:], L[:], lo, hi, wlo, whi)
			for j, v := range w {
				w64[j] = float64(v)
			}
			putF16(b, symStore(x, w64[:], L[:], d, lo, hi))
			bias := uint8(-lo) // stored levels are l+8 (Q4_0), l+16 (Q5_0)
			if t == Q8_0 {
				bias = 0 // Q8_0 stores the int8 itself
			}
			for j, l := range L {
				U[j] = uint8(l) + bias
			}
		} else {
			var d, m float64
			if grid {
				d, m = gridAsymFit(x, w[:], U[:], hi, false, wlo, whi, offsetsLegacy, gridLegacy.asymPoints, gridLegacy.asymIters)
			} else {
				d, m = sp.asymFit(x, w[:], U[:], hi, false, wlo, whi, offsetsLegacy)
			}
			ds, ms := asymStore(x, w[:], U[:], d, m, hi)
			putF16(b, ds)
			putF16(b[2:], ms)
		}
		packLegacy(t, b, &U)
		refLegacy(t, ref[:size], x)
		keepBest(t, b, ref[:size], x, w[:], scratch[:])
	}
	return nil
}

// legacyLevels gives the level range and inverse-scale search window of a type, and whether
// it is symmetric (x = d*l) or has a min (x = d*l + m, levels 0..hi).
func legacyLevels(t Type) (lo, hi int32, wlo, whi float32, sym bool) {
	switch t {
	case Q4_0:
		return -8, 7, symLoQ4, symHiQ4, true
	case Q5_0:
		return -16, 15, symLoQ5, symHiQ5, true
	case Q8_0:
		return -128, 127, symLoQ8, symHiQ8, true
	case Q4_1:
		return 0, 15, asymLo4, asymHi4, false
	}
	return 0, 31, asymLo5, asymHi5, false // Q5_1
}

// packLegacy stores the offset levels q after the block's float16 header: 4-bit pairs for the
// 4-bit types, 4-bit pairs plus a 32-bit mask of fifth bits for the 5-bit types, bytes for Q8_0.
func packLegacy(t Type, b []byte, q *[32]uint8) {
	hdr := 2
	if t == Q4_1 || t == Q5_1 {
		hdr = 4
	}
	switch t {
	case Q8_0:
		copy(b[hdr:], q[:])
	case Q4_0, Q4_1:
		for j := 0; j < 16; j++ {
			b[hdr+j] = q[j] | q[j+16]<<4
		}
	default: // Q5_0, Q5_1
		var qh uint32
		for j := 0; j < 16; j++ {
			q0, q1 := q[j], q[j+16]
			b[hdr+4+j] = q0&15 | (q1&15)<<4
			qh |= uint32(q0>>4)<<j | uint32(q1>>4)<<(j+16)
		}
		binary.LittleEndian.PutUint32(b[hdr:], qh)
	}
}

// refLegacy is the reference quantizer's block.
func refLegacy(t Type, ref []byte, x []float32) {
	switch t {
	case Q4_0:
		quantQ4_0(ref, x)
	case Q5_0:
		quantQ5_0(ref, x)
	case Q8_0:
		quantBlockQ8_0((*[sizeQ8_0]byte)(ref), (*[32]float32)(x))
	case Q4_1:
		quantQ4_1(ref, x)
	default:
		quantQ5_1(ref, x)
	}
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

// Inverse-scale windows of the asymmetric searches (relative to nmax/(max-min)).
const (
	asymLo4, asymHi4 = 0.7, 1.1
	asymLo5, asymHi5 = 0.8, 1.06
)

// keepBestSym is keepBest for the symmetric types (Q4_0, Q5_0, Q8_0) given the levels L
// and stored scale ds of b: both blocks' weighted errors over their dequantized values
// (float32(l)*d, as the dequantizers compute them) in one pass (symErr2), the reference block
// kept when its error is no larger.
func keepBestSym(t Type, b, ref []byte, x, w []float32, L *[32]int8, ds float32) {
	var lr [32]int8
	dref := getF16(ref)
	switch t {
	case Q8_0:
		for j := range lr {
			lr[j] = int8(ref[2+j])
		}
	case Q4_0:
		for j := 0; j < 16; j++ {
			q := ref[2+j]
			lr[j], lr[j+16] = int8(q&15)-8, int8(q>>4)-8
		}
	default: // Q5_0
		qh := binary.LittleEndian.Uint32(ref[2:])
		for j := 0; j < 16; j++ {
			q := ref[6+j]
			h0 := uint8(qh>>j<<4) & 0x10
			h1 := uint8(qh>>(j+12)) & 0x10
			lr[j], lr[j+16] = int8(q&15|h0)-16, int8(q>>4|h1)-16
		}
	}
	eo, er := symErr2(x, w, L, &lr, ds, dref)
	if er <= eo {
		copy(b, ref)
	}
}
