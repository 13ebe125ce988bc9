package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/internal/fixtures"
	"github.com/gorun-dev/gorun/internal/testmodel"
)

// Issue 21 item 6: llama.cpp's options typed by habit are accepted, with their meaning or as
// the no-op their help says; the greedy text is the same with all of them.
func TestCLILlamaHabitFlags(t *testing.T) {
	tiny := tinyFile(t)
	base := []string{"-m", tiny, "-p", "a b c", "-n", "16", "--temp", "0", "--no-display-prompt", "-t", "2"}
	code, want, errs := gorun(base...)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	for _, extra := range [][]string{
		{"--no-warmup"}, {"--color"}, {"--color", "off"}, {"-fa"}, {"-fa", "on"}, {"--flash-attn", "auto"}, {"-fa=off"},
		{"--mlock"}, {"-tb", "2"}, {"--threads-batch", "1"}, {"-ub", "2"}, {"--ubatch-size", "64"}, {"-sp"}, {"--special"},
		{"--verbose-prompt"}, {"--no-mmap"}, {"-v"},
	} {
		code, out, errs := gorun(append(append([]string(nil), base...), extra...)...)
		if code != 0 || out != want {
			t.Errorf("%q: exit %d, text %q, want %q: %s", extra, code, out, want, errs)
		}
	}
	// --log-disable: no informational lines; errors still.
	code, out, errs := gorun(append(base, "--log-disable")...)
	if code != 0 || out != want || errs != "" {
		t.Errorf("--log-disable: exit %d, text %q, stderr %q", code, out, errs)
	}
	if code, _, errs := gorun("-m", filepath.Join(t.TempDir(), "none.gguf"), "-p", "hi", "--log-disable"); code != 1 || !strings.Contains(errs, "none.gguf") {
		t.Errorf("--log-disable hid an error: exit %d, stderr %q", code, errs)
	}
	// --log-file: the informational lines also go to the file (appended).
	logFile := filepath.Join(t.TempDir(), "run.log")
	for i := 0; i < 2; i++ {
		if code, _, errs := gorun(append(base, "--log-file", logFile)...); code != 0 || !strings.Contains(errs, "tokens per second") {
			t.Fatalf("--log-file: exit %d, stderr %q", code, errs)
		}
	}
	if b, err := os.ReadFile(logFile); err != nil || strings.Count(string(b), "stop reason") != 2 {
		t.Errorf("--log-file %s: %q, %v", logFile, b, err)
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-fa=maybe"}, "want on, off or auto"},
		{[]string{"-ub", "0"}, "-ub >= 1"},
		{[]string{"-i", "--prompt-cache", "x"}, "--prompt-cache does not apply to -i"},
	} {
		code, _, errs := gorun(append(append([]string(nil), base...), c.args...)...)
		if code == 0 || !strings.Contains(errs, c.want) {
			t.Errorf("%q: exit %d, stderr %q, want %q", c.args, code, errs, c.want)
		}
	}
}

