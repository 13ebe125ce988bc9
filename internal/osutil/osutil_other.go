//go:build !unix

package osutil

import (
	"fmt"
	"os"
)

// Without non-blocking opens, the path is checked first: only a regular file is opened.
func openNoBlock(path string) (*os.File, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if !st.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: not a regular file (%v)", path, kind(st.Mode()))
	}
	return os.Open(path)
}

func setBlocking(*os.File) error { return nil }

// SyncDir does nothing where directories cannot be synced (Windows commits renames itself).
func SyncDir(string) error { return nil }
