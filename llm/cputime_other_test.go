//go:build !unix

package llm

import "time"

// procCPUTime is 0 where the process's CPU time is not read (benchmarks then omit it).
func procCPUTime() time.Duration { return 0 }
