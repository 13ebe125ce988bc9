package kernels

import (
	"math"
	"math/big"
	"math/rand/v2"
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

func newIntCase(t *testing.T, rng *rand.Rand, ty quant.Type, k, n, m int, off int32) *intCase {
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

var intTypes = []struct {
	ty      quant.Type
	generic *IntKernel
}{{quant.Q8_0, &intQ8_0Generic}, {quant.Q4_0, &intQ4_0Generic}}

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
			t.Logf("%v: tile kernel %v", it.ty, ik.Tile != nil)
			f, _ := quant.FormatOf(it.ty)
			for _, k := range []int{32, 64, 96, 768, 3072} {
				for _, n := range []int{1, 3, 4, 7, 16, 21} {
					const m = 9
					c := newIntCase(t, rng, it.ty, k, n, m, ik.Off)
					want := make([]float32, n)
					got := make([]float32, n)
					var tile IntTile
					tile.Size(k)
					tout := make([]float32, 4*IntTileRows)
					for i := range m {
						it.generic.Rows(&c.a, i, c.w, c.ws, want)
						ik.Rows(&c.a, i, c.w, c.ws, got)
						for r := range n {
							if math.Float32bits(got[r]) != math.Float32bits(want[r]) {
								t.Fatalf("%v k=%d n=%d row %d,%d: Rows %v, reference %v", it.ty, k, n, i, r, got[r], want[r])
							}
							xq := make([]byte, k/32*quant.SizeQ8_0)
							q8, _ := quant.FormatOf(quant.Q8_0)
							q8.Quantize(xq, c.x[i])
							vd := f.VecDot(c.w[r*c.ws:(r+1)*c.ws], xq)
							if d := math.Abs(float64(vd - want[r])); d > 1e-5*math.Abs(float64(vd))+1e-4 {
								t.Fatalf("%v k=%d row %d,%d: %v, VecDot %v", it.ty, k, i, r, want[r], vd)
							}
						}
					}
					if ik.Tile == nil {
						continue
					}
					for lo := 0; lo < n; lo += IntTileRows {
						rows := min(IntTileRows, n-lo)
						ik.Repack(&tile, c.w[lo*c.ws:], c.ws, rows)
						for i := 0; i+4 <= m; i++ {
							ik.Tile(&tile, &c.a, i, tout, IntTileRows)
							for j := range 4 {
								it.generic.Rows(&c.a, i+j, c.w[lo*c.ws:], c.ws, want[:rows])
								for r := range rows {
									if g := tout[j*IntTileRows+r]; math.Float32bits(g) != math.Float32bits(want[r]) {
										t.Fatalf("%v k=%d n=%d act %d row %d: Tile %v, reference %v", it.ty, k, n, i+j, lo+r, g, want[r])
									}
								}
							}
						}
					}
				}
			}
		}
	})
}
