package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"os/signal"
	"strconv"
	"strings"

	"github.com/gorun-dev/gorun/hub"
	"github.com/gorun-dev/gorun/llm"
)

// logitBias is -l/--logit-bias, llama.cpp's TOKEN(+|-)BIAS (15043+1, 50256-inf), repeatable.
type logitBias map[int32]float32

func (b *logitBias) String() string { return "" }
func (b *logitBias) Set(s string) error {
	i := strings.IndexAny(s, "+-")
	if i <= 0 {
		return fmt.Errorf("want TOKEN+BIAS or TOKEN-BIAS, such as 15043+1 or 50256-inf")
	}
	id, err1 := strconv.ParseInt(s[:i], 10, 32)
	v, err2 := strconv.ParseFloat(s[i+1:], 32)
	if err1 != nil || err2 != nil || id < 0 || math.IsNaN(v) {
		return fmt.Errorf("want TOKEN+BIAS or TOKEN-BIAS, such as 15043+1 or 50256-inf")
	}
	if s[i] == '-' {
		v = -v
	}
	if *b == nil {
		*b = logitBias{}
	}
	(*b)[int32(id)] = float32(v)
	return nil
}

// runFlags are the run command's options (llama-cli's names and defaults).
type runFlags struct {
	mf                             modelFlags
	prompt, promptFile             string
	escape, noEscape               bool
	n                              int
	temp, topP, minP, rep          float64
	freq, pres                     float64
	topK, repN                     int
	bias                           logitBias
	stops                          stringList
	seed                           int64
	noPrompt, ignoreEOS            bool
	version                        bool
	interactive, first, cnv, noCnv bool
	inPrefix, inSuffix, system     string
	keep                           int
	ctxShift, noCtxShift           bool
	verbosePrompt                  bool
	special                        bool
	promptCache                    string
	log                            logFlags
	info                           io.Writer // informational lines: stderr, unless --log-disable
	gram                           grammarFlags
}

