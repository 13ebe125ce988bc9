//go:build cuda

package cuda

import (
	"fmt"
	"strings"
	"sync"

	"github.com/gorun-dev/gorun/backend"
	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/quant"
)

func init() {
	backend.Register(backend.Device{
		Name:     "cuda",
		GPU:      true,
		Supports: supports,
		Open: func(c backend.Config) (graph.Backend, error) {
			return New(c.Ordinal)
		},
	})
}

// Supports reports whether the GPU computes node n (see supports).
func (b *Backend) Supports(n *graph.Tensor) error { return supports(n) }

// supports reports whether the kernels of this package compute node n: the ops compile.go
// launches, weights of the types that have kernels (typeSuffix), caches in f32 or f16. It is
// what compile would refuse, asked before any weight is uploaded.
func supports(n *graph.Tensor) error {
	switch n.Op {
	case graph.OpMulMat:
		w := n.Src[0]
		if !hasKernels(w.Type) {
			return fmt.Errorf("cuda: mul_mat of %q: tensor type %v is not supported on the GPU (GPU weight types: %s)", w.Name, w.Type, gpuTypes())
		}
		if w.Ne[2]*w.Ne[3] != 1 {
			return fmt.Errorf("cuda: mul_mat of %q: 3-D weights are not supported", w.Name)
		}
	case graph.OpGetRows:
		if t := n.Src[0]; !hasKernels(t.Type) {
			return fmt.Errorf("cuda: get_rows of %q: tensor type %v is not supported on the GPU (GPU weight types: %s)", t.Name, t.Type, gpuTypes())
		}
	case graph.OpStoreKV:
		return cacheType(n.Op, n.Src[0])
	case graph.OpStoreKVRows:
		_, _, err := rowCaches(n.Op, n.Caches)
		return err
	case graph.OpAttention:
		if _, err := queryGroup(n); err != nil {
			return err
		}
		return cacheType(n.Op, n.Src[1])
	case graph.OpAttentionRows:
		if _, err := queryGroup(n); err != nil {
			return err
		}
		_, _, err := rowCaches(n.Op, n.Src[1].Caches)
		return err
	case graph.OpRoPE:
		return ropeFits(n)
	case graph.OpNone, graph.OpView, graph.OpAdd, graph.OpMul, graph.OpGELU, graph.OpScale, graph.OpCopy, graph.OpLayerNorm,
		graph.OpRMSNorm, graph.OpSwiGLU:
	default:
		return fmt.Errorf("cuda: op %v is not supported", n.Op)
	}
	return nil
}

// cacheType accepts the KV cache types the attention kernels read.
func cacheType(op graph.Op, c *graph.Tensor) error {
	if c.Type != quant.F32 && c.Type != quant.F16 {
		return fmt.Errorf("cuda: %v: cache type %v is not supported (f32, f16)", op, c.Type)
	}
	return nil
}

// hasKernels reports whether weight type t has kernels in kernels.cu (typeSuffix) and in the
// PTX this binary embeds: after kernels.cu gains a type, the type stays refused, by name at
// load, until gen.sh has compiled the PTX again (rather than failing at the first token).
func hasKernels(t quant.Type) bool {
	suf := typeSuffix[t]
	return suf != "" && ptxEntries()["mv_"+suf] && ptxEntries()["getrows_"+suf]
}

// ptxEntries lists the kernels of the embedded PTX (inflated once, on first use).
var ptxEntries = sync.OnceValue(func() map[string]bool {
	ptx, err := embeddedPTX()
	if err != nil {
		return nil
	}
	names := map[string]bool{}
	for _, line := range strings.Split(string(ptx), "\n") {
		if _, after, ok := strings.Cut(line, ".entry "); ok {
			if name, _, ok := strings.Cut(after, "("); ok {
				names[strings.TrimSpace(name)] = true
			}
		}
	}
	return names
})

// rowCaches checks the caches of a batch's rows: one type the kernels read, one row length
// and one size (the kernel takes them once). It returns the element size and the suffix of
// the kernels' names.
func rowCaches(op graph.Op, caches []*graph.Tensor) (int, string, error) {
	if len(caches) == 0 {
		return 0, "", fmt.Errorf("cuda: %v: no caches", op)
	}
	c0 := caches[0]
	if err := cacheType(op, c0); err != nil {
		return 0, "", err
	}
	for _, c := range caches[1:] {
		if c.Type != c0.Type || c.Nb[1] != c0.Nb[1] || c.Ne[1] != c0.Ne[1] {
			return 0, "", fmt.Errorf("cuda: %v: the rows' caches differ in type, row length or size", op)
		}
	}
	if c0.Type == quant.F16 {
		return 2, "f16", nil
	}
	return 4, "f32", nil
}

// gpuTypes lists the weight types with GPU kernels, in type order.
func gpuTypes() string {
	s := ""
	for t := quant.Type(0); t < 64; t++ {
		if hasKernels(t) {
			if s != "" {
				s += ", "
			}
			s += t.String()
		}
	}
	return s
}