// Issue 21 item 6: --prompt-cache FILE saves the evaluated prompt and a later run reuses it,
// with the same text; a prompt that shares only its beginning reuses that; a file of another
// model is reported and replaced.
func TestCLIPromptCache(t *testing.T) {
	model := fixtures.Path(t, "gpt2-tiny-f16.gguf")
	cache := filepath.Join(t.TempDir(), "prompt.bin")
	const prompt = "In the beginning God created the heaven and the earth."
	args := func(p string, extra ...string) []string {
		return append([]string{"-m", model, "-p", p, "-n", "12", "--temp", "0", "--no-display-prompt", "-t", "2"}, extra...)
	}
	_, want, _ := gorun(args(prompt)...)
	code, first, errs := gorun(args(prompt, "--prompt-cache", cache)...)
	if code != 0 || first != want || !strings.Contains(errs, "does not exist yet") {
		t.Fatalf("first run: exit %d, text %q (want %q), stderr %q", code, first, want, errs)
	}
	if st, err := os.Stat(cache); err != nil || st.Size() == 0 {
		t.Fatalf("no cache written: %v", err)
	}
	code, again, errs := gorun(args(prompt, "--prompt-cache", cache)...)
	n := len(regexp.MustCompile(`reusing (\d+) of the prompt's (\d+) tokens`).FindStringSubmatch(errs))
	if code != 0 || again != want || n == 0 {
		t.Errorf("second run: exit %d, text %q (want %q), stderr %q", code, again, want, errs)
	}
	// Another prompt with the same beginning: its shared tokens are reused, the text is its own.
	other := "In the beginning God made"
	_, wantOther, _ := gorun(args(other)...)
	code, got, errs := gorun(args(other, "--prompt-cache", cache)...)
	if code != 0 || got != wantOther || !strings.Contains(errs, "reusing 4 of the prompt's 5 tokens") {
		t.Errorf("shared beginning: exit %d, text %q (want %q), stderr %q", code, got, wantOther, errs)
	}
	// A cache of another model: reported, replaced, and the text is right.
	tiny := tinyFile(t)
	_, wantTiny, _ := gorun("-m", tiny, "-p", prompt, "-n", "12", "--temp", "0", "--no-display-prompt", "-t", "2")
	code, got, errs = gorun("-m", tiny, "-p", prompt, "-n", "12", "--temp", "0", "--no-display-prompt", "-t", "2", "--prompt-cache", cache)
	if code != 0 || got != wantTiny || !strings.Contains(errs, "not usable") {
		t.Errorf("another model's cache: exit %d, text %q (want %q), stderr %q", code, got, wantTiny, errs)
	}
}

// Issue 21 item 6: "did you mean" suggests what is close (a typo, a swap, a glued number, the
// one option a name begins), and nothing for what is not.
func TestCLIDidYouMean(t *testing.T) {
	tiny := tinyFile(t)
	for _, c := range []struct{ opt, want string }{
		{"--tmep", "did you mean --temp?"},
		{"-n4", "did you mean -n 4?"},
		{"-ctx", "did you mean --ctx-size?"},
		{"--top_k", "did you mean --top-k?"},
		{"--repeat-penalt", "did you mean --repeat-penalty?"},
		{"-hff", ""},
		{"-zqk", ""},
		{"-ctq", "did you mean -ctk?"},
		{"-xy", ""},
	} {
		code, _, errs := gorun("-m", tiny, "-p", "hi", c.opt)
		if code != 2 || !strings.Contains(errs, "unknown option "+c.opt) {
			t.Errorf("%s: exit %d, stderr %q", c.opt, code, errs)
		}
		if c.want == "" && strings.Contains(errs, "did you mean") || c.want != "" && !strings.Contains(errs, c.want) {
			t.Errorf("%s: stderr %q, want %q", c.opt, errs, c.want)
		}
	}
}

