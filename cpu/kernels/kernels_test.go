package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gorun-dev/gorun/quant"
)

// forEachTier runs f with every tier this CPU supports switched on, then restores the best.
func forEachTier(t *testing.T, f func(t *testing.T, tier Tier)) {
	t.Helper()
	defer Use(Best())
	for _, tier := range Supported() {
		if err := Use(tier); err != nil {
			t.Fatal(err)
		}
		t.Run(tier.String(), func(t *testing.T) { f(t, tier) })
		if hasExtensions(tier) { // again without the kernels that need the extensions
			baseOnly = true
			err := Use(tier)
			baseOnly = false
			if err != nil {
				t.Fatal(err)
			}
			t.Run(tier.String()+"-base", func(t *testing.T) { f(t, tier) })
		}
	}
}

func randVec(rng *rand.Rand, n int) []float32 {
	v := make([]float32, n)
	for i := range v {
		v[i] = float32(rng.NormFloat64())
	}
	return v
}

// closeDot checks got against the float64 dot of a and b: within 1e-5 of sum |a_i b_i| (the
// scale of the rounding errors any summation order makes).
func closeDot(t *testing.T, what string, got float32, a, b []float32) {
	t.Helper()
	var exact, abs float64
	for i := range a {
		p := float64(a[i]) * float64(b[i])
		exact += p
		abs += math.Abs(p)
	}
	if d := math.Abs(float64(got) - exact); d > 1e-5*abs+1e-30 {
		t.Fatalf("%s: got %v, exact %v (error %.3g of sum|ab| %.3g)", what, got, exact, d, abs)
	}
}

var dotLengths = []int{0, 1, 7, 15, 16, 17, 31, 32, 33, 64, 100, 255, 256, 768, 777, 3072}

func TestDotMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 1))
	forEachTier(t, func(t *testing.T, tier Tier) {
		for _, k := range dotLengths {
			a, b := randVec(rng, k), randVec(rng, k)
			got := Dot(a, b)
			closeDot(t, "Dot", got, a, b)
			if want := dotGeneric(a, b); tier == Generic && got != want {
				t.Fatalf("k=%d: %v != %v", k, got, want)
			}
		}
	})
}

// Every kernel of a tier sums each element in the same order: one row, 1x4 and 4x4 give the
// same bits, whatever the strides.
func TestTilesEqualDot(t *testing.T) {
	rng := rand.New(rand.NewPCG(2, 2))
	forEachTier(t, func(t *testing.T, tier Tier) {
		for _, k := range dotLengths {
			xs, ws, os := k+3, k+5, 7
			x := randVec(rng, 4*xs)
			w := randVec(rng, 4*ws)
			const guard = 11
			out := make([]float32, 3*os+4+guard)
			for i := range out {
				out[i] = float32(math.NaN())
			}
			Dot4x4(x, xs, w, ws, k, out, os)
			for i := 0; i < 4; i++ {
				var r [4]float32
				xi := x[i*xs : i*xs+k]
				Dot1x4(xi, w, ws, &r)
				for j := 0; j < 4; j++ {
					wj := w[j*ws : j*ws+k]
					d := Dot(xi, wj)
					closeDot(t, "Dot", d, xi, wj)
					if r[j] != d || out[i*os+j] != d {
						t.Fatalf("k=%d (%d,%d): Dot %v, Dot1x4 %v, Dot4x4 %v", k, i, j, d, r[j], out[i*os+j])
					}
				}
				for j := 4; j < os && i < 3; j++ { // between rows: untouched
					if !math.IsNaN(float64(out[i*os+j])) {
						t.Fatalf("k=%d: Dot4x4 wrote out[%d]", k, i*os+j)
					}
				}
			}
			for j := 3*os + 4; j < len(out); j++ {
				if !math.IsNaN(float64(out[j])) {
					t.Fatalf("k=%d: Dot4x4 wrote past its tile (out[%d])", k, j)
				}
			}
		}
	})
}

// Dot6x4 gives Dot's bits for each of its 24 outputs and writes nothing else.
func TestTile6x4EqualsDot(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 4))
	forEachTier(t, func(t *testing.T, tier Tier) {
		for _, k := range dotLengths {
			xs, ws, os := k+3, k+5, 7
			x := randVec(rng, 6*xs)
			w := randVec(rng, 4*ws)
			const guard = 11
			out := make([]float32, 5*os+4+guard)
			for i := range out {
				out[i] = float32(math.NaN())
			}
			Dot6x4(x, xs, w, ws, k, out, os)
			for i := range out {
				r, c := i/os, i%os
				if r < 6 && c < 4 {
					if d := Dot(x[r*xs:r*xs+k], w[c*ws:c*ws+k]); out[i] != d {
						t.Fatalf("k=%d (%d,%d): Dot %v, Dot6x4 %v", k, r, c, d, out[i])
					}
				} else if !math.IsNaN(float64(out[i])) {
					t.Fatalf("k=%d: Dot6x4 wrote out[%d]", k, i)
				}
			}
		}
	})
}

// The AVX2 and AVX-512 tiers keep the same 16 lanes: their results are bit-identical.
func TestSIMDTiersAgreeExactly(t *testing.T) {
	if !cpuHas(AVX512) {
		t.Skip("needs a CPU with AVX-512 and AVX2")
	}
	defer Use(Best())
	rng := rand.New(rand.NewPCG(3, 3))
	for _, k := range dotLengths {
		a, w := randVec(rng, k), randVec(rng, 4*k)
		var r2, r5 [4]float32
		Use(AVX2)
		d2 := Dot(a, w[:k])
		Dot1x4(a, w, k, &r2)
		Use(AVX512)
		d5 := Dot(a, w[:k])
		Dot1x4(a, w, k, &r5)
		if d2 != d5 || r2 != r5 {
			t.Fatalf("k=%d: avx2 %v %v, avx512 %v %v", k, d2, r2, d5, r5)
		}
	}
}

