package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gorun quantize --search: grid (the default; fast, its former name, the same file) and full
// write files of the same size with different bytes; bad values and --reference with an
// explicit --search are usage errors; -h documents it.
func TestQuantizeSearchFlag(t *testing.T) {
	src := tinyFile(t)
	dir := t.TempDir()
	out := func(n string) string { return filepath.Join(dir, n) }
	for _, c := range [][]string{
		{"quantize", src, out("def.gguf"), "q4_0", "-t", "2"},
		{"quantize", src, out("full.gguf"), "q4_0", "-t", "2", "--search", "full"},
		{"quantize", src, out("grid.gguf"), "q4_0", "-t", "2", "--search=grid"},
		{"quantize", src, out("fast.gguf"), "q4_0", "-t", "2", "--search", "fast"},
	} {
		if code, _, errs := gorun(c...); code != 0 {
			t.Fatalf("gorun %q: exit %d: %s", c, code, errs)
		}
	}
	def, _ := os.ReadFile(out("def.gguf"))
	full, _ := os.ReadFile(out("full.gguf"))
	grid, _ := os.ReadFile(out("grid.gguf"))
	fast, _ := os.ReadFile(out("fast.gguf"))
	if !bytes.Equal(def, grid) {
		t.Error("--search grid differs from the default")
	}
	if len(grid) != len(full) || bytes.Equal(grid, full) {
		t.Errorf("--search grid: %d bytes (full %d), identical %v", len(grid), len(full), bytes.Equal(grid, full))
	}
	if !bytes.Equal(fast, grid) {
		t.Error("--search fast differs from --search grid")
	}
	if code, _, errs := gorun("-m", out("grid.gguf"), "-p", "hi", "-n", "3", "--seed", "1"); code != 0 {
		t.Errorf("the grid-searched model does not run: %s", errs)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"quantize", src, out("x.gguf"), "q4_0", "--search", "quick"}, "unknown search"},
		{[]string{"quantize", src, out("x.gguf"), "q4_0", "--search", "grid", "--reference"}, "do not mix"},
		{[]string{"quantize", src, out("x.gguf"), "q4_0", "--search", "full", "--reference"}, "do not mix"},
	} {
		code, _, errs := gorun(c.args...)
		if code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("gorun %q: exit %d, stderr %q; want exit 2 and %q", c.args, code, errs, c.want)
		}
	}
	_, stdout, stderr := gorun("quantize", "-h")
	if help := stdout + stderr; !strings.Contains(help, "-search") || !strings.Contains(help, "grid") {
		t.Errorf("quantize -h does not document --search: %q", help)
	}
}
