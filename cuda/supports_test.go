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
