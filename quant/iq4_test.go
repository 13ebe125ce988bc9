package quant

import (
	"bytes"
	"testing"
)

// Hand-derived IQ4 blocks: inputs whose ggml output can be worked out on paper, so the
// reference quantizer is checked without a llama.cpp binary (the exact command comparing it
// with llama-quantize is in QUALITY.md).

// iq4Exact is a block of 32 values that are c times the table's levels: level j at value j and
// level 15-j at value j+16, so every level occurs and the largest magnitude is -127c.
func iq4Exact(c float32) []float32 {
	x := make([]float32, 32)
	for j := 0; j < 16; j++ {
		x[j] = c * iq4Levels[j]
		x[j+16] = c * iq4Levels[15-j]
	}
	return x
}

// iq4ExactQS is the packed indices of iq4Exact: j | (15-j)<<4.
func iq4ExactQS() []byte {
	qs := make([]byte, 16)
	for j := range qs {
		qs[j] = byte(j) | byte(15-j)<<4
	}
	return qs
}

// With c = 2^-6, every trial scale ggml tries (the largest value mapped to -127+itry, |itry| <=
// 7, a factor within 5.5% of 1) rounds every value to its own level, and the weighted
// least-squares scale of that assignment is c exactly: with a power-of-two c each product
// w*q*x is c times w*q*q with the same rounding. So d = f16(2^-6) = 0x2400 and the indices
// are the construction's.
func TestIQ4_NLHandDerived(t *testing.T) {
	want := append([]byte{0x00, 0x24}, iq4ExactQS()...)
	got := make([]byte, sizeIQ4_NL)
	if err := quantIQ4_NL(got, iq4Exact(1.0/64)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("exact block:\n got % x\nwant % x", got, want)
	}
	// An all-zero block: scale 0, and every index the one nearest 0 (level 1, index 8).
	want = append([]byte{0, 0}, bytes.Repeat([]byte{0x88}, 16)...)
	if err := quantIQ4_NL(got, make([]float32, 32)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("zero block:\n got % x\nwant % x", got, want)
	}
}

// IQ4_XS: block k is iq4Exact(c*m[k]), c = 2^-10. Each block's fitted scale is c*m[k] (to
// within float32 rounding), the largest in magnitude is -32c, so the super-block scale is
// -(-32c)/32 = c (f16 0x1400), each block's code is m[k] (stored as m[k]+32) and its indices
// the construction's. An all-zero super-block stores d = -0/32 = -0 (f16 0x8000) and code 0
// (stored 32: low nibble 0, high bits 2) for every block.
func TestIQ4_XSHandDerived(t *testing.T) {
	m := [8]float32{-32, 5, -7, 31, 1, -1, 16, -20}
	const c = 1.0 / 1024
	var x []float32
	for _, mk := range m {
		x = append(x, iq4Exact(c*mk)...)
	}
	// codes m+32 = 0, 37, 25, 63, 33, 31, 48, 12: low nibbles 0,5 | 9,15 | 1,15 | 0,12; high
	// bits 0,2,1,3,2,1,3,0 at bits 2k: 0x36d8.
	want := []byte{0x00, 0x14, 0xd8, 0x36, 0x50, 0xf9, 0xf1, 0xc0}
	for range m {
		want = append(want, iq4ExactQS()...)
	}
	got := make([]byte, sizeIQ4_XS)
	if err := quantIQ4_XS(got, x); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("exact super-block:\n got % x\nwant % x", got, want)
	}
	// Its values dequantize exactly: c*m[k] times each level.
	y := make([]float32, QK_K)
	dequantIQ4_XS(y, got)
	for i := range y {
		if y[i] != x[i] {
			t.Fatalf("value %d: %v, want %v", i, y[i], x[i])
		}
	}

	want = append([]byte{0x00, 0x80, 0xaa, 0xaa, 0, 0, 0, 0}, bytes.Repeat([]byte{0x88}, 128)...)
	if err := quantIQ4_XS(got, make([]float32, QK_K)); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("zero super-block:\n got % x\nwant % x", got, want)
	}
}

// bestIndexIQ4 picks the nearest level, the upper one on a tie (ggml's strict <), and clamps beyond the ends.
func TestBestIndexIQ4(t *testing.T) {
	for _, c := range []struct {
		x    float32
		want uint8
	}{{-1000, 0}, {-127, 0}, {-115.6, 0}, {-115.5, 1}, {0, 8}, {-4.6, 7}, {-4.5, 8}, {100.9, 14}, {101, 15}, {1e9, 15}} {
		if got := bestIndexIQ4(c.x); got != c.want {
			t.Errorf("bestIndexIQ4(%v) = %d, want %d", c.x, got, c.want)
		}
	}
}

// bestIndexBisect is ggml's best_index_int8 as written (bisection), for comparison.
func bestIndexBisect(x float32) uint8 {
	if x <= iq4Levels[0] {
		return 0
	}
	if x >= iq4Levels[15] {
		return 15
	}
	ml, mu := 0, 15
	for mu-ml > 1 {
		mav := (ml + mu) / 2
		if x < iq4Levels[mav] {
			mu = mav
		} else {
			ml = mav
		}
	}
	if x-iq4Levels[mu-1] < iq4Levels[mu]-x {
		return uint8(mu - 1)
	}
	return uint8(mu)
}

// The table lookup picks what ggml's bisection picks: at and next to every level and midpoint
// (each ± a few ulps), and at random points.
func TestBestIndexIQ4MatchesBisection(t *testing.T) {
	var xs []float32
	for k := range iq4Levels {
		xs = append(xs, iq4Levels[k])
		if k > 0 {
			xs = append(xs, (iq4Levels[k-1]+iq4Levels[k])/2)
		}
	}
	for _, x := range append([]float32(nil), xs...) {
		for _, d := range []float32{1e-6, 1e-5, 0.25, 0.5, 0.75, 1} {
			xs = append(xs, x+d, x-d, x*(1+d), x*(1-d))
		}
	}
	s := splitMix(7)
	for i := 0; i < 200000; i++ {
		xs = append(xs, float32(300*s.uniform()-150))
	}
	for _, x := range xs {
		if a, b := bestIndexIQ4(x), bestIndexBisect(x); a != b {
			t.Fatalf("x = %v: table %d, bisection %d", x, a, b)
		}
	}
}
