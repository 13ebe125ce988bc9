package quant

import (
	"crypto/sha256"
	"encoding/hex"
	"math"
	"math/rand/v2"
	"testing"
)

// The default quantizers' bytes are a contract: speed work on the full search (search*.go) must
// not change a single output byte. TestSearchFullPinned hashes the outputs of every type on rows
// that exercise the searches (Gaussian, heavy-tailed, float16-valued like the random test
// models, with calibration importance, and the edge cases) and compares them with hashes taken
// from the code before the speed work (commit cf16f41). A changed hash means changed bytes.

// pinRows returns the rows hashed by TestSearchFullPinned, with their importance (nil for none).
func pinRows() (rows, imps [][]float32) {
	const n = 768 // the 124M shape's row length: three super-blocks
	r := rand.New(rand.NewPCG(11, 12))
	add := func(x, imp []float32) {
		rows = append(rows, x)
		imps = append(imps, imp)
	}
	for range 24 {
		add(gaussRow(r, n, 0.02), nil)
	}
	for range 24 {
		add(heavyRow(r, n, 0.05), nil)
	}
	for range 24 { // float16 values from a discretized normal: many exact ties
		x := gaussRow(r, n, 0.02)
		for i, v := range x {
			x[i] = F16ToF32(F32ToF16(float32(math.Round(float64(v)*2048) / 2048)))
		}
		add(x, nil)
	}
	for range 24 {
		add(heavyRow(r, n, 0.05), importanceRow(r, n))
	}
	g := gaussRow(r, n, 1)
	fill := func(f func(i int) float32) []float32 {
		x := make([]float32, n)
		for i := range x {
			x[i] = f(i)
		}
		return x
	}
	imp := importanceRow(r, n)
	for _, x := range [][]float32{
		fill(func(int) float32 { return 0 }),
		fill(func(i int) float32 {
			if i == 77 {
				return 3000
			}
			return g[i]
		}),
		fill(func(i int) float32 { return g[i] * 1e-20 }),
		fill(func(i int) float32 { return g[i] * 1e-6 }),
		fill(func(i int) float32 { return g[i] * 1e-39 }),
		fill(func(int) float32 { return 0.37 }),
		fill(func(int) float32 { return -1.5 }),
		fill(func(i int) float32 { return -abs32(g[i]) - 0.1 }),
		fill(func(i int) float32 { return abs32(g[i]) + 2 }),
		fill(func(i int) float32 {
			if i == 300 {
				return -0.25
			}
			return 0
		}),
		fill(func(i int) float32 { return g[i] * 20000 }),
		fill(func(i int) float32 { return g[i] * 1e9 }),
		fill(func(i int) float32 { return float32(i%2) - 0.5 }),
		fill(func(i int) float32 { return float32(i%7-3) * 0.01 }), // values on a grid
		fill(func(i int) float32 { // zero blocks between random ones
			if (i/32)%2 == 0 {
				return 0
			}
			return g[i]
		}),
	} {
		add(x, nil)
		add(x, imp)
	}
	return rows, imps
}

// pinnedFull are the sha256 hashes (first 16 hex digits) of SearchFull's outputs on
// pinRows, computed with the code of commit cf16f41 (before the speed work).
var pinnedFull = map[Type]string{
	Q4_0: "085dc75f01f57cdb", Q4_1: "724fc4e91811ba95", Q5_0: "4a7c91b478c32ecb", Q5_1: "c04dd7b28b488557",
	Q8_0: "7c04259d97811c79", Q4_K: "dcd1786e03598277", Q5_K: "eaa901d06a73be3d", Q6_K: "c42067d95ac27dc2",
	// IQ4_NL and IQ4_XS: pinned when they were added (search_iq4.go).
	IQ4_NL: "ae94b78001900de3", IQ4_XS: "b1e4c601adb5e9df",
	Q2_K: "213026b0a3beabac", Q3_K: "6e18720f0799214d", // search_lowk.go: one search for both
}

// searchHash is the hash of the rows quantized to ty with the search s.
func searchHash(t testing.TB, ty Type, rows, imps [][]float32, s Search) string {
	f, _ := FormatOf(ty)
	h := sha256.New()
	for i, x := range rows {
		rs, _ := ty.RowSize(int64(len(x)))
		q := make([]byte, rs)
		if err := f.QuantizeSearch(q, x, imps[i], s); err != nil {
			t.Fatalf("%v row %d: %v", ty, i, err)
		}
		h.Write(q)
	}
	return hex.EncodeToString(h.Sum(nil))[:16]
}

func TestSearchFullPinned(t *testing.T) { testPinned(t, SearchFull, pinnedFull) }

// testPinned compares the hashes of the search s's outputs on pinRows with the pinned ones.
func testPinned(t *testing.T, s Search, pinned map[Type]string) {
	rows, imps := pinRows()
	for _, ty := range searchTypes {
		got := searchHash(t, ty, rows, imps, s)
		if want := pinned[ty]; got != want {
			t.Errorf("%v: %v search's bytes changed: hash %s, pinned %s", ty, s, got, want)
		}
	}
}

// BenchmarkSearchFull measures SearchFull on one 768-value row of float16-valued Gaussian
// weights (the random 124M model's rows); MB/s counts the float32 input bytes.
func BenchmarkSearchFull(b *testing.B) {
	benchSearch(b, SearchFull)
}

// benchSearch runs the search s on one 768-value row of float16-valued Gaussian
// weights, for every type.
func benchSearch(b *testing.B, s Search) {
	for _, ty := range searchTypes {
		b.Run(ty.String(), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(2, 2))
			const n = 768
			x := gaussRow(rng, n, 0.02)
			for i, v := range x {
				x[i] = F16ToF32(F32ToF16(v))
			}
			rs, _ := ty.RowSize(n)
			q := make([]byte, rs)
			f, _ := FormatOf(ty)
			b.SetBytes(4 * n)
			c0 := cpuNanos()
			for b.Loop() {
				if err := f.QuantizeSearch(q, x, nil, s); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuNanos()-c0)/float64(b.N), "cpu-ns/op")
		})
	}
}
