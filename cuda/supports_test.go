//go:build cuda

package cuda_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/internal/testmodel"
	"github.com/gorun-dev/gorun/llm"
	"github.com/gorun-dev/gorun/quant"
)

// A weight type without kernels is refused when the model loads with GPU layers, naming the
// tensor and its type; the check needs no device, so it runs on machines without a GPU too
// (linked against a stub libcuda). Every type the CPU multiplies with now has GPU kernels
// (TestSupportsWeightTypes), so the refused type is one no device computes with.
func TestLoadRefusesUnsupportedWeight(t *testing.T) {
	c, err := testmodel.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	c.Type = quant.F32
	dir := t.TempDir()
	src := filepath.Join(dir, "f32.gguf")
	if err := testmodel.Write(src, c); err != nil {
		t.Fatal(err)
	}
	// Q8_1 is an activation type: no dot product with it on any device.
	path := filepath.Join(dir, "q8_1.gguf")
	withEmbedding(t, src, path, quant.Q8_1)
	_, err = llm.Load(path, llm.Options{GPULayers: 99})
	if !errors.Is(err, llm.ErrUnsupportedType) || !strings.Contains(err.Error(), `"token_embd.weight"`) ||
		!strings.Contains(err.Error(), "q8_1") {
		t.Fatalf("Load of q8_1 weights with -ngl 99: %v; want an unsupported-type error naming token_embd.weight and q8_1", err)
	}
	t.Logf("refused at load: %v", err)
}

// withEmbedding copies the float32 model src to dst with token_embd.weight stored as typ.
func withEmbedding(t *testing.T, src, dst string, typ quant.Type) {
	t.Helper()
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriter()
	for _, kv := range f.KV {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		tt := ti.Type
		if ti.Name == "token_embd.weight" {
			tt = typ
		}
		if err := w.AddTensor(ti.Name, tt, ti.Dims); err != nil {
			t.Fatal(err)
		}
	}
	err = w.WriteFile(dst, func(i int, out *gguf.TensorInfo) ([]byte, error) {
		ti := &f.Tensors[i]
		if out.Type == ti.Type {
			return f.Data(ti), nil
		}
		b := make([]byte, out.Size)
		return b, quant.QuantizeRows(out.Type, b, quant.AsF32(f.Data(ti)), int(ti.Dims[0]))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// The Llama family's graphs (RMS norm, RoPE with and without frequency factors, SwiGLU,
// grouped-query attention, Qwen2's biases) pass the GPU's support check: loading with GPU
// layers gets past it (then fails only where no device can be opened, as on a machine linked
// against a stub libcuda).
func TestLoadAcceptsLlama(t *testing.T) {
	for _, name := range []string{"llama-tiny", "llama-tiny-untied", "qwen2-tiny"} {
		c, err := testmodel.Preset(name)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), name+".gguf")
		if err := testmodel.Write(path, c); err != nil {
			t.Fatal(err)
		}
		m, err := llm.Load(path, llm.Options{GPULayers: 99})
		if errors.Is(err, llm.ErrUnsupportedType) {
			t.Fatalf("%s with -ngl 99: %v", name, err)
		}
		if err == nil {
			m.Close()
		}
		t.Logf("%s with -ngl 99: %v", name, err)
	}
}
