//go:build unix

package gguf

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorun-dev/gorun/quant"
)

func smallWriter(t *testing.T) *Writer {
	w := NewWriter()
	if err := w.AddTensor("a", quant.F32, []int64{8}); err != nil {
		t.Fatal(err)
	}
	return w
}

func zeroData(i int, ti *TensorInfo) ([]byte, error) { return make([]byte, ti.Size), nil }

// Issue 8, row 7: a FIFO (or a device) named as a model neither blocks the open nor is read.
func TestOpenFIFODoesNotBlock(t *testing.T) {
	fifo := filepath.Join(t.TempDir(), "model.gguf")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Skip("no FIFOs here:", err)
	}
	done := make(chan error, 1)
	go func() { _, err := Open(fifo); done <- err }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "not a regular file (a named pipe)") {
			t.Fatalf("FIFO: %v", err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Open of a FIFO blocked") // the goroutine stays blocked; the test binary exits
	}
	if _, err := Open("/dev/zero"); err == nil || !strings.Contains(err.Error(), "not a regular file (a character device)") {
		t.Errorf("/dev/zero: %v", err)
	}
}

// Issue 8, rows 13 and 14: WriteFile writes OUT.tmp (replacing a leftover of a killed run),
// keeps an existing OUT's permissions, honours the umask for a new OUT, writes through a
// symbolic link, and refuses a directory before writing anything.
func TestWriteFileTempPermissionsLinks(t *testing.T) {
	dir := t.TempDir()
	out := filepath.Join(dir, "out.gguf")
	if TempPath(out) != out+".tmp" {
		t.Fatal(TempPath(out))
	}
	// A leftover temporary file (SIGKILL) is replaced, and none is left afterwards.
	if err := os.WriteFile(out+".tmp", []byte("leftover"), 0o600); err != nil {
		t.Fatal(err)
	}
	old := syscall.Umask(0o027)
	err := smallWriter(t).WriteFile(out, zeroData)
	syscall.Umask(old)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(out + ".tmp"); !os.IsNotExist(err) {
		t.Errorf("temporary file left: %v", err)
	}
	if st, _ := os.Stat(out); st.Mode().Perm() != 0o640 {
		t.Errorf("new file mode %v, want 0640 (0666 less the umask 027)", st.Mode().Perm())
	}
	// An existing file keeps its (narrower) permissions.
	if err := os.Chmod(out, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := smallWriter(t).WriteFile(out, zeroData); err != nil {
		t.Fatal(err)
	}
	if st, _ := os.Stat(out); st.Mode().Perm() != 0o600 {
		t.Errorf("existing 0600 file became %v", st.Mode().Perm())
	}
	// A symbolic link stays a link; the file it names is written (also when it does not exist
	// yet), and the temporary file sits beside the target.
	sub := filepath.Join(dir, "store")
	os.Mkdir(sub, 0o755)
	link := filepath.Join(dir, "link.gguf")
	if err := os.Symlink(filepath.Join("store", "real.gguf"), link); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := smallWriter(t).WriteFile(link, zeroData); err != nil {
			t.Fatal(err)
		}
		if st, err := os.Lstat(link); err != nil || st.Mode()&os.ModeSymlink == 0 {
			t.Fatalf("link replaced: %v %v", st.Mode(), err)
		}
		if _, err := Open(filepath.Join(sub, "real.gguf")); err != nil {
			t.Fatal(err)
		}
	}
	// A directory (directly or through a link) is refused by ResolveOutput, before any work.
	for _, p := range []string{sub, filepath.Join(dir, "dirlink")} {
		os.Symlink("store", filepath.Join(dir, "dirlink"))
		if _, err := ResolveOutput(p); err == nil || !strings.Contains(err.Error(), "not a regular file") {
			t.Errorf("ResolveOutput(%s): %v", p, err)
		}
		called := false
		err := smallWriter(t).WriteFile(p, func(i int, ti *TensorInfo) ([]byte, error) { called = true; return zeroData(i, ti) })
		if err == nil || called {
			t.Errorf("WriteFile(%s): %v, data asked for: %v", p, err, called)
		}
	}
	if entries, _ := os.ReadDir(sub); len(entries) != 1 {
		t.Errorf("store holds %v", entries)
	}
}

// Issue 8, row 3: alignments above 1 MiB are refused by the writer as by the reader, and the
// padding at 1 MiB is written in large pieces (a file of a thousand tiny tensors at the largest
// alignment is 1 GiB of padding: here, 8 tensors, measured).
func TestWriterAlignmentBound(t *testing.T) {
	w := NewWriter()
	if err := w.SetAlignment(1 << 21); err == nil {
		t.Error("alignment 2 MiB accepted")
	}
	if err := w.Set(KeyAlignment, uint32(1<<31)); err == nil {
		t.Error("general.alignment 2^31 accepted")
	}
	if err := w.SetAlignment(MaxAlignment); err != nil {
		t.Fatal(err)
	}
	for i := range 8 {
		if err := w.AddTensor(string(rune('a'+i)), quant.F32, []int64{1}); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	n, err := w.WriteTo(discard{}, zeroData)
	if err != nil || n != 9<<20 { // the header and each tensor padded to 1 MiB
		t.Fatalf("wrote %d bytes: %v", n, err)
	}
	if d := time.Since(start); d > 2*time.Second {
		t.Errorf("8 MiB of padding took %v", d)
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
