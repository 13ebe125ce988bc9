package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/metrics"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/gorun-dev/gorun/internal/testmodel"
)

// TestMain runs the gorun command itself when GORUN_TEST_MAIN is set, so that tests can run it
// as a process (exit statuses, signals) without building a binary.
func TestMain(m *testing.M) {
	if os.Getenv("GORUN_TEST_MAIN") == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// gorunProcess prepares gorun with args as a child process.
func gorunProcess(args ...string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], args...)
	cmd.Env = append(os.Environ(), "GORUN_TEST_MAIN=1")
	return cmd
}

func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// gorunBounded runs the CLI in-process and fails when it takes longer than d or allocates more
// than limit bytes.
func gorunBounded(t *testing.T, d time.Duration, limit uint64, args ...string) (int, string, string) {
	t.Helper()
	start, before := time.Now(), heapAllocs()
	code, out, errs := gorun(args...)
	if took, used := time.Since(start), heapAllocs()-before; took > d || used > limit {
		t.Errorf("gorun %q took %v and allocated %d bytes (bounds %v, %d)", args, took, used, d, limit)
	}
	return code, out, errs
}

func writeModel(t *testing.T, c testmodel.Config) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "m.gguf")
	if err := testmodel.Write(p, c); err != nil {
		t.Fatal(err)
	}
	return p
}

// Issue 8, row 9: NaN and infinities are refused by every floating-point option, by name
// (NaN passes every range check).
func TestNonFiniteOptionsRefused(t *testing.T) {
	tiny := tinyFile(t)
	for _, opt := range []string{"--temp", "--top-p", "--min-p", "--repeat-penalty"} {
		for _, v := range []string{"NaN", "nan", "Inf", "-Inf", "+inf", "1e999"} {
			code, out, errs := gorun("-m", tiny, "-p", "hi", "-n", "2", opt, v)
			if code != 2 || out != "" || !strings.Contains(firstLine(errs), opt[1:]) || !(strings.Contains(errs, "not a finite number") || strings.Contains(errs, "out of range")) {
				t.Errorf("%s %s: exit %d, stdout %q, stderr %q", opt, v, code, out, firstLine(errs))
			}
		}
	}
}

func firstLine(s string) string { return strings.SplitN(s, "\n", 2)[0] }

// Issue 8, rows 6 and 7: every input file is bounded and opened so that a FIFO or a device
// neither blocks nor streams forever: -m, and -f of run, tokenize, perplexity and imatrix,
// --calib, --imatrix, --kl-divergence-base.
func TestInputFilesBounded(t *testing.T) {
	tiny := tinyFile(t)
	dir := t.TempDir()
	fifo := filepath.Join(dir, "fifo")
	if err := mkfifo(fifo); err != nil {
		t.Skip("no FIFOs:", err)
	}
	// A sparse file a little over each limit: no disk used, and nothing of it may be read.
	huge := func(n int64) string {
		p := filepath.Join(dir, "huge"+firstLine(time.Now().Format("150405.000000000")))
		f, err := os.Create(p)
		if err != nil {
			t.Fatal(err)
		}
		f.Truncate(n + 1)
		f.Close()
		return p
	}
	bigPrompt, bigText := huge(maxPromptBytes), huge(maxTextBytes)
	out := filepath.Join(dir, "q.gguf")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"-m", fifo, "-p", "hi"}, "not a regular file (a named pipe)"},
		{[]string{"-m", "/dev/zero", "-p", "hi"}, "not a regular file (a character device)"},
		{[]string{"tokenize", "-m", fifo, "-p", "hi"}, "not a regular file"},
		{[]string{"-m", tiny, "-f", "/dev/zero"}, "-f: /dev/zero: not a regular file (a character device)"},
		{[]string{"-m", tiny, "-f", fifo}, "not a regular file (a named pipe)"},
		{[]string{"-m", tiny, "-f", bigPrompt}, "over the limit of 32 MiB"},
		{[]string{"tokenize", "-m", tiny, "-f", "/dev/zero"}, "not a regular file"},
		{[]string{"tokenize", "-m", tiny, "-f", bigPrompt}, "over the limit of 32 MiB"},
		{[]string{"perplexity", "-m", tiny, "-f", "/dev/zero"}, "not a regular file"},
		{[]string{"perplexity", "-m", tiny, "-f", fifo}, "not a regular file"},
		{[]string{"perplexity", "-m", tiny, "-f", bigText}, "over the limit of 256 MiB"},
		{[]string{"quantize", tiny, out, "q8_0", "--calib", "/dev/zero"}, "--calib: /dev/zero: not a regular file"},
		{[]string{"quantize", tiny, out, "q8_0", "--calib", bigText}, "over the limit of 256 MiB"},
		{[]string{"quantize", fifo, out, "q8_0"}, "not a regular file"},
		{[]string{"quantize", tiny, out, "q8_0", "--imatrix", fifo}, "not a regular file (a named pipe)"},
		{[]string{"quantize", tiny, out, "q8_0", "--imatrix", "/dev/zero"}, "not a regular file"},
		{[]string{"imatrix", "-m", tiny, "-f", fifo, "-o", filepath.Join(dir, "im.dat")}, "-f: " + fifo + ": not a regular file"},
		{[]string{"perplexity", "-m", tiny, "--kl-divergence-base", fifo, "--kl-divergence"}, "not a regular file (a named pipe)"},
	}
	for _, c := range cases {
		code, _, errs := gorunBounded(t, 10*time.Second, 16<<20, c.args...)
		if code != 1 || !strings.Contains(errs, c.want) {
			t.Errorf("gorun %q: exit %d, stderr %q; want %q", c.args, code, errs, c.want)
		}
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Errorf("an output was written: %v", err)
	}
}

