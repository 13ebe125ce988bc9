package main

import "testing"

// llama.cpp's "off" values of the sampling flags keep their meaning, though a zero option in
// the library means its default: --top-k 0 keeps every token (as --top-k of the vocabulary
// size), --repeat-last-n 0 turns the penalty off (as --repeat-penalty 1).
func TestSamplingFlagsOff(t *testing.T) {
	tiny := tinyFile(t) // a 512-token vocabulary
	gen := func(args ...string) string {
		t.Helper()
		base := []string{"-m", tiny, "-p", "a b c", "-n", "24", "--temp", "1.5", "--seed", "7", "--ignore-eos", "--no-display-prompt", "-t", "2"}
		code, out, errs := gorun(append(base, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		return out
	}
	if a, b := gen("--top-k", "0", "--top-p", "1", "--min-p", "0.01"), gen("--top-k", "512", "--top-p", "1", "--min-p", "0.01"); a != b {
		t.Errorf("--top-k 0 %q differs from --top-k 512 %q", a, b)
	}
	if a, b := gen("--top-k", "0", "--top-p", "1", "--min-p", "0.01"), gen("--top-k", "40", "--top-p", "1", "--min-p", "0.01"); a == b {
		t.Errorf("--top-k 0 gives the text of --top-k 40: %q", a)
	}
	if a, b := gen("--repeat-penalty", "1.5", "--repeat-last-n", "0"), gen("--repeat-penalty", "1"); a != b {
		t.Errorf("--repeat-last-n 0 %q differs from no penalty %q", a, b)
	}
}
