// Command chat is a terminal chat that embeds gorun's llm package: it streams the model's
// answer as it is generated, Ctrl-C stops the answer (the conversation so far is kept), and
// Ctrl-C at the prompt or end of input quits.
//
//	go run ./examples/chat -m gpt2.gguf
//
// Lines starting with / are commands: /reset forgets the conversation, /undo drops the last
// exchange, /save FILE and /load FILE keep a conversation across runs.
//
// GPT-2 is not a chat model: it continues the transcript "User: ...\nAssistant:" as text, and
// the stop string "\nUser:" ends its turn.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"

	"github.com/gorun-dev/gorun/llm"
)

func main() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt)
	os.Exit(run(os.Args[1:], os.Stdin, os.Stdout, os.Stderr, sig))
}

// run is the program, with its input, outputs and interrupts passed in so tests can drive it.
func run(args []string, stdin io.Reader, stdout, stderr io.Writer, interrupts <-chan os.Signal) int {
	fs := flag.NewFlagSet("chat", flag.ContinueOnError)
	fs.SetOutput(stderr)
	model := fs.String("m", "", "model `FILE` (GGUF)")
	threads := fs.Int("t", 0, "CPU threads (0: one per physical core)")
	maxTokens := fs.Int("n", 128, "most tokens per answer")
	temp := fs.Float64("temp", 0.8, "temperature (0: greedy)")
	seed := fs.Int64("seed", -1, "random seed (-1: a random one)")
	ngl := fs.Int("ngl", 0, "layers on the GPU (a build with -tags cuda; 99: all)")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if *model == "" {
		fmt.Fprintln(stderr, "chat: -m MODEL is required")
		return 2
	}
	m, err := llm.Load(*model, llm.Options{Threads: *threads, GPULayers: *ngl})
	if err != nil {
		fmt.Fprintln(stderr, "chat:", err)
		return 1
	}
	defer m.Close()
	s, err := m.NewSession()
	if err != nil {
		fmt.Fprintln(stderr, "chat:", err)
		return 1
	}
	// llama.cpp's sampling defaults, with this program's temperature and seed.
	sample := llm.DefaultSampling()
	sample.Temperature = float32(*temp)
	if *seed >= 0 {
		sample.Seed = uint64(*seed)
	}
	c := &chat{m: m, s: s, out: stdout, errw: stderr, opts: llm.GenerateOptions{
		MaxTokens: *maxTokens, Sample: sample, Stop: []string{"\nUser:"},
	}}
	// Lines come from a goroutine so that Ctrl-C can end the program while it waits for one.
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdin)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	for {
		fmt.Fprint(stdout, "> ")
		var line string
		var ok bool
		select {
		case line, ok = <-lines:
		case <-interrupts:
			fmt.Fprintln(stdout)
			return 0
		}
		if !ok {
			fmt.Fprintln(stdout)
			return 0
		}
		if err := c.handle(strings.TrimSpace(line), interrupts); err != nil {
			fmt.Fprintln(stderr, "chat:", err)
			if errors.Is(err, llm.ErrClosed) {
				return 1
			}
		}
	}
}

type chat struct {
	m     *llm.Model
	s     *llm.Session
	out   io.Writer
	errw  io.Writer
	opts  llm.GenerateOptions
	turns []int // context length before each exchange, for /undo
}

func (c *chat) handle(line string, interrupts <-chan os.Signal) error {
	cmd, arg, _ := strings.Cut(line, " ")
	switch cmd {
	case "":
		return nil
	case "/reset":
		c.s.Reset()
		c.turns = nil
		return nil
	case "/undo":
		if len(c.turns) == 0 {
			return errors.New("nothing to undo")
		}
		n := c.turns[len(c.turns)-1]
		c.turns = c.turns[:len(c.turns)-1]
		return c.s.Rewind(n)
	case "/save":
		f, err := os.Create(arg)
		if err != nil {
			return err
		}
		if err := c.s.Save(f); err != nil {
			f.Close()
			return err
		}
		return f.Close()
	case "/load":
		f, err := os.Open(arg)
		if err != nil {
			return err
		}
		defer f.Close()
		s, err := c.m.LoadSession(f)
		if err != nil {
			return err
		}
		c.s, c.turns = s, nil
		return nil
	}
	c.turns = append(c.turns, c.s.Pos())
	prompt := "User: " + line + "\nAssistant:"
	if c.s.Pos() > 0 {
		prompt = "\n" + prompt
	}
	// Ctrl-C while the answer streams cancels it; the session keeps what was generated.
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		select {
		case <-interrupts:
			cancel()
		case <-done:
		}
	}()
	defer func() { close(done); cancel() }()
	shown := false // the answer's text so far is only white space
	for p, err := range c.s.Stream(ctx, prompt, c.opts) {
		if errors.Is(err, llm.ErrCancelled) {
			fmt.Fprintln(c.out, " [stopped]")
			return nil
		}
		if err != nil {
			return err
		}
		text := p.Text
		if !shown {
			// "Assistant:" is followed by a space the model writes: the answer is shown
			// from its first letter, as gorun -cnv shows it.
			text = strings.TrimLeft(text, " \t")
			shown = text != ""
		}
		fmt.Fprint(c.out, text)
	}
	fmt.Fprintln(c.out)
	if st := c.s.LastStats(); st.Stop == llm.StopContextFull {
		fmt.Fprintln(c.errw, "chat: the context is full; /reset or /undo to go on")
	}
	return nil
}
