package main

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/cpu/kernels"
	"github.com/gorun-dev/gorun/quant"
)

// --quantized-activations: auto (the default) takes the integer path for Q4_0 weights where
// the CPU has SIMD integer kernels, true (or alone) everywhere, false nowhere; anything else is
// a usage error.
func TestCLIQuantizedActivations(t *testing.T) {
	dir := t.TempDir()
	q4 := filepath.Join(dir, "q4_0.gguf")
	if code, _, errs := gorun("quantize", tinyFile(t), q4, "q4_0", "--pure"); code != 0 {
		t.Fatal(errs)
	}
	text := filepath.Join(dir, "eval.txt")
	os.WriteFile(text, []byte(strings.Repeat("The quick brown fox jumps over the lazy dog. ", 40)), 0o644)
	final := regexp.MustCompile(`Final estimate: PPL = [0-9.]+`)
	ppl := func(extra ...string) string {
		t.Helper()
		code, out, errs := gorun(append([]string{"perplexity", "-m", q4, "-f", text, "-c", "64", "-t", "2"}, extra...)...)
		got := final.FindString(out + errs)
		if code != 0 || got == "" {
			t.Fatalf("%q: exit %d: %s", extra, code, errs)
		}
		return got
	}
	def, auto, on, onAlone, off := ppl(), ppl("--quantized-activations=auto"), ppl("--quantized-activations=true"),
		ppl("--quantized-activations"), ppl("--quantized-activations=false")
	if on == off {
		t.Errorf("the integer path gives the float path's perplexity: %s", on)
	}
	want := off
	if kernels.IntKernelFor(quant.Q4_0).SIMD() {
		want = on
	}
	if def != want || auto != want || onAlone != on {
		t.Errorf("default %s, auto %s, alone %s; want %s (true: %s, false: %s)", def, auto, onAlone, want, on, off)
	}
	code, _, errs := gorun("perplexity", "-m", q4, "-f", text, "-c", "64", "--quantized-activations=maybe")
	if code != 2 || !strings.Contains(errs, "want auto, true or false") {
		t.Errorf("--quantized-activations=maybe: exit %d, %s", code, errs)
	}
}
