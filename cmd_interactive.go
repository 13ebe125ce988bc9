package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"sync"

	"github.com/gorun-dev/gorun/chat"
	"github.com/gorun-dev/gorun/internal/stopstr"
	"github.com/gorun-dev/gorun/llm"
	"github.com/gorun-dev/gorun/tokenizer"
)

// Interactive mode (-i, -if, -cnv), as llama-cli's: the model writes after the prompt; at the
// end of text, after -n tokens, at a reverse prompt or on Ctrl-C, control returns to the user,
// whose line (wrapped in --in-prefix and --in-suffix) goes into the context, and the model
// writes again. End of input (Ctrl-D), /exit, or Ctrl-C at the input prompt ends the session
// with the statistics.

// chatUser and chatAssistant are conversation mode's plain-text template, the one `gorun
// serve` gives GPT-2 (server.DefaultChatTemplate): a system paragraph, then "User: ..." and
// "Assistant: ..." lines. An answer ends where the model begins the user's next line.
const (
	chatUser      = "User: "
	chatAssistant = "\nAssistant:"
	chatStop      = "\nUser:"
)

// errQuit ends the session from the input prompt (Ctrl-C there, or a second one).
var errQuit = context.Canceled

// errReversePrompt stops an answer at a reverse prompt (it is shown, then the user types).
var errReversePrompt = errors.New("reverse prompt")

const interactiveHelp = `== Running in interactive mode. ==
 - Press Ctrl+C to interject at any time; Ctrl+C at the input prompt quits.
 - Press Return to return control to the model.
 - If you want to submit another line, end your input with '\'.
 - /help lists the commands; Ctrl+D or /exit ends the session.
`

const commandHelp = `commands:
  /exit, /quit     end the session (as Ctrl+D)
  /clear, /reset   forget the conversation: the context goes back to the initial prompt (-cnv: the system prompt)
  /help            this list
  //text           send "/text"
`

// interactive is one interactive session.
type interactive struct {
	g      *generator
	f      *runFlags
	out    *bufio.Writer
	stderr io.Writer
	lines  <-chan inputLine
	intr   *interrupter

	base     string    // the text /clear goes back to: the prompt (-i), the system paragraph (-cnv)
	total    llm.Stats // every answer's statistics, added up; Stop is the last answer's
	answered bool      // -cnv: the context ends with an answer (the next line begins with "\n")
	carry    string    // -cnv: shown text whose tokens were dropped with a hidden stop string
	// conv is -cnv's conversation when the model has a chat template (or --chat-template
	// gives one); nil with the plain "User:"/"Assistant:" lines of a model without one.
	conv *chatConversation
}

// runInteractive runs an interactive session reading the user's lines from in, and prints the
// statistics when it ends. A Ctrl-C at the input prompt ends it with context.Canceled (exit
// status 130, as llama-cli's _exit(130)); end of input or /exit with nil.
func runInteractive(g *generator, f *runFlags, prompt string, in io.Reader, stdout, stderr io.Writer) error {
	s := &interactive{g: g, f: f, out: bufio.NewWriter(stdout), stderr: stderr, intr: newInterrupter()}
	if err := s.configure(prompt); err != nil {
		return err
	}
	sigs := make(chan os.Signal, 1)
	signal.Notify(sigs, os.Interrupt)
	defer signal.Stop(sigs)
	go s.intr.watch(sigs)
	lines := make(chan inputLine)
	go readLines(in, maxPromptBytes, lines)
	s.lines = lines
	fmt.Fprint(stderr, interactiveHelp)
	ended, err := s.loop(prompt)
	s.out.WriteString("\n")
	s.out.Flush()
	fmt.Fprintln(stderr)
	printStats(stderr, g, s.total, f.n, ended)
	return err
}

