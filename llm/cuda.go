//go:build cuda

package llm

// A build with the cuda tag registers the CUDA backend, which Options.GPULayers then chooses.
import _ "github.com/gorun-dev/gorun/cuda"