// Issue 21 item 9: the help groups the options in llama.cpp's sections, each option once with
// its aliases on one line and two dashes for long names, each default said once; "gorun help
// bogus" is a usage error like "gorun bogus"; "run" is among the commands.
func TestCLIHelpGrouped(t *testing.T) {
	code, out, _ := gorun("-h")
	if code != 0 {
		t.Fatalf("exit %d", code)
	}
	for _, want := range []string{"----- common params -----", "----- sampling params -----", "----- run params -----",
		"  -m, --model FILE\n", "  -n, --n-predict, --predict N\n", "  -s, --seed N\n", "  -t, --threads N\n", "gorun run MODEL PROMPT"} {
		if !strings.Contains(out, want) {
			t.Errorf("help lacks %q", want)
		}
	}
	if strings.Contains(out, "same as") {
		t.Error("an alias has its own entry (\"same as\")")
	}
	for _, line := range strings.Split(out, "\n") {
		if strings.Count(line, "default") > 1 {
			t.Errorf("a default said twice: %q", line)
		}
		if regexp.MustCompile(`^  -[a-z]{3,}-`).MatchString(line) && !strings.HasPrefix(line, "  -no-cnv") {
			t.Errorf("a long option with one dash: %q", line)
		}
	}
	if n := strings.Count(out, "\n  -"); n > 70 {
		t.Errorf("%d option lines: aliases are not grouped", n)
	}
	code, out, errs := gorun("help", "bogus")
	if code != 2 || out != "" || !strings.Contains(errs, `unknown command "bogus"`) {
		t.Errorf("help bogus: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, _, _ := gorun("bogus"); code != 2 {
		t.Errorf("bogus: exit %d", code)
	}
}

// Issue 21 item 7: the prompt from the standard input (-f -, -f /dev/stdin), as a positional
// argument (gorun -m M "Hi") and ollama's way (gorun run MODEL "Hi").
func TestCLIPromptSources(t *testing.T) {
	tiny := tinyFile(t)
	gen := func(args ...string) string {
		t.Helper()
		code, out, errs := gorun(append(args, "-n", "8", "--temp", "0", "--no-display-prompt", "-t", "2")...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, errs)
		}
		return out
	}
	want := gen("-m", tiny, "-p", "a b c")
	if got := gen("-m", tiny, "a b c"); got != want {
		t.Errorf("positional prompt: %q, want %q", got, want)
	}
	if got := gen("run", tiny, "a", "b", "c"); got != want {
		t.Errorf("run MODEL PROMPT: %q, want %q", got, want)
	}
	if got := gen("run", tiny, "-p", "a b c"); got != want {
		t.Errorf("run MODEL -p PROMPT: %q, want %q", got, want)
	}
	for _, file := range []string{"-", "/dev/stdin"} {
		cmd := gorunProcess("-m", tiny, "-f", file, "-n", "8", "--temp", "0", "--no-display-prompt", "-t", "2")
		cmd.Stdin = strings.NewReader("a b c\n")
		out, err := cmd.Output()
		if err != nil || string(out) != want {
			t.Errorf("-f %s: %q, %v; want %q", file, out, err, want)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-m", tiny, "-p", "hi", "extra"}, `unexpected argument "extra": the prompt is given by -p or -f already`},
		{[]string{"-p", "hi"}, "no model: use -m FILE (or gorun run MODEL PROMPT)"},
		{[]string{"-m", tiny, "-f", "-", "-i"}, "-f - reads the prompt from the input"},
	} {
		if code, _, errs := gorun(c.args...); code != 2 || !strings.Contains(errs, c.want) {
			t.Errorf("%q: exit %d, stderr %q, want %q", c.args, code, errs, c.want)
		}
	}
}

// Issue 21 item 12: bench's JSON has llama-bench's fields in llama-bench's order, model_type
// with llama.cpp's size label ("gpt2 0.1B F16" for 12 layers, "?B" where llama.cpp has none),
// and the markdown table ends with llama-bench's "build:" line.
func TestBenchLlamaBenchFields(t *testing.T) {
	c, _ := testmodel.Preset("tiny")
	c.NLayer = 12 // GPT-2 small's depth: llama.cpp's "0.1B"
	twelve := writeModel(t, c)
	code, out, errs := gorun("bench", "-m", twelve, "-p", "4", "-n", "0", "-r", "1", "-t", "1", "-o", "json")
	if code != 0 {
		t.Fatalf("bench: exit %d: %s", code, errs)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	var keys []string
	depth := 0
	for {
		tok, err := dec.Token()
		if err != nil {
			break
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
			continue
		case json.Delim('}'), json.Delim(']'):
			depth--
			continue
		}
		if k, ok := tok.(string); ok && depth == 2 && dec.More() {
			keys = append(keys, k)
			var v any
			dec.Decode(&v)
		}
	}
	// llama-bench's fields (test::get_fields, then samples_ns and samples_ts).
	want := []string{"build_commit", "build_number", "cpu_info", "gpu_info", "backends", "model_filename",
		"model_type", "model_size", "model_n_params", "n_batch", "n_ubatch", "n_threads",
		"cpu_mask", "cpu_strict", "poll", "type_k", "type_v", "n_gpu_layers",
		"split_mode", "main_gpu", "no_kv_offload", "flash_attn", "tensor_split", "use_mmap",
		"embeddings", "n_prompt", "n_gen", "test_time", "avg_ns", "stddev_ns",
		"avg_ts", "stddev_ts", "samples_ns", "samples_ts"}
	if len(keys) < len(want) || strings.Join(keys[:len(want)], ",") != strings.Join(want, ",") {
		t.Errorf("fields %v\nwant     %v", keys, want)
	}
	var res []map[string]any
	if json.Unmarshal([]byte(out), &res) != nil || len(res) != 1 || res[0]["model_type"] != "gpt2 0.1B F16" ||
		res[0]["n_batch"] != 512.0 || res[0]["use_mmap"] != true || res[0]["type_k"] != "f32" {
		t.Errorf("json: %s", out)
	}
	code, out, errs = gorun("bench", "-m", tinyFile(t), "-p", "4", "-n", "0", "-r", "1", "-t", "1")
	if code != 0 || !strings.Contains(out, "gpt2 ?B F16") || !regexp.MustCompile(`\n\nbuild: \S+ \(\d+\)\n$`).MatchString(out) {
		t.Errorf("md: exit %d, %q: %s", code, out, errs)
	}
}

// Issue 21 item 13: in -cnv, an answer from a model that never ends its turn stops when the
// context is full, saying why once, instead of shifting the context again and again; the next
// input makes room and the conversation goes on.
func TestConversationAnswerStopsAtFullContext(t *testing.T) {
	cmd := gorunProcess("-m", tinyFile(t), "-cnv", "-p", "hi", "-c", "48", "--ignore-eos", "--seed", "1", "-t", "1")
	cmd.Stdin = strings.NewReader("again\n/exit\n")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%v: %s", err, stderr.String())
	}
	if n := strings.Count(stderr.String(), "without ending its turn"); n != 2 {
		t.Errorf("said %d times, want once per answer (2):\nstdout %q\nstderr %q", n, out, stderr.String())
	}
	if strings.Count(string(out), "> ") != 3 {
		t.Errorf("stdout %q: want three prompts (two answers, then /exit)", out)
	}
}

// Issue 21 item 13: a run that fails before loading its model prints no seed; a prompt too
// long for a context already at the model's most does not suggest raising -c.
func TestCLIEarlyFailureMessages(t *testing.T) {
	code, _, errs := gorun("-m", filepath.Join(t.TempDir(), "missing.gguf"), "-p", "hi")
	if code != 1 || strings.Contains(errs, "seed") {
		t.Errorf("missing model: exit %d, stderr %q", code, errs)
	}
	tiny := tinyFile(t)
	long := strings.Repeat("a b ", 400)
	code, _, errs = gorun("-m", tiny, "-p", long)
	if code != 1 || strings.Contains(errs, "raise -c") || !strings.Contains(errs, "the context is at the model's most") || strings.Contains(errs, "seed") {
		t.Errorf("at the model's context: exit %d, stderr %q", code, errs)
	}
	code, _, errs = gorun("-m", tiny, "-p", long, "-c", "32")
	if code != 1 || !strings.Contains(errs, "raise -c (up to the model's") {
		t.Errorf("-c 64: exit %d, stderr %q", code, errs)
	}
	if code, _, errs := gorun("pull", "a/b", "c/d"); code != 2 || !strings.Contains(errs, "got 2 arguments") {
		t.Errorf("pull a/b c/d: exit %d, stderr %q", code, errs)
	}
	if code, _, errs := gorun("quantize", "x.gguf"); code != 2 || !strings.Contains(errs, "got 1 argument") || strings.Contains(errs, "1 arguments") {
		t.Errorf("quantize x.gguf: exit %d, stderr %q", code, errs)
	}
}
