package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/internal/fixtures"
)

// gorun convert writes llama.cpp's f16 conversion of gpt2-micro byte for byte, and the result
// generates.
func TestConvertCommand(t *testing.T) {
	src := fixtures.Path(t, "hf/gpt2-micro/model.safetensors")
	ref := fixtures.Path(t, "hf/gpt2-micro-f16.llamacpp.gguf")
	out := filepath.Join(t.TempDir(), "m.gguf")
	code, stdout, stderr := gorun("convert", filepath.Dir(src), out)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, stderr)
	}
	if !strings.Contains(stdout, `"Gpt2 Micro", 29 tensors`) {
		t.Errorf("stdout %q", stdout)
	}
	a, _ := os.ReadFile(out)
	b, _ := os.ReadFile(ref)
	if len(a) == 0 || string(a) != string(b) {
		t.Errorf("output (%d bytes) differs from llama.cpp's (%d bytes)", len(a), len(b))
	}
	if code, _, stderr := gorun("-m", out, "-p", "Hello", "-n", "4", "--temp", "0"); code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}
}

func TestConvertCommandErrors(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pytorch_model.bin"), []byte("PK"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "config.json"), []byte(`{"architectures":["GPT2LMHeadModel"],"n_layer":1,"n_embd":8,"n_head":2,"n_positions":16,"vocab_size":10}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"convert", dir}, 2, "want HF_DIR OUT.gguf"},
		{[]string{"convert", dir, filepath.Join(dir, "o.gguf")}, 1, "use the model's safetensors"},
		{[]string{"convert", filepath.Join(dir, "nope"), filepath.Join(dir, "o.gguf")}, 1, "Hugging Face model directory"},
		{[]string{"convert", dir, dir}, 1, "not a regular file"},
	} {
		code, _, stderr := gorun(c.args...)
		if code != c.code || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %q; want %d and %q", c.args, code, stderr, c.code, c.want)
		}
	}
}