func (f *runFlags) register(fs *flag.FlagSet) {
	f.mf.register(fs)
	def := llm.DefaultSampleOptions()
	fs.StringVar(&f.prompt, "p", "", "`prompt` text (escapes such as \\n are processed unless --no-escape)")
	fs.StringVar(&f.prompt, "prompt", "", "same as -p")
	fs.StringVar(&f.promptFile, "f", "", "read the prompt from `FILE` (one trailing newline is dropped)")
	fs.StringVar(&f.promptFile, "file", "", "same as -f")
	fs.BoolVar(&f.escape, "e", true, "process escapes (\\n, \\t, \\', \\\", \\\\, \\xNN) in -p, -r, --in-prefix, --in-suffix, -sys and typed input (the default)")
	fs.BoolVar(&f.escape, "escape", true, "same as -e")
	fs.BoolVar(&f.noEscape, "no-escape", false, "take those texts literally")
	fs.IntVar(&f.n, "n", -1, "tokens to generate (-1: until end of text or a full context; 0: none); in interactive mode, per answer")
	fs.IntVar(&f.n, "n-predict", -1, "same as -n")
	fs.IntVar(&f.n, "predict", -1, "same as -n")
	fs.Float64Var(&f.temp, "temp", def32(def.Temperature), "temperature (0: greedy)")
	fs.IntVar(&f.topK, "top-k", def.TopK, "top-k sampling (0: off)")
	fs.Float64Var(&f.topP, "top-p", def32(def.TopP), "top-p sampling (1: off)")
	fs.Float64Var(&f.minP, "min-p", def32(def.MinP), "min-p sampling (0: off)")
	fs.Float64Var(&f.rep, "repeat-penalty", def32(def.RepeatPenalty), "penalty for repeating recent tokens (1: off)")
	fs.IntVar(&f.repN, "repeat-last-n", def.RepeatLastN, "recent tokens the repeat, frequency and presence penalties look at (0: off, -1: the context)")
	fs.Float64Var(&f.freq, "frequency-penalty", 0, "subtract this times a token's count among the recent tokens from its logit (0: off)")
	fs.Float64Var(&f.pres, "presence-penalty", 0, "subtract this from the logit of a token among the recent tokens (0: off)")
	fs.Var(&f.bias, "l", "`TOKEN(+|-)BIAS`: add BIAS to the token's logit (15043+1, 50256-inf); repeatable")
	fs.Var(&f.bias, "logit-bias", "same as -l")
	fs.Var(&f.stops, "r", "reverse prompt `PROMPT`: stop where the text is generated (not shown); in interactive mode, shown, and control returns to the user; repeatable")
	fs.Var(&f.stops, "reverse-prompt", "same as -r")
	fs.Int64Var(&f.seed, "seed", -1, "random seed (-1: a random one, printed to stderr)")
	fs.Int64Var(&f.seed, "s", -1, "same as --seed")
	fs.BoolVar(&f.noPrompt, "no-display-prompt", false, "do not echo the prompt")
	fs.BoolVar(&f.ignoreEOS, "ignore-eos", false, "keep generating past the end-of-text token")
	fs.BoolVar(&f.version, "version", false, "print the version and exit")
	fs.BoolVar(&f.interactive, "i", false, "interactive mode: after each answer (end of text, -n tokens, a reverse prompt, Ctrl-C) the user types the next input")
	fs.BoolVar(&f.interactive, "interactive", false, "same as -i")
	fs.BoolVar(&f.first, "if", false, "interactive mode, the user first: the prompt is read, then the user types")
	fs.BoolVar(&f.first, "interactive-first", false, "same as -if")
	fs.BoolVar(&f.cnv, "cnv", false, "conversation mode: interactive, the inputs and answers formatted with the model's chat template (or --chat-template; plain 'User:'/'Assistant:' lines for a model without one, such as GPT-2); -p is the first message")
	fs.BoolVar(&f.cnv, "conversation", false, "same as -cnv")
	fs.BoolVar(&f.noCnv, "no-cnv", false, "no conversation mode (the default)")
	fs.BoolVar(&f.noCnv, "no-conversation", false, "same as -no-cnv")
	fs.StringVar(&f.system, "sys", "", "conversation mode: a system `PROMPT`, the conversation's first message")
	fs.StringVar(&f.system, "system-prompt", "", "same as -sys")
	fs.StringVar(&f.inPrefix, "in-prefix", "", "interactive mode: `TEXT` before each input (shown when the user is asked)")
	fs.StringVar(&f.inSuffix, "in-suffix", "", "interactive mode: `TEXT` after each input (shown after it)")
	fs.IntVar(&f.keep, "keep", 0, "tokens at the start of the prompt a context shift keeps (-1: all of the initial prompt)")
	fs.BoolVar(&f.ctxShift, "context-shift", false, "when the context fills, drop the older half of what follows --keep and go on (the default in interactive mode)")
	fs.BoolVar(&f.noCtxShift, "no-context-shift", false, "stop when the context fills (the default without -i)")
	fs.BoolVar(&f.verbosePrompt, "verbose-prompt", false, "print each text put into the context (-cnv: each turn as the chat template renders it) and its token count to stderr")
	fs.BoolVar(&f.special, "sp", false, "print special tokens' text: gorun always does (the end-of-text token ends the text unless --ignore-eos)")
	fs.BoolVar(&f.special, "special", false, "same as -sp")
	fs.StringVar(&f.promptCache, "prompt-cache", "", "keep the prompt's evaluated state in `FILE`: reuse what it holds of the prompt, save it after the prompt (not with -i, -cnv)")
	f.log.register(fs)
	f.mf.chat.register(fs)
	f.gram.register(fs)
}

// parse reads the command line. Besides -m and -p, the model and the prompt may be
// positional, as ollama's "run MODEL PROMPT": the first argument is the model when -m is not
// given, and the rest (joined by spaces) the prompt when neither -p nor -f is.
func (f *runFlags) parse(fs *flag.FlagSet, args []string, stderr io.Writer) error {
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if f.mf.model == "" && len(pos) > 0 {
		f.mf.model, pos = hubName(pos[0]), pos[1:]
	}
	switch {
	case f.mf.model == "":
		return usageError(fs, stderr, "no model: use -m FILE (or gorun run MODEL PROMPT)")
	case len(pos) > 0 && (f.prompt != "" || f.promptFile != ""):
		return usageError(fs, stderr, "unexpected argument %q: the prompt is given by -p or -f already", pos[0])
	case len(pos) > 0:
		f.prompt = strings.Join(pos, " ")
	}
	return resolveModel(&f.mf.model, stderr)
}

