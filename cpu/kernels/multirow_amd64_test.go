//go:build amd64 && !purego

package kernels

import (
	"math"
	"math/rand/v2"
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
			if (tier == AVX512 && slices.Contains(fusedAVX512, typ) || tier == AVX2 && slices.Contains(fusedAVX2, typ)) &&
				!MatVecRowsFused(typ) {
				t.Fatalf("%v: no fused multi-row kernel in the %v tier", typ, tier)
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

// fusedAVX512 and fusedAVX2 list the types with a fused multi-row kernel in those tiers.
var (
	fusedAVX512 = []quant.Type{quant.F16, quant.Q8_0, quant.Q4_0, quant.Q4_K, quant.Q6_K}
	fusedAVX2   = []quant.Type{quant.Q8_0}
)

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

// A MatVecRows call allocates nothing (the matmul calls it in its inner loop).
func TestMatVecRowsAllocatesNothing(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 5))
	const k = 256
	x := randVec(rng, MaxMatVecRows*k)
	out := make([]float32, MaxMatVecRows*4)
	forEachTier(t, func(t *testing.T, tier Tier) {
		for _, typ := range quantTypes {
			mvr := MatVecRows(typ)
			if mvr == nil {
				continue
			}
			rs, _ := typ.RowSize(k)
			w := make([]byte, 4*rs)
			for j := range 4 {
				copy(w[int64(j)*rs:], randRow(rng, typ, k))
			}
			for rows := 1; rows <= MaxMatVecRows; rows++ {
				if n := testing.AllocsPerRun(10, func() { mvr(x, k, rows, k, w, int(rs), out, 4) }); n != 0 {
					t.Fatalf("%v rows=%d: %v allocations per call", typ, rows, n)
				}
			}
		}
	})
}
