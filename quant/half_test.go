package quant

import (
	"math"
	"testing"
)

// Every half converts to float32 and back unchanged (NaNs stay NaNs).
func TestF16RoundTripAllPatterns(t *testing.T) {
	for i := 0; i < 1<<16; i++ {
		h := uint16(i)
		f := F16ToF32(h)
		back := F32ToF16(f)
		if f != f {
			if back&0x7c00 != 0x7c00 || back&0x3ff == 0 {
				t.Fatalf("NaN %#04x came back as %#04x", h, back)
			}
			continue
		}
		if back != h {
			t.Fatalf("%#04x -> %v -> %#04x", h, f, back)
		}
	}
}

// Rounding is to nearest, ties to even, including at the subnormal boundary and overflow.
func TestF32ToF16Rounding(t *testing.T) {
	cases := []struct {
		f    float32
		want uint16
	}{
		{1, 0x3c00},
		{-2, 0xc000},
		{65504, 0x7bff},
		{65520, 0x7c00},         // rounds up to infinity
		{65519.996, 0x7bff},     // just below the tie
		{1 + 1.0/2048, 0x3c00},  // tie, even stays
		{1 + 3.0/2048, 0x3c02},  // tie, odd rounds up
		{5.9604645e-08, 0x0001}, // smallest subnormal
		{2.9802322e-08, 0x0000}, // half of it: tie to even (zero)
		{4.4703484e-08, 0x0001}, // 0.75 of it rounds up
		{6.097555e-05, 0x03ff},  // largest subnormal
		{float32(math.Inf(-1)), 0xfc00},
		{1e-10, 0},
	}
	for _, c := range cases {
		if got := F32ToF16(c.f); got != c.want {
			t.Errorf("F32ToF16(%g) = %#04x, want %#04x", c.f, got, c.want)
		}
	}
}

func TestBF16(t *testing.T) {
	if got := F32ToBF16(1.00390625); got != 0x3f80 { // tie, even
		t.Errorf("tie rounding: %#04x", got)
	}
	if got := F32ToBF16(1.01171875); got != 0x3f82 { // tie, odd rounds up
		t.Errorf("tie rounding up: %#04x", got)
	}
	if got := BF16ToF32(0x3f80); got != 1 {
		t.Errorf("BF16ToF32(0x3f80) = %v", got)
	}
	if nan := F32ToBF16(float32(math.NaN())); BF16ToF32(nan) == BF16ToF32(nan) {
		t.Errorf("NaN lost: %#04x", nan)
	}
}

func TestRowSize(t *testing.T) {
	if n, err := Q4_0.RowSize(64); err != nil || n != 36 {
		t.Errorf("Q4_0 64 = %d, %v", n, err)
	}
	if _, err := Q4_K.RowSize(100); err == nil {
		t.Error("Q4_K of 100 elements accepted")
	}
	if _, err := F32.RowSize(math.MaxInt64); err == nil {
		t.Error("overflow accepted")
	}
	if _, err := Type(4).RowSize(32); err == nil {
		t.Error("removed type accepted")
	}
	want := map[Type]int{Q4_K: 144, Q5_K: 176, Q6_K: 210, Q8_K: 292, Q2_K: 84, Q3_K: 110, IQ4_XS: 136, TQ1_0: 54, TQ2_0: 66, IQ3_S: 110, IQ2_S: 82, IQ1_M: 56, IQ1_S: 50}
	for ty, size := range want {
		if ty.TypeSize() != size {
			t.Errorf("%v: size %d, want %d", ty, ty.TypeSize(), size)
		}
	}
}