// hubName reads a positional model as ollama's run does: a file when one exists there, else a
// Hub name ORG/NAME[:QUANT] (pulled unless cached).
func hubName(model string) string {
	if _, err := os.Stat(model); err == nil || strings.HasSuffix(strings.ToLower(model), ".gguf") {
		return model
	}
	if _, _, err := hub.ParseRef(model); err == nil && strings.Contains(model, "/") {
		return "hf://" + model
	}
	return model
}

// check refuses out-of-range and conflicting options, naming them, and processes the escapes
// of the texts that take them.
func (f *runFlags) check(fs *flag.FlagSet, stderr io.Writer) error {
	for _, c := range []struct {
		bad  bool
		name string
		want string
	}{
		{f.temp < 0, "--temp", "must be >= 0"},
		{f.topK < 0, "--top-k", "must be >= 0"},
		{f.topP <= 0 || f.topP > 1, "--top-p", "must be in (0, 1]"},
		{f.minP < 0 || f.minP > 1, "--min-p", "must be in [0, 1]"},
		{f.rep <= 0, "--repeat-penalty", "must be > 0"},
		{f.freq < -2 || f.freq > 2, "--frequency-penalty", "must be in [-2, 2]"},
		{f.pres < -2 || f.pres > 2, "--presence-penalty", "must be in [-2, 2]"},
		{f.keep < -1, "--keep", "must be >= -1"},
		{f.ctxShift && f.noCtxShift, "--context-shift", "and --no-context-shift contradict each other"},
		{f.cnv && f.noCnv, "-cnv", "and -no-cnv contradict each other"},
		{f.cnv && (f.inPrefix != "" || f.inSuffix != ""), "--in-prefix/--in-suffix", "do not apply to -cnv (its template wraps the input): use -i"},
		{f.system != "" && !f.cnv, "-sys", "needs -cnv (conversation mode)"},
		{f.promptCache != "" && f.interactiveMode(), "--prompt-cache", "does not apply to -i, -if, -cnv"},
		{isStdin(f.promptFile) && f.interactiveMode(), "-f " + f.promptFile, "reads the prompt from the input, which -i, -if, -cnv read the user's lines from: use -p or a file"},
	} {
		if c.bad {
			return usageError(fs, stderr, "%s %s", c.name, c.want)
		}
	}
	for _, r := range f.stops {
		if r == "" {
			return usageError(fs, stderr, "-r/--reverse-prompt must not be empty")
		}
	}
	if f.escape && !f.noEscape {
		// llama-cli processes the escapes of all these (common_params_parse).
		for _, s := range []*string{&f.prompt, &f.inPrefix, &f.inSuffix, &f.system} {
			*s = processEscapes(*s)
		}
		for i := range f.stops {
			f.stops[i] = processEscapes(f.stops[i])
		}
	}
	return nil
}

// interactiveMode reports whether the user types inputs (-i, -if, -cnv).
func (f *runFlags) interactiveMode() bool { return f.interactive || f.first || f.cnv }

// shifting reports whether a full context is shifted: by default in interactive mode only.
func (f *runFlags) shifting() bool {
	return !f.noCtxShift && (f.ctxShift || f.interactiveMode())
}

// generateOptions are the sampling options in llm's terms, which give each value the
// command's meaning (0 turns a filter off, -1 is the whole context).
func (f *runFlags) generateOptions(seed uint64) llm.GenerateOptions {
	return llm.GenerateOptions{IgnoreEOS: f.ignoreEOS, Sample: llm.SampleOptions{
		Temperature: float32(f.temp), TopK: f.topK, TopP: float32(f.topP), MinP: float32(f.minP),
		RepeatPenalty: float32(f.rep), RepeatLastN: max(f.repN, llm.WholeContext), Seed: seed,
		// llama.cpp's penalties: over the last --repeat-last-n tokens, prompt included.
		FrequencyPenalty: float32(f.freq), PresencePenalty: float32(f.pres), LogitBias: f.bias,
	}}
}

