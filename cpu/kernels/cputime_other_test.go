//go:build !linux

package kernels

func threadCPU() int64 { return 0 }
