package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// gorun perplexity --kl-divergence-base writes the base file (and the usual perplexity);
// --kl-divergence compares a model with it and prints llama-perplexity's report blocks: a model
// against its own base agrees on every top token. Misuse and a truncated base are clear errors,
// and a failed run leaves no base file behind.
func TestPerplexityKLDivergence(t *testing.T) {
	src := tinyFile(t)
	dir := t.TempDir()
	text := filepath.Join(dir, "text.txt")
	os.WriteFile(text, []byte(strings.Repeat("The quick brown fox jumps over the lazy dog. A stitch in time saves nine. ", 30)), 0o644)
	base := filepath.Join(dir, "base.dat")
	code, stdout, errs := gorun("perplexity", "-m", src, "-f", text, "-c", "32", "--chunks", "8", "--kl-divergence-base", base, "-t", "2")
	if code != 0 || !strings.Contains(stdout, "Final estimate") {
		t.Fatalf("base run: exit %d: %s%s", code, stdout, errs)
	}
	code, stdout, errs = gorun("perplexity", "-m", src, "--kl-divergence-base", base, "--kl-divergence", "-t", "2")
	if code != 0 {
		t.Fatalf("--kl-divergence: exit %d: %s", code, errs)
	}
	for _, want := range []string{"====== Perplexity statistics ======", "Mean ln(PPL(Q)/PPL(base))", "====== KL divergence statistics ======",
		"Mean    KLD:", "99.9%   KLD:", "95.0%   KLD:", "Median  KLD:", "Minimum KLD:", "====== Token probability statistics ======",
		"RMS Δp", "Same top p: 100.000 ± 0.000 %"} {
		if !strings.Contains(stdout, want) {
			t.Errorf("report lacks %q:\n%s", want, stdout)
		}
	}
	whole, _ := os.ReadFile(base)
	cut := filepath.Join(dir, "cut.dat")
	os.WriteFile(cut, whole[:len(whole)-10], 0o644)
	failed := filepath.Join(dir, "failed.dat")
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"perplexity", "-m", src, "--kl-divergence"}, 2, "needs --kl-divergence-base"},
		{[]string{"perplexity", "-m", src, "-f", text, "--kl-divergence-base", base, "--score-all"}, 2, "does not mix"},
		{[]string{"perplexity", "-m", src, "--kl-divergence-base", cut, "--kl-divergence"}, 1, "truncated"},
		{[]string{"perplexity", "-m", src, "--kl-divergence-base", text, "--kl-divergence"}, 1, "not a KL-divergence base file"},
		{[]string{"perplexity", "-m", src, "--kl-divergence-base", base, "--kl-divergence", "-c", "16"}, 1, "raise -c"},
		{[]string{"perplexity", "-m", src, "-f", text, "-c", "100000", "--kl-divergence-base", failed}, 1, "context length"},
	} {
		code, _, errs := gorun(c.args...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("gorun %q: exit %d, stderr %q; want exit %d and %q", c.args, code, errs, c.code, c.want)
		}
	}
	if _, err := os.Stat(failed); err == nil {
		t.Error("a failed base run left its file")
	}
	if _, err := os.Stat(failed + ".tmp"); err == nil {
		t.Error("a failed base run left its temporary file")
	}
}