// configure sets up the generator for the mode and refuses an initial prompt that does not
// fit, before anything is printed.
func (s *interactive) configure(prompt string) error {
	if s.f.cnv {
		if err := s.chooseTemplate(); err != nil {
			return err
		}
	}
	initial, err := s.initialText(prompt)
	if err != nil {
		return err
	}
	n := len(s.g.m.Tokenize(initial, true))
	if size := s.g.sess.ContextLength(); n >= size {
		return promptTooLong(s.g.m, n, size)
	}
	if s.g.keep < 0 || s.g.keep > n {
		s.g.keep = n // llama-cli's n_keep: -1 or more than the prompt is the whole prompt
	}
	s.base = prompt
	switch {
	case s.conv != nil:
		s.base = initial
		s.g.opts.Stop = s.f.stops // hidden: the next turn's rendering rewinds their tokens
		s.g.trackDrops = true
	case s.f.cnv:
		s.base = s.systemText()
		// The answer ends, unseen, where the model begins the user's next line.
		s.g.opts.Stop = append([]string{chatStop}, s.f.stops...)
		s.g.tokens = true // dropHidden needs the answer's tokens
	}
	return nil
}

// chooseTemplate takes the model's chat template for -cnv. A model without one keeps the
// plain "User:"/"Assistant:" lines, and says so; a template that fails is an error naming it.
func (s *interactive) chooseTemplate() error {
	tmpl, err := s.g.m.ChatTemplate()
	if errors.Is(err, chat.ErrNoTemplate) {
		fmt.Fprintln(s.stderr, "gorun: the model has no chat template (tokenizer.chat_template): conversation mode uses plain 'User:'/'Assistant:' lines (--chat-template sets a template)")
		return nil
	}
	if err != nil {
		return err
	}
	s.conv, err = newChatConversation(tmpl, s.f.system)
	return err
}

// systemText is -cnv's first paragraph.
func (s *interactive) systemText() string {
	if s.f.system == "" {
		return ""
	}
	return s.f.system + "\n\n"
}

// initialText is what goes into the context before the user types: the prompt, or in
// conversation mode the system paragraph and -p as the first message. With a chat template
// it is the system message rendered (-p is then the first turn's).
func (s *interactive) initialText(prompt string) (string, error) {
	switch {
	case !s.f.cnv:
		return prompt, nil
	case s.conv != nil:
		if len(s.conv.msgs) == 0 {
			return "", nil
		}
		text, err := s.conv.render(s.conv.msgs, false)
		return s.g.m.StripAddedSpecial(text), err
	case prompt == "":
		return s.systemText(), nil
	}
	return s.systemText() + chatUser + prompt + chatAssistant, nil
}

// loop runs the session: the prompt, then inputs and answers until the user ends it. It
// returns how the session ended.
func (s *interactive) loop(prompt string) (string, error) {
	if err := s.start(prompt); err != nil {
		return "error", err
	}
	for {
		if s.intr.quitting() {
			return "interrupted", errQuit
		}
		s.askForInput()
		line, err := s.readInput()
		switch {
		case errors.Is(err, errQuit):
			return "interrupted", err
		case err != nil:
			if !errors.Is(err, io.EOF) {
				fmt.Fprintf(s.stderr, "\ngorun: reading the input: %v\n", err)
			}
			return "end of input", nil
		}
		done, err := s.command(line)
		switch {
		case err != nil:
			return "error", err
		case done:
			return "/exit", nil
		}
	}
}

// start puts the initial prompt into the context and, unless the user goes first, answers it.
func (s *interactive) start(prompt string) error {
	text, err := s.initialText(prompt)
	if err != nil {
		return err
	}
	if prompt != "" && !s.f.noPrompt {
		if s.f.cnv {
			s.out.WriteString("> " + prompt + "\n")
		} else {
			s.out.WriteString(prompt)
		}
		s.out.Flush()
	}
	if s.conv != nil && prompt != "" {
		return s.chatTurn(prompt) // the rendering holds the system message too
	}
	if text == "" {
		return nil
	}
	if s.f.first || (s.f.cnv && prompt == "") {
		return s.feedInitial(text)
	}
	_, _, err = s.answer(text)
	return err
}

