//go:build cuda

package cuda

import (
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/quant"
)

// Every weight type the CPU multiplies with (a format with a dequantizing dot product, and
// f32) has GPU kernels and a chunk alignment, so a file that runs on the CPU also loads with
// GPU layers; another type is refused naming the tensor, its type and the GPU. No device is
// needed.
func TestSupportsWeightTypes(t *testing.T) {
	node := func(op graph.Op, typ quant.Type) *graph.Tensor {
		w := &graph.Tensor{Name: "w", Type: typ, Ne: [graph.MaxDims]int{256, 4, 1, 1}}
		n := &graph.Tensor{Op: op}
		n.Src[0] = w
		return n
	}
	for typ := quant.Type(0); typ < 64; typ++ {
		f, err := quant.FormatOf(typ)
		if typ != quant.F32 && (err != nil || f.DotF32 == nil) {
			continue
		}
		if typeSuffix[typ] == "" || chunkAlign[typ] <= 0 {
			t.Errorf("%v: kernel suffix %q, chunk alignment %d", typ, typeSuffix[typ], chunkAlign[typ])
		}
		if typeSuffix[typ] != "" && !hasKernels(typ) {
			t.Errorf("%v: kernels.cu has its kernels but the embedded PTX does not: run cuda/gen.sh (nvcc) and commit kernels.ptx.gz", typ)
			continue
		}
		for _, op := range []graph.Op{graph.OpMulMat, graph.OpGetRows} {
			if err := supports(node(op, typ)); err != nil {
				t.Errorf("%v %v: %v", op, typ, err)
			}
		}
	}
	for _, op := range []graph.Op{graph.OpMulMat, graph.OpGetRows} {
		err := supports(node(op, quant.Q8_1))
		if err == nil || !strings.Contains(err.Error(), `"w"`) || !strings.Contains(err.Error(), "q8_1") || !strings.Contains(err.Error(), "GPU") {
			t.Errorf("%v of q8_1: %v; want a refusal naming the tensor, the type and the GPU", op, err)
		}
	}
}
