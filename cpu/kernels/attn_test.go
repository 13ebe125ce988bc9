package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The attention kernels agree with the float64-exp, separately rounded reference on every
// tier: scores bit-identical to Dot, exponentials and sums within a few ulps, weighted sums
// within float32 rounding of their magnitude.
func TestAttentionKernels(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	forEachTier(t, func(t *testing.T, tier Tier) {
		for _, n := range []int{1, 5, 16, 17, 100, 512} {
			for _, d := range []int{64, 48, 24} {
				ks := 3*d + 5
				q, k := randVec(rng, d), randVec(rng, n*ks)
				s := make([]float32, n+3)
				for i := range s {
					s[i] = float32(math.NaN())
				}
				Scores(s[:n], q, k, ks)
				for j := 0; j < n; j++ {
					if want := Dot(q, k[j*ks:j*ks+d]); s[j] != want {
						t.Fatalf("n=%d d=%d: score %d = %v, Dot %v", n, d, j, s[j], want)
					}
				}
				for _, v := range s[n:] {
					if !math.IsNaN(float64(v)) {
						t.Fatal("Scores wrote past its output")
					}
				}
				scale := float32(0.125)
				mx := scale * Max(s[:n])
				ref := append([]float32(nil), s[:n]...)
				wantSum := expSumGeneric(ref, scale, mx)
				sum := ExpSum(s[:n], scale, mx)
				for j := range ref {
					if d := math.Abs(float64(s[j] - ref[j])); d > 4e-7*float64(ref[j])+1e-30 {
						t.Fatalf("exp %d: %v, want %v", j, s[j], ref[j])
					}
				}
				if math.Abs(float64(sum-wantSum)) > 1e-6*float64(wantSum) {
					t.Fatalf("sum %v, want %v", sum, wantSum)
				}
				out := make([]float32, d)
				want := make([]float32, d)
				v := randVec(rng, n*ks)
				WeightedSum(out, ref, v, ks)
				weightedSumGeneric(want, ref, v, ks)
				for i := range out {
					var mag float64
					for j := range ref {
						mag += math.Abs(float64(ref[j] * v[j*ks+i]))
					}
					if math.Abs(float64(out[i]-want[i])) > 1e-6*mag+1e-30 {
						t.Fatalf("n=%d d=%d: weighted sum %d: %v, want %v", n, d, i, out[i], want[i])
					}
				}
			}
		}
	})
}

func TestMaxAndAdd(t *testing.T) {
	rng := rand.New(rand.NewPCG(8, 8))
	forEachTier(t, func(t *testing.T, tier Tier) {
		for _, n := range []int{1, 15, 16, 17, 100, 1024} {
			a, b := randVec(rng, n), randVec(rng, n)
			if got, want := Max(a), maxGeneric(a); got != want {
				t.Fatalf("n=%d: Max %v, want %v", n, got, want)
			}
			dst := make([]float32, n+3)
			Add(dst[:n], a, b)
			for i := range a {
				if dst[i] != a[i]+b[i] {
					t.Fatalf("n=%d: Add[%d] = %v", n, i, dst[i])
				}
			}
			for _, v := range dst[n:] {
				if v != 0 {
					t.Fatal("Add wrote past dst")
				}
			}
		}
	})
}

func TestLayerNorm(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	forEachTier(t, func(t *testing.T, tier Tier) {
		for _, n := range []int{16, 64, 768, 1600, 100} {
			x, w, b := randVec(rng, n), randVec(rng, n), randVec(rng, n)
			for i := range x {
				x[i] = x[i]*30 + 50 // an offset and spread like a residual stream's
			}
			want := make([]float32, n)
			layerNormGeneric(want, x, w, b, 1e-5)
			got := make([]float32, n+2)
			LayerNorm(got[:n], x, w, b, 1e-5)
			for i := range want {
				if d := math.Abs(float64(got[i] - want[i])); d > 2e-5*(1+math.Abs(float64(want[i]))) {
					t.Fatalf("n=%d: [%d] = %v, want %v", n, i, got[i], want[i])
				}
			}
			if got[n] != 0 || got[n+1] != 0 {
				t.Fatal("LayerNorm wrote past dst")
			}
		}
	})
}

// WeightedSumAdd over consecutive blocks of the rows, after a clear, equals one WeightedSum
// over all of them bit for bit on every tier (the paged KV cache's attention relies on it),
// whatever the blocks' places in memory.
func TestWeightedSumAddBlocks(t *testing.T) {
	rng := rand.New(rand.NewPCG(10, 10))
	forEachTier(t, func(t *testing.T, tier Tier) {
		for _, n := range []int{1, 15, 16, 17, 40, 100} {
			for _, d := range []int{64, 48} {
				ks := 2*d + 3
				p, v := randVec(rng, n), randVec(rng, n*ks)
				want := make([]float32, d)
				WeightedSum(want, p, v, ks)
				// The same rows scattered: block b (16 rows) copied to slot perm[b].
				nb := (n + 15) / 16
				scattered := make([]float32, nb*16*ks+d)
				perm := rng.Perm(nb)
				got := make([]float32, d+1)
				got[d] = 42
				for b := 0; b < nb; b++ {
					rows := min(16, n-16*b)
					dst := scattered[perm[b]*16*ks:]
					copy(dst[:rows*ks], v[16*b*ks:])
					WeightedSumAdd(got[:d], p[16*b:16*b+rows], dst, ks)
				}
				for i := range want {
					if math.Float32bits(got[i]) != math.Float32bits(want[i]) {
						t.Fatalf("n=%d d=%d: [%d] = %v block by block, %v at once", n, d, i, got[i], want[i])
					}
				}
				if got[d] != 42 {
					t.Fatal("WeightedSumAdd wrote past out")
				}
			}
		}
	})
}
