//go:build amd64 && !purego

package kernels

import (
	"math"
	"math/rand/v2"
	"testing"

	"github.com/gorun-dev/gorun/quant"
)

// Extra checks for the SIMD tiers' quantized kernels with rows of random bytes (every nibble,
// high bit and 6-bit scale pattern, not only what the quantizers produce), block scales kept
// finite.

// randRow returns nb blocks of type t filled with random bytes whose half-precision scales are
// finite.
func randRow(rng *rand.Rand, t quant.Type, n int) []byte {
	rs, _ := t.RowSize(int64(n))
	row := make([]byte, rs)
	for i := range row {
		row[i] = byte(rng.Uint32())
	}
	var size int
	var halves []int
	switch t {
	case quant.F16, quant.BF16:
		size = 2
		halves = []int{0}
	case quant.Q8_0:
		size, halves = quant.SizeQ8_0, []int{0}
	case quant.Q4_0:
		size, halves = quant.SizeQ4_0, []int{0}
	case quant.Q4_1:
		size, halves = 20, []int{0, 2}
	case quant.Q5_0:
		size, halves = 22, []int{0}
	case quant.Q5_1:
		size, halves = 24, []int{0, 2}
	case quant.Q4_K:
		size, halves = quant.SizeQ4_K, []int{0, 2}
	case quant.Q5_K:
		size, halves = quant.SizeQ5_K, []int{0, 2}
	case quant.Q6_K:
		size, halves = quant.SizeQ6_K, []int{208}
	case quant.IQ4_NL:
		size, halves = quant.SizeIQ4_NL, []int{0}
	case quant.IQ4_XS:
		size, halves = quant.SizeIQ4_XS, []int{0}
	}
	for b := 0; b+size <= len(row); b += size {
		for _, h := range halves {
			row[b+h+1] &^= 0x40 // exponent < 16: finite
		}
	}
	return row
}

var quantTypes = []quant.Type{quant.F16, quant.BF16, quant.Q8_0, quant.Q4_0, quant.Q4_1, quant.Q5_0, quant.Q5_1,
	quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.IQ4_NL, quant.IQ4_XS}

func TestDequantizeRandomBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	forEachTier(t, func(t *testing.T, tier Tier) {
		for _, typ := range quantTypes {
			f, _ := quant.FormatOf(typ)
			for _, n := range []int{256, 512, 2816} {
				row := randRow(rng, typ, n)
				want := make([]float32, n)
				f.Dequantize(want, row)
				got := make([]float32, n)
				Dequantizer(typ)(got, row)
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("%v n=%d: value %d: got %v, want %v", typ, n, i, got[i], want[i])
					}
				}
			}
		}
	})
}

// The fused kernels equal the tile path on random bytes, and AVX2 equals AVX-512 exactly.
func TestMatVec4RandomBytes(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	type result struct {
		tier Tier
		typ  quant.Type
		k    int
		out  [4]float32
	}
	var results []result
	cases := map[quant.Type][][]byte{}
	xs := map[int][]float32{}
	ks := []int{256, 1024, 2816}
	for _, k := range ks {
		xs[k] = randVec(rng, k)
	}
	forEachTier(t, func(t *testing.T, tier Tier) {
		for _, typ := range quantTypes {
			mv := MatVec4(typ)
			if mv == nil || FuseAllRows() { // the generic tier's fused kernel is quant's DotF32
				continue
			}
			for ki, k := range ks {
				rs, _ := typ.RowSize(int64(k))
				ws := int(rs) + 5
				if len(cases[typ]) <= ki {
					w := make([]byte, 3*ws+int(rs))
					for j := 0; j < 4; j++ {
						copy(w[j*ws:], randRow(rng, typ, k))
					}
					cases[typ] = append(cases[typ], w)
				}
				w := cases[typ][ki]
				tile := make([]float32, 4*k)
				for j := 0; j < 4; j++ {
					Dequantizer(typ)(tile[j*k:(j+1)*k], w[j*ws:j*ws+int(rs)])
				}
				x := xs[k]
				var want, got [4]float32
				Dot1x4(x, tile, k, &want)
				mv(x, w, ws, &got)
				if got != want {
					t.Fatalf("%v k=%d: fused %v, tile %v", typ, k, got, want)
				}
				results = append(results, result{tier, typ, k, got})
			}
		}
	})
	for _, a := range results {
		for _, b := range results {
			if a.tier != Generic && b.tier != Generic && a.typ == b.typ && a.k == b.k && a.out != b.out {
				t.Fatalf("%v k=%d: %v %v, %v %v", a.typ, a.k, a.tier, a.out, b.tier, b.out)
			}
		}
	}
}

