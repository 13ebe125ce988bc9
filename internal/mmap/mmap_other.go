//go:build !unix && !windows

package mmap

import (
	"io"
	"os"
)

// Without mmap the file is read into memory: the same bytes, held by the process.
func mapRead(f *os.File, size int) ([]byte, error) {
	b := make([]byte, size)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, err
	}
	return b, nil
}

func unmap([]byte) error { return nil }

func willNeed([]byte) {}
