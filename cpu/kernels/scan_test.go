package kernels

import (
	"math"
	"math/rand/v2"
	"testing"
)

// Every tier's MaxFinite gives the generic one's index (the first of equal maxima, +0 and -0
// equal) and reports an infinity or a NaN anywhere, at any length.
func TestMaxFiniteTiers(t *testing.T) {
	rng := rand.New(rand.NewPCG(31, 32))
	lengths := []int{1, 7, 31, 32, 33, 64, 95, 200, 50257}
	type tcase struct {
		x    []float32
		want int
		ok   bool
	}
	var cases []tcase
	Use(Generic)
	for _, n := range lengths {
		for trial := range 12 {
			x := make([]float32, n)
			for i := range x {
				switch trial % 4 {
				case 0:
					x[i] = float32(rng.NormFloat64())
				case 1:
					x[i] = float32(rng.IntN(5)) // ties
				case 2:
					x[i] = -float32(rng.IntN(3)) // zeros of both signs, maximum 0
					if rng.IntN(2) == 0 {
						x[i] = float32(math.Copysign(0, -1))
					}
				default:
					x[i] = -1e30 * float32(rng.Float64())
				}
			}
			if trial >= 8 { // a non-finite value somewhere
				bad := []float32{float32(math.Inf(1)), float32(math.Inf(-1)), float32(math.NaN())}[trial%3]
				x[rng.IntN(n)] = bad
			}
			if trial == 7 { // the maximum in the tail past the vectors
				x[n-1] = 1e31
			}
			want, ok := MaxFinite(x)
			cases = append(cases, tcase{x, want, ok})
		}
	}
	forEachTier(t, func(t *testing.T, tier Tier) {
		for _, c := range cases {
			got, ok := MaxFinite(c.x)
			if ok != c.ok || (ok && got != c.want) {
				t.Fatalf("n=%d: (%d, %v), generic (%d, %v)", len(c.x), got, ok, c.want, c.ok)
			}
		}
	})
}

func BenchmarkMaxFinite(b *testing.B) {
	x := make([]float32, 50257)
	rng := rand.New(rand.NewPCG(1, 1))
	for i := range x {
		x[i] = float32(rng.NormFloat64())
	}
	for _, tier := range Supported() {
		b.Run(tier.String(), func(b *testing.B) {
			Use(tier)
			defer Use(Best())
			for b.Loop() {
				MaxFinite(x)
			}
		})
	}
}

// Every tier's IndexAtLeast lists the generic one's indexes, and counts past a full dst.
func TestIndexAtLeastTiers(t *testing.T) {
	rng := rand.New(rand.NewPCG(33, 34))
	for _, n := range []int{1, 63, 64, 65, 200, 4096, 4097, 50257} {
		x := make([]float32, n)
		for i := range x {
			x[i] = float32(rng.NormFloat64())
		}
		x[rng.IntN(n)] = float32(math.NaN())
		for _, th := range []float32{-10, 0, 1.5, 3, 100} {
			Use(Generic)
			want := make([]int32, n)
			wn := IndexAtLeast(x, th, want)
			forEachTier(t, func(t *testing.T, tier Tier) {
				for _, size := range []int{n, wn / 2} {
					got := make([]int32, size)
					if gn := IndexAtLeast(x, th, got); gn != wn {
						t.Fatalf("n=%d t=%v: %d indexes, generic %d", n, th, gn, wn)
					}
					for i := range min(size, wn) {
						if got[i] != want[i] {
							t.Fatalf("n=%d t=%v: index %d is %d, generic %d", n, th, i, got[i], want[i])
						}
					}
				}
			})
		}
	}
}
