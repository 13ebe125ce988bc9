//go:build unix

package osutil

import (
	"os"
	"syscall"

	"golang.org/x/sys/unix"
)

func openNoBlock(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDONLY|syscall.O_NONBLOCK, 0)
}

func setBlocking(f *os.File) error {
	flags, err := unix.FcntlInt(f.Fd(), unix.F_GETFL, 0)
	if err != nil {
		return &os.PathError{Op: "fcntl", Path: f.Name(), Err: err}
	}
	if _, err := unix.FcntlInt(f.Fd(), unix.F_SETFL, flags&^unix.O_NONBLOCK); err != nil {
		return &os.PathError{Op: "fcntl", Path: f.Name(), Err: err}
	}
	return nil
}

// SyncDir flushes a directory's entries (a rename into it) to disk.
func SyncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && err != syscall.EINVAL { // some file systems cannot
		return err
	}
	return nil
}
