// Package backend is the registry of the devices this gorun binary can compute on. Each
// backend package registers itself from an init function (the CPU always; CUDA in builds with
// the `cuda` tag), with what it supports, so that the library chooses a device from options
// (llm.Options.GPULayers) and refuses a model it cannot run before uploading anything, as
// ggml's backend registry and supports_op do.
package backend

import (
	"errors"
	"fmt"
	"sort"
	"sync"

	"github.com/gorun-dev/gorun/graph"
)

// ErrNoGPU is returned when a GPU is asked for and this binary has no GPU backend (a build
// without the `cuda` tag).
var ErrNoGPU = errors.New("this gorun was built without GPU support (build with -tags cuda)")

// Config is what opening a device takes.
type Config struct {
	Threads              int  // CPU threads (<= 0: one per physical core)
	QuantizedActivations bool // CPU: quantize activations to 8 bits for Q8_0/Q4_0 weights (integer kernels)
	Ordinal              int  // which device of the kind (GPU 0, 1, ...)
}

// Device is a kind of device a backend package provides.
type Device struct {
	Name string // "cpu", "cuda"
	GPU  bool
	// Priority orders GPU devices when several are registered (higher first).
	Priority int
	// Supports reports whether the device computes node n (its op with its inputs' types and
	// shapes); it needs no open device, so a model is checked before anything is allocated.
	Supports func(n *graph.Tensor) error
	// Open starts a backend on the device.
	Open func(Config) (graph.Backend, error)
}

var (
	mu      sync.RWMutex
	devices = map[string]Device{}
)

// Register adds a device kind; called from the init of its backend package. Registering a
// name twice is a programming error.
func Register(d Device) {
	mu.Lock()
	defer mu.Unlock()
	if _, dup := devices[d.Name]; dup || d.Name == "" || d.Open == nil || d.Supports == nil {
		panic(fmt.Sprintf("backend: Register(%q) twice or incomplete", d.Name))
	}
	devices[d.Name] = d
}

// Lookup returns the device kind registered under name.
func Lookup(name string) (Device, bool) {
	mu.RLock()
	defer mu.RUnlock()
	d, ok := devices[name]
	return d, ok
}

// Names lists the registered device kinds, sorted.
func Names() []string {
	mu.RLock()
	defer mu.RUnlock()
	names := make([]string, 0, len(devices))
	for n := range devices {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// GPU returns the preferred registered GPU device kind, or ErrNoGPU.
func GPU() (Device, error) {
	mu.RLock()
	defer mu.RUnlock()
	var best *Device
	for _, d := range devices {
		if d.GPU && (best == nil || d.Priority > best.Priority || d.Priority == best.Priority && d.Name < best.Name) {
			best = &d
		}
	}
	if best == nil {
		return Device{}, ErrNoGPU
	}
	return *best, nil
}

// CheckGraph asks supports about every node of a built graph and returns the first refusal.
func CheckGraph(supports func(*graph.Tensor) error, g *graph.Graph) error {
	for _, n := range g.Nodes {
		if err := supports(n); err != nil {
			return err
		}
	}
	return nil
}
