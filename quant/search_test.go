package quant

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// The error-minimizing quantizers (QuantizeSearch, SearchFull) against the reference ones, on synthetic
// rows. The per-block guarantee is for the weighted error the quantizers minimize (with the
// weights they use, computed here the same way): every block keeps llama.cpp's bytes unless
// ours are strictly better by that measure, so no block can be worse. The plain RMSE is not
// minimized directly by the default weighting, so it is asserted per row in aggregate, where it
// holds by a wide margin.

var searchTypes = []Type{Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, Q2_K, Q3_K}

// heavyRow has heavy tails like real weight matrices: a Gaussian with a log-normal scale and a
// rare large outlier.
func heavyRow(r *rand.Rand, n int, scale float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		v := r.NormFloat64() * math.Exp(0.7*r.NormFloat64())
		if r.IntN(200) == 0 {
			v *= 8
		}
		x[i] = float32(v * scale)
	}
	return x
}

// importanceRow mimics calibration statistics: log-normal, with a few dominant columns and a
// few dead ones.
func importanceRow(r *rand.Rand, n int) []float32 {
	imp := make([]float32, n)
	for i := range imp {
		imp[i] = float32(math.Exp(1.5 * r.NormFloat64()))
		switch r.IntN(100) {
		case 0:
			imp[i] *= 100
		case 1:
			imp[i] = 0
		}
	}
	return imp
}

// weightsOf returns the per-element weights QuantizeSearch uses for the row x.
func weightsOf(x, imp []float32) []float32 { return weightsFor(Q4_K, x, imp) }

// weightsFor is weightsOf with the type's own weighting (lowKWeights: Q3_K's differs).
func weightsFor(ty Type, x, imp []float32) []float32 {
	sigma2, impMean := rowStats(x, imp)
	if impMean <= 0 {
		imp = nil
	}
	w := make([]float32, len(x))
	bs := 32
	if len(x)%256 == 0 {
		bs = 256 // any split gives the same weights: they are per element
	}
	for i := 0; i < len(x); i += bs {
		lowKWeights(ty, w[i:i+bs], x[i:i+bs], sub(imp, i, bs), sigma2, impMean)
	}
	return w
}

type rowResult struct {
	seOurs, seRef   float64 // plain squared errors
	wseOurs, wseRef float64 // weighted
	worseBlocks     int     // blocks whose weighted error is above the reference's
}

// compareRow quantizes x with the search s and with the reference quantizer and compares them
// block by block.
func compareRow(t *testing.T, ty Type, x, imp []float32, s Search) rowResult {
	t.Helper()
	f, _ := FormatOf(ty)
	rs, _ := ty.RowSize(int64(len(x)))
	ours, ref := make([]byte, rs), make([]byte, rs)
	if err := f.QuantizeSearch(ours, x, imp, s); err != nil {
		t.Fatalf("%v: %v", ty, err)
	}
	if err := f.Quantize(ref, x); err != nil {
		t.Fatalf("%v reference: %v", ty, err)
	}
	yo, yr := make([]float32, len(x)), make([]float32, len(x))
	f.Dequantize(yo, ours)
	f.Dequantize(yr, ref)
	w := weightsFor(ty, x, imp)
	ones := make([]float32, len(x))
	for i := range ones {
		ones[i] = 1
	}
	var res rowResult
	bs := ty.BlockSize()
	for i := 0; i < len(x); i += bs {
		xb := x[i : i+bs]
		eo, er := werr(xb, yo[i:i+bs], w[i:i+bs]), werr(xb, yr[i:i+bs], w[i:i+bs])
		if eo > er {
			res.worseBlocks++
		}
		res.wseOurs += eo
		res.wseRef += er
		res.seOurs += werr(xb, yo[i:i+bs], ones)
		res.seRef += werr(xb, yr[i:i+bs], ones)
	}
	return res
}

func TestSearchBeatsReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const n, rows = 2048, 6
	for _, ty := range searchTypes {
		for _, dist := range []string{"gauss", "heavy"} {
			for _, withImp := range []bool{false, true} {
				var tot rowResult
				for row := 0; row < rows; row++ {
					scale := 0.02 * math.Exp(r.NormFloat64())
					var x []float32
					if dist == "gauss" {
						x = gaussRow(r, n, scale)
					} else {
						x = heavyRow(r, n, scale)
					}
					var imp []float32
					if withImp {
						imp = importanceRow(r, n)
					}
					res := compareRow(t, ty, x, imp, SearchFull)
					if res.worseBlocks > 0 {
						t.Errorf("%v %s imp=%v row %d: %d blocks have a larger weighted error than the reference's", ty, dist, withImp, row, res.worseBlocks)
					}
					if !withImp && res.seOurs >= res.seRef {
						t.Errorf("%v %s row %d: plain squared error %.6g not below the reference's %.6g", ty, dist, row, res.seOurs, res.seRef)
					}
					if withImp && res.wseOurs >= res.wseRef {
						t.Errorf("%v %s row %d: weighted error %.6g not below the reference's %.6g", ty, dist, row, res.wseOurs, res.wseRef)
					}
					tot.seOurs += res.seOurs
					tot.seRef += res.seRef
					tot.wseOurs += res.wseOurs
					tot.wseRef += res.wseRef
				}
				t.Logf("%-5v %-5s importance %-5v: vs the reference, RMSE %+.2f%%, weighted RMSE %+.2f%%", ty, dist, withImp,
					100*(math.Sqrt(tot.seOurs/tot.seRef)-1), 100*(math.Sqrt(tot.wseOurs/tot.wseRef)-1))
			}
		}
	}
}

// checkBlocks verifies that a quantized row is a valid block sequence of its type: finite
// scales (non-negative d and dmin for the K-quants with mins, whose 6-bit codes the layout
// bounds by construction) and finite values.
func checkBlocks(t *testing.T, ty Type, q []byte, n int, what string) []float32 {
	t.Helper()
	ts := ty.TypeSize()
	for b := 0; b < len(q)/ts; b++ {
		blk := q[b*ts : (b+1)*ts]
		var scales []float32
		switch ty {
		case Q4_0, Q5_0, Q8_0:
			scales = []float32{getF16(blk)}
		case Q4_1, Q5_1:
			scales = []float32{getF16(blk), getF16(blk[2:])}
		case Q4_K, Q5_K:
			d, dmin := getF16(blk), getF16(blk[2:])
			if d < 0 || dmin < 0 {
				t.Errorf("%v %s block %d: d %v, dmin %v negative", ty, what, b, d, dmin)
			}
			scales = []float32{d, dmin}
		case Q6_K:
			scales = []float32{getF16(blk[208:])}
		}
		for _, s := range scales {
			if math.IsNaN(float64(s)) || math.IsInf(float64(s), 0) {
				t.Errorf("%v %s block %d: scale %v", ty, what, b, s)
			}
		}
	}
	y := make([]float32, n)
	f, _ := FormatOf(ty)
	f.Dequantize(y, q)
	for i, v := range y {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			t.Fatalf("%v %s: value %d dequantizes to %v", ty, what, i, v)
		}
	}
	return y
}

func TestSearchValidBlocks(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for _, ty := range searchTypes {
		f, _ := FormatOf(ty)
		for _, x := range [][]float32{gaussRow(r, 1024, 1), heavyRow(r, 1024, 0.05)} {
			rs, _ := ty.RowSize(int64(len(x)))
			for _, imp := range [][]float32{nil, importanceRow(r, len(x))} {
				q := make([]byte, rs)
				if err := f.QuantizeSearch(q, x, imp, SearchFull); err != nil {
					t.Fatal(err)
				}
				checkBlocks(t, ty, q, len(x), "random")
			}
		}
	}
}

func TestSearchEdgeCases(t *testing.T) {
	const n = 512
	fill := func(f func(i int) float32) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = f(i)
		}
		return x
	}
	r := rand.New(rand.NewPCG(5, 6))
	g := gaussRow(r, n, 1)
	cases := []struct {
		name string
		x    []float32
	}{
		{"zeros", fill(func(int) float32 { return 0 })},
		{"one huge outlier", fill(func(i int) float32 {
			if i == 77 {
				return 3000
			}
			return g[i]
		})},
		{"tiny", fill(func(i int) float32 { return g[i] * 1e-20 })},
		{"float16 subnormal scale", fill(func(i int) float32 { return g[i] * 1e-6 })},
		{"float32 subnormal", fill(func(i int) float32 { return g[i] * 1e-39 })},
		{"all equal positive", fill(func(int) float32 { return 0.37 })},
		{"all equal negative", fill(func(int) float32 { return -1.5 })},
		{"negative only", fill(func(i int) float32 { return -abs32(g[i]) - 0.1 })},
		{"positive only", fill(func(i int) float32 { return abs32(g[i]) + 2 })},
		{"one nonzero", fill(func(i int) float32 {
			if i == 300 {
				return -0.25
			}
			return 0
		})},
		{"near float16 max", fill(func(i int) float32 { return g[i] * 20000 })},
		{"beyond float16", fill(func(i int) float32 { return g[i] * 1e9 })},
		{"two levels", fill(func(i int) float32 { return float32(i%2) - 0.5 })},
	}
	imp := importanceRow(r, n)
	for _, ty := range searchTypes {
		f, _ := FormatOf(ty)
		rs, _ := ty.RowSize(n)
		for _, c := range cases {
			for _, im := range [][]float32{nil, imp} {
				q := make([]byte, rs)
				if err := f.QuantizeSearch(q, c.x, im, SearchFull); err != nil {
					t.Fatalf("%v %s: %v", ty, c.name, err)
				}
				y := checkBlocks(t, ty, q, n, c.name)
				if c.name == "zeros" {
					for i, v := range y {
						if v != 0 {
							t.Fatalf("%v zeros: value %d is %v", ty, i, v)
						}
					}
				}
				if c.name == "beyond float16" {
					continue // the scales saturate; only finiteness is asked
				}
				if res := compareRow(t, ty, c.x, im, SearchFull); res.worseBlocks > 0 {
					t.Errorf("%v %s: %d blocks worse than the reference", ty, c.name, res.worseBlocks)
				}
			}
		}
	}
}

