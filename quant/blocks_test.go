package quant

import (
	"bytes"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// blockTypes are the block formats of this package, weights first, then activation types.
var blockTypes = []Type{Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS, Q8_1, Q8_K}

// weightTypes have DotF32 and VecDot.
var weightTypes = []Type{Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, IQ4_NL, IQ4_XS}

// maxRelRMSE bounds rms(dequantize(quantize(x)) - x) / rms(x) for Gaussian x. A uniform grid of
// step s has error s/sqrt(12); for 32 Gaussian values the largest magnitude is about 2.1σ, so
// q8_0's step is about 2.1σ/127 (error 0.005σ), q4_0's 2.1σ/8 (0.076σ), q5_0's 2.1σ/16
// (0.038σ); the min/max types spread 16 or 32 levels over the block's range (about 4.1σ:
// 0.079σ and 0.038σ). The K-quants fit scale and min per 16 or 32 values with a search, and
// pay for 6-bit or 4-bit sub-block scales; their bounds are the measured errors (q2_K 0.35,
// q3_K 0.15, q4_K 0.071, q5_K 0.036, q6_K 0.018) with a margin. Q8_K's step is set by the
// largest of 256 values (about 2.9σ): error 2.9σ/127/sqrt(12) = 0.0066σ. Bounds have 15-35%
// headroom over the values measured on 64Ki values.
var maxRelRMSE = map[Type]float64{
	Q8_0: 0.0065, Q8_1: 0.0065, Q8_K: 0.0085,
	Q4_0: 0.10, Q4_1: 0.095, Q5_0: 0.05, Q5_1: 0.047,
	Q2_K: 0.40, Q3_K: 0.21, Q4_K: 0.105, Q5_K: 0.052, Q6_K: 0.023,
	IQ4_NL: 0.09, IQ4_XS: 0.09, // measured 0.0765, 0.0771: 16 non-uniform levels, denser near 0
}

func gaussRow(rng *rand.Rand, n int, sigma float64) []float32 {
	x := make([]float32, n)
	for i := range x {
		x[i] = float32(rng.NormFloat64() * sigma)
	}
	return x
}

func mustQuantize(t testing.TB, ty Type, x []float32) []byte {
	t.Helper()
	rs, err := ty.RowSize(int64(len(x)))
	if err != nil {
		t.Fatal(err)
	}
	q := make([]byte, rs)
	if err := QuantizeRow(ty, q, x); err != nil {
		t.Fatalf("%v: %v", ty, err)
	}
	return q
}

func mustDequantize(t testing.TB, ty Type, q []byte, n int) []float32 {
	t.Helper()
	y := make([]float32, n)
	if err := DequantizeRow(ty, y, q); err != nil {
		t.Fatalf("%v: %v", ty, err)
	}
	return y
}

func relRMSE(got, want []float32) float64 {
	var se, ss float64
	for i := range want {
		d := float64(got[i]) - float64(want[i])
		se += d * d
		ss += float64(want[i]) * float64(want[i])
	}
	if ss == 0 {
		return math.Sqrt(se / float64(len(want)))
	}
	return math.Sqrt(se / ss)
}

func dot64(a, b []float32) (dot, abs float64) {
	for i := range a {
		p := float64(a[i]) * float64(b[i])
		dot += p
		abs += math.Abs(p)
	}
	return
}

func allFinite(x []float32) bool {
	for _, v := range x {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return false
		}
	}
	return true
}

