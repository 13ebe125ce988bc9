package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/internal/fixtures"
)

// TestGreedyStdoutMatchesReference for the trained Llama fixture: gorun prints Hugging Face's
// greedy continuation of each prompt.
func TestGreedyStdoutMatchesReferenceLlama(t *testing.T) {
	model := fixtures.Path(t, "llama-kjv-f16.gguf")
	var refs struct {
		Prompts []struct {
			Text       string `json:"text"`
			GreedyText string `json:"greedy_text"`
		} `json:"prompts"`
	}
	b, err := os.ReadFile(fixtures.Path(t, "llama_kjv_refs.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &refs); err != nil {
		t.Fatal(err)
	}
	for _, p := range refs.Prompts {
		code, out, errs := gorun("-m", model, "-p", p.Text, "-n", "48", "--temp", "0", "--no-display-prompt", "-t", "2")
		if code != 0 {
			t.Fatalf("exit %d: %s", code, errs)
		}
		if out != p.GreedyText {
			t.Errorf("%q:\n got %q\nwant %q", p.Text, out, p.GreedyText)
		}
	}
}

// gorun random-model writes the Llama-family shapes, and the files run.
func TestRandomModelLlamaShapes(t *testing.T) {
	for _, shape := range []string{"llama-tiny", "llama-tiny-untied", "qwen2-tiny"} {
		p := filepath.Join(t.TempDir(), shape+".gguf")
		code, _, errs := gorun("random-model", "-shape", shape, "-o", p)
		arch := strings.SplitN(shape, "-", 2)[0]
		if code != 0 || !strings.Contains(errs, arch+" "+shape) {
			t.Fatalf("random-model -shape %s: exit %d, %s", shape, code, errs)
		}
		if code, _, errs := gorun("-m", p, "-p", "hello", "-n", "4", "--temp", "0"); code != 0 || !strings.Contains(errs, "n_predict") {
			t.Errorf("%s: exit %d, %s", shape, code, errs)
		}
	}
	if code, _, errs := gorun("random-model", "-shape", "llama-7B", "-o", filepath.Join(t.TempDir(), "x.gguf")); code != 2 || !strings.Contains(errs, "llama-3.2-1B") {
		t.Errorf("unknown shape: exit %d, %s", code, errs)
	}
}
