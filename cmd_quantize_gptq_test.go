package main

import (
	"bytes"
	"os"
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

// --calib TEXT --gptq collects every matrix's second moments and writes another file than
// --calib alone, the same bytes for any thread count.
func TestQuantizeGPTQ(t *testing.T) {
	src := tinyFile(t)
	dir := t.TempDir()
	text := filepath.Join(dir, "calib.txt")
	os.WriteFile(text, []byte(strings.Repeat("The quick brown fox jumps over the lazy dog. ", 60)), 0o644)
	run := func(out string, args ...string) []byte {
		t.Helper()
		code, _, errs := gorun(append([]string{"quantize", src, out, "q4_k_m", "--calib", text}, args...)...)
		if code != 0 {
			t.Fatalf("quantize %q: exit %d: %s", args, code, errs)
		}
		if len(args) > 0 && args[0] == "--gptq" && !strings.Contains(errs, "second moments of") {
			t.Errorf("--gptq does not report its statistics: %s", errs)
		}
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	g1 := run(filepath.Join(dir, "g1.gguf"), "--gptq", "-t", "1")
	g2 := run(filepath.Join(dir, "g2.gguf"), "--gptq", "-t", "2")
	c := run(filepath.Join(dir, "c.gguf"), "-t", "2")
	if !bytes.Equal(g1, g2) {
		t.Error("--gptq: -t 1 and -t 2 give different files")
	}
	if len(g1) != len(c) {
		t.Errorf("--gptq file %d bytes, --calib alone %d", len(g1), len(c))
	}
	if bytes.Equal(g1, c) {
		t.Error("--gptq changed nothing")
	}
}
