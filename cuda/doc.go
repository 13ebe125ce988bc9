// Package cuda is gorun's CUDA backend: a thin cgo binding of the CUDA driver API (driver.go:
// a context owned by one locked OS thread, device memory, modules, launches, streams, CUDA
// graphs; every failure a Go error carrying CUDA's error name) and a graph.Backend running
// whole GPT-2, Llama and Qwen2 graphs on an NVIDIA GPU (backend.go, compile.go, kernels.cu).
//
// It builds only with the build tag `cuda` (go build -tags cuda), so the default build stays
// pure Go (CGO_ENABLED=0). The kernels are CUDA C compiled to PTX by nvcc through
// `go generate ./cuda/` (gen.sh) and embedded; building needs only libcuda (the driver) and a C
// compiler, not the CUDA toolkit. See NOTES.md for the design and measurements.
package cuda

// types.h first: kernels.cu includes it. Untagged here, so that `go generate ./cuda/` runs
// both without -tags cuda.
//go:generate go run ./gentypes
//go:generate sh gen.sh
