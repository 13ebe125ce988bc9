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
	"time"

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

func cmdRun(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("run", "gorun -m MODEL.gguf -p PROMPT [options]: generate text after a prompt", stderr)
	var mf modelFlags
	mf.register(fs)
	def := llm.DefaultSampleOptions()
	prompt := fs.String("p", "", "`prompt` text (escapes such as \\n are processed unless --no-escape)")
	fs.StringVar(prompt, "prompt", "", "same as -p")
	promptFile := fs.String("f", "", "read the prompt from `FILE` (one trailing newline is dropped)")
	fs.StringVar(promptFile, "file", "", "same as -f")
	escape := fs.Bool("e", true, "process escapes (\\n, \\t, \\', \\\", \\\\, \\xNN) in -p (the default)")
	fs.BoolVar(escape, "escape", true, "same as -e")
	noEscape := fs.Bool("no-escape", false, "take -p literally")
	n := fs.Int("n", -1, "tokens to generate (-1: until end of text or a full context; 0: none)")
	fs.IntVar(n, "n-predict", -1, "same as -n")
	fs.IntVar(n, "predict", -1, "same as -n")
	temp := fs.Float64("temp", def32(def.Temperature), "temperature (0: greedy)")
	topK := fs.Int("top-k", def.TopK, "top-k sampling (0: off)")
	topP := fs.Float64("top-p", def32(def.TopP), "top-p sampling (1: off)")
	minP := fs.Float64("min-p", def32(def.MinP), "min-p sampling (0: off)")
	rep := fs.Float64("repeat-penalty", def32(def.RepeatPenalty), "penalty for repeating recent tokens (1: off)")
	repN := fs.Int("repeat-last-n", def.RepeatLastN, "recent tokens the repeat, frequency and presence penalties look at (0: off, -1: the context)")
	freq := fs.Float64("frequency-penalty", 0, "subtract this times a token's count among the recent tokens from its logit (0: off)")
	pres := fs.Float64("presence-penalty", 0, "subtract this from the logit of a token among the recent tokens (0: off)")
	var bias logitBias
	fs.Var(&bias, "l", "`TOKEN(+|-)BIAS`: add BIAS to the token's logit (15043+1, 50256-inf); repeatable")
	fs.Var(&bias, "logit-bias", "same as -l")
	var stops stringList
	fs.Var(&stops, "r", "stop when the text `PROMPT` is generated (llama-cli's reverse prompt); repeatable")
	fs.Var(&stops, "reverse-prompt", "same as -r")
	seed := fs.Int64("seed", -1, "random seed (-1: a random one, printed to stderr)")
	fs.Int64Var(seed, "s", -1, "same as --seed")
	noPrompt := fs.Bool("no-display-prompt", false, "do not echo the prompt")
	ignoreEOS := fs.Bool("ignore-eos", false, "keep generating past the end-of-text token")
	fs.Bool("no-mmap", false, "accepted for llama-cli's command lines; no effect (gorun reads the model as it always does)")
	interactive := fs.Bool("i", false, "interactive mode: not implemented (refused)")
	fs.BoolVar(interactive, "interactive", false, "same as -i")
	fs.Bool("version", false, "print the version and exit")
	if err := parseModelFlags(fs, args, &mf.model, stderr); err != nil {
		if fs.Lookup("version").Value.String() == "true" && !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(stdout, versionLine())
			return nil
		}
		return err
	}
	if fs.Lookup("version").Value.String() == "true" {
		fmt.Fprintln(stdout, versionLine())
		return nil
	}
	if *interactive {
		return usageError(fs, stderr, "-i (interactive mode) is not implemented: give the text with -p or -f, or use 'gorun serve'")
	}
	if *escape && !*noEscape {
		*prompt = processEscapes(*prompt)
	}
	text, err := promptText(fs, stderr, *prompt, *promptFile)
	if err != nil {
		return err
	}
	for _, c := range []struct {
		bad  bool
		name string
		want string
	}{
		{*temp < 0, "--temp", "must be >= 0"},
		{*topK < 0, "--top-k", "must be >= 0"},
		{*topP <= 0 || *topP > 1, "--top-p", "must be in (0, 1]"},
		{*minP < 0 || *minP > 1, "--min-p", "must be in [0, 1]"},
		{*rep <= 0, "--repeat-penalty", "must be > 0"},
		{*freq < -2 || *freq > 2, "--frequency-penalty", "must be in [-2, 2]"},
		{*pres < -2 || *pres > 2, "--presence-penalty", "must be in [-2, 2]"},
	} {
		if c.bad {
			return usageError(fs, stderr, "%s %s", c.name, c.want)
		}
	}
	for _, r := range stops {
		if r == "" {
			return usageError(fs, stderr, "-r/--reverse-prompt must not be empty")
		}
	}
	s := uint64(*seed)
	if *seed < 0 {
		s = rand.Uint64() >> 1
		if *temp > 0 { // greedy decoding draws no random numbers
			fmt.Fprintf(stderr, "seed = %d\n", s)
		}
	}
	m, err := mf.load(stderr)
	if err != nil {
		return err
	}
	defer m.Close()
	for id := range bias {
		if int(id) >= m.Tokenizer().VocabSize() {
			return usageError(fs, stderr, "--logit-bias: token %d is not in the vocabulary of %d tokens", id, m.Tokenizer().VocabSize())
		}
	}
	sess, err := m.NewSession()
	if err != nil {
		return err
	}
	if err := checkPromptFits(m, sess, text); err != nil {
		return err
	}
	out := bufio.NewWriter(stdout)
	if !*noPrompt {
		out.WriteString(text)
		out.Flush()
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	opts := llm.GenerateOptions{MaxTokens: *n, IgnoreEOS: *ignoreEOS, Stop: stops, Sample: llm.SampleOptions{
		Temperature: float32(*temp), TopK: *topK, TopP: float32(*topP), MinP: float32(*minP),
		RepeatPenalty: float32(*rep), RepeatLastN: *repN, Seed: s,
	}}
	// llama.cpp's flag values in llm's terms, where a zero option means its default.
	if *topK == 0 {
		opts.Sample.TopK = llm.NoTopK
	}
	if *minP == 0 {
		opts.Sample.MinP = llm.NoMinP
	}
	switch {
	case *repN == 0:
		opts.Sample.RepeatPenalty = 1 // no window: no penalty
	case *repN < 0:
		opts.Sample.RepeatLastN = llm.WholeContext
	}
	if *n < 0 {
		opts.MaxTokens = llm.NoLimit
	}
	emit := func(piece string) error {
		out.WriteString(piece)
		return out.Flush() // stream: the user sees each piece as it is made
	}
	var st llm.Stats
	adj := penalties{frequency: float32(*freq), presence: float32(*pres), lastN: *repN, bias: bias}
	switch {
	case *n == 0: // llama-cli's -n 0: nothing generated (llm's MaxTokens 0 means its default)
		st.Stop = llm.StopLength
	case adj.active():
		st, err = generatePenalized(ctx, m, sess, text, opts, adj, emit)
	default:
		st, err = sess.Generate(ctx, text, opts, emit)
	}
	out.Flush()
	fmt.Fprintln(stderr)
	if st.Stop == llm.StopContextFull {
		fmt.Fprintf(stderr, "gorun: stopped: the context of %d tokens is full\n", sess.ContextLength())
	}
	printTimings(stderr, m, st)
	return err
}

