package kernels

import (
	"math"
	"math/rand/v2"
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
