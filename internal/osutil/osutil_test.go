package osutil

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

func TestReadFileLimit(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	os.WriteFile(p, []byte("0123456789"), 0o644)
	if b, err := ReadFile(p, 10); err != nil || string(b) != "0123456789" {
		t.Fatalf("%q %v", b, err)
	}
	if _, err := ReadFile(p, 9); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("over the limit: %v", err)
	}
	empty := filepath.Join(dir, "e")
	os.WriteFile(empty, nil, 0o644)
	if b, err := ReadFile(empty, 0); err != nil || len(b) != 0 {
		t.Fatalf("empty: %q %v", b, err)
	}
	if _, err := ReadFile(dir, 1<<20); err == nil || !strings.Contains(err.Error(), "not a regular file (a directory)") {
		t.Fatalf("directory: %v", err)
	}
	if _, err := ReadFile(filepath.Join(dir, "none"), 1); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("missing: %v", err)
	}
}

func TestMemAvailable(t *testing.T) {
	n, ok := MemAvailable()
	if runtime.GOOS == "linux" && (!ok || n <= 0) {
		t.Fatalf("MemAvailable on Linux: %d %v", n, ok)
	}
}
