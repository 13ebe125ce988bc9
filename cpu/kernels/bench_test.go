package kernels

import (
	"math/rand/v2"
	"runtime"
	"testing"
	"time"

	"github.com/gorun-dev/gorun/quant"
)

// Kernel benchmarks report GFLOP/s (2 per multiply-add) or GB/s of the bytes read; run them
// with -cpu 1 and compare with the machine's peak (cpu/PERF.md).

func benchTiers(b *testing.B, f func(b *testing.B)) {
	defer Use(Best())
	run := func(name string) {
		b.Run(name, func(b *testing.B) {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			c0 := threadCPU()
			f(b)
			// On a shared machine wall time counts other processes' turns too; the thread's
			// own CPU time does not.
			b.ReportMetric(float64(threadCPU()-c0)/float64(b.N), "cpu-ns/op")
		})
	}
	for _, t := range Supported() {
		if hasExtensions(t) { // the kernels a CPU without the extensions runs
			baseOnly = true
			Use(t)
			baseOnly = false
			run(t.String() + "-base")
		}
		Use(t)
		run(t.String())
	}
}

// rate reports a per-op amount as units per second of wall time and of thread CPU time.
func rate(b *testing.B, perOp float64, unit string) {
	b.ReportMetric(perOp*float64(b.N)/b.Elapsed().Seconds()/1e9, unit)
}

var _ = time.Now

func BenchmarkDot4x4(b *testing.B) {
	const k = 768
	rng := rand.New(rand.NewPCG(1, 1))
	x, w := randVec(rng, 4*k), randVec(rng, 4*k)
	out := make([]float32, 16)
	benchTiers(b, func(b *testing.B) {
		for b.Loop() {
			Dot4x4(x, k, w, k, k, out, 4)
		}
		rate(b, 32*k, "GFLOP/s")
	})
}

func BenchmarkDot1x4(b *testing.B) {
	const k = 768
	rng := rand.New(rand.NewPCG(1, 1))
	x, w := randVec(rng, k), randVec(rng, 4*k)
	var out [4]float32
	benchTiers(b, func(b *testing.B) {
		for b.Loop() {
			Dot1x4(x, w, k, &out)
		}
		rate(b, 8*k, "GFLOP/s")
	})
}

func BenchmarkDequant(b *testing.B) {
	const n = 3072
	rng := rand.New(rand.NewPCG(1, 1))
	src := randVec(rng, n)
	dst := make([]float32, n)
	for _, typ := range []quant.Type{quant.F16, quant.Q8_0, quant.Q4_0, quant.Q2_K, quant.Q3_K, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.IQ4_NL, quant.IQ4_XS} {
		rs, _ := typ.RowSize(n)
		row := make([]byte, rs)
		if err := quant.QuantizeRow(typ, row, src); err != nil {
			b.Fatal(err)
		}
		b.Run(typ.String(), func(b *testing.B) {
			benchTiers(b, func(b *testing.B) {
				b.SetBytes(rs)
				for b.Loop() {
					Dequantizer(typ)(dst, row)
				}
			})
		})
	}
}

func BenchmarkGELU(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	x := randVec(rng, 3072)
	dst := make([]float32, len(x))
	benchTiers(b, func(b *testing.B) {
		b.SetBytes(4 * int64(len(x)))
		for b.Loop() {
			GELU(dst, x)
		}
	})
}

// BenchmarkMatVec4 compares, per weight type, the fused kernel with dequantizing four rows
// into a tile and Dot1x4 (cache-resident rows: the compute side of generation). GB/s counts
// weight bytes.
func BenchmarkMatVec4(b *testing.B) {
	const k = 3072
	rng := rand.New(rand.NewPCG(1, 1))
	x := randVec(rng, k)
	tile := make([]float32, 4*k)
	var out [4]float32
	for _, typ := range []quant.Type{quant.F16, quant.BF16, quant.Q8_0, quant.Q4_0, quant.Q4_1, quant.Q5_0, quant.Q5_1, quant.Q4_K, quant.Q5_K, quant.Q6_K, quant.IQ4_NL, quant.IQ4_XS} {
		rs, _ := typ.RowSize(k)
		w := make([]byte, 4*rs)
		for j := 0; j < 4; j++ {
			if err := quant.QuantizeRow(typ, w[int64(j)*rs:int64(j+1)*rs], randVec(rng, k)); err != nil {
				b.Fatal(err)
			}
		}
		b.Run(typ.String()+"/tile", func(b *testing.B) {
			benchTiers(b, func(b *testing.B) {
				b.SetBytes(4 * rs)
				deq := Dequantizer(typ)
				for b.Loop() {
					for j := 0; j < 4; j++ {
						deq(tile[j*k:(j+1)*k], w[int64(j)*rs:int64(j+1)*rs])
					}
					Dot1x4(x, tile, k, &out)
				}
			})
		})
		b.Run(typ.String()+"/fused", func(b *testing.B) {
			benchTiers(b, func(b *testing.B) {
				mv := MatVec4(typ)
				if mv == nil {
					b.Skip("no fused kernel")
				}
				b.SetBytes(4 * rs)
				for b.Loop() {
					mv(x, w, int(rs), &out)
				}
			})
		})
	}
}

