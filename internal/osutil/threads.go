package osutil

import (
	"fmt"
	"runtime"

	"github.com/klauspost/cpuid/v2"
)

// DefaultThreads is the thread count gorun's compute (the CPU backend, the quantizer) uses when
// none is asked for: one per physical core (hyper-threads share a core's arithmetic units, so
// the kernels gain nothing from them), bounded by what the Go runtime may use, at least one.
func DefaultThreads() int {
	n := cpuid.CPU.PhysicalCores
	if n <= 0 {
		n = runtime.NumCPU()
	}
	return max(1, min(n, runtime.GOMAXPROCS(0)))
}

// MaxThreads is the most threads gorun accepts for a computation: four per CPU the system
// reports, and never more than 512. Each thread is a goroutine with its own scratch memory,
// and more threads than cores only slow the lockstep barriers down.
func MaxThreads() int { return min(4*runtime.NumCPU(), 512) }

// CheckThreads refuses a thread count above MaxThreads.
func CheckThreads(n int) error {
	if n > MaxThreads() {
		return fmt.Errorf("%d threads: at most %d on this machine (4 per CPU, and 512)", n, MaxThreads())
	}
	return nil
}