// Dequantization is bit-exact with package quant's generic code on every tier, for every
// format, including values at the edges of each format (all-zero, extreme blocks).
func TestDequantizeExact(t *testing.T) {
	rng := rand.New(rand.NewPCG(4, 4))
	types := []quant.Type{quant.F32, quant.F16, quant.BF16, quant.Q8_0, quant.Q4_0, quant.Q4_1, quant.Q5_0,
		quant.Q5_1, quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.IQ4_NL, quant.IQ4_XS}
	forEachTier(t, func(t *testing.T, tier Tier) {
		for _, typ := range types {
			f, err := quant.FormatOf(typ)
			if err != nil {
				t.Fatal(err)
			}
			for _, blocks := range []int{1, 2, 3, 12} {
				n := blocks * typ.BlockSize()
				if typ.BlockSize() == 1 {
					n = blocks * 16
				}
				n = max(n, 256) / 256 * 256 // K-quants need 256; others take any multiple
				if typ.BlockSize() < 256 {
					n = blocks * 32
				}
				src := randVec(rng, n)
				for i := range src[:min(n, 32)] { // an all-zero stretch and large values
					src[i] = 0
				}
				src[n-1] = 1e4
				rs, _ := typ.RowSize(int64(n))
				row := make([]byte, rs)
				if err := f.Quantize(row, src); err != nil {
					t.Fatal(err)
				}
				want := make([]float32, n)
				f.Dequantize(want, row)
				const guard = 9
				got := make([]float32, n+guard)
				for i := range got {
					got[i] = float32(math.NaN())
				}
				Dequantizer(typ)(got[:n], row)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%v n=%d: value %d: got %v, want %v", typ, n, i, got[i], want[i])
					}
				}
				for i := n; i < len(got); i++ {
					if !math.IsNaN(float64(got[i])) {
						t.Fatalf("%v: wrote past the row", typ)
					}
				}
			}
		}
	})
}

func TestGELUMatchesReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 5))
	x := randVec(rng, 4099)
	for i := range x {
		x[i] *= 4
	}
	special := []float32{0, -0, 1e-30, -1e-30, 10, -10, 20, -20, 88, -88, 1000, -1000, 3.4e38, -3.4e38, -5.5, -3}
	copy(x, special)
	want := make([]float32, len(x))
	geluGeneric(want, x)
	forEachTier(t, func(t *testing.T, tier Tier) {
		got := make([]float32, len(x)+5)
		GELU(got[:len(x)], x)
		for i := range x {
			d := math.Abs(float64(got[i]) - float64(want[i]))
			// A few float32 ulps of the result, or of x where the result cancels towards 0.
			if d > 4e-7*math.Abs(float64(want[i]))+1e-7*min(1, math.Abs(float64(x[i]))) {
				t.Fatalf("gelu(%v) = %v, want %v (error %.3g)", x[i], got[i], want[i], d)
			}
		}
		for _, v := range got[len(x):] {
			if v != 0 {
				t.Fatal("GELU wrote past dst")
			}
		}
	})
}

func TestParseTier(t *testing.T) {
	for _, tier := range []Tier{Generic, AVX2, AVX512} {
		if got, err := ParseTier(tier.String()); err != nil || got != tier {
			t.Fatalf("%v: %v %v", tier, got, err)
		}
	}
	if _, err := ParseTier("sse9"); err == nil {
		t.Fatal("accepted an unknown tier")
	}
}

// The fused dequantize-and-dot kernels equal dequantizing into a tile and Dot1x4, bit for bit.
func TestMatVec4EqualsTile(t *testing.T) {
	rng := rand.New(rand.NewPCG(6, 6))
	forEachTier(t, func(t *testing.T, tier Tier) {
		for _, typ := range []quant.Type{quant.F16, quant.BF16, quant.Q8_0, quant.Q4_0, quant.Q4_1, quant.Q5_0, quant.Q5_1,
			quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.IQ4_NL, quant.IQ4_XS} {
			mv := MatVec4(typ)
			if mv == nil {
				continue
			}
			for _, k := range []int{256, 768, 3072} {
				rs, _ := typ.RowSize(int64(k))
				ws := int(rs) + 7 // rows need not be adjacent
				w := make([]byte, 3*ws+int(rs))
				tile := make([]float32, 4*k)
				for j := 0; j < 4; j++ {
					src := randVec(rng, k)
					if err := quant.QuantizeRow(typ, w[j*ws:j*ws+int(rs)], src); err != nil {
						t.Fatal(err)
					}
					Dequantizer(typ)(tile[j*k:(j+1)*k], w[j*ws:j*ws+int(rs)])
				}
				x := randVec(rng, k)
				var want, got [4]float32
				if FuseAllRows() { // the generic tier: quant's own dot product, used for every batch
					f, _ := quant.FormatOf(typ)
					for j := range want {
						want[j] = f.DotF32(w[j*ws:j*ws+int(rs)], x)
					}
				} else {
					Dot1x4(x, tile, k, &want)
				}
				mv(x, w, ws, &got)
				if got != want {
					t.Fatalf("%v k=%d: fused %v, tile %v", typ, k, got, want)
				}
			}
		}
	})
}
