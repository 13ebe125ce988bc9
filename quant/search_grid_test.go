package quant

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The grid search (SearchGrid): its grid kernels equal their generic loops bit for bit, its
// blocks are valid and never worse than the reference block under the weighted error, and its
// quality stays close to the full search's.

// gridRow fills x and w with a group of n values of the kinds the callers pass.
func gridRow(r *rand.Rand, x, w []float32) float32 {
	sc := float32(r.ExpFloat64())
	for j := range x {
		v := float32(r.NormFloat64()) * sc
		switch r.IntN(8) {
		case 0:
			v = 0
		case 1:
			v = F16ToF32(F32ToF16(v))
		case 2:
			v = float32(math.Copysign(0, -1))
		}
		x[j] = v
		w[j] = float32(r.ExpFloat64())
		if r.IntN(16) == 0 {
			w[j] = 0
		}
	}
	return sc
}

// The assembly symGrid and asymGrid8 equal the generic loops bit for bit, on random groups
// and candidates (both signs, levels clamped at either end, offsets above and below the
// values, lanes without a valid fit).
func TestGridTiers(t *testing.T) {
	if !candAsmAvailable {
		t.Skip("no assembly grid kernels on this CPU or build")
	}
	r := rand.New(rand.NewPCG(51, 52))
	var x, w [32]float32
	ranges := [][2]float32{{-8, 7}, {-16, 15}, {-128, 127}, {-32, 31}}
	for it := range 20000 {
		n := 16 + 16*(it%2)
		if it%97 == 0 {
			n = 1 + r.IntN(32)
		}
		sc := gridRow(r, x[:n], w[:n])
		var sxx float32
		for j := 0; j < n; j++ {
			sxx += float32(float32(w[j]*x[j]) * x[j])
		}
		if r.IntN(10) == 0 {
			sxx *= float32(r.Float64())
		}
		var s [16]float32
		var m0 [8]float32
		for c := range s {
			s[c] = float32(r.NormFloat64()) * 20 / sc
		}
		for c := range m0 {
			m0[c] = float32(r.NormFloat64()) * sc
			if r.IntN(4) == 0 {
				m0[c] = 0
			}
		}
		lr := ranges[r.IntN(len(ranges))]
		var g1, g2 gridBest
		symGridGeneric(x[:n], w[:n], s[:], lr[0], lr[1], sxx, &g1)
		symGridAsm(&x[0], &w[0], uintptr(n), &s[0], 2, lr[0], lr[1], sxx, &g2)
		for l := range g1.e {
			if math.Float32bits(g1.e[l]) != math.Float32bits(g2.e[l]) || math.Float32bits(g1.d[l]) != math.Float32bits(g2.d[l]) || g1.idx[l] != g2.idx[l] {
				t.Fatalf("case %d symGrid lane %d: generic %v %v %d, assembly %v %v %d", it, l, g1.e[l], g1.d[l], g1.idx[l], g2.e[l], g2.d[l], g2.idx[l])
			}
		}
		if g1.bi != g2.bi || math.Float32bits(g1.bd) != math.Float32bits(g2.bd) {
			t.Fatalf("case %d symGrid best: generic %d %v, assembly %d %v", it, g1.bi, g1.bd, g2.bi, g2.bd)
		}
		if n == 32 {
			id := s[it%16]
			var l1, l2 [32]int8
			for j, v := range x {
				l1[j] = int8(clampL(nearestInt(v*id), int32(lr[0]), int32(lr[1])))
			}
			symLevels32Asm(&x, id, lr[0], lr[1], &l2)
			if l1 != l2 {
				t.Fatalf("case %d symLevels32: generic %v, assembly %v", it, l1, l2)
			}
			var want float32
			var amax float32
			for _, v := range x {
				if a := abs32(v); amax < a {
					amax, want = a, v
				}
			}
			if got := absMaxFirst32Asm(&x); math.Float32bits(got) != math.Float32bits(want) {
				t.Fatalf("case %d absMaxFirst32: %v, want %v", it, got, want)
			}
		}
		if n%8 == 0 {
			p1, n1, s1 := blockStatsGeneric(x[:n], w[:n])
			var out [3]float32
			blockStatsAsm(&x[0], &w[0], uintptr(n/8), &out)
			if p1 != out[0] || n1 != out[1] || math.Float32bits(s1) != math.Float32bits(out[2]) {
				t.Fatalf("case %d blockStats: generic %v %v %v, assembly %v", it, p1, n1, s1, out)
			}
		}
		var ds, id [8]float32
		for c := range ds {
			ds[c] = F16ToF32(F32ToF16(1 / s[c]))
			id[c] = 1 / ds[c]
			if r.IntN(20) == 0 {
				ds[c], id[c] = 0, 0
			}
		}
		var f1, f2 [8]float32
		symFixed8Generic(x[:n], w[:n], &ds, &id, lr[0], lr[1], &f1)
		symFixed8Asm(&x[0], &w[0], uintptr(n), &ds, &id, lr[0], lr[1], &f2)
		for c := range f1 {
			if math.Float32bits(f1[c]) != math.Float32bits(f2[c]) {
				t.Fatalf("case %d symFixed8 lane %d: generic %v, assembly %v", it, c, f1[c], f2[c])
			}
		}
		hi := float32([]int{15, 31}[r.IntN(2)])
		var a1, a2 [24]float32
		s8 := (*[8]float32)(s[:8])
		asymGrid8Generic(x[:n], w[:n], s8, &m0, hi, &a1)
		asymGrid8Asm(&x[0], &w[0], uintptr(n), s8, &m0, hi, &a2)
		for i := range a1 {
			if math.Float32bits(a1[i]) != math.Float32bits(a2[i]) {
				t.Fatalf("case %d asymGrid8 sum %d: generic %v, assembly %v", it, i, a1[i], a2[i])
			}
		}
	}
}