// nearest_int's magic-number trick is round-half-to-even for every input in its range.
func TestNearestInt(t *testing.T) {
	check := func(f float32) {
		if got, want := nearestInt(f), int32(math.RoundToEven(float64(f))); got != want {
			t.Fatalf("nearestInt(%v) = %d, want %d", f, got, want)
		}
	}
	for k := int32(-4194303); k <= 4194302; k += 997 {
		check(float32(k))
		check(float32(k) + 0.5) // ties, exactly representable below 2^22
		check(math.Nextafter32(float32(k)+0.5, 0))
		check(math.Nextafter32(float32(k)+0.5, 1e9))
	}
	for _, f := range []float32{0, -0.0, 0.5, -0.5, 1.5, -1.5, 2.5, 4194303, -4194303, 4194302.5, -4194302.5, 1e-30, -1e-30} {
		check(f)
	}
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 1_000_000; i++ {
		f := float32((rng.Float64()*2 - 1) * math.Pow(2, float64(rng.IntN(23))))
		check(f)
	}
	// Every third float32 in [0.25, 64], the range quantizers use most, and every tie there.
	for b := math.Float32bits(0.25); b <= math.Float32bits(64); b += 3 {
		f := math.Float32frombits(b)
		check(f)
		check(-f)
	}
	for k := float32(-64); k <= 64; k++ {
		for _, f := range []float32{k + 0.5, math.Nextafter32(k+0.5, -100), math.Nextafter32(k+0.5, 100)} {
			check(f)
		}
	}
}

// roundAway is roundf: half away from zero.
func TestRoundAway(t *testing.T) {
	check := func(f float32) {
		if got, want := roundAway(f), int32(math.Round(float64(f))); got != want {
			t.Fatalf("roundAway(%v) = %d, want %d", f, got, want)
		}
	}
	for k := float32(-300); k <= 300; k++ {
		for _, f := range []float32{k, k + 0.5, math.Nextafter32(k+0.5, -1000), math.Nextafter32(k+0.5, 1000), k + 0.25} {
			check(f)
		}
	}
	for b := math.Float32bits(1e-6); b <= math.Float32bits(200); b += 7 {
		check(math.Float32frombits(b))
		check(-math.Float32frombits(b))
	}
}

func TestRoundTripError(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const n = 1 << 16
	x := gaussRow(rng, n, 0.02)
	for _, ty := range blockTypes {
		y := mustDequantize(t, ty, mustQuantize(t, ty, x), n)
		e := relRMSE(y, x)
		t.Logf("%-5v relative RMSE %.4f (bound %.4f)", ty, e, maxRelRMSE[ty])
		if e > maxRelRMSE[ty] {
			t.Errorf("%v: relative RMSE %.4f above %.4f", ty, e, maxRelRMSE[ty])
		}
	}
}

// A known Q4_0 block, checked byte by byte: values (j%16-8)/2 give d = 0.5 and q = j%16.
func TestQ4_0Layout(t *testing.T) {
	x := make([]float32, 32)
	for j := range x {
		x[j] = float32(j%16-8) / 2
	}
	q := mustQuantize(t, Q4_0, x)
	want := []byte{0x00, 0x38}
	for j := 0; j < 16; j++ {
		want = append(want, byte(j)|byte(j)<<4)
	}
	if !bytes.Equal(q, want) {
		t.Fatalf("got % x\nwant % x", q, want)
	}
	y := mustDequantize(t, Q4_0, q, 32)
	for j := range x {
		if y[j] != x[j] {
			t.Fatalf("value %d: %v, want %v", j, y[j], x[j])
		}
	}
}