// feedInitial puts the initial text into the context without an answer.
func (s *interactive) feedInitial(text string) error {
	ctx, done := s.intr.answer()
	defer done()
	st, err := s.g.feed(ctx, text)
	s.total = addStats(s.total, st)
	if errors.Is(err, llm.ErrCancelled) {
		err = nil // Ctrl-C: the prompt is dropped, the user goes on without it
	}
	return err
}

// askForInput shows that the user's turn has come: --in-prefix (-i), "> " (-cnv).
func (s *interactive) askForInput() {
	if s.f.cnv {
		s.out.WriteString("\n> ")
	} else {
		s.out.WriteString(s.f.inPrefix)
	}
	s.out.Flush()
}

// command handles a line: a /command, or input for the model. It reports whether the session
// is over.
func (s *interactive) command(line string) (bool, error) {
	switch strings.TrimSpace(line) {
	case "/exit", "/quit":
		return true, nil
	case "/clear", "/reset":
		return false, s.clear()
	case "/help", "/?":
		fmt.Fprint(s.stderr, commandHelp)
		return false, nil
	}
	if strings.HasPrefix(line, "//") {
		line = line[1:]
	} else if strings.HasPrefix(line, "/") && !strings.ContainsAny(strings.TrimSpace(line), " \n") {
		fmt.Fprintf(s.stderr, "gorun: unknown command %s (/help lists them; begin the line with // to send a /)\n", strings.TrimSpace(line))
		return false, nil
	}
	return false, s.input(line)
}

// input sends the user's line to the model and shows the answer. An empty line hands control
// back to the model without input (-i), or asks again (-cnv).
func (s *interactive) input(line string) error {
	if s.f.escape && !s.f.noEscape {
		line = processEscapes(line) // llama-cli processes the escapes of typed input too
	}
	if s.f.cnv {
		if line == "" {
			return nil
		}
		if s.conv != nil {
			return s.chatTurn(line)
		}
		text := s.carry
		if s.answered {
			text += "\n"
		}
		_, _, err := s.answer(text + chatUser + line + chatAssistant)
		return err
	}
	if line == "" {
		_, _, err := s.answer("")
		return err
	}
	s.out.WriteString(s.f.inSuffix)
	s.out.Flush()
	_, _, err := s.answer(s.f.inPrefix + line + s.f.inSuffix)
	return err
}

// answer appends text to the context and shows what the model writes after it, until it
// stops or Ctrl-C interrupts it, and returns the answer as shown and whether the text went
// in (false: it did not fit). Only a failed computation is an error; a Ctrl-C, a full context
// or an input too long return control to the user.
func (s *interactive) answer(text string) (shown string, accepted bool, err error) {
	ctx, done := s.intr.answer()
	defer done()
	plain := s.f.cnv && s.conv == nil
	p := &answerPrinter{out: s.out, tok: s.g.m.Tokenizer(), collect: s.f.cnv, trimSpace: plain}
	if !s.f.cnv {
		p.reverse = s.f.stops // -cnv's are hidden stop strings (generator.opts.Stop)
	}
	var st llm.Stats
	if s.f.n == 0 { // llama-cli's -n 0: the input goes in, nothing comes out
		st, err = s.g.feed(ctx, text)
		st.Stop = llm.StopLength
	} else {
		st, err = s.g.run(ctx, text, s.f.n, p.emit)
	}
	switch {
	case errors.Is(err, errReversePrompt):
		st.Stop, st.StopString, err = llm.StopString, p.found, nil
	case errors.Is(err, context.Canceled) || errors.Is(err, llm.ErrCancelled):
		st.Stop, err = llm.StopCancelled, nil
	case errors.Is(err, llm.ErrContextFull): // refused before anything was evaluated
		fmt.Fprintf(s.stderr, "\ngorun: %v; /clear forgets the conversation\n", err)
		return "", false, nil
	case err == nil && st.Stop == llm.StopContextFull:
		fmt.Fprintf(s.stderr, "\ngorun: the context of %d tokens is full (%s); /clear forgets the conversation\n", s.g.sess.ContextLength(), s.fullHint())
	}
	s.total = addStats(s.total, st)
	if err != nil || !plain {
		return p.shown.String(), err == nil, err
	}
	s.answered = true
	s.carry, err = s.g.dropHidden(p.generated.String(), p.shown.String())
	return p.shown.String(), err == nil, err
}

