package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorun-dev/gorun/internal/fixtures"
	"github.com/gorun-dev/gorun/internal/testmodel"
)

func tinyModel(t *testing.T) string {
	c, _ := testmodel.Preset("tiny")
	c.NCtx = 512
	p := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := testmodel.Write(p, c); err != nil {
		t.Fatal(err)
	}
	return p
}

// interrupter is the chat's stdout: it sends Ctrl-C once, when the first answer has begun.
type interrupter struct {
	mu    sync.Mutex
	buf   bytes.Buffer
	sig   chan os.Signal
	armed bool
}

func (w *interrupter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.buf.Write(p)
	if w.armed && strings.Count(w.buf.String(), "> ") == 1 && !bytes.Equal(p, []byte("> ")) {
		w.armed = false
		w.sig <- os.Interrupt
		// Hold the answer's stream (Write runs on it) until the chat's watcher has surely
		// cancelled: a fast model could otherwise finish all its tokens first on a busy machine.
		time.Sleep(200 * time.Millisecond)
	}
	return len(p), nil
}

// A scripted conversation: Ctrl-C stops the first (long) answer and the session goes on;
// /save, /load, /undo and /reset work; end of input quits.
func TestChat(t *testing.T) {
	model := tinyModel(t)
	saved := filepath.Join(t.TempDir(), "conv.bin")
	in := strings.Join([]string{"hello there", "/save " + saved, "how are you", "/undo", "/load " + saved, "/undo", "/reset", "bye"}, "\n") + "\n"
	out := &interrupter{sig: make(chan os.Signal, 1), armed: true}
	var errb bytes.Buffer
	code := run([]string{"-m", model, "-t", "2", "-n", "400", "--temp", "0"}, strings.NewReader(in), out, &errb, out.sig)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	o := out.buf.String()
	if !strings.Contains(o, " [stopped]") {
		t.Errorf("Ctrl-C did not stop the answer:\n%s", o)
	}
	if n := strings.Count(o, "> "); n != 9 {
		t.Errorf("%d prompts, want 9 (8 lines, then end of input):\n%s", n, o)
	}
	// The second /undo comes after /load, which starts with no exchanges to undo.
	if !strings.Contains(errb.String(), "nothing to undo") || strings.Count(errb.String(), "chat:") != 1 {
		t.Errorf("stderr: %q", errb.String())
	}
	if st, err := os.Stat(saved); err != nil || st.Size() == 0 {
		t.Errorf("/save wrote nothing: %v", err)
	}
}

// Ctrl-C while waiting for a line quits.
func TestChatInterruptAtPrompt(t *testing.T) {
	model := tinyModel(t)
	r, w := io.Pipe()
	defer w.Close()
	sig := make(chan os.Signal, 1)
	done := make(chan int)
	var out, errb bytes.Buffer
	go func() { done <- run([]string{"-m", model, "-t", "2"}, r, &out, &errb, sig) }()
	time.Sleep(50 * time.Millisecond)
	sig <- os.Interrupt
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("exit %d: %s", code, errb.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatal("Ctrl-C at the prompt did not quit")
	}
}

func TestChatUsage(t *testing.T) {
	var out, errb bytes.Buffer
	if code := run(nil, strings.NewReader(""), &out, &errb, nil); code != 2 || !strings.Contains(errb.String(), "-m") {
		t.Errorf("no model: exit %d, %q", code, errb.String())
	}
}

// Issue 21 item 13: the answer is shown from its first letter (the space the model writes
// after "Assistant:" is not), as gorun -cnv shows it.
func TestChatAnswerHasNoLeadingSpace(t *testing.T) {
	model := fixtures.Path(t, "gpt2-tiny-f16.gguf")
	var out, errb bytes.Buffer
	code := run([]string{"-m", model, "-t", "2", "-n", "8", "--temp", "0"}, strings.NewReader("Who made the earth?\n"), &out, &errb, nil)
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errb.String())
	}
	answer, ok := strings.CutPrefix(out.String(), "> ")
	if !ok || answer == "" || answer[0] == ' ' || strings.TrimSpace(answer) == "" {
		t.Errorf("answer %q: want text from its first letter", answer)
	}
}