// refQ8_0 equals quantBlockQ8_0 byte for byte (the assembly rounding of ties included).
func TestRefQ8_0Tiers(t *testing.T) {
	r := rand.New(rand.NewPCG(61, 62))
	var x [32]float32
	for it := range 20000 {
		sc := float32(r.ExpFloat64())
		for j := range x {
			switch r.IntN(6) {
			case 0: // ties: amax is 127 steps, these are k + 0.5 steps
				x[j] = (float32(r.IntN(254)-127) + 0.5) * sc / 127
			case 1:
				x[j] = 0
			default:
				x[j] = float32(r.NormFloat64()) * sc
			}
		}
		if it%3 == 0 {
			x[r.IntN(32)] = sc // amax = sc exactly: ties at x = (k+0.5)*sc/127
		}
		if it%50 == 0 {
			x = [32]float32{}
		}
		if it%7 == 0 { // float32 subnormals: 1/d overflows
			for j := range x {
				x[j] *= 1e-39
			}
		}
		var a, b [sizeQ8_0]byte
		quantBlockQ8_0(&a, &x)
		refQ8_0(&b, &x)
		if a != b {
			t.Fatalf("case %d: refQ8_0 %v, quantBlockQ8_0 %v", it, b, a)
		}
	}
}

// The assembly candT8 equals the generic loop bit for bit (errors and levels), with both
// level ranges, offsets, zero scales and values clamped at either end.
func TestCandT8Tiers(t *testing.T) {
	if !candAsmAvailable {
		t.Skip("no assembly on this CPU or build")
	}
	r := rand.New(rand.NewPCG(65, 66))
	var xT, wT [256]float32
	for it := range 10000 {
		n := 16 + 16*(it%2)
		sc := gridRow(r, xT[:8*n], wT[:8*n])
		var p candT
		for k := 0; k < 8; k++ {
			ds := F16ToF32(F32ToF16(float32(r.ExpFloat64()) * sc / 20))
			if r.IntN(10) == 0 {
				ds = 0
			}
			if r.IntN(2) == 0 {
				p.set(k, ds, 0, -32, 31)
			} else {
				p.set(k, ds, float32(r.ExpFloat64())*sc, 0, int32([]int{15, 31}[r.IntN(2)]))
			}
		}
		var e1, e2 [8]float32
		var l1, l2 [256]float32
		candT8Generic(xT[:], wT[:], n, &p, &e1, l1[:])
		candT8Asm(&xT[0], &wT[0], uintptr(n), &p, &e2, &l2[0])
		for k := range e1 {
			if math.Float32bits(e1[k]) != math.Float32bits(e2[k]) {
				t.Fatalf("case %d lane %d: generic %v, assembly %v", it, k, e1[k], e2[k])
			}
		}
		for i := range l1 {
			if math.Float32bits(l1[i]) != math.Float32bits(l2[i]) {
				t.Fatalf("case %d level %d: generic %v, assembly %v", it, i, l1[i], l2[i])
			}
		}
	}
}

