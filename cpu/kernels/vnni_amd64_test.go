//go:build amd64 && !purego

package kernels

import (
	"testing"

	"github.com/gorun-dev/gorun/quant"
	"github.com/klauspost/cpuid/v2"
)

// On a CPU with AVX-512 VNNI the AVX-512 tier installs the VNNI kernels (so the tests that
// compare every tier with the reference do run the assembly), and the other tiers do not.
func TestVNNIKernelsInstalled(t *testing.T) {
	forEachTier(t, func(t *testing.T, tier Tier) {
		want := tier == AVX512 && cpuid.CPU.Supports(cpuid.AVX512VNNI)
		for _, k := range []struct {
			ty   quant.Type
			vnni *IntKernel
		}{{quant.Q8_0, &intQ8_0VNNI}, {quant.Q4_0, &intQ4_0VNNI}} {
			if got := IntKernelFor(k.ty) == k.vnni; got != want {
				t.Errorf("%v on %v: VNNI kernels %v, want %v", k.ty, tier, got, want)
			}
		}
	})
}
