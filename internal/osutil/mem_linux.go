package osutil

import (
	"bufio"
	"bytes"
	"os"
	"strconv"
)

// MemAvailable is the memory the machine can give a new workload without swapping, in bytes:
// /proc/meminfo's MemAvailable on Linux. ok is false when it cannot be known.
func MemAvailable() (n int64, ok bool) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, false
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		f := bytes.Fields(sc.Bytes())
		if len(f) >= 2 && string(f[0]) == "MemAvailable:" {
			kb, err := strconv.ParseInt(string(f[1]), 10, 64)
			if err != nil || kb < 0 || kb > 1<<53 {
				return 0, false
			}
			return kb << 10, true
		}
	}
	return 0, false
}
