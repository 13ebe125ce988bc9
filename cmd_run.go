package main

import (
	"bufio"
	"context"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/signal"

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
		if be, dev, err = gpuBackend(m.model, m.ngl); err != nil {
			return nil, err
		}
		fmt.Fprintf(stderr, "gpu: %s\n", dev)
	}
	md, err := llm.Load(m.model, llm.Options{Threads: m.threads, ContextLength: m.ctx, BatchSize: m.batch, QuantizedActivations: m.q8act, MemoryLimit: int64(m.mem), Backend: be})
	if err != nil && be != nil {
		be.Close()
	}
	return md, err
}

func cmdRun(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("run", "gorun -m MODEL.gguf -p PROMPT [options]: generate text after a prompt", stderr)
	var mf modelFlags
	mf.register(fs)
	def := llm.DefaultSampleOptions()
	prompt := fs.String("p", "", "`prompt` text")
	fs.StringVar(prompt, "prompt", "", "same as -p")
	promptFile := fs.String("f", "", "read the prompt from `FILE`")
	n := fs.Int("n", 128, "tokens to generate (-1: until end of text or a full context)")
	fs.IntVar(n, "n-predict", 128, "same as -n")
	temp := fs.Float64("temp", float64(def.Temperature), "temperature (0: greedy)")
	topK := fs.Int("top-k", def.TopK, "top-k sampling (0: off)")
	topP := fs.Float64("top-p", float64(def.TopP), "top-p sampling (1: off)")
	minP := fs.Float64("min-p", float64(def.MinP), "min-p sampling (0: off)")
	rep := fs.Float64("repeat-penalty", float64(def.RepeatPenalty), "penalty for repeating recent tokens (1: off)")
	repN := fs.Int("repeat-last-n", def.RepeatLastN, "recent tokens the repeat penalty looks at")
	seed := fs.Int64("seed", -1, "random seed (-1: a random one, printed to stderr)")
	noPrompt := fs.Bool("no-display-prompt", false, "do not echo the prompt")
	ignoreEOS := fs.Bool("ignore-eos", false, "keep generating past the end-of-text token")
	if err := parseModelFlags(fs, args, &mf.model, stderr); err != nil {
		return err
	}
	text, err := promptText(fs, stderr, *prompt, *promptFile)
	if err != nil {
		return err
	}
	switch {
	case *temp < 0 || *topP <= 0 || *topP > 1 || *minP < 0 || *minP > 1 || *rep <= 0 || *topK < 0:
		return usageError(fs, stderr, "sampling options out of range")
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
	opts := llm.GenerateOptions{MaxTokens: *n, IgnoreEOS: *ignoreEOS, Sample: llm.SampleOptions{
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
	st, err := sess.Generate(ctx, text, opts, func(piece string) error {
		out.WriteString(piece)
		return out.Flush() // stream: the user sees each piece as it is made
	})
	out.Flush()
	fmt.Fprintln(stderr)
	if st.Stop == llm.StopContextFull {
		fmt.Fprintf(stderr, "gorun: stopped: the context of %d tokens is full\n", sess.ContextLength())
	}
	printTimings(stderr, m, st)
	return err
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
