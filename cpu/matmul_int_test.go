package cpu

import (
	"testing"

	"github.com/gorun-dev/gorun/backend"
	"github.com/gorun-dev/gorun/cpu/kernels"

	"github.com/gorun-dev/gorun/quant"
)

// A matmul runs the integer kernels only where its weight type has them, it is not the logits
// and the mode asks for it: on for every such type, auto for Q4_0 alone and only on a tier
// with SIMD integer kernels, off never. Every other matmul gives the float path's bits.
func TestIntegerPathRouting(t *testing.T) {
	defer kernels.Use(kernels.Best())
	for _, tier := range kernels.Supported() {
		if err := kernels.Use(tier); err != nil {
			t.Fatal(err)
		}
		// Which tiers have SIMD integer kernels depends on the CPU (kernels'
		// TestVNNIKernelsInstalled); the generic tier never has.
		simd := kernels.IntKernelFor(quant.Q4_0).SIMD()
		if tier == kernels.Generic && simd {
			t.Errorf("the generic tier's integer kernels say they are SIMD")
		}
		for _, typ := range []quant.Type{quant.Q8_0, quant.Q4_0, quant.Q6_K, quant.Q4_K, quant.F16} {
			for _, mode := range []backend.QuantAct{backend.QuantActOn, backend.QuantActAuto} {
				want := intTypes[typ] && (mode == backend.QuantActOn || typ == quant.Q4_0 && simd)
				for _, M := range []int{1, 6} {
					testIntegerPathRouting(t, tier, typ, mode, M, want)
				}
			}
		}
	}
}

// testIntegerPathRouting multiplies M rows by weights of type typ with quantized activations
// off and in mode, and checks that the results differ (integer path) exactly when wantInt
// and that the logits node always gives the float path's bits.
func testIntegerPathRouting(t *testing.T, tier kernels.Tier, typ quant.Type, mode backend.QuantAct, M int, wantInt bool) {
	t.Helper()
	var plain, logits [2][]float32 // [off, mode]
	for i, q := range []backend.QuantAct{backend.QuantActOff, mode} {
		f := newFixture(t, 2)
		f.be.SetQuantizedActivations(q)
		K, N := 256, 40
		w, _ := f.weight(typ, K, N)
		x, _ := f.weight(quant.F32, K, M)
		y, l := f.ctx.MulMat(w, x), f.ctx.MulMat(w, x)
		l.Name = logitsNode
		f.run(y, l)
		plain[i], logits[i] = append([]float32(nil), y.F32()...), append([]float32(nil), l.F32()...)
	}
	if !equal(logits[1], plain[0]) {
		t.Fatalf("%v, %v, %v, %d rows: the logits differ from the float path's", tier, typ, mode, M)
	}
	if same := equal(plain[0], plain[1]); same == wantInt {
		t.Errorf("%v, %v, %v, %d rows: integer path taken = %v, want %v", tier, typ, mode, M, !same, wantInt)
	}
}

// intTypes are the weight types with integer kernels.
var intTypes = map[quant.Type]bool{quant.Q8_0: true, quant.Q4_0: true}

func equal(a, b []float32) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}
