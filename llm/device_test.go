package llm

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/gorun-dev/gorun/backend"
	"github.com/gorun-dev/gorun/cpu"
	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/internal/testmodel"
	"github.com/gorun-dev/gorun/quant"
)

// fakeGPU is a GPU device for these tests: it computes on the CPU, refuses bf16 weights and
// the rows ops (as the CUDA backend does), and counts how often it is opened.
var fakeGPUOpens atomic.Int32

func fakeGPUSupports(n *graph.Tensor) error {
	switch n.Op {
	case graph.OpMulMat, graph.OpGetRows:
		if n.Src[0].Type == quant.BF16 {
			return fmt.Errorf("fakegpu: %v of %q: tensor type %v is not supported on the GPU", n.Op, n.Src[0].Name, n.Src[0].Type)
		}
	case graph.OpStoreKVRows, graph.OpAttentionRows:
		return fmt.Errorf("fakegpu: op %v is not supported", n.Op)
	}
	return nil
}

// fakeBackend is a CPU backend that answers Supports as the fake GPU.
type fakeBackend struct{ *cpu.Backend }

func (f fakeBackend) Supports(n *graph.Tensor) error { return fakeGPUSupports(n) }
func (f fakeBackend) Name() string                   { return "fakegpu" }

func init() {
	if _, err := backend.GPU(); err == nil {
		return // a build with a real GPU backend: these tests skip
	}
	backend.Register(backend.Device{Name: "fakegpu", GPU: true, Supports: fakeGPUSupports,
		Open: func(c backend.Config) (graph.Backend, error) {
			fakeGPUOpens.Add(1)
			return fakeBackend{cpu.New(c.Threads)}, nil
		}})
}

func needFakeGPU(t *testing.T) {
	if d, err := backend.GPU(); err != nil || d.Name != "fakegpu" {
		t.Skip("a build with a real GPU backend")
	}
}

func writeTinyOfType(t *testing.T, typ quant.Type) string {
	c, err := testmodel.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	c.Type = typ
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := testmodel.Write(path, c); err != nil {
		t.Fatal(err)
	}
	return path
}

// A weight type the GPU cannot multiply is refused at load, naming the tensor and the type,
// before the device is opened or any weight uploaded.
func TestGPURefusesUnsupportedWeightAtLoad(t *testing.T) {
	needFakeGPU(t)
	path := writeTinyOfType(t, quant.BF16)
	before := fakeGPUOpens.Load()
	_, err := Load(path, Options{GPULayers: 99, Threads: 1})
	if !errors.Is(err, ErrUnsupportedType) || !strings.Contains(err.Error(), `"token_embd.weight"`) || !strings.Contains(err.Error(), "bf16") {
		t.Fatalf("Load of bf16 weights on the GPU: %v; want ErrUnsupportedType naming token_embd.weight and bf16", err)
	}
	if n := fakeGPUOpens.Load() - before; n != 0 {
		t.Errorf("the device was opened %d times for a refused model", n)
	}
	// The CPU runs the same file.
	m, err := Load(path, Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()
}

// GPULayers chooses the GPU device; all or none of the layers; a device without the rows ops
// runs concurrent sessions one step at a time, with the same text as the CPU.
func TestGPULayersChoosesDevice(t *testing.T) {
	needFakeGPU(t)
	path := writeTinyOfType(t, quant.F16)
	if _, err := Load(path, Options{GPULayers: 1, Threads: 1}); !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "all or none") {
		t.Errorf("GPULayers 1 of 2: %v", err)
	}
	if _, err := Load(path, Options{GPULayers: -1, Threads: 1}); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("GPULayers -1: %v", err)
	}
	g, err := Load(path, Options{GPULayers: 99, Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	if g.Backend().Name() != "fakegpu" || !g.batch.noRows {
		t.Errorf("backend %q, noRows %v: want the fake GPU without rows ops", g.Backend().Name(), g.batch.noRows)
	}
	c, err := Load(path, Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Backend().Name() != "cpu" || c.batch.noRows {
		t.Errorf("CPU model: backend %q, noRows %v", c.Backend().Name(), c.batch.noRows)
	}
	if a, b := greedyText(t, g), greedyText(t, c); a != b {
		t.Errorf("GPU text %q differs from CPU text %q", a, b)
	}
}

func greedyText(t *testing.T, m *Model) string {
	s, err := m.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var b strings.Builder
	_, err = s.Generate(context.Background(), "hello", GenerateOptions{MaxTokens: 12}, func(p string) error {
		b.WriteString(p)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return b.String()
}