// Issue 8, row 5: an absurd thread count is an error before any thread starts.
func TestThreadCountCapped(t *testing.T) {
	tiny := tinyFile(t)
	for _, args := range [][]string{
		{"-m", tiny, "-p", "hi", "-t", "2000000"},
		{"perplexity", "-m", tiny, "-f", tiny, "-t", "2000000"},
		{"quantize", tiny, filepath.Join(t.TempDir(), "q.gguf"), "q8_0", "-t", "2000000"},
	} {
		code, _, errs := gorunBounded(t, 5*time.Second, 16<<20, args...)
		if code != 1 || !strings.Contains(errs, "2000000 threads: at most") {
			t.Errorf("gorun %q: exit %d, %q", args, code, errs)
		}
	}
}

// Issue 8, row 8: perplexity that would score nothing is an error, never "PPL = 0".
func TestPerplexityNeedsScoredTokens(t *testing.T) {
	tiny := tinyFile(t)
	text := filepath.Join(t.TempDir(), "t.txt")
	os.WriteFile(text, []byte(strings.Repeat("The quick brown fox jumps over the lazy dog. ", 10)), 0o644)
	short := filepath.Join(t.TempDir(), "s.txt")
	os.WriteFile(short, []byte("Hi"), 0o644)
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"perplexity", "-m", tiny, "-f", text, "-c", "2"}, "scores no token"},
		{[]string{"perplexity", "-m", tiny, "-f", short, "-c", "16"}, "fewer than one chunk"},
	} {
		code, out, errs := gorun(c.args...)
		if code != 1 || strings.Contains(out, "Final estimate") || !strings.Contains(errs, c.want) {
			t.Errorf("gorun %q: exit %d, stdout %q, stderr %q", c.args, code, out, errs)
		}
	}
	if code, out, errs := gorun("perplexity", "-m", tiny, "-f", text, "-c", "3"); code != 0 || !strings.Contains(out, "Final estimate: PPL = ") || strings.Contains(out, "PPL = 0.0000") {
		t.Errorf("-c 3: exit %d %q %q", code, out, errs)
	}
}

// Issue 8, row 15: a prompt too long for the context is refused before anything is printed:
// no echo, no statistics.
func TestPromptTooLongPrintsNothing(t *testing.T) {
	code, out, errs := gorun("-m", tinyFile(t), "-p", strings.Repeat("word ", 100), "-n", "4")
	if code != 1 || out != "" || !strings.Contains(errs, "context is full") || strings.Contains(errs, "eval time") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
}

// Issues 8, rows 2 and 12: --mem-limit bounds what a model and context may need; the refusal
// names the sizes and the flags. A model with a 2^18-wide feed-forward layer needs ~1 GiB of
// arena for perplexity -c 512; with a 256 MiB limit that is refused at once.
func TestMemLimit(t *testing.T) {
	c, _ := testmodel.Preset("tiny")
	c.NCtx, c.NEmbd, c.NHead, c.NLayer, c.NFF = 512, 4, 1, 1, 1<<18
	wide := writeModel(t, c)
	text := filepath.Join(t.TempDir(), "t.txt")
	os.WriteFile(text, []byte(strings.Repeat("The quick brown fox. ", 200)), 0o644)
	code, out, errs := gorunBounded(t, 5*time.Second, 64<<20, "perplexity", "-m", wide, "-f", text, "-c", "512", "--mem-limit", "256M")
	if code != 1 || out != "" || !strings.Contains(errs, "not enough memory") || !strings.Contains(errs, "compute 1.") || !strings.Contains(errs, "(-c)") || !strings.Contains(errs, "256.0 MiB") {
		t.Errorf("exit %d, stdout %q, stderr %q", code, out, errs)
	}
	for _, bad := range []string{"x", "-5", "NaN", "0.5", "1e30G"} {
		if code, _, errs := gorun("-m", wide, "-p", "hi", "--mem-limit", bad); code != 2 || !strings.Contains(errs, "mem-limit") {
			t.Errorf("--mem-limit %s: exit %d %q", bad, code, firstLine(errs))
		}
	}
	if code, _, errs := gorun("-m", tinyFile(t), "-p", "hi", "-n", "2", "--mem-limit", "64M"); code != 0 {
		t.Errorf("a tiny model within 64M: %s", errs)
	}
}