// Quantizing what a block dequantizes to gives the same block back for the formats with a
// closed-form scale (the largest magnitude or the min/max reproduce the stored scale exactly).
// Two exceptions among those: Q8_1's s is d*sum(q) computed with the float32 d before it is
// rounded to half, so the second round's s can differ in the last half bit (d and the quants
// are identical); Q8_K stores d = 1/iscale in float32, which the second round recomputes
// from a max that is itself rounded, so d may move by an ulp, and when a block holds both
// +127 and -127 the second round may pick the other one as its max, negating d and every
// quant: the values are the same to an ulp.
// The K-quants search their scales, so a dequantized block may requantize to a nearby grid:
// for them the second round must move the values far less than the quantization error and the
// third round must hardly move them at all.
func TestRequantize(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	const n = 1 << 15
	x := gaussRow(rng, n, 1)
	for _, ty := range blockTypes {
		q1 := mustQuantize(t, ty, x)
		y1 := mustDequantize(t, ty, q1, n)
		q2 := mustQuantize(t, ty, y1)
		bs, ts := ty.BlockSize(), ty.TypeSize()
		same := 0
		for b := 0; b < n/bs; b++ {
			if bytes.Equal(q1[b*ts:(b+1)*ts], q2[b*ts:(b+1)*ts]) {
				same++
			}
		}
		frac := float64(same) / float64(n/bs)
		switch ty {
		case Q8_0, Q4_0, Q4_1, Q5_0, Q5_1:
			if frac != 1 {
				t.Errorf("%v: %d of %d blocks change when requantized", ty, n/bs-same, n/bs)
			}
		case Q8_1:
			for b := 0; b < n/bs; b++ {
				b1, b2 := q1[b*ts:(b+1)*ts], q2[b*ts:(b+1)*ts]
				if !bytes.Equal(b1[:2], b2[:2]) || !bytes.Equal(b1[4:], b2[4:]) {
					t.Fatalf("q8_1 block %d: d or quants changed", b)
				}
				if s1, s2 := getF16(b1[2:]), getF16(b2[2:]); math.Abs(float64(s1-s2)) > math.Abs(float64(s1))/1024 {
					t.Fatalf("q8_1 block %d: s %v -> %v", b, s1, s2)
				}
			}
		case Q8_K:
			y2 := mustDequantize(t, ty, q2, n)
			for i := range y1 {
				if math.Abs(float64(y1[i]-y2[i])) > 1e-6*math.Abs(float64(y1[i])) {
					t.Fatalf("q8_K value %d: %v -> %v", i, y1[i], y2[i])
				}
			}
		default:
			y2 := mustDequantize(t, ty, q2, n)
			y3 := mustDequantize(t, ty, mustQuantize(t, ty, y2), n)
			e21, e32 := relRMSE(y2, y1), relRMSE(y3, y2)
			t.Logf("%v: %.1f%% of blocks stable; round 2 moves values by %.4f, round 3 by %.4f (relative RMSE)", ty, 100*frac, e21, e32)
			if e21 > maxRelRMSE[ty]/4 || e32 > maxRelRMSE[ty]/20 {
				t.Errorf("%v: requantization not stable: %.2f of blocks, errors %.4f %.4f", ty, frac, e21, e32)
			}
		}
	}
}

// DotF32 is the dot product of the dequantized row with x, up to float32 summation error.
func TestDotF32(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for _, n := range []int{256, 4096} {
		for trial := 0; trial < 8; trial++ {
			w := gaussRow(rng, n, 0.05)
			x := gaussRow(rng, n, 1)
			if trial%2 == 1 { // non-zero mean exercises the min terms
				for i := range x {
					x[i] += 0.7
					w[i] += 0.01
				}
			}
			for _, ty := range weightTypes {
				q := mustQuantize(t, ty, w)
				f, _ := FormatOf(ty)
				want, abs := dot64(mustDequantize(t, ty, q, n), x)
				got := float64(f.DotF32(q, x))
				if math.Abs(got-want) > 1e-5*abs {
					t.Errorf("%v n=%d: DotF32 %v, dequantized dot %v (sum|wx| %v)", ty, n, got, want, abs)
				}
			}
		}
	}
}

