//go:build cuda

package main

import (
	"fmt"

	"github.com/gorun-dev/gorun/cuda"
	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/graph"
)

// gpuBackend opens the first CUDA GPU for -ngl (all layers: the CUDA backend runs whole graphs)
// and returns it with a description of the device.
func gpuBackend(model string, ngl int) (graph.Backend, string, error) {
	if ngl < 0 {
		return nil, "", fmt.Errorf("-ngl %d: the layer count must be >= 0", ngl)
	}
	f, err := gguf.Open(model)
	if err != nil {
		return nil, "", err
	}
	layers := 0
	if arch, err := f.String("general.architecture"); err == nil {
		if n, err := f.Uint(arch + ".block_count"); err == nil {
			layers = int(n)
		}
	}
	f.Close()
	if ngl < layers {
		return nil, "", fmt.Errorf("-ngl %d: this model has %d layers and gorun offloads all or none of them: use -ngl %d (or 99) to run on the GPU, or -ngl 0 for the CPU", ngl, layers, layers)
	}
	be, err := cuda.New(0)
	if err != nil {
		return nil, "", fmt.Errorf("-ngl %d: no usable CUDA GPU: %w (check the NVIDIA driver with nvidia-smi, or run without -ngl)", ngl, err)
	}
	return be, be.Device(), nil
}