// fullHint says why a full context was not shifted.
func (s *interactive) fullHint() string {
	if s.g.onlyBefore && s.g.shift {
		return "the answer filled it without ending its turn: the model may not end its turns (no end-of-turn token); the next input makes room"
	}
	if !s.g.shift {
		return "--no-context-shift"
	}
	return fmt.Sprintf("--keep %d leaves nothing to drop", s.g.keep)
}

// clear forgets everything after the initial prompt (-cnv: the system prompt), reusing its
// cache rows when they are still there (a context shift may have dropped some of them).
func (s *interactive) clear() error {
	s.answered, s.carry = false, ""
	s.g.dropped = nil
	if s.conv != nil {
		s.conv.clear()
	}
	ids := s.g.m.Tokenize(s.base, true)
	toks := s.g.sess.Tokens()
	if len(toks) >= len(ids) && equalTokens(toks[:len(ids)], ids) {
		s.g.sess.Rewind(len(ids))
	} else {
		s.g.sess.Reset()
		if _, err := s.g.feed(context.Background(), s.base); err != nil {
			return err
		}
	}
	fmt.Fprintf(s.stderr, "(context cleared: %d tokens)\n", s.g.sess.Pos())
	return nil
}

func equalTokens(a, b []int32) bool {
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return len(a) == len(b)
}

// readInput reads the user's input: a line, or several when each but the last ends with '\'
// (joined with newlines, as llama-cli does). io.EOF when input ends before a line; errQuit on
// the Ctrl-C that ends the session.
func (s *interactive) readInput() (string, error) {
	var b strings.Builder
	for {
		var l inputLine
		var ok bool
		select {
		case <-s.intr.quit:
			return "", errQuit
		case l, ok = <-s.lines:
		}
		switch {
		case !ok || (l.err != nil && b.Len() == 0):
			if l.err == nil {
				l.err = io.EOF
			}
			return "", l.err
		case l.err != nil:
			return b.String(), nil // input ended after a continued line: send what there is
		case l.tooLong:
			fmt.Fprintf(s.stderr, "gorun: an input line over %d MiB was ignored\n", maxPromptBytes>>20)
			return "", nil
		}
		line := strings.TrimSuffix(strings.TrimSuffix(l.text, "\n"), "\r")
		if strings.HasSuffix(line, "\\") && strings.HasSuffix(l.text, "\n") {
			b.WriteString(line[:len(line)-1] + "\n")
			continue
		}
		b.WriteString(line)
		return b.String(), nil
	}
}

// inputLine is a line of input (with its newline, if it had one), or the error that ended the
// input. tooLong marks a line over the limit, whose text was dropped.
type inputLine struct {
	text    string
	tooLong bool
	err     error
}

// readLines sends the lines of r, then the error that ends it, and closes lines. A line over
// limit bytes is sent as tooLong, without its text, so that no input exhausts memory. It reads
// on its own goroutine so that the session can wait for a line and for Ctrl-C at once.
func readLines(r io.Reader, limit int, lines chan<- inputLine) {
	defer close(lines)
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	tooLong := false
	for {
		chunk, err := br.ReadSlice('\n')
		if !tooLong {
			buf = append(buf, chunk...)
			if len(buf) > limit {
				buf, tooLong = nil, true
			}
		}
		if errors.Is(err, bufio.ErrBufferFull) {
			continue
		}
		if len(buf) > 0 || tooLong {
			lines <- inputLine{text: string(buf), tooLong: tooLong}
		}
		buf, tooLong = buf[:0], false
		if err != nil {
			lines <- inputLine{err: err}
			return
		}
	}
}