// VecDot computes exactly the dot product of the two dequantized rows (up to float32 rounding,
// and for Q8_1 the half-precision rounding of its stored d*sum); it differs from DotF32 on the
// float activations only by the activation quantization error.
func TestVecDot(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	const n = 4096
	for trial := 0; trial < 8; trial++ {
		w := gaussRow(rng, n, 0.05)
		x := gaussRow(rng, n, 1)
		if trial%2 == 1 {
			for i := range x {
				x[i] += 0.7
				w[i] += 0.01
			}
		}
		for _, ty := range weightTypes {
			f, _ := FormatOf(ty)
			vt := f.VecDotType
			if vt != Q8_0 && vt != Q8_1 && vt != Q8_K {
				t.Fatalf("%v: vec dot type %v", ty, vt)
			}
			q := mustQuantize(t, ty, w)
			xq := mustQuantize(t, vt, x)
			wd := mustDequantize(t, ty, q, n)
			xd := mustDequantize(t, vt, xq, n)
			got := float64(f.VecDot(q, xq))
			want, abs := dot64(wd, xd)
			tol := 1e-5 * abs
			if vt == Q8_1 { // m*s uses s rounded to half precision
				ms := 0.0
				ms1 := ty.TypeSize()
				for b := 0; b < n/32; b++ {
					m := float64(getF16(q[b*ms1+2:]))
					s := float64(getF16(xq[b*36+2:]))
					ms += math.Abs(m * s)
				}
				tol += ms / 1024
			}
			if math.Abs(got-want) > tol {
				t.Errorf("%v: VecDot %v, dot of dequantized rows %v (tolerance %v)", ty, got, want, tol)
			}
			// Against the float activations: the activation error bounds the difference.
			exact := float64(f.DotF32(q, x))
			var actErr float64
			for i := range x {
				actErr += math.Abs(float64(wd[i]) * float64(x[i]-xd[i]))
			}
			if math.Abs(got-exact) > actErr+tol+1e-5*abs {
				t.Errorf("%v: VecDot %v vs DotF32 %v beyond activation error %v", ty, got, exact, actErr)
			}
		}
	}
}

// Awkward blocks: the quantizers must not produce NaN or Inf, and must keep what can be kept.
func TestEdgeBlocks(t *testing.T) {
	const n = 512
	rng := rand.New(rand.NewPCG(11, 12))
	cases := []struct {
		name string
		x    func() []float32
		// maxErr bounds max|y-x| relative to max|x|; < 0 means only finiteness is checked.
		maxErr func(Type) float64
	}{
		{"zeros", func() []float32 { return make([]float32, n) }, func(Type) float64 { return 0 }},
		{"outlier", func() []float32 {
			x := make([]float32, n)
			for i := range x {
				x[i] = float32(rng.Float64()*2e-3 - 1e-3)
			}
			x[37] = 1e4
			x[300] = -1e4
			return x
		}, func(ty Type) float64 { return 1.0 / 8 }},
		{"tiny", func() []float32 { return gaussRow(rng, n, 1e-30) }, func(Type) float64 { return 1 }},
		{"negative", func() []float32 {
			x := gaussRow(rng, n, 1)
			for i := range x {
				x[i] = -abs32(x[i]) - 0.5
			}
			return x
		}, func(ty Type) float64 { return 0.7 }},
		{"f16 range", func() []float32 {
			x := gaussRow(rng, n, 2e4)
			for i := range x {
				x[i] = max(-6e4, min(6e4, x[i]))
			}
			x[5] = 65504
			x[400] = -65504
			return x
		}, func(ty Type) float64 { return 0.7 }},
	}
	for _, c := range cases {
		x := c.x()
		var amax float64
		for _, v := range x {
			amax = max(amax, math.Abs(float64(v)))
		}
		for _, ty := range blockTypes {
			q := mustQuantize(t, ty, x)
			y := mustDequantize(t, ty, q, n)
			if !allFinite(y) {
				t.Errorf("%s %v: non-finite dequantized values", c.name, ty)
				continue
			}
			var maxErr float64
			for i := range x {
				maxErr = max(maxErr, math.Abs(float64(y[i])-float64(x[i])))
			}
			if lim := c.maxErr(ty) * amax; maxErr > lim {
				t.Errorf("%s %v: max error %g above %g", c.name, ty, maxErr, lim)
			}
			if c.name == "zeros" {
				for _, v := range y {
					if v != 0 {
						t.Fatalf("zeros %v: dequantized to %v", ty, v)
					}
				}
			}
			if c.name == "outlier" {
				// The outliers themselves survive within their block's step.
				for _, i := range []int{37, 300} {
					if e := math.Abs(float64(y[i]-x[i])) / 1e4; e > 0.1 {
						t.Errorf("outlier %v: value %d is %v", ty, i, y[i])
					}
				}
			}
			if f, _ := FormatOf(ty); f.DotF32 != nil {
				ones := make([]float32, n)
				for i := range ones {
					ones[i] = 1
				}
				if d := f.DotF32(q, ones); math.IsNaN(float64(d)) || math.IsInf(float64(d), 0) {
					t.Errorf("%s %v: DotF32 %v", c.name, ty, d)
				}
			}
		}
	}
}

