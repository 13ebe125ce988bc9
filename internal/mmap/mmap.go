// Package mmap maps whole regular files read-only, for the GGUF and safetensors readers: the
// file is opened so that a FIFO or a device cannot block the open (osutil.OpenRegular), and the
// mapping outlives the descriptor. Where the system has no mmap the file is read into memory.
package mmap

import (
	"fmt"
	"math"

	"github.com/gorun-dev/gorun/internal/osutil"
)

// Map maps the regular file at path read-only and returns its bytes; Unmap releases them.
// check, when not nil, sees the file's size first and may refuse it (its error is returned
// after the path). An empty file is refused: there is nothing to map.
func Map(path string, check func(size int64) error) ([]byte, error) {
	fd, err := osutil.OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer fd.Close() // the mapping outlives the descriptor
	st, err := fd.Stat()
	if err != nil {
		return nil, err
	}
	size := st.Size()
	if check != nil {
		if err := check(size); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	switch {
	case size == 0:
		return nil, fmt.Errorf("%s: empty file", path)
	case size > math.MaxInt:
		return nil, fmt.Errorf("%s: %d bytes is too large to map", path, size)
	}
	data, err := mapRead(fd, int(size))
	if err != nil {
		return nil, fmt.Errorf("%s: mmap: %w", path, err)
	}
	return data, nil
}

// Unmap releases the bytes Map returned; they must not be used afterwards.
func Unmap(b []byte) error { return unmap(b) }

// WillNeed asks the system to read the mapping ahead, as all of it will be read soon. It only
// costs or saves time; where the system has no such advice it does nothing.
func WillNeed(b []byte) { willNeed(b) }
