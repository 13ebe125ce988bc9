package quant

import (
	"math/rand/v2"
	"testing"
)

// Grid describes a block as its dequantizer reads it: rounding each dequantized value to the
// grid gives that value back, and storing those levels gives a block with the same values;
// rounding other values gives the grid point the stored block then holds.
func TestGridRoundTrip(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for _, ty := range []Type{Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K} {
		f, _ := FormatOf(ty)
		n := ty.BlockSize()
		rs := ty.TypeSize()
		for trial := 0; trial < 50; trial++ {
			x := heavyRow(r, n, 0.05)
			if trial == 0 {
				clear(x) // an all-zero block: zero scales
			}
			b := make([]byte, rs)
			if err := f.QuantizeSearch(b, x, nil, SearchGrid); err != nil {
				t.Fatal(err)
			}
			y := make([]float32, n)
			f.Dequantize(y, b)
			var g Grid
			if !g.Load(ty, b) {
				t.Fatalf("%v: Load refused", ty)
			}
			L := make([]int32, n)
			for j, v := range y {
				l, q := g.Round(j, v)
				if q != v || l < g.Lmin || l > g.Lmax {
					t.Fatalf("%v trial %d: value %d %v rounds to level %d = %v", ty, trial, j, v, l, q)
				}
				L[j] = l
			}
			b2 := make([]byte, rs)
			copy(b2, b)
			g.Store(b2, L)
			y2 := make([]float32, n)
			f.Dequantize(y2, b2)
			for j := range y {
				if y2[j] != y[j] {
					t.Fatalf("%v trial %d: stored levels give %v at %d, was %v", ty, trial, y2[j], j, y[j])
				}
			}
			// Other values: the stored block holds exactly the grid points Round returned.
			z := heavyRow(r, n, 0.05)
			for j, v := range z {
				L[j], z[j] = g.Round(j, v)
			}
			g.Store(b2, L)
			f.Dequantize(y2, b2)
			for j := range z {
				if y2[j] != z[j] {
					t.Fatalf("%v trial %d: stored block has %v at %d, Round said %v", ty, trial, y2[j], j, z[j])
				}
			}
		}
	}
	var g Grid
	if g.Load(IQ4_NL, make([]byte, IQ4_NL.TypeSize())) {
		t.Error("Load accepted IQ4_NL, whose levels are not evenly spaced")
	}
}
