package main

import (
	"path/filepath"
	"strings"
	"testing"
)

// --gptq needs the calibration text's second moments: without --calib it is a usage error that
// says so, and -h documents it.
func TestQuantizeGPTQNeedsCalib(t *testing.T) {
	src := tinyFile(t)
	dir := t.TempDir()
	for _, args := range [][]string{{"--gptq"}, {"--gptq", "--imatrix", filepath.Join(dir, "none.dat")}} {
		code, _, errs := gorun(append([]string{"quantize", src, filepath.Join(dir, "x.gguf"), "q4_0"}, args...)...)
		if code != 2 || !strings.Contains(errs, "--gptq needs --calib") {
			t.Errorf("gorun quantize %q: exit %d, stderr %q", args, code, errs)
		}
	}
	_, stdout, stderr := gorun("quantize", "-h")
	if !strings.Contains(stdout+stderr, "-gptq") {
		t.Error("quantize -h does not document --gptq")
	}
}