// The assembly symErr2 equals the generic loop bit for bit.
func TestSymErr2Tiers(t *testing.T) {
	if !candAsmAvailable {
		t.Skip("no assembly on this CPU or build")
	}
	r := rand.New(rand.NewPCG(63, 64))
	var x, w [32]float32
	var la, lb [32]int8
	for it := range 20000 {
		sc := gridRow(r, x[:], w[:])
		for j := range la {
			la[j], lb[j] = int8(r.IntN(256)-128), int8(r.IntN(256)-128)
		}
		da, db := sc/float32(1+r.IntN(127)), -sc/float32(1+r.IntN(127))
		ea, eb := symErr2Generic(x[:], w[:], &la, &lb, da, db)
		var out [2]float64
		symErr2Asm(&x[0], &w[0], &la, &lb, da, db, &out)
		if math.Float64bits(ea) != math.Float64bits(out[0]) || math.Float64bits(eb) != math.Float64bits(out[1]) {
			t.Fatalf("case %d: generic %v %v, assembly %v", it, ea, eb, out)
		}
	}
}

// refQ4_0 equals quantQ4_0 byte for byte.
func TestRefQ4_0Tiers(t *testing.T) {
	r := rand.New(rand.NewPCG(67, 68))
	var x [32]float32
	for it := range 20000 {
		sc := float32(r.ExpFloat64())
		for j := range x {
			switch r.IntN(6) {
			case 0: // at the rounding points: max is 8 steps, these are k + 0.5 steps
				x[j] = (float32(r.IntN(16)-8) + 0.5) * sc / 8
			case 1:
				x[j] = 0
			default:
				x[j] = float32(r.NormFloat64()) * sc
			}
		}
		if it%3 == 0 {
			x[r.IntN(32)] = sc * float32(1-2*r.IntN(2))
		}
		if it%50 == 0 {
			x = [32]float32{}
		}
		if it%7 == 0 {
			for j := range x {
				x[j] *= 1e-39
			}
		}
		var a, b [sizeQ4_0]byte
		quantQ4_0(a[:], x[:])
		refQ4_0(b[:], x[:])
		if a != b {
			t.Fatalf("case %d: refQ4_0 %v, quantQ4_0 %v", it, b, a)
		}
	}
}

// ScalesFinite agrees with dequantizing: finite scales exactly when every value is finite.
func TestScalesFinite(t *testing.T) {
	r := rand.New(rand.NewPCG(69, 70))
	for _, ty := range searchTypes {
		f, _ := FormatOf(ty)
		for _, sc := range []float64{0.02, 1, 1e5, 1e9} {
			x := gaussRow(r, 512, sc)
			rs, _ := ty.RowSize(512)
			for _, quantize := range []func([]byte, []float32) error{f.Quantize, func(q []byte, x []float32) error { return f.QuantizeSearch(q, x, nil, SearchGrid) }} {
				q := make([]byte, rs)
				if err := quantize(q, x); err != nil {
					t.Fatal(err)
				}
				y := make([]float32, 512)
				f.Dequantize(y, q)
				want := allFinite(y)
				got, known := ScalesFinite(ty, q)
				if !known || got != want {
					t.Errorf("%v scale %g: ScalesFinite %v (known %v), values finite %v", ty, sc, got, known, want)
				}
			}
		}
	}
	if _, known := ScalesFinite(Q8_K, nil); known {
		t.Error("ScalesFinite claims Q8_K")
	}
}

