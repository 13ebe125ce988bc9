//go:build unix

package quant

import "syscall"

// cpuNanos is the process's user+system CPU time (benchmarks on a shared machine report it
// beside the wall time: it counts only the cycles this process got).
func cpuNanos() int64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return ru.Utime.Nano() + ru.Stime.Nano()
}
