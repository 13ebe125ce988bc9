package main

import (
	"bufio"
	"errors"
	"os"
	"path/filepath"

	"github.com/gorun-dev/gorun/internal/osutil"
)

// errNotRegular refuses to write over a directory, a device or a pipe.
var errNotRegular = errors.New("not a regular file")

// atomicFile is an output written to path.tmp and renamed over path only when complete, so an
// interrupted or failed run leaves no partial file.
type atomicFile struct {
	path, tmp string
	f         *os.File
	w         *bufio.Writer
}

func createAtomic(path string) (*atomicFile, error) {
	if fi, err := os.Stat(path); err == nil && !fi.Mode().IsRegular() {
		return nil, &os.PathError{Op: "write", Path: path, Err: errNotRegular}
	}
	tmp := path + ".tmp"
	f, err := os.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		return nil, err
	}
	return &atomicFile{path: path, tmp: tmp, f: f, w: bufio.NewWriterSize(f, 1<<20)}, nil
}

// commit flushes, syncs and renames the file into place.
func (a *atomicFile) commit() error {
	err := a.w.Flush()
	if err == nil {
		err = a.f.Sync()
	}
	if cerr := a.f.Close(); err == nil {
		err = cerr
	}
	a.f = nil
	if err == nil {
		err = os.Rename(a.tmp, a.path)
	}
	if err != nil {
		os.Remove(a.tmp)
		return err
	}
	return osutil.SyncDir(filepath.Dir(a.path))
}

// abort removes the temporary file unless commit succeeded.
func (a *atomicFile) abort() {
	if a.f != nil {
		a.f.Close()
		a.f = nil
		os.Remove(a.tmp)
	}
}

// writeFileAtomic writes b to path through an atomicFile.
func writeFileAtomic(path string, b []byte) error {
	a, err := createAtomic(path)
	if err != nil {
		return err
	}
	defer a.abort()
	if _, err := a.w.Write(b); err != nil {
		return err
	}
	return a.commit()
}