func TestSearchRejects(t *testing.T) {
	for _, ty := range searchTypes {
		f, _ := FormatOf(ty)
		rs, _ := ty.RowSize(256)
		q := make([]byte, rs)
		for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
			x := make([]float32, 256)
			x[100] = bad
			if err := f.QuantizeSearch(q, x, nil, SearchFull); err == nil {
				t.Errorf("%v: %v in the input accepted", ty, bad)
			}
		}
		x := make([]float32, 256)
		for _, imp := range [][]float32{make([]float32, 255), {-1}, {float32(math.NaN())}, {float32(math.Inf(1))}} {
			full := imp
			if len(imp) == 1 {
				full = make([]float32, 256)
				full[7] = imp[0]
			}
			if err := f.QuantizeSearch(q, x, full, SearchFull); err == nil {
				t.Errorf("%v: bad importance %v accepted", ty, imp)
			}
		}
		if err := f.QuantizeSearch(q, x, nil, Search(7)); err == nil || !strings.Contains(err.Error(), "search") {
			t.Errorf("%v: unknown search: %v", ty, err)
		}
	}
}

// ParseSearch reads the names String writes, and "fast" (the grid search's former name).
func TestParseSearch(t *testing.T) {
	for _, s := range []Search{SearchFull, SearchGrid} {
		if got, err := ParseSearch(s.String()); err != nil || got != s {
			t.Errorf("ParseSearch(%q) = %v, %v", s, got, err)
		}
	}
	var zero Search
	if zero != SearchGrid {
		t.Errorf("the zero Search (the default) is %v, want grid", zero)
	}
	if got, err := ParseSearch("fast"); err != nil || got != SearchGrid {
		t.Errorf(`ParseSearch("fast") = %v, %v`, got, err)
	}
	if _, err := ParseSearch("quick"); err == nil || !strings.Contains(err.Error(), "quick") {
		t.Errorf("ParseSearch(quick): %v", err)
	}
}

func TestSearchNoAllocs(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	x := heavyRow(r, 1024, 0.1)
	imp := importanceRow(r, 1024)
	for _, ty := range searchTypes {
		f, _ := FormatOf(ty)
		rs, _ := ty.RowSize(1024)
		q := make([]byte, rs)
		for _, im := range [][]float32{nil, imp} {
			for _, s := range []Search{SearchGrid, SearchFull} {
				if a := testing.AllocsPerRun(5, func() { f.QuantizeSearch(q, x, im, s) }); a != 0 {
					t.Errorf("%v %v: %v allocations per row", ty, s, a)
				}
			}
		}
	}
}

// f16Near gives finite neighbours of the same sign, saturating beyond float16's range.
func TestF16Near(t *testing.T) {
	for _, d := range []float32{1, -1, 0.1234, -3e-5, 6e-8, 0, 65504, 1e6, -1e6} {
		c := f16Near(d)
		for _, v := range c {
			if math.IsInf(float64(v), 0) || math.IsNaN(float64(v)) {
				t.Errorf("f16Near(%v) = %v", d, c)
			}
			if d != 0 && v != 0 && (v > 0) != (d > 0) {
				t.Errorf("f16Near(%v) = %v changes sign", d, c)
			}
		}
		if abs32(d) <= 65504 && c[0] != F16ToF32(F32ToF16(d)) {
			t.Errorf("f16Near(%v)[0] = %v is not the rounded value", d, c[0])
		}
	}
}