// BenchmarkStream measures the machine's read bandwidth as generation sees it: the fused
// kernel over 256 MiB of weight rows (far more than the caches), on one thread and on two
// (each thread half the rows). Compare GB/s here with MatVec4's cache-resident rate to see
// whether a type is bound by memory or by compute.
func BenchmarkStream(b *testing.B) {
	const k, size = 768, 256 << 20
	rng := rand.New(rand.NewPCG(1, 1))
	x := randVec(rng, k)
	for _, typ := range []quant.Type{quant.F16, quant.Q8_0, quant.Q4_0, quant.Q4_K, quant.Q6_K} {
		rs64, _ := typ.RowSize(k)
		rs := int(rs64)
		rows := size / rs &^ 7
		w := make([]byte, rows*rs)
		row := make([]byte, rs)
		quant.QuantizeRow(typ, row, randVec(rng, k))
		for r := 0; r < rows; r++ {
			copy(w[r*rs:], row)
		}
		for _, threads := range []int{1, 2} {
			b.Run(typ.String()+"/threads="+string(rune('0'+threads)), func(b *testing.B) {
				mv := MatVec4(typ)
				if mv == nil {
					b.Skip("no fused kernel")
				}
				b.SetBytes(int64(rows * rs))
				for b.Loop() {
					done := make(chan bool)
					per := rows / threads
					for t := 0; t < threads; t++ {
						go func(lo int) {
							var out [4]float32
							for r := lo; r+4 <= lo+per; r += 4 {
								mv(x, w[r*rs:], rs, &out)
							}
							done <- true
						}(t * per)
					}
					for t := 0; t < threads; t++ {
						<-done
					}
				}
			})
		}
	}
}

// The Llama kernels at the Llama-3.2-1B shape: a 2048 row (RMSNorm), an 8192 row (SwiGLU), a
// row of 32 query heads of 64 (RoPE, both modes) and one row's angles.

func BenchmarkRMSNorm(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	x, w := randVec(rng, 2048), randVec(rng, 2048)
	dst := make([]float32, len(x))
	benchTiers(b, func(b *testing.B) {
		b.SetBytes(4 * int64(len(x)))
		for b.Loop() {
			RMSNorm(dst, x, w, 1e-5)
		}
	})
}

func BenchmarkSwiGLU(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	g, u := randVec(rng, 8192), randVec(rng, 8192)
	dst := make([]float32, len(g))
	benchTiers(b, func(b *testing.B) {
		b.SetBytes(4 * int64(len(g)))
		for b.Loop() {
			SwiGLU(dst, g, u)
		}
	})
}

func BenchmarkRope(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 1))
	x := randVec(rng, 2048)
	dst := make([]float32, len(x))
	freqs, cs := make([]float64, 32), make([]float32, 64)
	RopeFreqs(freqs, 64, 500000, 1, nil)
	RopeAngles(cs, 100, freqs)
	for _, mode := range []string{"normal", "neox"} {
		b.Run(mode, func(b *testing.B) {
			benchTiers(b, func(b *testing.B) {
				rot := rope(mode == "neox")
				b.SetBytes(4 * int64(len(x)))
				for b.Loop() {
					for h := 0; h < len(x); h += 64 {
						rot(dst[h:h+64], x[h:h+64], cs)
					}
				}
			})
		})
	}
	b.Run("angles", func(b *testing.B) {
		for b.Loop() {
			RopeAngles(cs, 100, freqs)
		}
	})
}

// BenchmarkReadBandwidth measures the machine's read bandwidth as the float32 dot product of
// two 256 MiB vectors (Dot, the active tier), split over 1 or 2 goroutines: the denominator of
// generation's ceiling (weight bytes per token / bandwidth) in cpu/PERF.md.
func BenchmarkReadBandwidth(b *testing.B) {
	const n = 64 << 20 // float32 values per vector
	rng := rand.New(rand.NewPCG(1, 1))
	x, y := make([]float32, n), make([]float32, n)
	chunk := randVec(rng, 4096)
	for i := 0; i < n; i += len(chunk) {
		copy(x[i:], chunk)
		copy(y[i:], chunk)
	}
	for _, threads := range []int{1, 2} {
		b.Run("threads="+string(rune('0'+threads)), func(b *testing.B) {
			b.SetBytes(2 * 4 * n)
			sums := make([]float32, threads)
			for b.Loop() {
				done := make(chan bool)
				per := n / threads
				for t := 0; t < threads; t++ {
					go func(t int) {
						sums[t] = Dot(x[t*per:(t+1)*per], y[t*per:(t+1)*per])
						done <- true
					}(t)
				}
				for t := 0; t < threads; t++ {
					<-done
				}
			}
		})
	}
}