// scaleFields lists the offsets of the half-precision scales in a block of t, and the block size.
func scaleFields(t quant.Type) (size int, halves []int) {
	switch t {
	case quant.Q4_K:
		return quant.SizeQ4_K, []int{0, 2}
	case quant.Q5_K:
		return quant.SizeQ5_K, []int{0, 2}
	case quant.Q6_K:
		return quant.SizeQ6_K, []int{208}
	}
	return 0, nil
}

// The K-quant fused kernels equal the tile path bit for bit (and AVX2 equals AVX-512) over the
// whole range of finite half-precision scales, subnormal to 65504, not only below 2 as in
// randRow; and a block whose scale is Inf or NaN gives the tile path's bits or, where that
// is NaN, NaN too. (In those Q6_K blocks every q is 63 and every scale positive, and x is
// positive over the block, so the tile path's sum is +-Inf, not NaN.)
func TestMatVec4ScaleRange(t *testing.T) {
	rng := rand.New(rand.NewPCG(12, 12))
	const k = 1024
	x := randVec(rng, k)
	for i := 256; i < 512; i++ {
		x[i] = float32(math.Abs(float64(x[i])))
	}
	type key struct {
		typ  quant.Type
		c, j int
	}
	first := map[key]float32{}
	cases := map[quant.Type][][]byte{}
	for _, typ := range []quant.Type{quant.Q4_K, quant.Q5_K, quant.Q6_K} {
		rs, _ := typ.RowSize(k)
		size, halves := scaleFields(typ)
		for c := 0; c < 12; c++ {
			ws := int(rs) + 3
			w := make([]byte, 3*ws+int(rs))
			for j := 0; j < 4; j++ {
				row := randRow(rng, typ, k)
				if c >= 8 && j == c-8 && typ == quant.Q6_K {
					blk := row[size : 2*size]
					for i := range blk[:192] {
						blk[i] = 0xff
					}
					for i := 192; i < 208; i++ {
						blk[i] = 0x10
					}
				}
				for b := 0; b+size <= len(row); b += size {
					for _, h := range halves {
						v := uint16(rng.Uint32()) & 0x7bff // exponent < 31: finite
						if c >= 8 && j == c-8 && b == size && h == halves[0] {
							v = []uint16{0x7c00, 0xfc00, 0x7e00, 0x7c01}[c-8] // +Inf, -Inf, NaN
						}
						row[b+h], row[b+h+1] = byte(v), byte(v>>8)
					}
				}
				copy(w[j*ws:], row)
			}
			cases[typ] = append(cases[typ], w)
		}
	}
	forEachTier(t, func(t *testing.T, tier Tier) {
		if tier == Generic {
			return
		}
		for _, typ := range []quant.Type{quant.Q4_K, quant.Q5_K, quant.Q6_K} {
			mv := MatVec4(typ)
			rs, _ := typ.RowSize(k)
			ws := int(rs) + 3
			for c, w := range cases[typ] {
				tile := make([]float32, 4*k)
				for j := 0; j < 4; j++ {
					Dequantizer(typ)(tile[j*k:(j+1)*k], w[j*ws:j*ws+int(rs)])
				}
				var want, got [4]float32
				Dot1x4(x, tile, k, &want)
				mv(x, w, ws, &got)
				for j := range got {
					a, b := got[j], want[j]
					if math.Float32bits(a) != math.Float32bits(b) && !(a != a && b != b) {
						t.Fatalf("%v case %d row %d: fused %v, tile %v", typ, c, j, a, b)
					}
					if f, ok := first[key{typ, c, j}]; !ok {
						first[key{typ, c, j}] = a
					} else if math.Float32bits(a) != math.Float32bits(f) && !(a != a && f != f) {
						t.Fatalf("%v case %d row %d: %v here, %v in another tier", typ, c, j, a, f)
					}
				}
			}
		}
	})
}

