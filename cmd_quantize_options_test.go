package main

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/quant"
)

// llama-quantize's options: --output-tensor-type and --token-embedding-type set those
// matrices' types, --leave-output-tensor copies output.weight, --keep-split is accepted and
// says it changes nothing; a bad type name is a usage error naming the option.
func TestQuantizeTypeOptions(t *testing.T) {
	src := tinyFile(t)
	dir := t.TempDir()
	types := func(args ...string) map[string]quant.Type {
		t.Helper()
		out := filepath.Join(dir, "q.gguf")
		if code, _, errs := gorun(append([]string{"quantize", src, out, "q4_0", "-t", "2"}, args...)...); code != 0 {
			t.Fatalf("gorun quantize %q: exit %d: %s", args, code, errs)
		}
		f, err := gguf.Open(out)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		m := map[string]quant.Type{}
		for _, ti := range f.Tensors {
			m[ti.Name] = ti.Type
		}
		return m
	}
	if m := types("--output-tensor-type", "q8_0", "--token-embedding-type", "Q5_1"); m["output.weight"] != quant.Q8_0 || m["token_embd.weight"] != quant.Q5_1 {
		t.Errorf("forced types: output %v, token_embd %v; want q8_0, q5_1", m["output.weight"], m["token_embd.weight"])
	}
	in, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	outType := in.Tensor("output.weight").Type
	in.Close()
	if m := types("--leave-output-tensor"); m["output.weight"] != outType {
		t.Errorf("--leave-output-tensor: output.weight %v, the input's %v", m["output.weight"], outType)
	}
	code, _, errs := gorun("quantize", src, filepath.Join(dir, "k.gguf"), "q8_0", "-t", "2", "--keep-split")
	if code != 0 || !strings.Contains(errs, "one file") {
		t.Errorf("--keep-split: exit %d, stderr %q", code, errs)
	}
	for _, c := range [][]string{{"--output-tensor-type", "q9_9"}, {"--token-embedding-type", "nonsense"}} {
		code, _, errs := gorun(append([]string{"quantize", src, filepath.Join(dir, "x.gguf"), "q4_0"}, c...)...)
		if code != 2 || !strings.Contains(errs, c[0]) || !strings.Contains(errs, c[1]) {
			t.Errorf("gorun quantize %q: exit %d, stderr %q", c, code, errs)
		}
	}
	_, stdout, stderr := gorun("quantize", "-h")
	for _, opt := range []string{"output-tensor-type", "token-embedding-type", "leave-output-tensor", "keep-split", "allow-requantize"} {
		if !strings.Contains(stdout+stderr, opt) {
			t.Errorf("quantize -h does not document --%s", opt)
		}
	}
}
