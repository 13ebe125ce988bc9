package kernels

import (
	"fmt"
	"math"
	"math/big"
	"math/rand/v2"
	"runtime"
	"testing"

	"github.com/gorun-dev/gorun/quant"
)

// FMA32 is a*b+c rounded once: compared with the exact value rounded by math/big, on random
// operands and on sums built to fall on or next to a float32 rounding midpoint (where rounding
// twice, to float64 then to float32, goes wrong).
func TestFMA32CorrectlyRounded(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 1))
	check := func(a, b, c float32) {
		t.Helper()
		x := new(big.Float).SetPrec(400).SetFloat64(float64(a))
		x.Mul(x, new(big.Float).SetPrec(400).SetFloat64(float64(b)))
		x.Add(x, new(big.Float).SetPrec(400).SetFloat64(float64(c)))
		want, _ := x.Float32()
		if got := FMA32(a, b, c); math.Float32bits(got) != math.Float32bits(want) && !(got == 0 && want == 0) {
			t.Fatalf("FMA32(%v, %v, %v) = %v, want %v", a, b, c, got, want)
		}
	}
	for range 200000 {
		a := float32(rng.NormFloat64() * math.Exp2(float64(rng.IntN(40)-20)))
		b := float32(rng.NormFloat64())
		c := float32(rng.NormFloat64() * math.Exp2(float64(rng.IntN(60)-30)))
		check(a, b, c)
		check(a, b, -a*b)
	}
	// c = 1 and a*b a tiny value just at/around half an ulp of 1 (2^-24): the float64 sum
	// 1 + 2^-24 + tiny rounds to the midpoint, then to even (1) if rounded twice.
	for _, p := range []float32{0x1p-24, 0x1p-24 * (1 + 0x1p-23), 0x1p-24 * (1 - 0x1p-24), 0x1p-25} {
		for _, tiny := range []float32{0x1p-60, -0x1p-60, 0x1p-77, 0} {
			check(p, 1, 1+0)
			check(1+0x1p-23, p, 1)
			check(p+tiny, 1, 1)
			check(-(p + tiny), 1, -1)
		}
	}
	check(float32(math.MaxFloat32), 2, 0)
	check(0, 5, -0)
}

// intCase is random weights of type ty (n rows of k values) and m quantized activation rows.
type intCase struct {
	ty   quant.Type
	k, n int
	w    []byte
	ws   int
	x    [][]float32
	a    IntAct
}

func newIntCase(t testing.TB, rng *rand.Rand, ty quant.Type, k, n, m int, off int32) *intCase {
	t.Helper()
	f, err := quant.FormatOf(ty)
	if err != nil {
		t.Fatal(err)
	}
	q8, _ := quant.FormatOf(quant.Q8_0)
	ws := int(ty.TypeSize()) * k / 32
	c := &intCase{ty: ty, k: k, n: n, ws: ws, w: make([]byte, n*ws)}
	for r := range n {
		if err := f.Quantize(c.w[r*ws:(r+1)*ws], randVec(rng, k)); err != nil {
			t.Fatal(err)
		}
	}
	c.a.Size(m, k)
	buf := make([]byte, k/32*quant.SizeQ8_0)
	for i := range m {
		x := randVec(rng, k)
		if i == 1 && k >= 64 {
			clear(x[32:64]) // a zero block: scale 0
		}
		c.x = append(c.x, x)
		if err := q8.Quantize(buf, x); err != nil {
			t.Fatal(err)
		}
		c.a.Pack(i, buf, off)
	}
	return c
}

type intType struct {
	ty      quant.Type
	generic *IntKernel
}

var intTypes = []intType{{quant.Q8_0, &intQ8_0Generic}, {quant.Q4_0, &intQ4_0Generic}}

// Every tier's integer kernels (rows and tile) give the generic reference's bits, and the
// reference is quant's VecDot up to the float32 rounding of the block sums' accumulation.
func TestIntKernelsMatchReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 2))
	forEachTier(t, func(t *testing.T, tier Tier) {
		for _, it := range intTypes {
			ik := IntKernelFor(it.ty)
			if ik == nil {
				t.Fatalf("%v: no integer kernels", it.ty)
			}
			f, _ := quant.FormatOf(it.ty)
			q8, _ := quant.FormatOf(quant.Q8_0)
			for _, k := range []int{32, 64, 96, 768, 3072} {
				for _, n := range []int{1, 3, 4, 7, 16, 21} {
					const m = 9
					c := newIntCase(t, rng, it.ty, k, n, m, ik.Off)
					want := make([]float32, n)
					got := make([]float32, n)
					var tile IntTile
					tile.Size(k)
					tout := make([]float32, 4*IntTileRows)
					tout8 := make([]float32, 8*IntTileRows)
					xq := make([]byte, k/32*quant.SizeQ8_0)
					for i := range m {
						it.generic.Rows(&c.a, i, c.w, c.ws, want)
						ik.Rows(&c.a, i, c.w, c.ws, got)
						if err := q8.Quantize(xq, c.x[i]); err != nil {
							t.Fatal(err)
						}
						for r := range n {
							if math.Float32bits(got[r]) != math.Float32bits(want[r]) {
								t.Fatalf("%v k=%d n=%d row %d,%d: Rows %v, reference %v", it.ty, k, n, i, r, got[r], want[r])
							}
							vd := f.VecDot(c.w[r*c.ws:(r+1)*c.ws], xq)
							if d := math.Abs(float64(vd - want[r])); d > 1e-5*math.Abs(float64(vd))+1e-4 {
								t.Fatalf("%v k=%d row %d,%d: %v, VecDot %v", it.ty, k, i, r, want[r], vd)
							}
						}
					}
					if ik.Rows2 != nil {
						checkRows2(t, it, ik, c)
					}
					if ik.Tile == nil {
						continue
					}
					for lo := 0; lo < n; lo += IntTileRows {
						rows := min(IntTileRows, n-lo)
						ik.Repack(&tile, c.w[lo*c.ws:], c.ws, rows)
						for i := 0; i+4 <= m; i++ {
							ik.Tile(&tile, &c.a, i, tout, IntTileRows)
							checkTile(t, it, c, i, 4, lo, rows, tout, want)
						}
						for i := 0; i+8 <= m; i++ {
							ik.Tile8(&tile, &c.a, i, tout8, IntTileRows)
							checkTile(t, it, c, i, 8, lo, rows, tout8, want)
						}
					}
				}
			}
		}
	})
}