// No block of SearchGrid is worse than the reference block under the weighted error, and
// whole rows are better, on the rows TestSearchBeatsReference uses and on pinRows' edge cases.
func TestGridBeatsReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const n, rows = 2048, 4
	for _, ty := range searchTypes {
		var tot rowResult
		for row := 0; row < rows; row++ {
			scale := 0.02 * math.Exp(r.NormFloat64())
			for _, x := range [][]float32{gaussRow(r, n, scale), heavyRow(r, n, scale)} {
				for _, imp := range [][]float32{nil, importanceRow(r, n)} {
					res := compareRow(t, ty, x, imp, SearchGrid)
					if res.worseBlocks > 0 {
						t.Errorf("%v row %d: %d blocks have a larger weighted error than the reference's", ty, row, res.worseBlocks)
					}
					if res.wseOurs >= res.wseRef {
						t.Errorf("%v row %d: weighted error %.6g not below the reference's %.6g", ty, row, res.wseOurs, res.wseRef)
					}
					tot.wseOurs += res.wseOurs
					tot.wseRef += res.wseRef
				}
			}
		}
		t.Logf("%-5v weighted RMSE vs the reference %+.2f%%", ty, 100*(math.Sqrt(tot.wseOurs/tot.wseRef)-1))
	}
	rows2, imps := pinRows()
	for _, ty := range searchTypes {
		for i, x := range rows2[96:] { // the edge cases
			if x[0] > 1e8 || x[0] < -1e8 || x[1] > 1e8 || x[1] < -1e8 {
				continue // beyond float16: the scales saturate, only validity is asked (TestGridValid)
			}
			if res := compareRow(t, ty, x, imps[96+i], SearchGrid); res.worseBlocks > 0 {
				t.Errorf("%v edge case %d: %d blocks worse than the reference", ty, i, res.worseBlocks)
			}
		}
	}
}

// SearchGrid's blocks are valid (finite scales and values; zeros stay zeros), it rejects
// what SearchFull rejects, and it allocates nothing per row.
func TestGridValid(t *testing.T) {
	rows, imps := pinRows()
	r := rand.New(rand.NewPCG(3, 4))
	rows = append(rows, gaussRow(r, 1024, 1), heavyRow(r, 1024, 0.05))
	imps = append(imps, nil, importanceRow(r, 1024))
	for _, ty := range searchTypes {
		f, _ := FormatOf(ty)
		for i, x := range rows {
			rs, _ := ty.RowSize(int64(len(x)))
			q := make([]byte, rs)
			if err := f.QuantizeSearch(q, x, imps[i], SearchGrid); err != nil {
				t.Fatalf("%v row %d: %v", ty, i, err)
			}
			y := checkBlocks(t, ty, q, len(x), "grid")
			zero := true
			for _, v := range x {
				zero = zero && v == 0
			}
			for j, v := range y {
				if zero && v != 0 {
					t.Fatalf("%v row %d: a zero row dequantizes to %v at %d", ty, i, v, j)
				}
			}
		}
		rs, _ := ty.RowSize(256)
		q := make([]byte, rs)
		for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1))} {
			x := make([]float32, 256)
			x[100] = bad
			if err := f.QuantizeSearch(q, x, nil, SearchGrid); err == nil {
				t.Errorf("%v: %v in the input accepted", ty, bad)
			}
		}
		if err := f.QuantizeSearch(q, make([]float32, 256), make([]float32, 255), SearchGrid); err == nil {
			t.Errorf("%v: importance of the wrong length accepted", ty)
		}
		x := heavyRow(r, 1024, 0.1)
		imp := importanceRow(r, 1024)
		rs, _ = ty.RowSize(1024)
		q = make([]byte, rs)
		for _, im := range [][]float32{nil, imp} {
			if a := testing.AllocsPerRun(5, func() { f.QuantizeSearch(q, x, im, SearchGrid) }); a != 0 {
				t.Errorf("%v: %v allocations per row", ty, a)
			}
		}
	}
}

