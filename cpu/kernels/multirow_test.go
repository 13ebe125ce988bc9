package kernels

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/gorun-dev/gorun/quant"
)

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
		{"overlapping w rows", x, k, 2, k, ws - 1, 4, w, out},
		{"partial block", x, k, 2, k - 16, ws, 4, w, out},
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
// "fused" is MatVecRows, "perrow" MatVec4 once per activation row (what a type without a
// multi-row kernel gets): the difference is what forming each weight once saves.
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
		mv, mvr := MatVec4(typ), MatVecRows(typ)
		for _, path := range []string{"fused", "perrow"} {
			for _, rows := range []int{1, 2, 3, 4, 8} {
				if path == "perrow" && rows == 1 {
					continue
				}
				b.Run(fmt.Sprintf("%v/%s/rows=%d", typ, path, rows), func(b *testing.B) {
					runtime.LockOSThread()
					defer runtime.UnlockOSThread()
					b.SetBytes(4 * rs)
					c0 := threadCPU()
					for b.Loop() {
						if path == "perrow" {
							for m := range rows {
								mv(x[m*k:(m+1)*k], w, int(rs), (*[4]float32)(out[m*4:]))
							}
							continue
						}
						for m := 0; m < rows; m += MaxMatVecRows {
							mvr(x[m*k:], k, min(MaxMatVecRows, rows-m), k, w, int(rs), out[m*4:], 4)
						}
					}
					b.ReportMetric(float64(threadCPU()-c0)/float64(b.N), "cpu-ns/op")
				})
			}
		}
	}
}

// BenchmarkStreamRows streams 256 MiB of weight rows of 768 (more than the caches) through
// MatVecRows on one thread, with 1..32 activation rows ("fused"), and through the prompts'
// path ("tile": 16 rows dequantized into a float32 tile, then Dot6x4/Dot4x4/Dot1x4 as
// cpu/matmul.go's mulTile runs them): GB/s of weights here against BenchmarkMatVecRows'
// cache-resident rate says whether a decode step of that many sessions is bound by memory or
// by compute, and fused against tile where the matmul should switch.
func BenchmarkStreamRows(b *testing.B) {
	const k, size = 768, 256 << 20
	rng := rand.New(rand.NewPCG(1, 1))
	x := randVec(rng, 32*k)
	out := make([]float32, 32*16)
	tile := make([]float32, 16*k)
	for _, typ := range []quant.Type{quant.F16, quant.Q8_0, quant.Q4_0, quant.Q4_K, quant.Q6_K} {
		rs64, _ := typ.RowSize(k)
		rs := int(rs64)
		nrows := size / rs &^ 15
		w := make([]byte, nrows*rs)
		row := make([]byte, rs)
		if err := quant.QuantizeRow(typ, row, randVec(rng, k)); err != nil {
			b.Fatal(err)
		}
		for r := 0; r < nrows; r++ {
			copy(w[r*rs:], row)
		}
		mvr, deq := MatVecRows(typ), Dequantizer(typ)
		fused := func(rows int) {
			for r := 0; r+4 <= nrows; r += 4 {
				for m := 0; m < rows; m += MaxMatVecRows {
					mvr(x[m*k:], k, min(MaxMatVecRows, rows-m), k, w[r*rs:], rs, out[m*4:], 4)
				}
			}
		}
		tiled := func(rows int) {
			var o4 [4]float32
			for r := 0; r+16 <= nrows; r += 16 {
				for j := range 16 {
					deq(tile[j*k:(j+1)*k], w[(r+j)*rs:(r+j+1)*rs])
				}
				m := 0
				for ; m+6 <= rows; m += 6 {
					for j := 0; j < 16; j += 4 {
						Dot6x4(x[m*k:], k, tile[j*k:], k, k, out[j:], 16)
					}
				}
				for ; m+4 <= rows; m += 4 {
					for j := 0; j < 16; j += 4 {
						Dot4x4(x[m*k:], k, tile[j*k:], k, k, out[j:], 16)
					}
				}
				for ; m < rows; m++ {
					for j := 0; j < 16; j += 4 {
						Dot1x4(x[m*k:(m+1)*k], tile[j*k:], k, &o4)
					}
				}
			}
		}
		for _, c := range []struct {
			path string
			rows int
			run  func(int)
		}{{"fused", 1, fused}, {"fused", 2, fused}, {"fused", 4, fused}, {"fused", 8, fused},
			{"fused", 12, fused}, {"fused", 16, fused}, {"fused", 32, fused}, {"tile", 4, tiled},
			{"tile", 8, tiled}, {"tile", 12, tiled}, {"tile", 16, tiled}, {"tile", 32, tiled}} {
			b.Run(fmt.Sprintf("%v/%s/rows=%d", typ, c.path, c.rows), func(b *testing.B) {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				b.SetBytes(int64(nrows * rs))
				c0 := threadCPU()
				for b.Loop() {
					c.run(c.rows)
				}
				cpu := float64(threadCPU()-c0) / float64(b.N)
				b.ReportMetric(cpu/1e6, "cpu-ms/op")
				b.ReportMetric(float64(nrows*rs)/cpu, "GB/cpu-s")
			})
		}
	}
}

// On every platform and tier (the generic reference included), MatVecRows gives MatVec4's bits
// row by row on quantized rows of every type that has a MatVec4.
func TestMatVecRowsQuantizedRows(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 6))
	const k = 512
	x := randVec(rng, MaxMatVecRows*k)
	forEachTier(t, func(t *testing.T, tier Tier) {
		for typ := range quant.Type(len(matVec4)) {
			mv, mvr := MatVec4(typ), MatVecRows(typ)
			if (mv == nil) != (mvr == nil) {
				t.Fatalf("%v: MatVec4 nil %v, MatVecRows nil %v", typ, mv == nil, mvr == nil)
			}
			if mv == nil || k%typ.BlockSize() != 0 {
				continue
			}
			rs, _ := typ.RowSize(k)
			w := make([]byte, 4*rs)
			for j := range 4 {
				if err := quant.QuantizeRow(typ, w[int64(j)*rs:int64(j+1)*rs], randVec(rng, k)); err != nil {
					t.Fatal(err)
				}
			}
			out := make([]float32, MaxMatVecRows*4)
			mvr(x, k, MaxMatVecRows, k, w, int(rs), out, 4)
			for i := range MaxMatVecRows {
				var want [4]float32
				mv(x[i*k:(i+1)*k], w, int(rs), &want)
				for j := range want {
					if math.Float32bits(out[i*4+j]) != math.Float32bits(want[j]) {
						t.Fatalf("%v: out[%d][%d] = %v, MatVec4 %v", typ, i, j, out[i*4+j], want[j])
					}
				}
			}
		}
	})
}
