//go:build amd64 && !purego

package kernels

import (
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/quant"
	"github.com/klauspost/cpuid/v2"
)

// On a CPU with AVX-512 VNNI the AVX-512 tier installs the VNNI kernels, and on one with
// AVX-VNNI the AVX2 tier (but not its base run) installs the AVX-VNNI ones, so the tests that
// compare every tier with the reference do run the assembly; the other tiers do not.
func TestVNNIKernelsInstalled(t *testing.T) {
	forEachTier(t, func(t *testing.T, tier Tier) {
		vnni512 := cpuid.CPU.Supports(cpuid.AVX512VNNI)
		want512 := tier == AVX512 && vnni512
		base := strings.HasSuffix(t.Name(), "-base") // forEachTier's run without the extensions
		want256 := hasAVXVNNI() && !base && (tier == AVX2 || tier == AVX512 && !vnni512)
		for _, k := range []struct {
			ty            quant.Type
			vnni, avxvnni *IntKernel
		}{{quant.Q8_0, &intQ8_0VNNI, &intQ8_0AVXVNNI}, {quant.Q4_0, &intQ4_0VNNI, &intQ4_0AVXVNNI}} {
			if got := IntKernelFor(k.ty) == k.vnni; got != want512 {
				t.Errorf("%v on %v: AVX-512 VNNI kernels %v, want %v", k.ty, tier, got, want512)
			}
			if got := IntKernelFor(k.ty) == k.avxvnni; got != want256 {
				t.Errorf("%v on %v: AVX-VNNI kernels %v, want %v", k.ty, tier, got, want256)
			}
		}
	})
}
