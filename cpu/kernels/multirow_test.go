package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"slices"
	"testing"

	"github.com/gorun-dev/gorun/quant"
)

// Every output element of MatVecRows has the bits MatVec4 gives for its activation row alone,
// for every tier, type, row count and length (random bytes, so every scale and quant value
// occurs; rows and outputs at odd strides), and the kernel writes nothing outside its outputs.
func TestMatVecRowsEqualsMatVec4(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 3))
	forEachTier(t, func(t *testing.T, tier Tier) {
		for _, typ := range quantTypes {
			mv, mvr := MatVec4(typ), MatVecRows(typ)
			if (mv == nil) != (mvr == nil) {
				t.Fatalf("%v: MatVec4 nil %v, MatVecRows nil %v", typ, mv == nil, mvr == nil)
			}
			if mv == nil {
				continue
			}
			if tier == AVX512 && slices.Contains(fusedAVX512, typ) && !MatVecRowsFused(typ) {
				t.Fatalf("%v: no fused multi-row kernel in the AVX-512 tier", typ)
			}
			ks := []int{256, 768, 3072}
			if typ == quant.F16 || typ == quant.BF16 {
				ks = append(ks, 8, 40, 777) // tails of fewer than 16 values
			}
			for _, k := range ks {
				if k%typ.BlockSize() != 0 {
					continue
				}
				rs, _ := typ.RowSize(int64(k))
				ws := int(rs) + 7 // rows need not be adjacent
				w := make([]byte, 3*ws+int(rs))
				for j := range 4 {
					copy(w[j*ws:], randRow(rng, typ, k))
				}
				xs, os := k+5, 11
				x := randVec(rng, MaxMatVecRows*xs)
				for rows := 1; rows <= MaxMatVecRows; rows++ {
					const guard = -12345
					out := make([]float32, MaxMatVecRows*os)
					for i := range out {
						out[i] = guard
					}
					mvr(x, xs, rows, k, w, ws, out, os)
					for i := range MaxMatVecRows {
						var want [4]float32
						if i < rows {
							mv(x[i*xs:i*xs+k], w, ws, &want)
						}
						for j := range os {
							got := out[i*os+j]
							switch {
							case i < rows && j < 4:
								if math.Float32bits(got) != math.Float32bits(want[j]) {
									t.Fatalf("%v k=%d rows=%d: out[%d][%d] = %v, MatVec4 %v", typ, k, rows, i, j, got, want[j])
								}
							case got != guard:
								t.Fatalf("%v k=%d rows=%d: wrote out[%d][%d] = %v outside the outputs", typ, k, rows, i, j, got)
							}
						}
					}
				}
			}
		}
	})
}

// fusedAVX512 lists the types with a fused multi-row kernel in the AVX-512 tier.
var fusedAVX512 = []quant.Type{quant.F16, quant.Q8_0, quant.Q4_0, quant.Q4_K, quant.Q6_K}

// Operands that do not hold the rows asked for are refused with a panic before any kernel
// reads them, not read out of bounds.
func TestMatVecRowsRefusesShortOperands(t *testing.T) {
	mvr := MatVecRows(quant.Q8_0)
	k, ws := 64, quant.SizeQ8_0*2
	w := make([]byte, 4*ws)
	x := make([]float32, 4*k)
	out := make([]float32, 4*4)
	cases := []struct {
		name                string
		x                   []float32
		xs, rows, k, ws, os int
		w                   []byte
		out                 []float32
	}{
		{"no rows", x, k, 0, k, ws, 4, w, out},
		{"too many rows", x, k, MaxMatVecRows + 1, k, ws, 4, w, out},
		{"short x", x[:3*k+k-1], k, 4, k, ws, 4, w, out},
		{"overlapping x rows", x, k - 1, 2, k, ws, 4, w, out},
		{"short out", x, k, 4, k, ws, 4, w, out[:15]},
		{"short w", x, k, 2, k, ws, 4, w[:4*ws-1], out},
	}
	for _, c := range cases {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: accepted", c.name)
				}
			}()
			mvr(c.x, c.xs, c.rows, c.k, c.w, c.ws, c.out, c.os)
		}()
	}
}

// BenchmarkMatVecRows: four cache-resident weight rows of 3072 against 1..8 activation rows
// (8 = two calls), on the best tier: the compute side of a decode step of that many sessions.
// Compare cpu-ns/op with rows x BenchmarkMatVec4's to see what forming each weight once saves.
func BenchmarkMatVecRows(b *testing.B) {
	const k = 3072
	rng := rand.New(rand.NewPCG(1, 1))
	x := randVec(rng, 8*k)
	out := make([]float32, 8*4)
	for _, typ := range []quant.Type{quant.F16, quant.Q8_0, quant.Q4_0, quant.Q4_K, quant.Q6_K} {
		rs, _ := typ.RowSize(k)
		w := make([]byte, 4*rs)
		for j := range 4 {
			if err := quant.QuantizeRow(typ, w[int64(j)*rs:int64(j+1)*rs], randVec(rng, k)); err != nil {
				b.Fatal(err)
			}
		}
		mvr := MatVecRows(typ)
		for _, rows := range []int{1, 2, 3, 4, 8} {
			b.Run(fmt.Sprintf("%v/rows=%d", typ, rows), func(b *testing.B) {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				b.SetBytes(4 * rs)
				c0 := threadCPU()
				for b.Loop() {
					for m := 0; m < rows; m += MaxMatVecRows {
						mvr(x[m*k:], k, min(MaxMatVecRows, rows-m), k, w, int(rs), out[m*4:], 4)
					}
				}
				b.ReportMetric(float64(threadCPU()-c0)/float64(b.N), "cpu-ns/op")
			})
		}
	}
}

