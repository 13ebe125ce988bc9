package main

// Issue 10, "Tried as a new user would, against llama-cli": one test per row of the table.

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/backend"
	"github.com/gorun-dev/gorun/internal/fixtures"
	"github.com/gorun-dev/gorun/llm"
)

// Row "-n 0" and "default -n": -n 0 generates nothing; without -n, as with -n -1, generation
// goes on until end of text or a full context (not 128 tokens); --predict is -n.
func TestCLINPredict(t *testing.T) {
	tiny := tinyFile(t)
	code, out, errs := gorun("-m", tiny, "-p", "hello world", "-n", "0", "--temp", "0")
	if code != 0 || out != "hello world" || !strings.Contains(errs, "/     0 tokens") {
		t.Errorf("-n 0: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	for _, n := range [][]string{nil, {"-n", "-1"}, {"--predict", "-1"}} {
		args := append([]string{"-m", tiny, "-p", "hello", "--ignore-eos", "-s", "1", "-c", "40", "-t", "1"}, n...)
		code, out, errs := gorun(args...)
		if code != 0 || !strings.Contains(errs, "context of 40 tokens is full") || out == "hello" {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", n, code, out, errs)
		}
	}
	_, a, _ := gorun("-m", tiny, "-p", "hello", "--predict", "5", "--temp", "0", "--ignore-eos")
	_, b, errs := gorun("-m", tiny, "-p", "hello", "-n", "5", "--temp", "0", "--ignore-eos")
	if a != b || !strings.Contains(errs, "/     5 tokens") {
		t.Errorf("--predict 5 %q, -n 5 %q, stderr %q", a, b, errs)
	}
}

// Row "-p 'a\nb'": escapes are processed by default, as llama.cpp's string_process_escapes
// does; -e/--escape is accepted; --no-escape takes the prompt literally.
func TestCLIEscapes(t *testing.T) {
	for in, want := range map[string]string{
		`a\nb`: "a\nb", `a\tb\rc`: "a\tb\rc", `\'q\"`: `'q"`, `back\\slash\\n`: `back\slash\n`,
		`\x41\x7a`: "Az", `\xZZ`: `\xZZ`, `\q`: `\q`, `end\`: `end\`, `\x4`: `\x4`, "plain": "plain",
	} {
		if got := processEscapes(in); got != want {
			t.Errorf("processEscapes(%q) = %q, want %q", in, got, want)
		}
	}
	tiny := tinyFile(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{nil, "a\nb\tc"},
		{[]string{"-e"}, "a\nb\tc"},
		{[]string{"--escape"}, "a\nb\tc"},
		{[]string{"--no-escape"}, `a\nb\tc`},
	} {
		args := append([]string{"-m", tiny, "-p", `a\nb\tc`, "-n", "0"}, c.args...)
		if code, out, errs := gorun(args...); code != 0 || out != c.want {
			t.Errorf("%q: exit %d, stdout %q, want %q (stderr %q)", c.args, code, out, c.want, errs)
		}
	}
}

// Row "-f p.txt": one trailing newline of the prompt file is dropped (an editor's), no more.
func TestCLIPromptFileTrailingNewline(t *testing.T) {
	tiny := tinyFile(t)
	dir := t.TempDir()
	for content, want := range map[string]string{"hello\n": "hello", "hello\n\n": "hello\n", "hello": "hello", `a\nb` + "\n": `a\nb`} {
		p := filepath.Join(dir, "p.txt")
		os.WriteFile(p, []byte(content), 0o644)
		if code, out, errs := gorun("-m", tiny, "-f", p, "-n", "0"); code != 0 || out != want {
			t.Errorf("file %q: exit %d, stdout %q, want %q (stderr %q)", content, code, out, want, errs)
		}
	}
}

// Row "-ngl 99 on a CPU build": a warning on stderr, then the CPU runs the model.
func TestCLIGPULayersOnCPUBuild(t *testing.T) {
	tiny := tinyFile(t)
	if _, err := backend.GPU(); err == nil {
		t.Skip("a build with GPU support")
	}
	code, out, errs := gorun("-m", tiny, "-p", "hi", "-n", "3", "-ngl", "99", "--temp", "0")
	if code != 0 || !strings.Contains(errs, "warning:") || !strings.Contains(errs, "without GPU support") || !strings.Contains(errs, "running on the CPU") || !strings.HasPrefix(out, "hi") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	_, plain, _ := gorun("-m", tiny, "-p", "hi", "-n", "3", "--temp", "0")
	if out != plain {
		t.Errorf("-ngl 99 %q differs from the CPU run %q", out, plain)
	}
	p := filepath.Join(t.TempDir(), "r.gguf")
	gorun("random-model", "-shape", "tiny", "-o", p)
	if code, out, errs := gorun("bench", "-m", p, "-p", "0", "-n", "2", "-r", "1", "-ngl", "99"); code != 0 || !strings.Contains(errs, "warning:") || !strings.Contains(out, "tg2") {
		t.Errorf("bench -ngl 99: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// Row "-s, --predict, --version, --no-mmap, -r, -i, penalties, -l": accepted with llama-cli's
// meaning.
func TestCLILlamaFlags(t *testing.T) {
	tiny := tinyFile(t)
	gen := func(args ...string) string {
		t.Helper()
		base := []string{"-m", tiny, "-p", "a b c", "-n", "24", "--ignore-eos", "--no-display-prompt", "-t", "1"}
		code, out, errs := gorun(append(base, args...)...)
		if code != 0 {
			t.Fatalf("%q: exit %d: %s", args, code, errs)
		}
		return out
	}
	sampled := gen("--temp", "1.5", "--seed", "7")
	if s := gen("--temp", "1.5", "-s", "7"); s != sampled {
		t.Errorf("-s 7 %q differs from --seed 7 %q", s, sampled)
	}
	if s := gen("--temp", "1.5", "-s", "7", "--no-mmap"); s != sampled {
		t.Errorf("--no-mmap changed the text: %q", s)
	}
	// The CLI's own generation loop (used for penalties and bias) draws as the library does: a
	// bias of 0 gives the library's text.
	if s := gen("--temp", "1.5", "-s", "7", "-l", "5+0"); s != sampled {
		t.Errorf("-l 5+0 %q differs from the library's %q", s, sampled)
	}
	greedy := gen("--temp", "0")
	if s := gen("--temp", "0", "--frequency-penalty", "1.5"); s == greedy {
		t.Errorf("--frequency-penalty changed nothing: %q", s)
	}
	if s := gen("--temp", "0", "--presence-penalty", "1.5"); s == greedy {
		t.Errorf("--presence-penalty changed nothing: %q", s)
	}
	if s := gen("--temp", "0", "--presence-penalty", "1.5", "--repeat-last-n", "0"); s != greedy {
		t.Errorf("--repeat-last-n 0 leaves the presence penalty on: %q", s)
	}
	tok, err := llm.LoadTokenizer(tiny)
	if err != nil {
		t.Fatal(err)
	}
	id := int32(-1) // a token of plain letters, to force with a bias
	for i := int32(0); i < int32(tok.VocabSize()) && id < 0; i++ {
		if b := tok.TokenBytes(i); len(b) >= 2 && strings.Trim(string(b), "abcdefghijklmnopqrstuvwxyz") == "" {
			id = i
		}
	}
	word := string(tok.TokenBytes(id))
	forced := gen("--temp", "0", "--repeat-last-n", "0", "-n", "4", "-l", itoa(id)+"+100")
	if forced != strings.Repeat(word, 4) {
		t.Errorf("-l %d+100: %q, want %q four times", id, forced, word)
	}
	first := tok.Encode(gen("--temp", "0", "-n", "1"))
	if len(first) != 1 {
		t.Fatalf("one greedy token: %v", first)
	}
	if s := gen("--temp", "0", "-n", "1", "--logit-bias", itoa(first[0])+"-inf"); s == "" || tok.Encode(s)[0] == first[0] {
		t.Errorf("--logit-bias %d-inf: still chose it: %q", first[0], s)
	}
	// -r/--reverse-prompt stops at the text, in the library's loop and in the CLI's.
	stop := greedy[len(greedy)/2:][:3]
	want := greedy[:strings.Index(greedy, stop)]
	for _, extra := range [][]string{nil, {"-l", "5+0"}} {
		args := append([]string{"--temp", "0", "-r", "zzzz", "--reverse-prompt", stop}, extra...)
		if s := gen(args...); s != want {
			t.Errorf("%q: %q, want %q", args, s, want)
		}
	}
	if code, out, errs := gorun("--version"); code != 0 || !strings.HasPrefix(out, "gorun version ") || errs != "" {
		t.Errorf("--version: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	// -i is accepted (interactive_test.go drives it on a terminal): here stdin ends at once.
	for _, mode := range []string{"-i", "--interactive", "-if", "--interactive-first", "-cnv", "--conversation"} {
		cmd := gorunProcess("-m", tiny, "-p", "hi", "-n", "2", "-t", "1", mode)
		cmd.Stdin = strings.NewReader("")
		out, _ := cmd.CombinedOutput()
		if code := cmd.ProcessState.ExitCode(); code != 0 || !strings.Contains(string(out), "stop reason      = end of input") {
			t.Errorf("%s with no input: exit %d, output %q", mode, code, out)
		}
	}
	for _, bad := range []string{"5", "x+1", "5*2", "5+y", "-3+1"} {
		if code, _, errs := gorun("-m", tiny, "-p", "hi", "-l", bad); code != 2 || !strings.Contains(errs, "TOKEN+BIAS") {
			t.Errorf("-l %s: exit %d, stderr %q", bad, code, errs)
		}
	}
	if code, _, errs := gorun("-m", tiny, "-p", "hi", "-l", "100000+1"); code != 2 || !strings.Contains(errs, "not in the vocabulary") {
		t.Errorf("-l 100000+1: exit %d, stderr %q", code, errs)
	}
}

func itoa(id int32) string { b, _ := json.Marshal(id); return string(b) }

// Rows "typo --tmp 0" and "--temp=-1, --top-p 2": one line naming the option, with a
// suggestion for a misspelt one, exit 2.
func TestCLIOneLineErrors(t *testing.T) {
	tiny := tinyFile(t)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-m", tiny, "-p", "hi", "--tmp", "0"}, "did you mean --temp?"},
		{[]string{"-m", tiny, "-p", "hi", "--top_p", "0.5"}, "did you mean --top-p?"},
		{[]string{"-m", tiny, "-p", "hi", "--seeed", "1"}, "did you mean --seed?"},
		{[]string{"-m", tiny, "-p", "hi", "--temp=-1"}, "--temp must be >= 0"},
		{[]string{"-m", tiny, "-p", "hi", "--top-p", "2"}, "--top-p must be in (0, 1]"},
		{[]string{"-m", tiny, "-p", "hi", "--min-p", "1.5"}, "--min-p must be in [0, 1]"},
		{[]string{"-m", tiny, "-p", "hi", "--top-k", "-2"}, "--top-k must be >= 0"},
		{[]string{"-m", tiny, "-p", "hi", "--repeat-penalty", "0"}, "--repeat-penalty must be > 0"},
		{[]string{"-m", tiny, "-p", "hi", "--frequency-penalty", "3"}, "--frequency-penalty must be in [-2, 2]"},
		{[]string{"-m", tiny, "-p", "hi", "-n", "x"}, `invalid value "x" for flag -n`},
		{[]string{"-m", tiny, "-p", "hi", "-r", ""}, "-r/--reverse-prompt must not be empty"},
		{[]string{"tokenize", "-m", tiny, "--idz"}, "did you mean --ids?"},
		{[]string{"-m", tiny, "-p", "hi", "--keep", "-2"}, "--keep must be >= -1"},
		{[]string{"-m", tiny, "-p", "hi", "-sys", "be brief"}, "-sys needs -cnv"},
		{[]string{"-m", tiny, "-p", "hi", "-cnv", "--in-prefix", "Q:"}, "do not apply to -cnv"},
		{[]string{"-m", tiny, "-p", "hi", "--context-shift", "--no-context-shift"}, "contradict"},
		{[]string{"-m", tiny, "-p", "hi", "--cvn"}, "did you mean -cnv?"},
	} {
		code, out, errs := gorun(c.args...)
		if code != 2 || out != "" || strings.Count(errs, "\n") != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("%q: exit %d, stdout %q, stderr %q; want one line with %q", c.args, code, out, errs, c.want)
		}
	}
	if code, _, errs := gorun("-m", tiny, "-p", "hi", "--zzzzzzz"); code != 2 || strings.Contains(errs, "did you mean") || strings.Count(errs, "\n") != 1 {
		t.Errorf("no near option: exit %d, stderr %q", code, errs)
	}
}

// Rows "gorun -h" and "flag defaults in help": help goes to stdout, lists the subcommands and
// the run options, with defaults as written.
func TestCLIHelp(t *testing.T) {
	for _, args := range [][]string{{"-h"}, {"--help"}, {"help"}, {"-m", "x.gguf", "--help"}} {
		code, out, errs := gorun(args...)
		if code != 0 || errs != "" {
			t.Errorf("%q: exit %d, stderr %q", args, code, errs)
		}
		for _, want := range []string{"gorun tokenize", "gorun bench", "gorun serve", "--temp", "(default: 0.8)", "(default: 0.95)", "(default: 0.05)", "--reverse-prompt", "--frequency-penalty"} {
			if !strings.Contains(out, want) {
				t.Errorf("%q: help lacks %q", args, want)
			}
		}
		if strings.Contains(out, "0.800000011920929") || strings.Contains(out, "00000") {
			t.Errorf("%q: defaults not as written:\n%s", args, out)
		}
	}
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"tokenize", "-h"}, "gorun tokenize -m"}, {[]string{"help", "bench"}, "gorun bench -m"}, {[]string{"bench", "--help"}, "gorun bench -m"},
	} {
		if code, out, errs := gorun(c.args...); code != 0 || errs != "" || !strings.Contains(out, c.want) || strings.Contains(out, "gorun serve -m") {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", c.args, code, out, errs)
		}
	}
}

// Row "tokenize with no text": a usage error.
func TestCLITokenizeNoText(t *testing.T) {
	tiny := tinyFile(t)
	if code, out, errs := gorun("tokenize", "-m", tiny); code != 2 || out != "" || !strings.Contains(errs, "no text") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// Issue 17 row 10: an explicitly empty text is valid and has no tokens (only a missing -p or
// -f is a usage error).
func TestCLITokenizeEmptyText(t *testing.T) {
	tiny := tinyFile(t)
	if code, out, errs := gorun("tokenize", "-m", tiny, "-p", "", "--ids"); code != 0 || out != "[]\n" || errs != "" {
		t.Errorf("-p '' --ids: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, out, errs := gorun("tokenize", "-m", tiny, "-p", ""); code != 0 || out != "" || errs != "" {
		t.Errorf("-p '': exit %d, stdout %q, stderr %q", code, out, errs)
	}
	empty := filepath.Join(t.TempDir(), "empty.txt")
	os.WriteFile(empty, nil, 0o644)
	if code, out, errs := gorun("tokenize", "-m", tiny, "-f", empty, "--ids"); code != 0 || out != "[]\n" || errs != "" {
		t.Errorf("-f EMPTY --ids: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	if code, _, errs := gorun("tokenize", "-m", tiny, "-f", ""); code != 2 || !strings.Contains(errs, "-f names no file") {
		t.Errorf("-f '': exit %d, stderr %q", code, errs)
	}
}

// Issue 21 item 13: one overwrite rule for the commands that write a model, llama-quantize's:
// random-model replaces an existing output as convert and quantize do (-f/--force accepted).
func TestCLIRandomModelOverwrite(t *testing.T) {
	p := filepath.Join(t.TempDir(), "m.gguf")
	for _, f := range []string{"", "-f", "--force"} {
		os.WriteFile(p, []byte("precious"), 0o644)
		args := []string{"random-model", "-shape", "tiny", "-o", p}
		if f != "" {
			args = append(args, f)
		}
		if code, _, errs := gorun(args...); code != 0 {
			t.Errorf("%q: exit %d, stderr %q", f, code, errs)
		}
		if b, _ := os.ReadFile(p); len(b) < 4 || string(b[:4]) != "GGUF" {
			t.Errorf("%s: not overwritten", f)
		}
	}
	// -shape in any case; a bad one names the shapes, not a package.
	if code, _, errs := gorun("random-model", "-shape", "TINY", "-o", p); code != 0 {
		t.Errorf("-shape TINY: exit %d, stderr %q", code, errs)
	}
	if code, _, errs := gorun("random-model", "-shape", "7b", "-o", p); code != 2 || strings.Contains(errs, "testmodel") || !strings.Contains(errs, "124M") {
		t.Errorf("-shape 7b: exit %d, stderr %q", code, errs)
	}
}

// Row "bench -m a -m b / -m a,b": both models are benchmarked; a missing one fails before the
// table's header.
func TestCLIBenchSeveralModels(t *testing.T) {
	dir := t.TempDir()
	a, b := filepath.Join(dir, "a.gguf"), filepath.Join(dir, "b.gguf")
	gorun("random-model", "-shape", "tiny", "-o", a)
	gorun("random-model", "-shape", "tiny", "-o", b, "-seed", "2")
	for _, ms := range [][]string{{"-m", a, "-m", b}, {"-m", a + "," + b}, {"--model", a, "-m", b}} {
		args := append([]string{"bench", "-p", "0", "-n", "2", "-r", "1", "-o", "json", "-t", "1"}, ms...)
		code, out, errs := gorun(args...)
		var res []benchResult
		if code != 0 || json.Unmarshal([]byte(out), &res) != nil || len(res) != 2 || res[0].File != a || res[1].File != b {
			t.Errorf("%q: exit %d, stdout %q, stderr %q", ms, code, out, errs)
		}
	}
	code, out, errs := gorun("bench", "-p", "0", "-n", "2", "-r", "1", "-m", a+","+filepath.Join(dir, "missing.gguf"))
	if code != 1 || out != "" || !strings.Contains(errs, "missing.gguf") {
		t.Errorf("missing model: exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// The real model answers -r with llama-cli's meaning on text it knows (the fixture's greedy
// continuation, cut at the reverse prompt).
func TestCLIReversePromptFixture(t *testing.T) {
	model := fixtures.Path(t, "gpt2-tiny-f16.gguf")
	_, full, _ := gorun("-m", model, "-p", "The capital of France is", "-n", "24", "--temp", "0", "--no-display-prompt", "-t", "1")
	i := strings.Index(full[1:], " ") + 1
	if i <= 0 {
		t.Skipf("no second word in %q", full)
	}
	code, out, errs := gorun("-m", model, "-p", "The capital of France is", "-n", "24", "--temp", "0", "--no-display-prompt", "-t", "1", "-r", full[i:i+2])
	if code != 0 || out != full[:i] {
		t.Errorf("exit %d, stdout %q, want %q (stderr %q)", code, out, full[:i], errs)
	}
}

// Issue 10, "the end-of-run statistics with the stop reason": the last line of the statistics
// says why generation stopped, in the one-shot mode too (interrupted: TestInterruptedGenerationExits130).
func TestCLIStopReason(t *testing.T) {
	tiny := tinyFile(t)
	tok, err := llm.LoadTokenizer(tiny)
	if err != nil {
		t.Fatal(err)
	}
	greedy := func(args ...string) string {
		_, out, _ := gorun(append([]string{"-m", tiny, "-p", "a b c", "--temp", "0", "--ignore-eos", "--no-display-prompt", "-t", "1"}, args...)...)
		return out
	}
	stop := greedy("-n", "12")[6:][:3]
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"-n", "3", "--ignore-eos"}, "stop reason      = n_predict (-n 3 tokens)"},
		{[]string{"-n", "0"}, "stop reason      = n_predict (-n 0 tokens)"},
		{[]string{"-n", "-1", "--ignore-eos", "-c", "16"}, "stop reason      = context full (16 tokens)"},
		{[]string{"-n", "8", "-l", itoa(tok.EOS()) + "+100"}, "stop reason      = eos (end of text)"},
		{[]string{"-n", "12", "--ignore-eos", "-r", stop}, "stop reason      = reverse prompt " + strconv.Quote(stop)},
		{[]string{"-n", "12", "--ignore-eos", "-r", stop, "-l", "5+0"}, "stop reason      = reverse prompt " + strconv.Quote(stop)},
	} {
		args := append([]string{"-m", tiny, "-p", "a b c", "--temp", "0", "-t", "1"}, c.args...)
		if code, _, errs := gorun(args...); code != 0 || !strings.Contains(errs, c.want+"\n") {
			t.Errorf("%q: exit %d, stderr %q; want %q", c.args, code, errs, c.want)
		}
	}
}
