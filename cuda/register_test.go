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

// The kernels the compiler picks for a subset of the types are in the embedded PTX for each of
// those types (mvsln3 and mvq are compiled only for some), and the shared ones are there. No
// device is needed.
func TestEmbeddedPTXHasPickedKernels(t *testing.T) {
	want := []string{"mmf1", "mmf2", "split_rows", "splitk_reduce"}
	for typ := range mvsln3Types {
		want = append(want, "mvsln3_"+typeSuffix[typ])
	}
	for typ := range mvqAlign {
		want = append(want, "mvq_"+typeSuffix[typ])
	}
	for typ, suf := range typeSuffix {
		if hasKernels(typ) {
			want = append(want, "splitw_"+suf, "mmh_"+suf, "mm2_"+suf, "mvsln_"+suf)
		}
	}
	for _, name := range want {
		if !ptxEntries()[name] {
			t.Errorf("kernel %s is not in the embedded PTX", name)
		}
	}
}
