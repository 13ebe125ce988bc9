//go:build !amd64 || purego

package kernels

// Without assembly (another architecture, or -tags purego) only the generic tier exists.

func cpuHas(t Tier) bool { return t == Generic }

func useSIMD(Tier) {}

func hasExtensions(Tier) bool { return false }