// The grid search stays close to the full one: on Gaussian and heavy-tailed rows its weighted
// RMSE is at most 1.5% (legacy types and Q6_K) or 3% (Q4_K, Q5_K, Q4_1, Q5_1) above the full
// search's; measured on the trained fixture, 0.0-0.9% (SPEED.md).
func TestGridCloseToFull(t *testing.T) {
	r := rand.New(rand.NewPCG(9, 10))
	var rows [][]float32
	for range 6 {
		rows = append(rows, gaussRow(r, 2048, 0.02), heavyRow(r, 2048, 0.02))
	}
	for _, ty := range searchTypes {
		f, _ := FormatOf(ty)
		var wFull, wGrid float64
		for _, x := range rows {
			rs, _ := ty.RowSize(int64(len(x)))
			a, b := make([]byte, rs), make([]byte, rs)
			if err := f.QuantizeSearch(a, x, nil, SearchFull); err != nil {
				t.Fatal(err)
			}
			if err := f.QuantizeSearch(b, x, nil, SearchGrid); err != nil {
				t.Fatal(err)
			}
			w := weightsOf(x, nil)
			ya, yb := make([]float32, len(x)), make([]float32, len(x))
			f.Dequantize(ya, a)
			f.Dequantize(yb, b)
			wFull += werr(x, ya, w)
			wGrid += werr(x, yb, w)
		}
		rel := 100 * (math.Sqrt(wGrid/wFull) - 1)
		limit := 1.5
		switch ty {
		case Q4_K, Q5_K, Q4_1, Q5_1:
			limit = 3
		}
		t.Logf("%-5v grid vs full weighted RMSE %+.2f%%", ty, rel)
		if rel > limit {
			t.Errorf("%v: the grid search's weighted RMSE is %.2f%% above the full search's (limit %.1f%%)", ty, rel, limit)
		}
	}
}

// The whole grid-search quantizers give the same bytes with and without the assembly.
func TestSearchGridTiers(t *testing.T) {
	if !candAsmAvailable {
		t.Skip("no assembly on this CPU or build")
	}
	rows, imps := pinRows()
	defer func(c, g bool) { useCandAsm, useGridAsm = c, g }(useCandAsm, useGridAsm)
	for _, ty := range searchTypes {
		useCandAsm, useGridAsm = true, true
		a := searchHash(t, ty, rows, imps, SearchGrid)
		useCandAsm, useGridAsm = false, false
		g := searchHash(t, ty, rows, imps, SearchGrid)
		if a != g {
			t.Errorf("%v: assembly hash %s, generic %s", ty, a, g)
		}
	}
}

// pinnedGrid are the hashes of SearchGrid's outputs on pinRows, as measured in SPEED.md
// (the same with and without the assembly; like the full search's, they differ in GOAMD64=v3
// builds, where the compiler fuses the shared weighting's and fits' multiply-adds): a change
// to the grid search's bytes has to be deliberate, and measured again.
var pinnedGrid = map[Type]string{
	Q4_0: "e11619b614dc49e9", Q4_1: "c4f199e3fafdb403", Q5_0: "041f529ed51de162", Q5_1: "885f1c9d18c3f8dd",
	Q8_0: "266959727326112e", Q4_K: "599fe25abebf9449", Q5_K: "42f3b08a70411cc0", Q6_K: "7e1cf4d11a2b8b38",
	IQ4_NL: "1d0c12a3f92e443b", IQ4_XS: "9164f3344afaded4",
	// Q2_K and Q3_K: pinned when their search was added (search_lowk.go; the same bytes for
	// both searches).
	Q2_K: "213026b0a3beabac", Q3_K: "6e18720f0799214d",
}

func TestSearchGridPinned(t *testing.T) { testPinned(t, SearchGrid, pinnedGrid) }

// BenchmarkSearchGrid measures SearchGrid on BenchmarkSearchFull's row (one 768-value row of
// float16-valued Gaussian weights).
func BenchmarkSearchGrid(b *testing.B) {
	benchSearch(b, SearchGrid)
}

func BenchmarkGrid(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	var x, w [32]float32
	gridRow(r, x[:], w[:])
	var s [16]float32
	var m0 [8]float32
	for c := range s {
		s[c] = 5 + 0.1*float32(c)
	}
	var res gridBest
	var a [24]float32
	s8 := (*[8]float32)(s[:8])
	b.Run("sym/generic", func(b *testing.B) {
		for b.Loop() {
			symGridGeneric(x[:], w[:], s[:8], -8, 7, 1, &res)
		}
	})
	b.Run("asym/generic", func(b *testing.B) {
		for b.Loop() {
			asymGrid8Generic(x[:], w[:], s8, &m0, 15, &a)
		}
	})
	if candAsmAvailable {
		b.Run("sym/asm", func(b *testing.B) {
			for b.Loop() {
				symGridAsm(&x[0], &w[0], 32, &s[0], 1, -8, 7, 1, &res)
			}
		})
		b.Run("asym/asm", func(b *testing.B) {
			for b.Loop() {
				asymGrid8Asm(&x[0], &w[0], 32, s8, &m0, 15, &a)
			}
		})
	}
}
