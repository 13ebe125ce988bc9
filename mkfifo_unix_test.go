//go:build unix

package main

import "syscall"

// mkfifo makes a named pipe (tests of inputs that must not block).
func mkfifo(path string) error { return syscall.Mkfifo(path, 0o600) }