// BenchmarkStreamRows streams 256 MiB of weight rows of 768 (more than the caches) through
// MatVecRows on one thread, with 1..8 activation rows: GB/s of weights here against
// BenchmarkMatVecRows' cache-resident rate says whether a decode step of that many sessions
// is bound by memory or by compute.
func BenchmarkStreamRows(b *testing.B) {
	const k, size = 768, 256 << 20
	rng := rand.New(rand.NewPCG(1, 1))
	x := randVec(rng, 8*k)
	out := make([]float32, 8*4)
	for _, typ := range []quant.Type{quant.F16, quant.Q8_0, quant.Q4_0} {
		rs64, _ := typ.RowSize(k)
		rs := int(rs64)
		nrows := size / rs &^ 7
		w := make([]byte, nrows*rs)
		row := make([]byte, rs)
		if err := quant.QuantizeRow(typ, row, randVec(rng, k)); err != nil {
			b.Fatal(err)
		}
		for r := 0; r < nrows; r++ {
			copy(w[r*rs:], row)
		}
		mvr := MatVecRows(typ)
		for _, rows := range []int{1, 2, 4, 8} {
			b.Run(fmt.Sprintf("%v/rows=%d", typ, rows), func(b *testing.B) {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				b.SetBytes(int64(nrows * rs))
				c0 := threadCPU()
				for b.Loop() {
					for r := 0; r+4 <= nrows; r += 4 {
						for m := 0; m < rows; m += MaxMatVecRows {
							mvr(x[m*k:], k, min(MaxMatVecRows, rows-m), k, w[r*rs:], rs, out[m*4:], 4)
						}
					}
				}
				cpu := float64(threadCPU()-c0) / float64(b.N)
				b.ReportMetric(cpu/1e6, "cpu-ms/op")
				b.ReportMetric(float64(nrows*rs)/cpu, "GB/cpu-s")
			})
		}
	}
}

// MatVecRows equals MatVec4 row by row over the whole range of half-precision scales (and F16
// weights), subnormal to 65504, and with an Inf or NaN scale in a block (where the one-row
// Q6_K kernel of the VBMI tier hands over to the base kernel): the same bits, or NaN for NaN.
func TestMatVecRowsScaleRange(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 4))
	const k = 1024
	x := randVec(rng, MaxMatVecRows*k)
	for i := range x {
		if i%k >= 256 && i%k < 512 {
			x[i] = float32(math.Abs(float64(x[i])))
		}
	}
	fields := map[quant.Type]struct{ size, half int }{
		quant.F16: {2, 0}, quant.Q8_0: {quant.SizeQ8_0, 0}, quant.Q4_0: {quant.SizeQ4_0, 0},
		quant.Q4_K: {quant.SizeQ4_K, 0}, quant.Q6_K: {quant.SizeQ6_K, 208},
	}
	specials := []uint16{0, 0x7c00, 0xfc00, 0x7e00, 0x7c01} // none, +Inf, -Inf, NaN, NaN
	forEachTier(t, func(t *testing.T, tier Tier) {
		for typ, f := range fields {
			mv, mvr := MatVec4(typ), MatVecRows(typ)
			rs, _ := typ.RowSize(k)
			ws := int(rs) + 3
			for c, special := range specials {
				w := make([]byte, 3*ws+int(rs))
				for j := range 4 {
					row := randRow(rng, typ, k)
					for b := 0; b+f.size <= len(row); b += f.size {
						v := uint16(rng.Uint32()) & 0x7bff // exponent < 31: finite
						if special != 0 && j == c%4 && b == 5*f.size {
							v = special
						}
						row[b+f.half], row[b+f.half+1] = byte(v), byte(v>>8)
					}
					copy(w[j*ws:], row)
				}
				out := make([]float32, MaxMatVecRows*4)
				for rows := 2; rows <= MaxMatVecRows; rows++ {
					mvr(x, k, rows, k, w, ws, out, 4)
					for i := range rows {
						var want [4]float32
						mv(x[i*k:(i+1)*k], w, ws, &want)
						for j, b := range want {
							a := out[i*4+j]
							if math.Float32bits(a) != math.Float32bits(b) && !(a != a && b != b) {
								t.Fatalf("%v case %d rows=%d: out[%d][%d] = %v, MatVec4 %v", typ, c, rows, i, j, a, b)
							}
						}
					}
				}
			}
		}
	})
}
