//go:build unix

package mmap

import (
	"os"

	"golang.org/x/sys/unix"
)

func mapRead(f *os.File, size int) ([]byte, error) {
	return unix.Mmap(int(f.Fd()), 0, size, unix.PROT_READ, unix.MAP_SHARED)
}

func unmap(b []byte) error { return unix.Munmap(b) }

// willNeed asks for read-ahead: the weights will all be read soon. Failure only costs speed.
func willNeed(b []byte) { _ = unix.Madvise(b, unix.MADV_WILLNEED) }
