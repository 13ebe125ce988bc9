package main

import (
	"encoding/json"
	"io"
	"net/http"
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

// `gorun serve --pooling last` answers /v1/embeddings, and ollama's /api/embed, with
// llama-embedding's vectors for the same pooling (within the llm tolerance); --pooling none is
// a usage error.
func TestServeEmbeddingsMatchLlamaEmbedding(t *testing.T) {
	model := fixtures.Path(t, "gpt2-tiny-f16.gguf")
	if code, _, errs := gorun("serve", "-m", model, "--pooling", "none"); code != exitUsage || !strings.Contains(errs, "--pooling") {
		t.Errorf("--pooling none: exit %d, %q", code, errs)
	}
	url, stop := serveFor(t, "-m", model, "-c", "512", "--pooling", "last", "--embeddings", "--alias", "tiny")
	defer stop()
	want := readRefEmbeddings(t, "gpt2-tiny-f16.last.norm2.json")
	input, _ := json.Marshal(strings.Split(embedRefPrompt, "<#sep#>"))
	var openai struct {
		Data []struct {
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
	}
	var ollama struct {
		Embeddings [][]float64 `json:"embeddings"`
	}
	postJSON(t, url+"/v1/embeddings", `{"model":"tiny","input":`+string(input)+`}`, &openai)
	postJSON(t, url+"/api/embed", `{"model":"tiny","input":`+string(input)+`}`, &ollama)
	if len(openai.Data) != 3 || len(ollama.Embeddings) != 3 {
		t.Fatalf("%d and %d embeddings", len(openai.Data), len(ollama.Embeddings))
	}
	for i := range want {
		for _, got := range [][]float64{openai.Data[i].Embedding, ollama.Embeddings[i]} {
			if len(got) != len(want[i]) {
				t.Fatalf("input %d: %d values, want %d", i, len(got), len(want[i]))
			}
			for j := range got {
				if d := got[j] - want[i][j]; d > 2e-3 || d < -2e-3 {
					t.Fatalf("input %d value %d: %v, llama-embedding %v", i, j, got[j], want[i][j])
				}
			}
		}
	}
}

func readRefEmbeddings(t *testing.T, name string) [][]float64 {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("llm", "testdata", "embeddings", name))
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Data []struct {
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatal(err)
	}
	out := make([][]float64, len(ref.Data))
	for i, d := range ref.Data {
		out[i] = d.Embedding
	}
	return out
}

func postJSON(t *testing.T, url, body string, v any) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || json.Unmarshal(b, v) != nil {
		t.Fatalf("%s: %d %s", url, resp.StatusCode, b)
	}
}
