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

	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/llm"
)

// modelFlags are the options every command that loads a model shares.
type modelFlags struct {
	model   string
	threads int
	ctx     int
	batch   int
	ngl     int
	q8act   bool
	mem     memLimit
}

func (m *modelFlags) register(fs interface {
	Var(flag.Value, string, string)
	StringVar(*string, string, string, string)
	IntVar(*int, string, int, string)
	BoolVar(*bool, string, bool, string)
}) {
	fs.StringVar(&m.model, "m", "", "model `FILE` (GGUF)")
	fs.StringVar(&m.model, "model", "", "same as -m")
	fs.IntVar(&m.threads, "t", 0, "CPU `threads` (default: one per physical core)")
	fs.IntVar(&m.threads, "threads", 0, "same as -t")
	fs.IntVar(&m.ctx, "c", 0, "context length in tokens (default: the model's)")
	fs.IntVar(&m.ctx, "ctx-size", 0, "same as -c")
	fs.IntVar(&m.batch, "b", 512, "prompt tokens per graph evaluation")
	fs.IntVar(&m.batch, "batch-size", 512, "same as -b")
	fs.IntVar(&m.ngl, "ngl", 0, "layers to offload to the GPU (a CUDA build offloads all or none: 99 for all)")
	fs.IntVar(&m.ngl, "n-gpu-layers", 0, "same as -ngl")
	fs.BoolVar(&m.q8act, "quantized-activations", false, "quantize activations to 8 bits for quantized weights (ggml's integer path) instead of float32")
	fs.Var(&m.mem, "mem-limit", "refuse a model and context needing more than `SIZE` (512M, 8G, ...; auto: the memory available; off)")
}

func (m *modelFlags) load(stderr io.Writer) (*llm.Model, error) {
	if m.threads < 0 || m.ctx < 0 || m.batch < 1 {
		return nil, fmt.Errorf("-t, -c must be >= 0 and -b >= 1")
	}
	var be graph.Backend
	if m.ngl != 0 {
		var dev string
		var err error
		be, dev, err = gpuBackend(m.model, m.ngl)
		switch {
		case noGPUBuild(err):
			// llama-cli on a CPU build warns and runs on the CPU; so does gorun.
			fmt.Fprintf(stderr, "warning: %v; running on the CPU\n", err)
		case err != nil:
			return nil, err
		default:
			fmt.Fprintf(stderr, "gpu: %s\n", dev)
		}
	}
	md, err := llm.Load(m.model, llm.Options{Threads: m.threads, ContextLength: m.ctx, BatchSize: m.batch, QuantizedActivations: m.q8act, MemoryLimit: int64(m.mem), Backend: be})
	if err != nil && be != nil {
		be.Close()
	}
	return md, err
}

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