// The AVX2 tier's GELU, exp and attention kernels and its 4x4 tile give the AVX-512 tier's
// bits (same instruction sequence, 2^n built without VSCALEFPS), including exponentials that
// underflow to subnormals and GELU's extreme arguments.
func TestAVX2MatchesAVX512(t *testing.T) {
	if !cpuHas(AVX512) {
		t.Skip("needs a CPU with AVX-512 and AVX2")
	}
	defer Use(Best())
	rng := rand.New(rand.NewPCG(10, 10))
	x := randVec(rng, 4096+7)
	for i := range x {
		x[i] *= float32(1 + i%40) // up to +-160 and beyond
	}
	copy(x, []float32{0, float32(math.Copysign(0, -1)), 1e-30, -1e-30, 10, -10, 20, -20, 88, -88, 1000, -1000,
		3.4e38, -3.4e38, -5.5, -3, float32(math.Inf(1)), float32(math.Inf(-1)), 44, -44, 45, -45, 60, -60})
	q, k := randVec(rng, 64), randVec(rng, 37*64)
	const kk = 777
	xa, wa := randVec(rng, 4*kk), randVec(rng, 4*kk)
	var outs [2][]float32
	for i, tier := range []Tier{AVX2, AVX512} {
		Use(tier)
		g := make([]float32, len(x))
		GELU(g, x)
		s := make([]float32, 1000+9) // exponents from about -125 down to -100 clamped
		for j := range s {
			s[j] = -float32(j) / 7
		}
		sum := ExpSum(s, 1.25, -0.5)
		sc := make([]float32, 37)
		Scores(sc, q, k, 64)
		ws := make([]float32, 64)
		WeightedSum(ws, sc, k, 64)
		tile := make([]float32, 16)
		Dot4x4(xa, kk, wa, kk, kk, tile, 4)
		outs[i] = append(append(append(append(append(g, s...), sum), sc...), ws...), tile...)
	}
	for i := range outs[0] {
		a, b := outs[0][i], outs[1][i]
		if math.Float32bits(a) != math.Float32bits(b) && !(a != a && b != b) {
			in := float32(0)
			if i < len(x) {
				in = x[i]
			}
			t.Fatalf("output %d (input %v): avx2 %v, avx512 %v", i, in, a, b)
		}
	}
}

// BenchmarkAVX2Variants compares the AVX2 tier's kernels with the alternatives they replace.
func BenchmarkAVX2Variants(b *testing.B) {
	if !cpuHas(AVX2) {
		b.Skip("needs AVX2")
	}
	defer Use(Best())
	Use(AVX2)
	const k = 768
	rng := rand.New(rand.NewPCG(1, 1))
	x, w := randVec(rng, 4*k), randVec(rng, 4*k)
	out := make([]float32, 16)
	for _, v := range []struct {
		name string
		f    func(x []float32, xs int, w []float32, ws int, k int, out []float32, os int)
	}{{"dot4x4/via1x4", dot4x4Via1x4}, {"dot4x4/2x4", dot4x4AVX2Go}} {
		b.Run(v.name, func(b *testing.B) {
			c0 := threadCPU()
			for b.Loop() {
				v.f(x, k, w, k, k, out, 4)
			}
			b.ReportMetric(float64(threadCPU()-c0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// BenchmarkAttention measures the attention kernels on every tier: one head of 64 over a
// context of 1024 positions.
func BenchmarkAttention(b *testing.B) {
	const n, d = 1024, 64
	rng := rand.New(rand.NewPCG(1, 1))
	q, k, v := randVec(rng, d), randVec(rng, n*d), randVec(rng, n*d)
	s := make([]float32, n)
	out := make([]float32, d)
	b.Run("Scores", func(b *testing.B) {
		benchTiers(b, func(b *testing.B) {
			for b.Loop() {
				Scores(s, q, k, d)
			}
		})
	})
	b.Run("ExpSum", func(b *testing.B) {
		benchTiers(b, func(b *testing.B) {
			for b.Loop() {
				for j := range s {
					s[j] = float32(j%97) / 10
				}
				ExpSum(s, 0.125, 1.2)
			}
		})
	})
	b.Run("WeightedSum", func(b *testing.B) {
		benchTiers(b, func(b *testing.B) {
			for b.Loop() {
				WeightedSum(out, s, v, d)
			}
		})
	})
}
