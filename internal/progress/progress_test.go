package progress

import (
	"bytes"
	"os"
	"strings"
	"testing"
	"time"
)

// Issue 21 item 10: every redraw fits the terminal's width (less one column), so that an
// 80-column terminal shows one line, not a line per redraw; the note goes first, then the ETA,
// then the bar.
func TestBarFitsTheTerminal(t *testing.T) {
	for _, cols := range []int{20, 40, 60, 80, 120, 200} {
		var buf bytes.Buffer
		b := newBar(&buf, "pull model-00001-of-00002.safetensors", 3<<30, true, cols).Bytes()
		b.start = time.Now().Add(-time.Minute)
		for _, done := range []int64{0, 1 << 20, 1 << 30, 3 << 30} {
			b.last = time.Time{}
			b.Set(done, strings.Repeat("a long note about the file ", 5), false)
		}
		b.Done()
		for _, line := range strings.Split(strings.TrimSuffix(buf.String(), "\n"), "\r")[1:] {
			if n := len([]rune(line)); n > max(cols-1, 20) {
				t.Errorf("%d columns: a line of %d: %q", cols, n, line)
			}
		}
		if cols >= 80 && !strings.Contains(buf.String(), "[====") {
			t.Errorf("%d columns: no bar drawn: %q", cols, buf.String())
		}
		if strings.Count(buf.String(), "\n") != 1 {
			t.Errorf("%d columns: %d lines, want the bar's one", cols, strings.Count(buf.String(), "\n"))
		}
	}
}

// Off a terminal (a file, a pipe, /dev/null, a buffer) no bar is drawn: plain lines, only those
// asked for.
func TestBarOffTerminal(t *testing.T) {
	devNull, err := os.OpenFile(os.DevNull, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer devNull.Close()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	file, err := os.Create(t.TempDir() + "/log")
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	for name, f := range map[string]*os.File{"/dev/null": devNull, "a pipe": w, "a file": file} {
		if New(f, "x", 10).tty {
			t.Errorf("%s taken for a terminal", name)
		}
	}
	var buf bytes.Buffer
	b := New(&buf, "calibrate", 4)
	b.Set(1, "chunk 1", false)
	b.Set(2, "chunk 2", true)
	b.Done()
	if got := buf.String(); got != "calibrate:  50% chunk 2\n" {
		t.Errorf("off a terminal: %q", got)
	}
}