// checkRows2 compares the pair kernel's output for activation rows i and i+1 with the generic
// kernel's, with the second row's outputs right after the first's and further on, and checks
// that it writes nothing else.
func checkRows2(t *testing.T, it intType, ik *IntKernel, c *intCase) {
	t.Helper()
	ref := make([][]float32, len(c.x))
	for i := range ref {
		ref[i] = make([]float32, c.n)
		it.generic.Rows(&c.a, i, c.w, c.ws, ref[i])
	}
	for _, os := range []int{c.n, c.n + 5} {
		out := make([]float32, os+c.n+1)
		for i := 0; i+2 <= len(c.x); i++ {
			const guard = float32(-12345)
			for j := range out {
				out[j] = guard
			}
			ik.Rows2(&c.a, i, c.w, c.ws, c.n, out, os)
			for j, g := range out {
				row, r := i, j
				if j >= os {
					row, r = i+1, j-os
				}
				if r >= c.n {
					if g != guard {
						t.Fatalf("%v k=%d n=%d: Rows2 wrote out[%d] (os %d)", c.ty, c.k, c.n, j, os)
					}
					continue
				}
				if want := ref[row][r]; math.Float32bits(g) != math.Float32bits(want) {
					t.Fatalf("%v k=%d n=%d act %d row %d: Rows2 %v, reference %v", c.ty, c.k, c.n, row, r, g, want)
				}
			}
		}
	}
}

// checkTile compares a tile kernel's output for activation rows i.. with the generic kernel.
func checkTile(t *testing.T, it intType, c *intCase, i, rowsA, lo, rows int, tout, want []float32) {
	t.Helper()
	for j := range rowsA {
		it.generic.Rows(&c.a, i+j, c.w[lo*c.ws:], c.ws, want[:rows])
		for r := range rows {
			if g := tout[j*IntTileRows+r]; math.Float32bits(g) != math.Float32bits(want[r]) {
				t.Fatalf("%v k=%d n=%d act %d row %d (tile of %d): %v, reference %v", c.ty, c.k, c.n, i+j, lo+r, rowsA, g, want[r])
			}
		}
	}
}

// QuantizeAct writes what quant's Q8_0 quantizer and IntAct.Pack write, on every tier, and
// refuses non-finite values with quant's error.
func TestQuantizeActMatchesQ8_0(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 3))
	q8, _ := quant.FormatOf(quant.Q8_0)
	forEachTier(t, func(t *testing.T, tier Tier) {
		for _, k := range []int{32, 64, 768, 3072} {
			x := randVec(rng, k)
			for i := range x {
				switch rng.IntN(50) {
				case 0:
					x[i] = 0
				case 1:
					x[i] = float32(math.Round(float64(x[i]*4))) / 4 // halves: ties in the rounding
				case 2:
					x[i] *= 1e-30
				}
			}
			if k >= 64 {
				clear(x[32:64])
			}
			var got, want IntAct
			got.Size(1, k)
			want.Size(1, k)
			buf := make([]byte, k/32*quant.SizeQ8_0)
			for _, off := range []int32{128, 8} {
				if err := q8.Quantize(buf, x); err != nil {
					t.Fatal(err)
				}
				want.Pack(0, buf, off)
				if err := QuantizeAct(&got, 0, x, off); err != nil {
					t.Fatal(err)
				}
				for i := range got.Q {
					if got.Q[i] != want.Q[i] {
						t.Fatalf("k=%d: value %d (x %v): quantized %d, quant's %d", k, i, x[i], int8(got.Q[i]), int8(want.Q[i]))
					}
				}
				for b := range got.D {
					if math.Float32bits(got.D[b]) != math.Float32bits(want.D[b]) || got.C[b] != want.C[b] {
						t.Fatalf("k=%d block %d: scale %v correction %d, want %v %d", k, b, got.D[b], got.C[b], want.D[b], want.C[b])
					}
				}
			}
			for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(-1))} {
				y := append([]float32(nil), x...)
				y[k-1] = bad
				if err := QuantizeAct(&got, 0, y, 8); err == nil {
					t.Fatalf("k=%d: %v quantized without an error", k, bad)
				}
			}
		}
	})
}