// penalties are what the library's sampler lacks: llama.cpp's frequency and presence penalties
// (over the last lastN tokens of the context, prompt included, as llama-cli counts them) and
// the logit bias.
type penalties struct {
	frequency, presence float32
	lastN               int // 0: off; < 0: the whole context
	bias                logitBias
}

func (p penalties) active() bool {
	return len(p.bias) > 0 || (p.lastN != 0 && (p.frequency != 0 || p.presence != 0))
}

// apply writes the adjusted logits to dst.
func (p penalties) apply(dst, logits []float32, tokens []int32) {
	copy(dst, logits)
	for id, b := range p.bias {
		dst[id] += b // -inf bans the token
	}
	if p.lastN == 0 || (p.frequency == 0 && p.presence == 0) {
		return
	}
	recent := tokens
	if p.lastN > 0 && len(recent) > p.lastN {
		recent = recent[len(recent)-p.lastN:]
	}
	counts := map[int32]int{}
	for _, t := range recent {
		counts[t]++
	}
	for id, c := range counts {
		dst[id] -= p.frequency*float32(c) + p.presence
	}
}

// generatePenalized is the library's generation with the penalties applied to the logits
// before its sampler sees them: same sampler and draws per position, same decoder, stop
// strings held back until they cannot begin.
func generatePenalized(ctx context.Context, m *llm.Model, sess *llm.Session, prompt string, opts llm.GenerateOptions, p penalties, emit func(string) error) (llm.Stats, error) {
	var st llm.Stats
	tok := m.Tokenizer()
	start := time.Now()
	tokens := tok.Encode(prompt)
	if len(tokens) == 0 {
		tokens = []int32{tok.EOS()} // as the library: an empty prompt starts a new text
	}
	st.PromptTokens = len(tokens)
	logits, err := sess.EvalContext(ctx, tokens)
	st.PromptTime = time.Since(start)
	if err != nil {
		st.Stop = llm.StopError
		return st, err
	}
	start = time.Now()
	sampler := llm.NewSampler(opts.Sample, len(logits))
	st.Seed = sampler.Seed()
	work := make([]float32, len(logits))
	dec := tok.NewDecoder()
	var held string // generated text that might begin a stop string
	finish := func(reason llm.StopReason) error {
		st.Stop, st.GenTime = reason, time.Since(start)
		held += dec.Flush()
		if i, s := findStop(held, opts.Stop); i >= 0 {
			held, st.Stop, st.StopString = held[:i], llm.StopString, s
		}
		if held == "" {
			return nil
		}
		return emit(held)
	}
	for {
		if err := ctx.Err(); err != nil {
			st.Stop, st.GenTime = llm.StopCancelled, time.Since(start)
			return st, err
		}
		if opts.MaxTokens > 0 && st.Tokens >= opts.MaxTokens {
			return st, finish(llm.StopLength)
		}
		if sess.Pos() >= sess.ContextLength() {
			return st, finish(llm.StopContextFull)
		}
		p.apply(work, logits, tokens)
		next := sampler.SampleAt(work, tokens, uint64(len(tokens)))
		if next == tok.EOS() && !opts.IgnoreEOS {
			return st, finish(llm.StopEOS)
		}
		tokens = append(tokens, next)
		st.Tokens++
		held += dec.Next(next)
		if i, s := findStop(held, opts.Stop); i >= 0 {
			st.Stop, st.StopString, st.GenTime = llm.StopString, s, time.Since(start)
			return st, emit(held[:i])
		}
		if k := len(held) - stopPrefix(held, opts.Stop); k > 0 {
			if err := emit(held[:k]); err != nil {
				st.Stop = llm.StopCaller
				return st, err
			}
			held = held[k:]
		}
		if logits, err = sess.EvalContext(ctx, []int32{next}); err != nil {
			st.Stop = llm.StopError
			if ctx.Err() != nil {
				st.Stop = llm.StopCancelled
			}
			st.GenTime = time.Since(start)
			return st, err
		}
	}
}

// findStop returns the index of the first stop string in t and the string, or -1.
func findStop(t string, stops []string) (int, string) {
	at, which := -1, ""
	for _, s := range stops {
		if i := strings.Index(t, s); s != "" && i >= 0 && (at < 0 || i < at) {
			at, which = i, s
		}
	}
	return at, which
}

// stopPrefix is the length of the longest end of t that begins a stop string (to hold back).
func stopPrefix(t string, stops []string) int {
	best := 0
	for _, s := range stops {
		for k := min(len(s)-1, len(t)); k > best; k-- {
			if strings.HasSuffix(t, s[:k]) {
				best = k
				break
			}
		}
	}
	return best
}

func printTimings(w io.Writer, m *llm.Model, st llm.Stats) {
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
	fmt.Fprintf(w, "threads          = %d, backend = %s\n", m.Threads(), m.Backend().Name())
}
