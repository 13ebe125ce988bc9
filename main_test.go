package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/internal/fixtures"
	"github.com/gorun-dev/gorun/internal/testmodel"
)

// gorun runs the CLI in-process and returns its exit code, stdout and stderr.
func gorun(args ...string) (int, string, string) {
	var out, errb bytes.Buffer
	code := run(args, &out, &errb)
	return code, out.String(), errb.String()
}

// `gorun -m f16 -p P -n 48 --temp 0 --no-display-prompt` prints exactly the reference
// continuation on stdout, and nothing else.
func TestGreedyStdoutMatchesReference(t *testing.T) {
	model := fixtures.Path(t, "gpt2-tiny-f16.gguf")
	var refs struct {
		Prompts []struct {
			Text         string `json:"text"`
			Greedy48Text string `json:"greedy48_text"`
		} `json:"prompts"`
	}
	b, err := os.ReadFile(fixtures.Path(t, "refs.json"))
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
		if out != p.Greedy48Text {
			t.Errorf("%q:\n got %q\nwant %q", p.Text, out, p.Greedy48Text)
		}
		if !strings.Contains(errs, "tokens per second") {
			t.Errorf("no timings on stderr: %q", errs)
		}
	}
	// Without --no-display-prompt the prompt is echoed first.
	_, out, _ := gorun("-m", model, "-p", refs.Prompts[0].Text, "-n", "48", "--temp", "0")
	if out != refs.Prompts[0].Text+refs.Prompts[0].Greedy48Text {
		t.Errorf("with the prompt: %q", out)
	}
}

