//go:build linux

package main

// Issue 10, "must show" 3: an interactive session driven through a pseudo-terminal (reverse
// prompt, Ctrl-C, end of input, context shift), on the tiny fixture model, greedy.

import (
	"context"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/gorun-dev/gorun/internal/fixtures"
	"github.com/gorun-dev/gorun/llm"
)

const (
	ptyPrompt = "The capital of France is"
	ptyMarker = "<<you>>" // --in-prefix: shown when gorun waits for the user
	ptyWait   = 20 * time.Second
)

// reversePromptIn picks a reverse prompt in the greedy text: a word that ends before a space
// (a token boundary in GPT-2's pre-tokenization) and first appears there, at least 8 bytes in.
func reversePromptIn(t *testing.T, text string) (r string, end int) {
	for j := 8; j < len(text); j++ {
		if text[j] != ' ' || text[j-1] == ' ' || text[j-1] == '\n' {
			continue
		}
		i := strings.LastIndexAny(text[:j-1], " \n")
		if i < 0 {
			continue
		}
		if r := text[i:j]; strings.Index(text, r) == i && !strings.Contains(r, "\n") {
			return r, j
		}
	}
	t.Skipf("no usable reverse prompt in %q", text)
	return "", 0
}

// untilReverse is the text of pieces up to the one that completes r, as gorun -i shows it.
func untilReverse(pieces []string, r string) string {
	var b strings.Builder
	for _, p := range pieces {
		b.WriteString(p)
		if strings.Contains(b.String(), r) {
			break
		}
	}
	return b.String()
}

// (a) A reverse prompt stops the answer where it is shown and hands control back; the text
// before it is the one-shot greedy text; the user's input, continued over two lines with '\'
// and wrapped in --in-prefix and --in-suffix, gets the continuation the library computes for
// the same context.
func TestInteractiveReversePromptPTY(t *testing.T) {
	model := fixtures.Path(t, "gpt2-tiny-q8_0.gguf")
	_, full, _ := gorun("-m", model, "-p", ptyPrompt, "-n", "32", "--temp", "0", "--no-display-prompt", "-t", "1")
	r, end := reversePromptIn(t, full)
	_, before, _ := gorun("-m", model, "-p", ptyPrompt, "-n", "32", "--temp", "0", "--no-display-prompt", "-t", "1", "-r", r)
	if before+r != full[:end] {
		t.Fatalf("one-shot -r %q: %q, want %q", r, before, full[:end-len(r)])
	}
	const prefix, suffix = " Q:", " A:"
	input := "hello\nworld"
	second := libraryContinuation(t, model, r, prefix+input+suffix, 12)

	p := startPTY(t, "-m", model, "-p", ptyPrompt, "-n", "12", "--temp", "0", "-t", "1", "-i",
		"-r", r, "--in-prefix", prefix, "--in-suffix", suffix)
	first := p.readUntil(prefix, ptyWait)
	if want := ptyPrompt + before + r + prefix; !strings.HasSuffix(first, want) {
		t.Errorf("first answer: %q, want it to end with %q", first, want)
	}
	p.write("hello\\\n")
	p.write("world\n")
	p.readUntil("world\n", ptyWait) // the terminal's echo
	if got := p.readUntil(prefix, ptyWait); got != suffix+second+prefix {
		t.Errorf("second answer: %q, want %q", got, suffix+second+prefix)
	}
	p.write("\x04")
	if code := p.wait(ptyWait); code != 0 {
		t.Errorf("exit %d after Ctrl-D", code)
	}
	if out := p.text(); !strings.Contains(out, "stop reason      = end of input") {
		t.Errorf("no stop reason in:\n%s", out)
	}
}