// answerPrinter shows an answer as it is generated and watches it for the reverse prompts.
type answerPrinter struct {
	out       *bufio.Writer
	tok       tokenizer.Tokenizer
	reverse   []string // shown reverse prompts: the answer stops after the piece that completes one
	collect   bool     // collect the answer's text (-cnv)
	trimSpace bool     // drop the answer's leading space (after the plain format's "Assistant:")
	tail      string   // the end of the answer, where a reverse prompt may have begun
	found     string   // the reverse prompt that stopped the answer
	started   bool
	// generated and shown are the answer's token bytes and the text emitted (-cnv).
	generated, shown strings.Builder
}

// emit shows a piece, and stops the answer (errReversePrompt) once a reverse prompt is shown.
func (a *answerPrinter) emit(p llm.Piece) error {
	text := p.Text
	if a.collect {
		if p.Token >= 0 {
			a.generated.Write(a.tok.TokenBytes(p.Token))
		}
		a.shown.WriteString(text)
		if a.trimSpace && !a.started && text != "" {
			a.started, text = true, strings.TrimPrefix(text, " ")
		}
	}
	if text != "" {
		a.out.WriteString(text)
		if err := a.out.Flush(); err != nil {
			return err
		}
	}
	if r := a.watch(p.Text); r != "" {
		a.found = r
		return errReversePrompt
	}
	return nil
}

// watch looks for a reverse prompt in the answer's text so far (also one spanning pieces)
// and returns it, or "".
func (a *answerPrinter) watch(text string) string {
	if len(a.reverse) == 0 || text == "" {
		return ""
	}
	t := a.tail + text
	if i, r := (&stopstr.Matcher{Stops: a.reverse}).Find(t); i >= 0 {
		return r
	}
	longest := 0
	for _, r := range a.reverse {
		longest = max(longest, len(r))
	}
	if len(t) >= longest {
		t = t[len(t)-longest+1:] // what a reverse prompt may still complete
	}
	a.tail = t
	return ""
}

// interrupter gives Ctrl-C llama-cli's meaning in interactive mode: the first stops the
// answer being written and hands control to the user; another before the user has sent a
// line (at the input prompt, or while the answer winds down) ends the session.
type interrupter struct {
	mu     sync.Mutex
	cancel context.CancelFunc // the answer being written; nil when none (or already stopped)
	quit   chan struct{}      // closed by the Ctrl-C that ends the session
	closed bool
}

func newInterrupter() *interrupter { return &interrupter{quit: make(chan struct{})} }

// watch handles the signals until sigs is no longer sent to (the process ends with it).
func (it *interrupter) watch(sigs <-chan os.Signal) {
	for range sigs {
		it.interrupt()
	}
}

func (it *interrupter) interrupt() {
	it.mu.Lock()
	defer it.mu.Unlock()
	if it.cancel != nil {
		it.cancel()
		it.cancel = nil
		return
	}
	if !it.closed {
		close(it.quit)
		it.closed = true
	}
}

// answer returns the context of an answer, which the next Ctrl-C cancels; done ends it.
func (it *interrupter) answer() (context.Context, func()) {
	ctx, cancel := context.WithCancel(context.Background())
	it.mu.Lock()
	it.cancel = cancel
	it.mu.Unlock()
	return ctx, func() {
		it.mu.Lock()
		it.cancel = nil
		it.mu.Unlock()
		cancel()
	}
}

func (it *interrupter) quitting() bool {
	select {
	case <-it.quit:
		return true
	default:
		return false
	}
}
