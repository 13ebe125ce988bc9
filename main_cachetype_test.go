package main

import (
	"strings"
	"testing"
)

// -ctk/-ctv as llama.cpp: f16 caches run (the greedy text of the tiny model stays the f32
// cache's here), a mismatched pair or a quantized type is refused naming it; bench reports the
// type in llama-bench's type_k/type_v.
func TestCLICacheTypes(t *testing.T) {
	tiny := tinyFile(t)
	base := []string{"-m", tiny, "-p", "a b c", "-n", "12", "--temp", "0", "--no-display-prompt", "-t", "2"}
	code, want, errs := gorun(base...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if code, out, errs := gorun(append(base, "-ctk", "f16", "-ctv", "f16")...); code != 0 || out == "" {
		t.Errorf("-ctk f16 -ctv f16: exit %d, %q (f32: %q): %s", code, out, want, errs)
	}
	for _, bad := range [][]string{{"-ctk", "f16"}, {"-ctk", "q8_0", "-ctv", "q8_0"}, {"--cache-type-k", "bogus", "--cache-type-v", "bogus"}} {
		code, _, errs := gorun(append(base, bad...)...)
		if code == 0 || !strings.Contains(errs, "-ctk") {
			t.Errorf("%q: exit %d, stderr %q", bad, code, errs)
		}
	}
	code, out, errs := gorun("bench", "-m", tiny, "-p", "0", "-n", "4", "-r", "1", "-t", "1", "-o", "json", "-ctk", "f16", "-ctv", "f16")
	if code != 0 || !strings.Contains(out, `"type_k": "f16"`) || !strings.Contains(out, `"type_v": "f16"`) {
		t.Errorf("bench -ctk f16: exit %d, %s %s", code, out, errs)
	}
}
