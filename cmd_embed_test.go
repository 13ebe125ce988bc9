package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/internal/fixtures"
)

// The prompts llm/testdata/embeddings was made with, and llama-embedding's command line.
const embedRefPrompt = "In the beginning God created the heaven and the earth.<#sep#>And the earth was without form, and void<#sep#>Hello"

// gorun embed with llama-embedding's flags prints llama-embedding's JSON (OpenAI's list) with
// the same values, within the tolerance llm's test explains (float16 KV cache in llama.cpp).
func TestCLIEmbedMatchesLlamaEmbedding(t *testing.T) {
	model := fixtures.Path(t, "gpt2-tiny-f16.gguf")
	code, out, errs := gorun("embed", "-m", model, "-t", "2", "-c", "512", "--pooling", "last", "--embd-normalize", "2",
		"--embd-output-format", "json", "--embd-separator", "<#sep#>", "-p", embedRefPrompt)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	type list struct {
		Object string `json:"object"`
		Data   []struct {
			Object    string    `json:"object"`
			Index     int       `json:"index"`
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
	}
	var got, want list
	if err := json.Unmarshal([]byte(out), &got); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	b, err := os.ReadFile(filepath.Join("llm", "testdata", "embeddings", "gpt2-tiny-f16.last.norm2.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &want); err != nil {
		t.Fatal(err)
	}
	if got.Object != "list" || len(got.Data) != 3 {
		t.Fatalf("got object %q with %d items", got.Object, len(got.Data))
	}
	for i, d := range got.Data {
		if d.Object != "embedding" || d.Index != i || len(d.Embedding) != len(want.Data[i].Embedding) {
			t.Fatalf("item %d: %q index %d, %d values", i, d.Object, d.Index, len(d.Embedding))
		}
		for j, v := range d.Embedding {
			if diff := v - want.Data[i].Embedding[j]; diff > 2e-3 || diff < -2e-3 {
				t.Fatalf("item %d value %d: %v, llama-embedding %v", i, j, v, want.Data[i].Embedding[j])
			}
		}
	}
}

// The default output is llama-embedding's text: "embedding N:" lines (16 values each for
// several inputs) and the cosine similarity matrix; array is a bare JSON array of arrays;
// json+ adds the similarity matrix; -p's \n separates inputs.
func TestCLIEmbedFormats(t *testing.T) {
	tiny := tinyFile(t)
	code, out, errs := gorun("embed", "-m", tiny, "-p", `hello world\ngoodbye`)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 8 || !strings.HasPrefix(lines[0], "embedding 0: ") || len(strings.Fields(lines[1])) != 2+16 ||
		lines[3] != "cosine similarity matrix:" || !strings.HasPrefix(lines[6], "  1.00 ") {
		t.Errorf("text output:\n%s", out)
	}
	code, out, _ = gorun("embed", "-m", tiny, "-p", "hello", "--embd-output-format", "array", "--embd-normalize", "0")
	var arr [][]float64
	if code != 0 || json.Unmarshal([]byte(out), &arr) != nil || len(arr) != 1 {
		t.Fatalf("array: exit %d, %q", code, out)
	}
	var peak float64
	for _, v := range arr[0] {
		peak = max(peak, v, -v)
		if v != float64(int64(v)) {
			t.Fatalf("max-abs normalization prints integers, got %v", v)
		}
	}
	if peak != 32760 {
		t.Errorf("max-abs normalization: largest magnitude %v, want 32760", peak)
	}
	code, out, _ = gorun("embed", "-m", tiny, "-p", `a\nb`, "--embd-output-format", "json+")
	var plus struct {
		Cosine [][]float64 `json:"cosineSimilarity"`
	}
	if code != 0 || json.Unmarshal([]byte(out), &plus) != nil || len(plus.Cosine) != 2 || plus.Cosine[0][0] != 1 {
		t.Errorf("json+: exit %d, %q", code, out)
	}
}

// Bad options are one-line usage errors (exit 2); an input with no tokens is an error naming it.
func TestCLIEmbedBadInput(t *testing.T) {
	tiny := tinyFile(t)
	for _, args := range [][]string{
		{"--pooling", "none", "-p", "x"},
		{"--pooling", "avg", "-p", "x"},
		{"--embd-normalize", "-3", "-p", "x"},
		{"--embd-output-format", "xml", "-p", "x"},
		{"--embd-separator", "", "-p", "x"},
		{},
	} {
		code, _, errs := gorun(append([]string{"embed", "-m", tiny}, args...)...)
		if code != 2 || strings.Count(strings.TrimSpace(errs), "\n") != 0 {
			t.Errorf("%q: exit %d, stderr %q", args, code, errs)
		}
	}
	code, _, errs := gorun("embed", "-m", tiny, "-p", `a\n`)
	if code != 1 || !strings.Contains(errs, "input 1: ") || !strings.Contains(errs, "no tokens") {
		t.Errorf("empty input: exit %d, stderr %q", code, errs)
	}
}
