package main

import (
	"bufio"
	"context"
	"errors"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/internal/fixtures"
	"github.com/gorun-dev/gorun/llm"
)

// Input lines: '\' at the end continues the input on the next line (joined with a newline);
// an empty line is an input of its own; a line over the limit is dropped whole; end of input
// after a continued line sends what there is, then io.EOF.
func TestReadInput(t *testing.T) {
	lines := make(chan inputLine)
	go readLines(strings.NewReader("one\\\ntwo\\\nthree\n\nwin\r\n"+strings.Repeat("x", 100)+"\nlast\\\n"), 64, lines)
	s := &interactive{lines: lines, intr: newInterrupter(), stderr: io.Discard}
	for _, want := range []string{"one\ntwo\nthree", "", "win", "", "last\n"} {
		if got, err := s.readInput(); got != want || err != nil {
			t.Fatalf("readInput = %q, %v; want %q", got, err, want)
		}
	}
	if got, err := s.readInput(); !errors.Is(err, io.EOF) {
		t.Errorf("at the end: %q, %v; want io.EOF", got, err)
	}
	// Ctrl-C at the input prompt ends the session.
	s = &interactive{lines: make(chan inputLine), intr: newInterrupter()}
	s.intr.interrupt()
	if _, err := s.readInput(); !errors.Is(err, errQuit) {
		t.Errorf("after Ctrl-C at the prompt: %v", err)
	}
}

// Ctrl-C stops the answer being written; another, before the user sends a line, quits.
func TestInterrupter(t *testing.T) {
	it := newInterrupter()
	ctx, done := it.answer()
	it.interrupt()
	if ctx.Err() == nil || it.quitting() {
		t.Fatalf("first Ctrl-C: answer %v, quitting %v", ctx.Err(), it.quitting())
	}
	it.interrupt() // while the answer winds down
	done()
	if !it.quitting() {
		t.Error("a second Ctrl-C did not quit")
	}
	it.interrupt() // more are harmless
}

// A reverse prompt is found across pieces, and the answer stops after the piece that shows it.
func TestAnswerPrinterReversePrompt(t *testing.T) {
	var out strings.Builder
	p := &answerPrinter{out: bufio.NewWriter(&out), reverse: []string{"User:", "zz"}}
	for i, piece := range []string{"Hello", " there\nUs", "er: and more"} {
		err := p.emit(llm.Piece{Text: piece, Token: -1})
		if (i == 2) != errors.Is(err, errReversePrompt) {
			t.Fatalf("piece %d %q: %v", i, piece, err)
		}
	}
	if out.String() != "Hello there\nUser: and more" || p.found != "User:" {
		t.Errorf("shown %q, found %q", out.String(), p.found)
	}
}

