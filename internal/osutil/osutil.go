// Package osutil holds the operating-system details gorun's commands and loaders share: opening
// input files so that a FIFO or a device cannot block or stream forever, reading them with a
// size bound, syncing a directory after a rename, how much memory the machine has, and how
// many threads to compute with.
package osutil

import (
	"errors"
	"fmt"
	"io"
	"os"
)

// OpenRegular opens path for reading and fails unless it is a regular file. The open itself
// cannot block: on Unix the file is opened non-blocking (a FIFO without a writer would
// otherwise wait forever in open) and switched back to blocking reads once it is known to be a
// regular file; elsewhere the path is checked before it is opened.
func OpenRegular(path string) (*os.File, error) {
	f, err := openNoBlock(path)
	if err != nil {
		return nil, err
	}
	st, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if !st.Mode().IsRegular() {
		f.Close()
		return nil, fmt.Errorf("%s: not a regular file (%v)", path, kind(st.Mode()))
	}
	if err := setBlocking(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

func kind(m os.FileMode) string {
	switch {
	case m.IsDir():
		return "a directory"
	case m&os.ModeNamedPipe != 0:
		return "a named pipe"
	case m&os.ModeSocket != 0:
		return "a socket"
	case m&os.ModeCharDevice != 0:
		return "a character device"
	case m&os.ModeDevice != 0:
		return "a device"
	}
	return m.Type().String()
}

// ErrTooLarge is wrapped by ReadFile when a file is over its limit.
var ErrTooLarge = errors.New("file too large")

// ReadFile reads a regular file of at most limit bytes (opened as OpenRegular does). A larger
// file is refused before anything is read; a file that grows while it is read stops at the
// limit and is refused too, so memory stays bounded whatever the path names.
func ReadFile(path string, limit int64) ([]byte, error) {
	f, err := OpenRegular(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > limit {
		return nil, fmt.Errorf("%s: %w: %d bytes, the limit is %d", path, ErrTooLarge, st.Size(), limit)
	}
	b := make([]byte, 0, st.Size()+1)
	for {
		if int64(len(b)) > limit {
			return nil, fmt.Errorf("%s: %w: more than %d bytes", path, ErrTooLarge, limit)
		}
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := f.Read(b[len(b):min(cap(b), int(limit)+1)])
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return nil, err
		}
	}
}