// The all-zero block stores zero scales (ggml's q4_0 stores -0: max/-8 with max = 0).
func TestZeroBlockScales(t *testing.T) {
	x := make([]float32, QK_K)
	for _, ty := range blockTypes {
		q := mustQuantize(t, ty, x)
		nonzero := 0
		for _, b := range q {
			if b != 0 {
				nonzero++
			}
		}
		switch ty {
		case Q4_0, Q5_0: // d = -0 (0x8000); quants 8 resp. 16 (x/d = 0 -> 8.5 -> 8)
			if getF16(q) != 0 || q[1] != 0x80 {
				t.Errorf("%v: d bytes % x", ty, q[:2])
			}
		case Q4_1, Q5_1, Q8_0, Q8_1, Q8_K, Q4_K, Q5_K, Q6_K, Q2_K, Q3_K:
			if nonzero != 0 {
				t.Errorf("%v: zero input gives % x", ty, q[:min(len(q), 40)])
			}
		}
	}
}

func TestNonFiniteRejected(t *testing.T) {
	for _, ty := range blockTypes {
		for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
			x := make([]float32, 512)
			x[300] = bad
			q := make([]byte, ty.TypeSize()*512/ty.BlockSize())
			err := QuantizeRow(ty, q, x)
			if err == nil || !strings.Contains(err.Error(), "300") {
				t.Errorf("%v with %v: error %v", ty, bad, err)
			}
			f, _ := FormatOf(ty)
			if err := f.Quantize(q, x); err == nil {
				t.Errorf("%v Quantize accepted %v", ty, bad)
			}
			err = QuantizeRows(ty, q, x, 256)
			if err == nil || !strings.Contains(err.Error(), "row 1") {
				t.Errorf("%v QuantizeRows with %v: error %v", ty, bad, err)
			}
		}
	}
}

func TestRowHelpers(t *testing.T) {
	x := make([]float32, 64)
	for i := range x {
		x[i] = float32(i)
	}
	if err := QuantizeRow(Q4_0, make([]byte, 35), x); err == nil {
		t.Error("short destination accepted")
	}
	if err := QuantizeRow(Q4_K, make([]byte, 144), x); err == nil {
		t.Error("partial super-block accepted")
	}
	if err := QuantizeRow(IQ2_XXS, make([]byte, 66), make([]float32, 256)); err == nil {
		t.Error("unsupported type accepted")
	}
	if err := DequantizeRow(Q8_0, make([]float32, 64), make([]byte, 67)); err == nil {
		t.Error("long source accepted")
	}
	if err := QuantizeRows(Q8_0, make([]byte, 68), x, 48); err == nil {
		t.Error("row length not a block multiple accepted")
	}
	if err := QuantizeRows(Q8_0, make([]byte, 68), x[:48], 32); err == nil {
		t.Error("partial row accepted")
	}
	// QuantizeRows is QuantizeRow row by row.
	rng := rand.New(rand.NewPCG(13, 14))
	src := gaussRow(rng, 4*512, 1)
	for _, ty := range blockTypes {
		rs := ty.TypeSize() * 512 / ty.BlockSize()
		all := make([]byte, 4*rs)
		if err := QuantizeRows(ty, all, src, 512); err != nil {
			t.Fatal(err)
		}
		for r := 0; r < 4; r++ {
			if one := mustQuantize(t, ty, src[r*512:(r+1)*512]); !bytes.Equal(one, all[r*rs:(r+1)*rs]) {
				t.Errorf("%v row %d differs", ty, r)
			}
		}
	}
}

