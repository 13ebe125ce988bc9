package quant

import (
	"os"
	"strings"
)

// Candidate errors, eight at a time. The searches try several stored scales (and
// mins) for each group of values and keep the one with the smallest weighted error; candErr8
// computes eight such errors in one pass over the values, each lane exactly as the scalar loop
// computes one (subErrKx, subErrQ6, symStore):
//
//	l    = clamp(nearestInt((x_j + dm) * id), lmin, lmax)
//	diff = float64(x_j - (float32(ds*float32(l)) - dm))
//	e   += float64(w_j) * diff * diff        (in j order, float64)
//
// With dm = 0 this is the symmetric types' error (x + 0 and y - 0 change no value that
// matters: a -0 input rounds to level 0 either way). The assembly version (AVX2) computes the
// eight lanes in vector registers with the same float32 and float64 operations, unfused, so its
// results are bit-identical to the generic loop (TestCandErr8Tiers); it is used when the CPU
// has AVX2, unless GORUN_CPU=generic or the purego build tag.

// candParams are eight candidates' parameters (unused lanes may hold anything finite).
type candParams struct {
	dm, id, ds [8]float32
	lmin, lmax [8]int32
}

// candErr8Generic is the reference for candErr8: lane by lane, the scalar loop.
func candErr8Generic(x []float32, w []float64, p *candParams, e *[8]float64, lt []int32) {
	n := len(x)
	w = w[:n]
	lt = lt[:8*n]
	for c := 0; c < 8; c++ {
		dm, id, ds, lo, hi := p.dm[c], p.id[c], p.ds[c], p.lmin[c], p.lmax[c]
		var s float64
		for j, v := range x {
			l := clampL(nearestInt((v+dm)*id), lo, hi)
			lt[8*j+c] = l
			diff := float64(v - (float32(ds*float32(l)) - dm))
			s += w[j] * diff * diff
		}
		e[c] = s
	}
}

// candErr8 sets e[c] to candidate c's weighted error over x and lt[8*j+c] to its level for x[j].
func candErr8(x []float32, w []float64, p *candParams, e *[8]float64, lt []int32) {
	if useCandAsm && len(x) > 0 {
		_ = w[len(x)-1]
		_ = lt[8*len(x)-1]
		candErr8Asm(&x[0], &w[0], uintptr(len(x)), p, e, &lt[0])
		return
	}
	candErr8Generic(x, w, p, e, lt)
}

// useCandAsm selects the assembly candErr8 (set at start-up; tests switch it).
var useCandAsm = candAsmAvailable && !strings.EqualFold(os.Getenv("GORUN_CPU"), "generic")