// noGPUBuild reports whether err is gpuBackend's answer in a build without GPU support
// (gpu_nocuda.go), after which the commands warn and run on the CPU as llama.cpp's do.
func noGPUBuild(err error) bool {
	return err != nil && strings.Contains(err.Error(), "built without GPU support")
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
	fs.Bool("no-mmap", false, "accepted for llama-cli's command lines; no effect (gorun reads the model as it always does)")
	fs.BoolVar(&f.version, "version", false, "print the version and exit")
	fs.BoolVar(&f.interactive, "i", false, "interactive mode: after each answer (end of text, -n tokens, a reverse prompt, Ctrl-C) the user types the next input")
	fs.BoolVar(&f.interactive, "interactive", false, "same as -i")
	fs.BoolVar(&f.first, "if", false, "interactive mode, the user first: the prompt is read, then the user types")
	fs.BoolVar(&f.first, "interactive-first", false, "same as -if")
	fs.BoolVar(&f.cnv, "cnv", false, "conversation mode: interactive, each input a 'User:' line and each answer an 'Assistant:' line (GPT-2 has no chat template); -p is the first message")
	fs.BoolVar(&f.cnv, "conversation", false, "same as -cnv")
	fs.BoolVar(&f.noCnv, "no-cnv", false, "no conversation mode (the default: GPT-2 has no chat template)")
	fs.BoolVar(&f.noCnv, "no-conversation", false, "same as -no-cnv")
	fs.StringVar(&f.system, "sys", "", "conversation mode: a system `PROMPT`, the conversation's first paragraph")
	fs.StringVar(&f.system, "system-prompt", "", "same as -sys")
	fs.StringVar(&f.inPrefix, "in-prefix", "", "interactive mode: `TEXT` before each input (shown when the user is asked)")
	fs.StringVar(&f.inSuffix, "in-suffix", "", "interactive mode: `TEXT` after each input (shown after it)")
	fs.IntVar(&f.keep, "keep", 0, "tokens at the start of the prompt a context shift keeps (-1: all of the initial prompt)")
	fs.BoolVar(&f.ctxShift, "context-shift", false, "when the context fills, drop the older half of what follows --keep and go on (the default in interactive mode)")
	fs.BoolVar(&f.noCtxShift, "no-context-shift", false, "stop when the context fills (the default without -i)")
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

// generateOptions are the sampling options in llm's terms, where a zero option means its
// default.
func (f *runFlags) generateOptions(seed uint64) llm.GenerateOptions {
	opts := llm.GenerateOptions{IgnoreEOS: f.ignoreEOS, Sample: llm.SampleOptions{
		Temperature: float32(f.temp), TopK: f.topK, TopP: float32(f.topP), MinP: float32(f.minP),
		RepeatPenalty: float32(f.rep), RepeatLastN: f.repN, Seed: seed,
		// llama.cpp's penalties: over the last --repeat-last-n tokens, prompt included.
		FrequencyPenalty: float32(f.freq), PresencePenalty: float32(f.pres), LogitBias: f.bias,
	}}
	if f.topK == 0 {
		opts.Sample.TopK = llm.NoTopK
	}
	if f.minP == 0 {
		opts.Sample.MinP = llm.NoMinP
	}
	switch {
	case f.repN == 0: // no window: no penalties
		opts.Sample.RepeatPenalty, opts.Sample.FrequencyPenalty, opts.Sample.PresencePenalty = 1, 0, 0
	case f.repN < 0:
		opts.Sample.RepeatLastN = llm.WholeContext
	}
	return opts
}

// resolveSeed returns --seed, or a random seed (printed when sampling draws from it).
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
	if err := parseModelFlags(fs, args, &f.mf.model, stderr); err != nil {
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
	seed := f.resolveSeed(stderr)
	m, err := f.mf.load(stderr)
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
	g := &generator{m: m, sess: sess, opts: f.generateOptions(seed), shift: f.shifting(), keep: f.keep}
	if f.interactiveMode() {
		return runInteractive(g, &f, text, os.Stdin, stdout, stderr)
	}
	if err := checkPromptFits(m, sess, text); err != nil {
		return err
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
	var st llm.Stats
	var err error
	if f.n == 0 { // llama-cli's -n 0: nothing generated (llm's MaxTokens 0 means its default)
		st.Stop = llm.StopLength
	} else {
		st, err = g.run(ctx, text, f.n, emit)
	}
	out.Flush()
	fmt.Fprintln(stderr)
	if st.Stop == llm.StopContextFull {
		fmt.Fprintf(stderr, "gorun: stopped: the context of %d tokens is full\n", g.sess.ContextLength())
	}
	printStats(stderr, g, st, f.n, "")
	return err
}

// stopOnError is the stop reason of a failed evaluation: cancelled when ctx was.
func stopOnError(ctx context.Context) llm.StopReason {
	if ctx.Err() != nil {
		return llm.StopCancelled
	}
	return llm.StopError
}

// printStats prints the end-of-run statistics: llama.cpp's timings, the context shifts, and
// why generation stopped (ended: how an interactive session ended, or "").
func printStats(w io.Writer, g *generator, st llm.Stats, nPredict int, ended string) {
	m := g.m
	perTok := func(n int, secs float64) (float64, float64) {
		if n == 0 || secs == 0 {
			return 0, 0
		}
		return 1e3 * secs / float64(n), float64(n) / secs
	}
	fmt.Fprintf(w, "load time        = %10.2f ms\n", float64(m.LoadTime().Microseconds())/1e3)
	ms, tps := perTok(st.PromptTokens, st.PromptTime.Seconds())
	fmt.Fprintf(w, "prompt eval time = %10.2f ms / %5d tokens (%8.2f ms per token, %8.2f tokens per second)\n",
		float64(st.PromptTime.Microseconds())/1e3, st.PromptTokens, ms, tps)
	ms, tps = perTok(st.Tokens, st.GenTime.Seconds())
	fmt.Fprintf(w, "eval time        = %10.2f ms / %5d tokens (%8.2f ms per token, %8.2f tokens per second)\n",
		float64(st.GenTime.Microseconds())/1e3, st.Tokens, ms, tps)
	if g.shifts > 0 {
		fmt.Fprintf(w, "context shifts   = %d (%d tokens evaluated again in %.2f ms; --keep %d)\n",
			g.shifts, g.shiftTokens, float64(g.shiftTime.Microseconds())/1e3, g.keep)
	}
	fmt.Fprintf(w, "threads          = %d, backend = %s\n", m.Threads(), m.Backend().Name())
	reason := stopReason(st, nPredict, g.sess.ContextLength())
	if ended != "" {
		reason = ended + "; last answer: " + reason
	}
	fmt.Fprintf(w, "stop reason      = %s\n", reason)
}

// stopReason names why generation stopped, in llama.cpp's terms where it has them.
func stopReason(st llm.Stats, nPredict, nctx int) string {
	switch st.Stop {
	case llm.StopEOS:
		return "eos (end of text)"
	case llm.StopLength:
		return fmt.Sprintf("n_predict (-n %d tokens)", nPredict)
	case llm.StopString:
		return fmt.Sprintf("reverse prompt %q", st.StopString)
	case llm.StopContextFull:
		return fmt.Sprintf("context full (%d tokens)", nctx)
	case llm.StopCancelled:
		return "interrupted"
	case "":
		return "none (nothing generated)"
	}
	return string(st.Stop)
}
