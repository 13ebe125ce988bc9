package llm

import (
	"fmt"

	"github.com/gorun-dev/gorun/backend"
	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/kvcache"
	"github.com/gorun-dev/gorun/models"
	"github.com/gorun-dev/gorun/quant"
)

// ErrNoGPU is returned when GPU layers are asked for and this binary has no GPU backend (built
// without -tags cuda); a GPU backend whose device cannot be opened is another error.
var ErrNoGPU = backend.ErrNoGPU

// QuantAct is Options.QuantizedActivations: which CPU matmuls quantize their activations to 8
// bits (backend.QuantAct).
type QuantAct = backend.QuantAct

// The values of QuantAct (see Options.QuantizedActivations).
const (
	QuantActAuto = backend.QuantActAuto // Q4_0 weights where the CPU has VNNI; the default
	QuantActOff  = backend.QuantActOff  // float32 activations everywhere
	QuantActOn   = backend.QuantActOn   // Q8_0 and Q4_0 weights on any CPU
)

// ParseQuantAct reads auto, on (true, 1) or off (false, 0).
func ParseQuantAct(s string) (QuantAct, error) { return backend.ParseQuantAct(s) }

// chooseDevice picks the device kind the options ask for: the CPU, or the preferred GPU (a
// binary without one answers ErrNoGPU before anything is read from the model).
func chooseDevice(opts Options) (backend.Device, error) {
	switch {
	case opts.Backend != nil || opts.GPULayers == 0:
		cpu, _ := backend.Lookup("cpu")
		return cpu, nil
	case opts.GPULayers < 0:
		return backend.Device{}, fmt.Errorf("%w: %d GPU layers: the layer count must be >= 0", ErrInvalidOption, opts.GPULayers)
	}
	return backend.GPU()
}

// checkGPULayers requires GPU layers to cover every layer: the GPU backend runs whole graphs.
func checkGPULayers(dev backend.Device, hp models.Hparams, opts Options) error {
	if dev.GPU && opts.GPULayers < hp.NLayer {
		return fmt.Errorf("%w: %d GPU layers: this model has %d layers and gorun offloads all or none of them: use %d (or 99) to run on the GPU, or 0 for the CPU",
			ErrInvalidOption, opts.GPULayers, hp.NLayer, hp.NLayer)
	}
	return nil
}

// checkSupport builds the model's graphs (one token, a prompt batch, and the rows of two
// sessions) on the planning architecture and asks the device about every node: an op or
// weight type it cannot compute is refused now, naming the tensor, rather than at the first
// token. A device without the rows ops still runs sessions, one step at a time; one without the
// paged ops gives each session a whole-context cache instead of sharing a pool of blocks.
func (m *Model) checkSupport(dev backend.Device, given graph.Backend) error {
	supports := dev.Supports
	if given != nil {
		supports = given.Supports
	}
	for _, n := range []int{1, m.nbatch} {
		if err := m.planGraph(supports, n); err != nil {
			return fmt.Errorf("%w: %w", ErrUnsupportedType, err)
		}
	}
	m.batch.noRows = m.planRows(supports) != nil
	m.paged = m.checkPaged(supports) == nil
	return nil
}

// planGraph builds the n-token graph on a cache that allocates nothing and checks its nodes.
func (m *Model) planGraph(supports func(*graph.Tensor) error, n int) error {
	cache, err := newPlanCache(m.arch, n, m.cacheType)
	if err != nil {
		return err
	}
	ctx := graph.NewContext(m.arch.MaxTensors())
	step, err := m.arch.Build(ctx, cache, n, n-1)
	if err != nil {
		return err
	}
	return checkNodes(supports, ctx, step)
}

// planRows is planGraph for the batched decode of two sessions.
func (m *Model) planRows(supports func(*graph.Tensor) error) error {
	a, err := newPlanCache(m.arch, 1, m.cacheType)
	if err != nil {
		return err
	}
	b, _ := newPlanCache(m.arch, 1, m.cacheType)
	ctx := graph.NewContext(m.arch.MaxTensors())
	step, err := m.arch.BuildRows(ctx, []*kvcache.Cache{a, b})
	if err != nil {
		return err
	}
	return checkNodes(supports, ctx, step)
}

func checkNodes(supports func(*graph.Tensor) error, ctx *graph.Context, step models.Step) error {
	g := graph.NewGraph(ctx.Used())
	if err := g.Build(step.Logits); err != nil {
		return err
	}
	return backend.CheckGraph(supports, g)
}

// newPlanCache is a KV cache of n positions that takes no memory (on the sizer backend).
func newPlanCache(arch models.Model, n int, typ quant.Type) (*kvcache.Cache, error) {
	return kvcache.New(&sizer{}, arch.Hparams().KVShape(), n, typ)
}

// scratchThreads is the number of threads whose scratch memory the estimate counts: the
// CPU's threads, or what a given backend reports (at least one).
func scratchThreads(dev backend.Device, opts Options) int {
	switch {
	case opts.Backend != nil:
		if t, ok := opts.Backend.(interface{ Threads() int }); ok {
			return max(t.Threads(), 1)
		}
		return 1
	case dev.GPU:
		return 1
	case opts.Threads > 0:
		return opts.Threads
	}
	return defaultThreads()
}
