package kernels

import (
	"fmt"
	"os"
	"strings"

	"github.com/gorun-dev/gorun/quant"
)

// Tier is a set of kernels for one class of CPU.
type Tier int

const (
	Generic Tier = iota // pure Go, any CPU
	AVX2                // AVX2 + FMA + F16C
	AVX512              // AVX-512 F/BW/VL/DQ + the AVX2 tier's extensions
	tierCount
)

var tierNames = [...]string{Generic: "generic", AVX2: "avx2", AVX512: "avx512"}

// tierNames names every tier: the constant index is out of range, a compile error, unless the
// table has exactly tierCount entries.
var _ = [1]struct{}{}[len(tierNames)-int(tierCount)]

func (t Tier) String() string {
	if t >= 0 && int(t) < len(tierNames) {
		return tierNames[t]
	}
	return fmt.Sprintf("tier(%d)", int(t))
}

// ParseTier reads a tier name as GORUN_CPU spells it.
func ParseTier(s string) (Tier, error) {
	for t, n := range tierNames {
		if strings.EqualFold(s, n) {
			return Tier(t), nil
		}
	}
	return 0, fmt.Errorf("unknown CPU tier %q (want generic, avx2 or avx512)", s)
}

// The kernels of the active tier. Callers go through these variables; Use swaps them.
var (
	// Dot returns the dot product of a and b[:len(a)].
	Dot func(a, b []float32) float32

	// Dot1x4 sets out[j] = Dot(x, w[j*ws : j*ws+len(x)]) for j < 4.
	Dot1x4 func(x []float32, w []float32, ws int, out *[4]float32)

	// Dot4x4 sets out[i*os+j] = Dot(x[i*xs : i*xs+k], w[j*ws : j*ws+k]) for i, j < 4.
	Dot4x4 func(x []float32, xs int, w []float32, ws int, k int, out []float32, os int)

	// Dot6x4 is Dot4x4 for six x rows: out[i*os+j] for i < 6, j < 4. Prompt GEMMs use it for
	// the reuse: each weight vector loaded serves six rows.
	Dot6x4 func(x []float32, xs int, w []float32, ws int, k int, out []float32, os int)

	// GELU sets dst[i] = gelu(x[i]) (GPT-2's tanh approximation).
	GELU func(dst, x []float32)

	// dequant[t] writes the len(dst) values of a row stored as type t.
	dequant [64]func(dst []float32, src []byte)

	// matVec4[t] is the fused dequantize-and-dot of one activation row with four rows of
	// type t, nil where the tier has none.
	matVec4 [64]func(x []float32, w []byte, ws int, out *[4]float32)
)

var active Tier

// baseOnly, set by tests, makes Use leave out the kernels that need more than the tier's base
// instruction set (see hasExtensions), so that both kinds run on a CPU that has the extensions.
var baseOnly bool

// Active is the tier in use.
func Active() Tier { return active }

// Supported lists the tiers this CPU (and this build) can run, best last.
func Supported() []Tier {
	ts := []Tier{Generic}
	for t := Generic + 1; t <= AVX512; t++ {
		if cpuHas(t) {
			ts = append(ts, t)
		}
	}
	return ts
}

// Use switches every kernel to tier t. It is meant for start-up and tests: kernels running
// concurrently with Use may see a mix of tiers.
func Use(t Tier) error {
	if t != Generic && !cpuHas(t) {
		return fmt.Errorf("CPU tier %v is not supported by this CPU or build (supported: %v)", t, Supported())
	}
	useGeneric()
	if t != Generic {
		// A SIMD tier fuses only where its kernel matches its tile path bit for bit.
		clear(matVec4[:])
		fuseAll = false
		useSIMD(t)
	}
	fillMatVecRows()
	active = t
	return nil
}

// Dequantizer returns the kernel that writes the float32 values of a row of type t, or nil.
func Dequantizer(t quant.Type) func(dst []float32, src []byte) {
	if int(t) < 0 || int(t) >= len(dequant) {
		return nil
	}
	return dequant[t]
}

// fuseAll: the matmul should use MatVec4 for any number of activation rows (the generic tier,
// whose fused kernel sums in its own order), not only for generation's one or two.
var fuseAll bool

// FuseAllRows reports whether matrix products should use the fused kernels (where MatVec4 has
// one) for every number of activation rows, so that results stay independent of the batch.
func FuseAllRows() bool { return fuseAll }

// MatVec4 returns a kernel that sets out[j] to the dot product of x with row j < 4 of w (rows
// of type t, ws bytes apart); nil when the active tier has none for t. In the SIMD tiers it is
// bit-identical to dequantizing the rows and calling Dot1x4; in the generic tier it is quant's
// DotF32 (see FuseAllRows). len(x) must be a whole number of t's blocks.
func MatVec4(t quant.Type) func(x []float32, w []byte, ws int, out *[4]float32) {
	if int(t) < 0 || int(t) >= len(matVec4) {
		return nil
	}
	return matVec4[t]
}

// Best is the best tier this CPU supports.
func Best() Tier {
	s := Supported()
	return s[len(s)-1]
}

func init() {
	t := Best()
	if env := os.Getenv("GORUN_CPU"); env != "" {
		want, err := ParseTier(env)
		if err != nil {
			fmt.Fprintf(os.Stderr, "gorun: GORUN_CPU: %v; using %v\n", err, t)
		} else if want != Generic && !cpuHas(want) {
			fmt.Fprintf(os.Stderr, "gorun: GORUN_CPU=%s: this CPU lacks it; using %v\n", env, t)
		} else {
			t = want
		}
	}
	if err := Use(t); err != nil {
		panic(err) // unreachable: t was checked above
	}
}
