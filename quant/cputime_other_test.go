//go:build !unix

package quant

func cpuNanos() int64 { return 0 }
