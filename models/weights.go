package models

import (
	"fmt"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/quant"
)

// weights loads named tensors of a file as static graph tensors on a backend, checking shapes
// and types. It keeps the first error, so an architecture's loader is a list of its tensors.
type weights struct {
	f    *gguf.File
	be   graph.Backend
	ctx  *graph.Context
	err  error
	used map[string]bool // tensors loaded so far
}

func newWeights(f *gguf.File, be graph.Backend, tensors int) *weights {
	return &weights{f: f, be: be, ctx: graph.NewContext(tensors), used: map[string]bool{}}
}

// bias loads an optional tensor (nil when absent), required when need is set.
func (w *weights) bias(dst **graph.Tensor, name string, need bool, want ...int) {
	if need || w.has(name) {
		w.load(dst, name, want...)
	}
}

// allUsed fails when the file holds a tensor the architecture did not load: a variant of it
// (extra biases, experts, another feed-forward) whose graph gorun does not build, which would
// otherwise run silently without that tensor.
func (w *weights) allUsed(arch string) {
	if w.err != nil {
		return
	}
	for i := range w.f.Tensors {
		if name := w.f.Tensors[i].Name; !w.used[name] {
			w.err = fmt.Errorf("%w: tensor %q is not part of the %s graph gorun runs (a variant of %s that gorun does not support)", ErrUnsupportedArchitecture, name, arch, arch)
			return
		}
	}
}

// load sets *dst to the tensor name with exactly the dims want (ne0 first).
func (w *weights) load(dst **graph.Tensor, name string, want ...int) {
	if w.err == nil {
		*dst, w.err = w.get(name, want...)
	}
}

// has reports whether the file holds tensor name (for optional tensors: biases, output).
func (w *weights) has(name string) bool { return w.f.Tensor(name) != nil }

// get returns the tensor name with exactly the dims want (ne0 first).
func (w *weights) get(name string, want ...int) (*graph.Tensor, error) {
	ti := w.f.Tensor(name)
	if ti == nil {
		return nil, fmt.Errorf("tensor %q is missing", name)
	}
	if len(ti.Dims) != len(want) {
		return nil, fmt.Errorf("tensor %q has shape %v, want %v", name, ti.Dims, want)
	}
	for i, d := range ti.Dims {
		if d != int64(want[i]) {
			return nil, fmt.Errorf("tensor %q has shape %v, want %v", name, ti.Dims, want)
		}
	}
	if _, err := quant.FormatOf(ti.Type); err != nil {
		return nil, fmt.Errorf("tensor %q: %w: %w", name, ErrUnsupportedType, err)
	}
	buf, err := w.be.Weights(w.f.Data(ti))
	if err != nil {
		return nil, fmt.Errorf("tensor %q: %w", name, err)
	}
	t := w.ctx.NewStatic(name, ti.Type, buf, 0, want...)
	w.used[name] = true
	return t, w.ctx.Err()
}
