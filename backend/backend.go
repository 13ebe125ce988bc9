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
	"strings"
	"sync"

	"github.com/gorun-dev/gorun/graph"
)

// ErrNoGPU is returned when a GPU is asked for and this binary has no GPU backend (a build
// without the `cuda` tag).
var ErrNoGPU = errors.New("this gorun was built without GPU support (build with -tags cuda)")

// Config is what opening a device takes.
type Config struct {
	Threads              int      // CPU threads (<= 0: one per physical core)
	QuantizedActivations QuantAct // CPU: which matmuls quantize their activations to 8 bits
	Ordinal              int      // which device of the kind (GPU 0, 1, ...)
}

// QuantAct chooses the activations of the CPU's matrix multiplications with quantized
// weights: float32 (the weights' error alone) or quantized to 8 bits per block of 32, as ggml
// does, for integer dot products (faster prompts where the CPU has VNNI). Weight types without
// integer kernels, and the logits, always keep float32. The zero value is QuantActAuto.
type QuantAct uint8

const (
	// QuantActAuto quantizes activations only where the integer path met the accuracy gate
	// (perplexity within 0.2% of the float path's on every fixture: Q4_0 weights, not Q8_0)
	// and the CPU has SIMD integer kernels (AVX-512 VNNI or AVX-VNNI); float32 elsewhere. The
	// choice depends on the weight type and the CPU alone, never on the number of rows, so
	// batched and token-by-token evaluation stay bit-identical.
	QuantActAuto QuantAct = iota
	// QuantActOff keeps float32 activations for every matmul.
	QuantActOff
	// QuantActOn quantizes activations for every weight type with integer kernels (Q8_0,
	// Q4_0), on any CPU (without VNNI: a plain-Go reference with the same bits, slow).
	QuantActOn
)

var quantActNames = [...]string{QuantActAuto: "auto", QuantActOff: "off", QuantActOn: "on"}

func (q QuantAct) String() string {
	if int(q) < len(quantActNames) {
		return quantActNames[q]
	}
	return fmt.Sprintf("QuantAct(%d)", q)
}

// ParseQuantAct reads auto, on (true, 1) or off (false, 0).
func ParseQuantAct(s string) (QuantAct, error) {
	switch strings.ToLower(s) {
	case "auto":
		return QuantActAuto, nil
	case "on", "true", "1":
		return QuantActOn, nil
	case "off", "false", "0":
		return QuantActOff, nil
	}
	return 0, fmt.Errorf("quantized activations %q: want auto, on (true) or off (false)", s)
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
