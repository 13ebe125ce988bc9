//go:build !cuda

package main

import (
	"fmt"

	"github.com/gorun-dev/gorun/graph"
)

// gpuBackend would open the GPU for -ngl; this build has no GPU support.
func gpuBackend(model string, ngl int) (graph.Backend, string, error) {
	return nil, "", fmt.Errorf("-ngl %d: this gorun was built without GPU support (build with -tags cuda)", ngl)
}
