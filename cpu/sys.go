package cpu

import (
	"runtime"
	"unsafe"

	"github.com/klauspost/cpuid/v2"
)

// physicalCores is the number of physical cores (hyper-threads share a core's arithmetic units,
// so matmul gains nothing from them), bounded by what the Go runtime may use.
func physicalCores() int {
	n := cpuid.CPU.PhysicalCores
	if n <= 0 {
		n = runtime.NumCPU()
	}
	return min(n, runtime.GOMAXPROCS(0))
}

func uintptrOf(b []byte) uintptr {
	if len(b) == 0 {
		return 0
	}
	return uintptr(unsafe.Pointer(&b[0]))
}