// libraryContinuation is what the library generates, greedy, after the prompt's answer up to
// the reverse prompt r and then text: the context gorun -i builds. It stops after the piece
// that shows r again, or after n tokens.
func libraryContinuation(t *testing.T, model, r, text string, n int) string {
	t.Helper()
	m, err := llm.Load(model, llm.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s, err := m.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	// A hidden stop string leaves the tokens in the context as a shown reverse prompt does.
	if _, err := s.Generate(ctx, ptyPrompt, llm.GenerateOptions{MaxTokens: n, Stop: []string{r}}, func(string) error { return nil }); err != nil {
		t.Fatal(err)
	}
	var pieces []string
	_, err = s.GenerateTokens(ctx, text, llm.GenerateOptions{MaxTokens: n}, func(p llm.Piece) error {
		pieces = append(pieces, p.Text)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return untilReverse(pieces, r)
}

// (b) Ctrl-C during a long generation stops it and hands control to the user, whose next line
// is answered; Ctrl-C at the input prompt ends the session with exit status 130 (llama-cli's)
// and the statistics, naming the interruption.
func TestInteractiveCtrlCPTY(t *testing.T) {
	model := fixtures.Path(t, "gpt2-tiny-q8_0.gguf")
	// -n -1 with context shifts: endless until Ctrl-C.
	p := startPTY(t, "-m", model, "-p", ptyPrompt, "-n", "-1", "--ignore-eos", "-c", "64",
		"--temp", "0", "-t", "1", "-i", "--in-prefix", ptyMarker)
	p.readUntil(ptyPrompt, ptyWait)
	atLeast := func(n int) func(string) int {
		return func(s string) int {
			if len(s) >= n {
				return len(s)
			}
			return -1
		}
	}
	p.readUntilFunc("40 bytes of answer", ptyWait, atLeast(40))
	p.write("\x03")
	p.readUntil(ptyMarker, ptyWait)
	p.write("go on\n")
	p.readUntil("go on\n", ptyWait)
	if got := p.readUntilFunc("40 bytes of the second answer", ptyWait, atLeast(40)); strings.Contains(got, ptyMarker) {
		t.Fatalf("the second answer ended by itself: %q", got)
	}
	p.write("\x03")
	p.readUntil(ptyMarker, ptyWait)
	p.write("\x03")
	code := p.wait(ptyWait)
	out := p.text()
	if code != 130 || !strings.Contains(out, "stop reason      = interrupted; last answer: interrupted") || !strings.Contains(out, "gorun: interrupted") || strings.Contains(out, "eval time        =       0.00 ms") {
		t.Errorf("exit %d (want 130); it wrote:\n%s", code, out)
	}
}

// (c) End of input (Ctrl-D at the input prompt) ends the session cleanly: exit status 0, the
// statistics with the stop reason.
func TestInteractiveEOFPTY(t *testing.T) {
	model := fixtures.Path(t, "gpt2-tiny-q8_0.gguf")
	p := startPTY(t, "-m", model, "-p", ptyPrompt, "-n", "4", "--ignore-eos", "--temp", "0", "-t", "1",
		"-i", "--in-prefix", ptyMarker)
	p.readUntil(ptyMarker, ptyWait)
	p.write("\x04")
	code := p.wait(ptyWait)
	out := p.text()
	if code != 0 || !strings.Contains(out, "stop reason      = end of input; last answer: n_predict (-n 4 tokens)") || !strings.Contains(out, "/     4 tokens") {
		t.Errorf("exit %d; it wrote:\n%s", code, out)
	}
}

// (d) A context of 32 tokens holds 100 generated ones: the context shifts (keeping the first
// 4 tokens), generation goes on to -n without an error, and control returns to the user.
func TestInteractiveContextShiftPTY(t *testing.T) {
	model := fixtures.Path(t, "gpt2-tiny-q8_0.gguf")
	p := startPTY(t, "-m", model, "-p", ptyPrompt, "-c", "32", "--keep", "4", "-n", "100", "--ignore-eos",
		"--temp", "0", "-t", "1", "-i", "--in-prefix", ptyMarker)
	p.readUntil(ptyMarker, ptyWait)
	p.write("\x04")
	code := p.wait(ptyWait)
	out := p.text()
	m := regexp.MustCompile(`context shifts   = (\d+) \((\d+) tokens evaluated again .*; --keep 4\)`).FindStringSubmatch(out)
	if code != 0 || m == nil || strings.Contains(out, "gorun: ") || !strings.Contains(out, "/   100 tokens") || !strings.Contains(out, "n_predict (-n 100 tokens)") {
		t.Fatalf("exit %d; it wrote:\n%s", code, out)
	}
	// Each shift keeps 4 tokens and moves half of the other 28: 100 tokens after a 5-token
	// prompt in 32 need at least (105-32)/14 shifts.
	if n, _ := strconv.Atoi(m[1]); n < (105-32)/14 {
		t.Errorf("%s context shifts for 105 tokens in 32", m[1])
	}
}
