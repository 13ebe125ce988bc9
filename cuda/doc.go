// Package cuda will hold gorun's CUDA backend: a thin cgo binding of the CUDA driver API, NVRTC
// and cuBLAS, and kernels implementing graph.Backend on the GPU. It builds only with the build
// tag `cuda`, so the default build stays pure Go (CGO_ENABLED=0). Until it lands, -ngl is
// refused with a message saying the binary has no GPU support.
package cuda