// Large inputs are quantized by several goroutines: same bytes, and the error of the first bad
// row.
func TestQuantizeRowsParallel(t *testing.T) {
	const rows, rowLen = 300, 256
	rng := rand.New(rand.NewPCG(17, 18))
	src := gaussRow(rng, rows*rowLen, 1)
	for _, ty := range []Type{Q8_0, Q4_K} {
		rs := ty.TypeSize() * rowLen / ty.BlockSize()
		all := make([]byte, rows*rs)
		if err := QuantizeRows(ty, all, src, rowLen); err != nil {
			t.Fatal(err)
		}
		for r := 0; r < rows; r++ {
			if one := mustQuantize(t, ty, src[r*rowLen:(r+1)*rowLen]); !bytes.Equal(one, all[r*rs:(r+1)*rs]) {
				t.Fatalf("%v row %d differs", ty, r)
			}
		}
	}
	src[250*rowLen+3] = float32(math.Inf(1))
	src[100*rowLen+7] = float32(math.NaN())
	err := QuantizeRows(Q8_0, make([]byte, rows*rowLen/32*34), src, rowLen)
	if err == nil || !strings.HasPrefix(err.Error(), "row 100: ") {
		t.Fatalf("error %v, want row 100's", err)
	}
}

// The formats are registered with the kernels and activation types ggml uses.
func TestRegistered(t *testing.T) {
	want := map[Type]Type{Q8_0: Q8_0, Q4_0: Q8_0, Q5_0: Q8_0, Q4_1: Q8_1, Q5_1: Q8_1,
		Q2_K: Q8_K, Q3_K: Q8_K, Q4_K: Q8_K, Q5_K: Q8_K, Q6_K: Q8_K, IQ4_NL: Q8_0, IQ4_XS: Q8_K}
	for _, ty := range blockTypes {
		f, err := FormatOf(ty)
		if err != nil {
			t.Fatal(err)
		}
		if f.Dequantize == nil || f.Quantize == nil {
			t.Errorf("%v: missing kernels", ty)
		}
		if vt, ok := want[ty]; ok {
			if f.DotF32 == nil || f.VecDot == nil || f.VecDotType != vt {
				t.Errorf("%v: DotF32 %v, VecDot %v, VecDotType %v", ty, f.DotF32 != nil, f.VecDot != nil, f.VecDotType)
			}
		}
	}
}

// Q8_K's block sums are the sums of its quants, and Q8_1's s is d times the quant sum.
func TestActivationSums(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	x := gaussRow(rng, 1024, 3)
	q := mustQuantize(t, Q8_K, x)
	for b := 0; b < 4; b++ {
		blk := (*[sizeQ8_K]byte)(q[b*sizeQ8_K:])
		for j := 0; j < 16; j++ {
			var s int32
			for _, v := range blk[4+16*j : 4+16*j+16] {
				s += int32(int8(v))
			}
			if got := bsum(blk, j); got != s {
				t.Fatalf("block %d sum %d: %d, want %d", b, j, got, s)
			}
		}
	}
	q1 := mustQuantize(t, Q8_1, x)
	for b := 0; b < 32; b++ {
		blk := q1[b*36 : b*36+36]
		var s int32
		for _, v := range blk[4:] {
			s += int32(int8(v))
		}
		// s was computed from the float32 d before its rounding to half: allow both roundings.
		want := float64(s) * float64(getF16(blk))
		if got := float64(getF16(blk[2:])); math.Abs(got-want) > math.Abs(want)/1024 {
			t.Fatalf("block %d: s %v, want %v", b, got, want)
		}
	}
}

func ExampleQuantizeRow() {
	x := make([]float32, 32)
	for i := range x {
		x[i] = float32(i) / 4
	}
	q := make([]byte, 34) // one Q8_0 block
	if err := QuantizeRow(Q8_0, q, x); err != nil {
		panic(err)
	}
	y := make([]float32, 32)
	if err := DequantizeRow(Q8_0, y, q); err != nil {
		panic(err)
	}
	fmt.Println(y[0], y[4], y[31])
	// Output: 0 0.9765625 7.751465
}