// BenchmarkInt measures the integer path's kernels at K=768 with Q8_0 and Q4_0 weights, in
// thread CPU time: quantizing one activation row, repacking 16 weight rows, the 4x16 and 8x16
// tiles, and the streaming kernel on 16 rows for one activation row. GMAC/s counts the
// multiply-adds (Dot4x4's GFLOP/s are two per multiply-add).
func BenchmarkInt(b *testing.B) {
	const k = 768
	rng := rand.New(rand.NewPCG(19, 4))
	for _, it := range intTypes {
		ik := IntKernelFor(it.ty)
		c := newIntCase(b, rng, it.ty, k, IntTileRows, 8, ik.Off)
		var tile IntTile
		tile.Size(k)
		out := make([]float32, 8*IntTileRows)
		x := randVec(rng, k)
		run := func(name string, macs int, f func()) {
			b.Run(it.ty.String()+"/"+name, func(b *testing.B) {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				c0 := threadCPU()
				for range b.N {
					f()
				}
				ns := float64(threadCPU()-c0) / float64(b.N)
				b.ReportMetric(ns, "cpu-ns/op")
				if macs > 0 && ns > 0 {
					b.ReportMetric(float64(macs)/ns, "GMAC/s")
				}
			})
		}
		run("quantize", 0, func() { QuantizeAct(&c.a, 0, x, ik.Off) })
		run("repack16", 0, func() { ik.Repack(&tile, c.w, c.ws, IntTileRows) })
		if ik.Tile != nil {
			run("tile4x16", 4*16*k, func() { ik.Tile(&tile, &c.a, 0, out, IntTileRows) })
			run("tile8x16", 8*16*k, func() { ik.Tile8(&tile, &c.a, 0, out, IntTileRows) })
		}
		run("rows16", 16*k, func() { ik.Rows(&c.a, 0, c.w, c.ws, out[:IntTileRows]) })
	}
}

// BenchmarkStreamInt streams 256 MiB of weight rows of 768 (more than the caches) through the
// integer path on one thread as cpu/matmul.go's mulMatInt runs it for 1..16 activation rows:
// below intTileMin rows the streaming kernels over 16 weight rows, two activation rows at a
// time where the tier has a pair kernel (the later rows find the weights in L1), from it on
// the 16 rows repacked, then the 8- and 4-row tiles.
// GB of weights per CPU-second, to compare with BenchmarkStreamRows' float path.
func BenchmarkStreamInt(b *testing.B) {
	const k, size = 768, 256 << 20
	rng := rand.New(rand.NewPCG(19, 5))
	for _, it := range intTypes {
		ik := IntKernelFor(it.ty)
		c := newIntCase(b, rng, it.ty, k, 1, 16, ik.Off)
		nrows := size / c.ws &^ 15
		w := make([]byte, nrows*c.ws)
		for r := 0; r < nrows; r++ {
			copy(w[r*c.ws:], c.w)
		}
		var tile IntTile
		tile.Size(k)
		out := make([]float32, 16*IntTileRows)
		for _, rt := range [][2]int{{1, 4}, {2, 4}, {3, 4}, {4, 4}, {4, 5}, {8, 4}, {16, 4}} {
			rows, tileMin := rt[0], rt[1] // tileMin: as cpu/matmul.go's intTileMin
			b.Run(fmt.Sprintf("%v/rows=%d/tilemin=%d", it.ty, rows, tileMin), func(b *testing.B) {
				runtime.LockOSThread()
				defer runtime.UnlockOSThread()
				c0 := threadCPU()
				for range b.N {
					for r := 0; r+16 <= nrows; r += 16 {
						wr := w[r*c.ws : (r+16)*c.ws]
						if rows < tileMin || ik.Tile == nil {
							m := 0
							for ; ik.Rows2 != nil && m+2 <= rows; m += 2 {
								ik.Rows2(&c.a, m, wr, c.ws, IntTileRows, out[m*IntTileRows:], IntTileRows)
							}
							for ; m < rows; m++ {
								ik.Rows(&c.a, m, wr, c.ws, out[m*IntTileRows:(m+1)*IntTileRows])
							}
							continue
						}
						ik.Repack(&tile, wr, c.ws, IntTileRows)
						m := 0
						for ; m+8 <= rows; m += 8 {
							ik.Tile8(&tile, &c.a, m, out[m*IntTileRows:], IntTileRows)
						}
						for ; m+4 <= rows; m += 4 {
							ik.Tile(&tile, &c.a, m, out[m*IntTileRows:], IntTileRows)
						}
					}
				}
				if ns := float64(threadCPU()-c0) / float64(b.N); ns > 0 {
					b.ReportMetric(float64(nrows*c.ws)/ns, "GB/cpu-s")
				}
			})
		}
	}
}