// The context shift keeps the first --keep tokens, drops the older half of the rest, and the
// session's cache is then exactly what evaluating its tokens afresh gives: the logits after
// the shifted context are bit-identical to a new session's.
func TestContextShiftExact(t *testing.T) {
	m, err := llm.Load(tinyFile(t), llm.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	sess, _ := m.NewSession()
	prompt := m.Tokenizer().Encode("hello world, and more")
	g := &generator{m: m, sess: sess, shift: true, keep: 3, opts: llm.GenerateOptions{IgnoreEOS: true}}
	st, err := g.run(context.Background(), "hello world, and more", 150, func(llm.Piece) error { return nil })
	if err != nil || st.Tokens != 150 || st.Stop != llm.StopLength || g.shifts == 0 {
		t.Fatalf("150 tokens in a context of %d: %+v, %v, %d shifts", sess.ContextLength(), st, err, g.shifts)
	}
	toks := sess.Tokens()
	if !slices.Equal(toks[:3], prompt[:3]) {
		t.Errorf("kept %v, want the prompt's first 3 tokens %v", toks[:3], prompt[:3])
	}
	got, err := sess.Logits(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	got = slices.Clone(got)
	fresh, _ := m.NewSession()
	want, err := fresh.Eval(toks)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(got, want) {
		t.Error("the shifted session's logits differ from a fresh evaluation of its tokens")
	}
	// One shift by hand: llama.cpp's n_keep/n_discard rule, exactly.
	sess.Reset()
	toks = toks[:41]
	if _, err := sess.Eval(toks); err != nil {
		t.Fatal(err)
	}
	if ok, err := g.shiftContext(); !ok || err != nil {
		t.Fatal(ok, err)
	}
	if want := append(slices.Clone(toks[:3]), toks[3+(41-3)/2:]...); !slices.Equal(sess.Tokens(), want) {
		t.Errorf("after a shift of 41 tokens keeping 3: %v, want %v", sess.Tokens(), want)
	}
	// A --keep that holds the whole context leaves nothing to drop: generation stops there.
	sess.Reset()
	g = &generator{m: m, sess: sess, shift: true, keep: 1 << 20, opts: llm.GenerateOptions{IgnoreEOS: true}}
	if st, err := g.run(context.Background(), "hello", 500, func(llm.Piece) error { return nil }); err != nil || st.Stop != llm.StopContextFull {
		t.Errorf("--keep over the context: %+v, %v", st, err)
	}
}

// dropHidden leaves the context ending with the text shown: the context's text plus what it
// returns (to append again) is the shown text, whatever the hidden end's length.
func TestDropHidden(t *testing.T) {
	m, err := llm.Load(tinyFile(t), llm.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tok := m.Tokenizer()
	toks := tok.Encode("Some text, then an answer\nUser: hidden")
	answer := toks[len(toks)-6:]
	generated := tok.Decode(answer)
	for hidden := 0; hidden <= len(generated); hidden++ {
		sess, _ := m.NewSession()
		if _, err := sess.Eval(toks); err != nil {
			t.Fatal(err)
		}
		g := &generator{m: m, sess: sess}
		shown := generated[:len(generated)-hidden]
		carry, err := g.dropHidden(generated, shown)
		if err != nil {
			t.Fatal(err)
		}
		want := tok.Decode(toks)[:len(tok.Decode(toks))-hidden]
		if got := tok.Decode(sess.Tokens()) + carry; got != want {
			t.Errorf("hidden %d: context %q + carry %q, want %q", hidden, tok.Decode(sess.Tokens()), carry, want)
		}
		sess.Close()
	}
}

// Without -i, --context-shift lets generation go past the context (--keep -1: the prompt).
func TestOneShotContextShift(t *testing.T) {
	code, out, errs := gorun("-m", tinyFile(t), "-p", "hello", "-c", "32", "-n", "100", "--ignore-eos", "--seed", "1", "--context-shift", "--keep", "-1", "-t", "1")
	if code != 0 || out == "" || !strings.Contains(errs, "/   100 tokens") || !strings.Contains(errs, "context shifts   = ") || !strings.Contains(errs, "n_predict (-n 100 tokens)") {
		t.Errorf("exit %d, stderr %q", code, errs)
	}
}

// Conversation mode puts GPT-2 in the server's plain-text template: the system paragraph, then
// "User: ..." and "Assistant:"; the answer shown is the library's for that text, without its
// leading space, stopping unseen at "\nUser:". Its input here comes from a pipe.
func TestConversationMode(t *testing.T) {
	model := fixtures.Path(t, "gpt2-tiny-q8_0.gguf")
	m, err := llm.Load(model, llm.Options{Threads: 1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	s, _ := m.NewSession()
	answer := ""
	_, err = s.Generate(context.Background(), "A dictionary.\n\nUser: What is a dog?\nAssistant:",
		llm.GenerateOptions{MaxTokens: 24, Stop: []string{"\nUser:"}}, func(p string) error { answer += p; return nil })
	if err != nil {
		t.Fatal(err)
	}
	cmd := gorunProcess("-m", model, "-cnv", "-sys", "A dictionary.", "-p", "What is a dog?", "-n", "24", "--temp", "0", "-t", "1")
	cmd.Stdin = strings.NewReader("And a cat?\n/exit\n")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, _ := cmd.Output()
	want := "> What is a dog?\n" + strings.TrimPrefix(answer, " ") + "\n> "
	if code := cmd.ProcessState.ExitCode(); code != 0 || !strings.HasPrefix(string(out), want) || strings.Count(string(out), "\n> ") != 2 {
		t.Errorf("exit %d, stdout %q, want it to begin %q and ask twice (stderr %q)", code, out, want, stderr.String())
	}
	if !strings.Contains(stderr.String(), "stop reason      = /exit; last answer: ") {
		t.Errorf("stderr %q", stderr.String())
	}
}

// The /commands: /help lists them, an unknown one is refused (not sent to the model), //
// sends a line beginning with '/', /clear goes back to the prompt, /exit ends the session.
func TestInteractiveCommands(t *testing.T) {
	cmd := gorunProcess("-m", tinyFile(t), "-p", "hi", "-n", "3", "--ignore-eos", "--seed", "1", "-t", "1", "-i", "--in-prefix", "[>]")
	cmd.Stdin = strings.NewReader("/help\n/frobnicate\n//slash\n/clear\n/exit\nnever read\n")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, _ := cmd.Output()
	errs := stderr.String()
	if code := cmd.ProcessState.ExitCode(); code != 0 || strings.Count(string(out), "[>]") != 5 {
		t.Errorf("exit %d, stdout %q", code, out)
	}
	for _, want := range []string{"/clear, /reset", "unknown command /frobnicate", "(context cleared: ", "stop reason      = /exit"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q: %q", want, errs)
		}
	}
	if !strings.Contains(errs, "/     6 tokens") { // two answers of 3: the prompt's and /slash's
		t.Errorf("want 6 generated tokens: %q", errs)
	}
}
