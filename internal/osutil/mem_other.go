//go:build !linux

package osutil

// MemAvailable is not known on this system: callers fall back to an explicit limit.
// (darwin and Windows report free memory in ways that undercount what a process can get;
// gorun does not guess there.)
func MemAvailable() (n int64, ok bool) { return 0, false }