// Issue 8, row 16: exit statuses: 0 success, 1 error, 2 usage; 130 when Ctrl-C interrupts
// generation, after printing the timings.
func TestExitStatuses(t *testing.T) {
	tiny := tinyFile(t)
	for _, c := range []struct {
		args []string
		code int
	}{
		{[]string{"-m", tiny, "-p", "hi", "-n", "2"}, 0},
		{[]string{"help"}, 0},
		{[]string{"-m", tiny, "-p", "hi", "--bogus"}, 2},
		{[]string{"frobnicate"}, 2},
		{[]string{"-m", filepath.Join(t.TempDir(), "none.gguf"), "-p", "hi"}, 1},
	} {
		cmd := gorunProcess(c.args...)
		err := cmd.Run()
		if code := cmd.ProcessState.ExitCode(); code != c.code {
			t.Errorf("gorun %q: exit %d (%v), want %d", c.args, code, err, c.code)
		}
	}
}

func TestInterruptedGenerationExits130(t *testing.T) {
	c, _ := testmodel.Preset("tiny")
	c.NCtx, c.NEmbd, c.NHead, c.NLayer = 8192, 128, 4, 4
	model := writeModel(t, c)
	cmd := gorunProcess("-m", model, "-p", "hello", "-n", "-1", "--ignore-eos", "--seed", "1", "-t", "1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// Once text streams, interrupt.
	r := bufio.NewReader(stdout)
	if _, err := r.Peek(16); err != nil {
		t.Fatal(err)
	}
	cmd.Process.Signal(os.Interrupt)
	go r.WriteTo(new(bytes.Buffer))
	done := make(chan struct{})
	go func() { cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(30 * time.Second):
		cmd.Process.Kill()
		t.Fatal("no exit 30 s after SIGINT")
	}
	if code := cmd.ProcessState.ExitCode(); code != 130 || !strings.Contains(stderr.String(), "eval time") || !strings.Contains(stderr.String(), "stop reason      = interrupted\n") {
		t.Errorf("exit %d, stderr %q", code, stderr.String())
	}
}

// Issue 8, rows 13 and 14: quantize's temporary file is OUT.tmp, removed when SIGINT or
// SIGTERM stops the run (exit 130 or 143); OUT a directory is refused before any work.
func TestQuantizeSignalsAndOutput(t *testing.T) {
	c, _ := testmodel.Preset("tiny")
	c.NEmbd, c.NHead, c.NFF, c.NLayer, c.NVocab = 768, 12, 3072, 4, 8192
	model := writeModel(t, c)
	dir := t.TempDir()
	out := filepath.Join(dir, "q.gguf")
	for _, sig := range []syscall.Signal{syscall.SIGINT, syscall.SIGTERM} {
		cmd := gorunProcess("quantize", model, out, "q4_k_m", "-t", "1")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(20 * time.Second)
		for {
			if _, err := os.Stat(out + ".tmp"); err == nil {
				break
			}
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				t.Fatal("no OUT.tmp appeared")
			}
			time.Sleep(time.Millisecond)
		}
		cmd.Process.Signal(sig)
		cmd.Wait()
		want := 128 + int(sig)
		if code := cmd.ProcessState.ExitCode(); code != want {
			t.Errorf("%v: exit %d, want %d", sig, code, want)
		}
		if entries, _ := os.ReadDir(dir); len(entries) != 0 {
			t.Errorf("%v left %v", sig, entries)
		}
	}
	// A directory as OUT fails at once, before the quantization.
	code, _, errs := gorunBounded(t, 2*time.Second, 32<<20, "quantize", model, dir, "q4_k_m")
	if code != 1 || !strings.Contains(errs, "not a regular file") {
		t.Errorf("OUT a directory: exit %d, %q", code, errs)
	}
}

func TestMemLimitParse(t *testing.T) {
	for in, want := range map[string]memLimit{"512M": 512 << 20, "8G": 8 << 30, "8GiB": 8 << 30, "1.5g": 3 << 29, "4096": 4096, "2T": 2 << 40, "auto": 0, "off": -1} {
		var m memLimit
		if err := m.Set(in); err != nil || m != want {
			t.Errorf("%q: %d %v, want %d", in, m, err, want)
		}
	}
}
