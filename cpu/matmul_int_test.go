package cpu

import (
	"testing"

	"github.com/gorun-dev/gorun/quant"
)

// On the integer path, a matmul runs the integer kernels only where its weight type has them
// and it is not the logits; every other matmul gives the float path's bits.
func TestIntegerPathRouting(t *testing.T) {
	for _, typ := range []quant.Type{quant.Q8_0, quant.Q4_0, quant.Q6_K, quant.Q4_K, quant.F16} {
		for _, M := range []int{1, 6} {
			var plain, logits [2][]float32 // [float path, integer path]
			for i, qact := range []bool{false, true} {
				f := newFixture(t, 2)
				f.be.SetQuantizedActivations(qact)
				K, N := 256, 40
				w, _ := f.weight(typ, K, N)
				x, _ := f.weight(quant.F32, K, M)
				y, l := f.ctx.MulMat(w, x), f.ctx.MulMat(w, x)
				l.Name = logitsNode
				f.run(y, l)
				plain[i], logits[i] = append([]float32(nil), y.F32()...), append([]float32(nil), l.F32()...)
			}
			_, hasInt := intTypes[typ]
			for j := range plain[0] {
				if logits[1][j] != plain[0][j] {
					t.Fatalf("%v, %d rows: logits[%d] on the integer path %v, float path %v", typ, M, j, logits[1][j], plain[0][j])
				}
			}
			if same := equal(plain[0], plain[1]); same == hasInt {
				t.Errorf("%v, %d rows: integer path gives the float path's bits: %v (want %v)", typ, M, same, !hasInt)
			}
		}
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
