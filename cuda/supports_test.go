//go:build cuda

package cuda_test

import (
	"errors"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/internal/testmodel"
	"github.com/gorun-dev/gorun/llm"
	"github.com/gorun-dev/gorun/quant"
)

// A weight type without GPU kernels is refused when the model loads with GPU layers, naming
// the tensor and its type; the check needs no device, so it runs on machines without a GPU
// too (linked against a stub libcuda).
func TestLoadRefusesUnsupportedWeight(t *testing.T) {
	c, err := testmodel.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	c.Type = quant.BF16
	path := filepath.Join(t.TempDir(), "bf16.gguf")
	if err := testmodel.Write(path, c); err != nil {
		t.Fatal(err)
	}
	_, err = llm.Load(path, llm.Options{GPULayers: 99})
	if !errors.Is(err, llm.ErrUnsupportedType) || !strings.Contains(err.Error(), `"token_embd.weight"`) ||
		!strings.Contains(err.Error(), "bf16") || !strings.Contains(err.Error(), "GPU") {
		t.Fatalf("Load of bf16 weights with -ngl 99: %v; want an unsupported-type error naming token_embd.weight and bf16", err)
	}
	t.Logf("refused at load: %v", err)
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