// resolveSeed returns --seed, or for -1 (llm.RandomSeed) a random seed, printed when sampling
// draws from it. One seed serves every turn of an interactive run.
func (f *runFlags) resolveSeed(stderr io.Writer) uint64 {
	if f.seed >= 0 {
		return uint64(f.seed)
	}
	s := rand.Uint64() >> 1
	if f.temp > 0 { // greedy decoding draws no random numbers
		fmt.Fprintf(stderr, "seed = %d\n", s)
	}
	return s
}

func cmdRun(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("run", "gorun -m MODEL.gguf -p PROMPT [options]: generate text after a prompt (-i: interactively)", stderr)
	var f runFlags
	f.register(fs)
	if err := f.parse(fs, args, stderr); err != nil {
		if f.version && !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stdout, versionLine())
			return nil
		}
		return err
	}
	if f.version {
		fmt.Fprintln(stdout, versionLine())
		return nil
	}
	if err := f.check(fs, stderr); err != nil {
		return err
	}
	text, err := promptText(fs, stderr, f.prompt, f.promptFile)
	if err != nil {
		return err
	}
	gram, err := f.gram.compile(fs, stderr)
	if err != nil {
		return err
	}
	info, closeLog, err := f.log.open(stderr)
	if err != nil {
		return err
	}
	defer closeLog()
	f.info = info
	m, err := f.mf.load(info)
	if err != nil {
		return err
	}
	defer m.Close()
	for id := range f.bias {
		if int(id) >= m.Tokenizer().VocabSize() {
			return usageError(fs, stderr, "--logit-bias: token %d is not in the vocabulary of %d tokens", id, m.Tokenizer().VocabSize())
		}
	}
	sess, err := m.NewSession()
	if err != nil {
		return err
	}
	if !f.interactiveMode() {
		if err := checkPromptFits(m, sess, text); err != nil {
			return err
		}
	}
	// The seed is printed once the run is sure to start: a run that fails first used none.
	g := &generator{m: m, sess: sess, opts: f.generateOptions(f.resolveSeed(info)), shift: f.shifting(), keep: f.keep, onlyBefore: f.cnv}
	if f.verbosePrompt || f.log.verbose {
		g.verbose = info
	}
	g.opts.Sample.Grammar = gram // each answer (each generation between context shifts) starts at the root
	if f.interactiveMode() {
		return runInteractive(g, &f, text, os.Stdin, stdout, stderr)
	}
	if n := len(m.Tokenizer().Encode(text)); g.keep < 0 || g.keep > n {
		g.keep = n // llama-cli's n_keep: -1 or more than the prompt is the whole prompt
	}
	g.opts.Stop = f.stops
	return runOnce(g, &f, text, stdout, stderr)
}

// runOnce generates once after the prompt: the command without -i.
func runOnce(g *generator, f *runFlags, text string, stdout, stderr io.Writer) error {
	out := bufio.NewWriter(stdout)
	if !f.noPrompt {
		out.WriteString(text)
		out.Flush()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	emit := func(p llm.Piece) error {
		if p.Text == "" {
			return nil
		}
		out.WriteString(p.Text)
		return out.Flush() // stream: the user sees each piece as it is made
	}
	prompt := text
	if f.promptCache != "" {
		if err := g.usePromptCache(ctx, f.promptCache, text, f.info); err != nil {
			return err
		}
		prompt = "" // in the context now
	}
	st, err := g.run(ctx, prompt, f.n, emit)
	out.Flush()
	fmt.Fprintln(f.info)
	if st.Stop == llm.StopContextFull {
		fmt.Fprintf(stderr, "gorun: stopped: the context of %d tokens is full\n", g.sess.ContextLength())
	}
	printStats(f.info, g, st, f.n, "")
	return err
}