func TestTokenizeIDs(t *testing.T) {
	model := fixtures.Path(t, "gpt2-tiny-f16.gguf")
	code, out, errs := gorun("tokenize", "-m", model, "-p", "In the beginning God created", "--ids")
	if code != 0 || out != "[818,262,3726,1793,2727]\n" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

func tinyFile(t *testing.T) string {
	c, _ := testmodel.Preset("tiny")
	p := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := testmodel.Write(p, c); err != nil {
		t.Fatal(err)
	}
	return p
}

// Bad command lines and bad files give a clear message and a non-zero exit, never a panic.
func TestBadInput(t *testing.T) {
	tiny := tinyFile(t)
	dir := t.TempDir()
	garbage := filepath.Join(dir, "garbage.gguf")
	os.WriteFile(garbage, []byte("this is not a model at all, just text"), 0o644)
	whole, _ := os.ReadFile(tiny)
	truncated := filepath.Join(dir, "truncated.gguf")
	os.WriteFile(truncated, whole[:len(whole)/2], 0o644)
	cases := []struct {
		args []string
		code int
		want string
	}{
		{[]string{"-p", "hi"}, 2, "no model"},
		{[]string{"-m", tiny, "--bogus"}, 2, "unknown option --bogus"},
		{[]string{"-m", tiny, "-n", "x"}, 2, "invalid value"},
		{[]string{"-m", tiny, "--top-p", "0"}, 2, "--top-p must be in (0, 1]"},
		{[]string{"-m", filepath.Join(dir, "missing.gguf"), "-p", "hi"}, 1, "no such file"},
		{[]string{"-m", garbage, "-p", "hi"}, 1, "gguf"},
		{[]string{"-m", truncated, "-p", "hi"}, 1, "past the end"},
		{[]string{"-m", tiny, "-p", "hi", "-c", "1000"}, 1, "exceeds the 64 positions"},
		{[]string{"-m", tiny, "-p", strings.Repeat("word ", 100), "-n", "4"}, 1, "context is full"},
		{[]string{"frobnicate"}, 2, "unknown command"},
		{[]string{"tokenize", "-p", "x"}, 2, "no model"},
		{[]string{"perplexity", "-m", tiny}, 2, "no text"},
	}
	for _, c := range cases {
		code, _, errs := gorun(c.args...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("gorun %q: exit %d, stderr %q; want exit %d and %q", c.args, code, errs, c.code, c.want)
		}
	}
}

// Generation stops with a message (not an error) when the context fills up.
func TestContextFullStops(t *testing.T) {
	code, out, errs := gorun("-m", tinyFile(t), "-p", "hello", "-n", "500", "--ignore-eos", "--seed", "1", "-c", "32")
	if code != 0 || !strings.Contains(errs, "context of 32 tokens is full") || out == "" {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

func TestHelp(t *testing.T) {
	for _, args := range [][]string{{"help"}, {"-h"}, {"tokenize", "-h"}, {"help", "perplexity"}} {
		code, out, errs := gorun(args...)
		if code != 0 || !strings.Contains(out+errs, "gorun") {
			t.Errorf("%q: exit %d", args, code)
		}
	}
}

func TestBenchAndRandomModel(t *testing.T) {
	p := filepath.Join(t.TempDir(), "r.gguf")
	if code, _, errs := gorun("random-model", "-shape", "tiny", "-o", p); code != 0 {
		t.Fatalf("random-model: %s", errs)
	}
	code, out, errs := gorun("bench", "-m", p, "-p", "16", "-n", "4", "-r", "2", "-t", "1,2")
	if code != 0 {
		t.Fatalf("bench: %s", errs)
	}
	for _, want := range []string{"| model", "pp16", "tg4", "±"} {
		if !strings.Contains(out, want) {
			t.Errorf("bench output lacks %q:\n%s", want, out)
		}
	}
	if rows := strings.Count(out, "\n"); rows != 2+4+2 {
		t.Errorf("%d lines, want header + 4 rows + a blank line and the build line:\n%s", rows, out)
	}
	code, out, _ = gorun("bench", "-m", p, "-p", "8", "-n", "0", "-r", "1", "-o", "json")
	var res []map[string]any
	if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res) != 1 || res[0]["n_prompt"] != 8.0 || res[0]["n_gen"] != 0.0 {
		t.Errorf("json output: %q", out)
	} else {
		// llama-bench's field names, so its tools read gorun's output.
		for _, k := range []string{"model_filename", "model_type", "model_size", "model_n_params", "n_threads", "avg_ts", "stddev_ts", "samples_ts", "avg_ns", "samples_ns"} {
			if _, ok := res[0][k]; !ok {
				t.Errorf("json output lacks %q: %q", k, out)
			}
		}
	}
	if code, _, errs := gorun("bench", "-m", p, "-p", "1000"); code != 1 || !strings.Contains(errs, "context") {
		t.Errorf("prompt longer than the context: exit %d %q", code, errs)
	}
}

// gorun quantize writes the file, prints a size table, and refuses bad requests clearly.
func TestQuantizeCommand(t *testing.T) {
	src := tinyFile(t)
	dir := t.TempDir()
	out := filepath.Join(dir, "q8.gguf")
	code, stdout, errs := gorun("quantize", src, out, "q8_0", "-t", "2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	if !strings.Contains(stdout, "q8_0") || !strings.Contains(stdout, "bits per weight") || !strings.Contains(errs, "100%") {
		t.Errorf("stdout %q\nstderr %q", stdout, errs)
	}
	if code, _, _ := gorun("-m", out, "-p", "hi", "-n", "3", "--seed", "1"); code != 0 {
		t.Error("the quantized model does not run")
	}
	for _, c := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"quantize", src, out}, 2, "want IN.gguf OUT.gguf TYPE"},
		{[]string{"quantize", src, out, "q3_x"}, 2, "unknown quantization type"},
		{[]string{"quantize", src, src, "q4_0"}, 1, "refusing to overwrite"},
		{[]string{"quantize", filepath.Join(dir, "none.gguf"), out, "q4_0"}, 1, "no such file"},
		{[]string{"quantize", src, out, "q4_0", "--reference", "--calib", src}, 2, "do not mix"},
	} {
		code, _, errs := gorun(c.args...)
		if code != c.code || !strings.Contains(errs, c.want) {
			t.Errorf("gorun %q: exit %d, stderr %q; want exit %d and %q", c.args, code, errs, c.code, c.want)
		}
	}
}

// --calib gathers statistics on a text and changes the quantized weights (the importance
// reaches the quantizer), and the result still runs.
func TestQuantizeCalibrated(t *testing.T) {
	src := tinyFile(t)
	dir := t.TempDir()
	text := filepath.Join(dir, "calib.txt")
	os.WriteFile(text, []byte(strings.Repeat("The quick brown fox jumps over the lazy dog. ", 40)), 0o644)
	plain, calib := filepath.Join(dir, "plain.gguf"), filepath.Join(dir, "calib.gguf")
	if code, _, errs := gorun("quantize", src, plain, "q4_0", "--pure"); code != 0 {
		t.Fatal(errs)
	}
	code, _, errs := gorun("quantize", src, calib, "q4_0", "--pure", "--calib", text)
	if code != 0 || !strings.Contains(errs, "statistics for") {
		t.Fatalf("exit %d: %s", code, errs)
	}
	a, _ := os.ReadFile(plain)
	b, _ := os.ReadFile(calib)
	if len(a) != len(b) || bytes.Equal(a, b) {
		t.Errorf("calibrated file: %d bytes vs %d, identical %v", len(b), len(a), bytes.Equal(a, b))
	}
	if code, _, errs := gorun("-m", calib, "-p", "The quick", "-n", "4", "--temp", "0"); code != 0 {
		t.Errorf("calibrated model: %s", errs)
	}
}
