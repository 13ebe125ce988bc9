//go:build unix

package llm

import (
	"syscall"
	"time"
)

// procCPUTime is the CPU time (user + system) the process has used, for benchmarks on a shared
// machine, where wall time measures the other processes too.
func procCPUTime() time.Duration {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
