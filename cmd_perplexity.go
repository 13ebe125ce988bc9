package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/gorun-dev/gorun/internal/osutil"
	"github.com/gorun-dev/gorun/llm"
)

const perplexitySynopsis = `gorun perplexity -m MODEL.gguf -f TEXT [-c 512] [--chunks N] [--score-all]: measure perplexity
gorun perplexity -m BASE.gguf -f TEXT --kl-divergence-base FILE: also save BASE's log-probabilities
gorun perplexity -m MODEL.gguf --kl-divergence-base FILE --kl-divergence: compare MODEL with BASE

As llama-perplexity: the text is cut into chunks of -c tokens, each evaluated from an empty
context, and the second half of each chunk is scored. --kl-divergence-base FILE saves the
base model's next-token distributions at the scored positions (llama-perplexity's file: 16-bit
log-probabilities, about 2 x vocabulary bytes per position; either tool reads the other's);
--kl-divergence then evaluates the same text with another model (a quantization of the base)
and reports llama-perplexity's statistics: both perplexities and their ratio, the mean KL
divergence with its uncertainty and its percentiles, how often both models' most likely token
agree, and the change of the next token's probability (delta p).`

func cmdPerplexity(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("perplexity", perplexitySynopsis, stderr)
	var mf modelFlags
	mf.register(fs)
	file := fs.String("f", "", "text `FILE` to score")
	fs.StringVar(file, "file", "", "same as -f")
	scoreAll := fs.Bool("score-all", false, "score every position after the first of each chunk (default: the second half, as llama-perplexity)")
	chunks := fs.Int("chunks", 0, "score at most `N` chunks (default: all)")
	klBase := fs.String("kl-divergence-base", "", "`FILE` of the base model's log-probabilities: written, or read with --kl-divergence (llama-perplexity's format)")
	klDiv := fs.Bool("kl-divergence", false, "compare with the --kl-divergence-base file's distributions (its text and chunks; no -f)")
	if err := parseModelFlags(fs, args, &mf.model, stderr); err != nil {
		return err
	}
	if *chunks < 0 {
		return usageError(fs, stderr, "--chunks %d: must be >= 0", *chunks)
	}
	if *klDiv {
		if *klBase == "" {
			return usageError(fs, stderr, "--kl-divergence needs --kl-divergence-base FILE (written by a run without --kl-divergence)")
		}
		if *scoreAll {
			return usageError(fs, stderr, "--kl-divergence compares the positions the base file stores; --score-all does not apply")
		}
		return klDivergence(mf, *klBase, *chunks, stdout, stderr)
	}
	if *file == "" {
		return usageError(fs, stderr, "no text: use -f FILE")
	}
	if *klBase != "" && *scoreAll {
		return usageError(fs, stderr, "--kl-divergence-base stores the second half of each chunk; --score-all does not mix with it")
	}
	if mf.ctx == 0 {
		mf.ctx = 512
	}
	if mf.batch < mf.ctx {
		mf.batch = mf.ctx // one chunk per graph evaluation
	}
	text, err := readInput("-f", *file, maxTextBytes)
	if err != nil {
		return err
	}
	m, err := mf.load(stderr)
	if err != nil {
		return err
	}
	defer m.Close()
	tokens := m.Tokenize(string(text), true) // llama-perplexity tokenizes with add_special
	n := len(tokens) / mf.ctx
	if *chunks > 0 {
		n = min(n, *chunks)
	}
	fmt.Fprintf(stderr, "perplexity: %d tokens, %d chunks of %d, scoring %s\n", len(tokens), n, mf.ctx,
		map[bool]string{false: "the second half of each chunk", true: "every position after the first"}[*scoreAll])
	s, err := m.NewSession()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var base *atomicFile
	if *klBase != "" {
		if base, err = createAtomic(*klBase); err != nil {
			return err
		}
		defer base.abort()
		defer removeOnSignal(stderr, "perplexity", base.tmp)()
		fmt.Fprintf(stderr, "perplexity: saving the log-probabilities to %s\n", *klBase)
	}
	start := time.Now()
	opts := llm.PerplexityOptions{Chunk: mf.ctx, ScoreAll: *scoreAll, MaxChunks: *chunks}
	if base != nil {
		opts.LogProbs = base.w
	}
	opts.Progress = func(done, total int, r llm.PerplexityResult) {
		fmt.Fprintf(stdout, "[%d]%.4f,", done, r.PPL)
		if f, ok := stdout.(*os.File); ok {
			f.Sync()
		}
		reportETA(stderr, start, done, total)
	}
	res, err := s.Perplexity(ctx, tokens, opts)
	fmt.Fprintln(stdout)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Final estimate: PPL = %.4f +/- %.5f\n", res.PPL, res.StdErr)
	if base != nil {
		if err := base.commit(); err != nil {
			return err
		}
	}
	fmt.Fprintf(stderr, "perplexity: %d tokens scored in %.2f s\n", res.Scored, time.Since(start).Seconds())
	return nil
}

// reportETA says after the first chunk how long one took and how long the rest will take.
func reportETA(stderr io.Writer, start time.Time, done, total int) {
	if done == 1 {
		eta := time.Since(start) * time.Duration(total-1)
		fmt.Fprintf(stderr, "perplexity: %.2f s per chunk, about %.0f s left\n", time.Since(start).Seconds(), eta.Seconds())
	}
}

// klDivergence runs --kl-divergence: the base file's text with this model, compared with the
// base's distributions; the context is the base's chunk unless -c says more.
func klDivergence(mf modelFlags, path string, chunks int, stdout, stderr io.Writer) error {
	f, err := osutil.OpenRegular(path)
	if err != nil {
		return fmt.Errorf("--kl-divergence-base: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return err
	}
	base, err := llm.ReadLogProbsBase(bufio.NewReaderSize(f, 1<<20), st.Size())
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	if mf.ctx == 0 {
		mf.ctx = base.NCtx
	}
	mf.batch = max(mf.batch, base.NCtx) // one chunk per graph evaluation
	m, err := mf.load(stderr)
	if err != nil {
		return err
	}
	defer m.Close()
	s, err := m.NewSession()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	n := base.NChunk
	if chunks > 0 {
		n = min(n, chunks)
	}
	fmt.Fprintf(stderr, "kl-divergence: %s: %d chunks of %d tokens, vocabulary %d; comparing %d\n", path, base.NChunk, base.NCtx, base.NVocab, n)
	fmt.Fprintln(stdout, "chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              Δp RMS            Same top p")
	start := time.Now()
	k, err := s.KLDivergence(ctx, base, llm.KLDivergenceOptions{MaxChunks: chunks, Progress: func(done, total int, k *llm.KLDivergenceStats) {
		ppl, r, kld, rms, top := k.PPL(), k.LogPPLRatio(), k.KLD(), k.PDiffRMS(), k.SameTop()
		fmt.Fprintf(stdout, "%4d    %9.4f ± %9.4f    %10.5f ± %10.5f    %10.5f ± %10.5f    %6.3f ± %6.3f %%    %6.3f ± %6.3f %%\n",
			done, ppl.Value, ppl.Err, r.Value, r.Err, kld.Value, kld.Err, 100*rms.Value, 100*rms.Err, 100*top.Value, 100*top.Err)
		reportETA(stderr, start, done, total)
	}})
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout)
	printKLDivergence(stdout, k)
	return nil
}

// printKLDivergence writes llama-perplexity's three report blocks (with the 95% and 90%
// percentiles its KLD block meant to print: it prints the 99% line twice).
func printKLDivergence(w io.Writer, k *llm.KLDivergenceStats) {
	if k.Count() < 100 {
		fmt.Fprintf(w, "only %d positions compared: too few for statistics (llama-perplexity wants 100)\n", k.Count())
		return
	}
	ppl, pb, r := k.PPL(), k.BasePPL(), k.LogPPLRatio()
	fmt.Fprintln(w, "====== Perplexity statistics ======")
	fmt.Fprintf(w, "Mean PPL(Q)                   : %10.6f ± %10.6f\n", ppl.Value, ppl.Err)
	fmt.Fprintf(w, "Mean PPL(base)                : %10.6f ± %10.6f\n", pb.Value, pb.Err)
	fmt.Fprintf(w, "Cor(ln(PPL(Q)), ln(PPL(base))): %6.2f%%\n", 100*k.LogPPLCorrelation())
	fmt.Fprintf(w, "Mean ln(PPL(Q)/PPL(base))     : %10.6f ± %10.6f\n", r.Value, r.Err)
	ratio, diff := k.PPLRatio(), k.PPLDiff()
	fmt.Fprintf(w, "Mean PPL(Q)/PPL(base)         : %10.6f ± %10.6f\n", ratio.Value, ratio.Err)
	fmt.Fprintf(w, "Mean PPL(Q)-PPL(base)         : %10.6f ± %10.6f\n", diff.Value, diff.Err)
	fmt.Fprintln(w)
	fmt.Fprintln(w, "====== KL divergence statistics ======")
	kld := k.KLD()
	fmt.Fprintf(w, "Mean    KLD: %10.6f ± %10.6f\n", kld.Value, kld.Err)
	for _, p := range []struct {
		name string
		f    float64
	}{{"Maximum", 1}, {"99.9%  ", 0.999}, {"99.0%  ", 0.99}, {"95.0%  ", 0.95}, {"90.0%  ", 0.9}, {"Median ", 0.5},
		{"10.0%  ", 0.1}, {" 5.0%  ", 0.05}, {" 1.0%  ", 0.01}, {"Minimum", 0}} {
		fmt.Fprintf(w, "%s KLD: %10.6f\n", p.name, k.KLDPercentile(p.f))
	}
	fmt.Fprintln(w)
	fmt.Fprintln(w, "====== Token probability statistics ======")
	pd := k.PDiff()
	fmt.Fprintf(w, "Mean    Δp: %6.3f ± %5.3f %%\n", 100*pd.Value, 100*pd.Err)
	for _, p := range []struct {
		name string
		f    float64
	}{{"Maximum", 1}, {"99.9%  ", 0.999}, {"99.0%  ", 0.99}, {"95.0%  ", 0.95}, {"90.0%  ", 0.9}, {"75.0%  ", 0.75}, {"Median ", 0.5},
		{"25.0%  ", 0.25}, {"10.0%  ", 0.1}, {" 5.0%  ", 0.05}, {" 1.0%  ", 0.01}, {" 0.1%  ", 0.001}, {"Minimum", 0}} {
		fmt.Fprintf(w, "%s Δp: %6.3f%%\n", p.name, 100*k.PDiffPercentile(p.f))
	}
	rms, top := k.PDiffRMS(), k.SameTop()
	fmt.Fprintf(w, "RMS Δp    : %6.3f ± %5.3f %%\n", 100*rms.Value, 100*rms.Err)
	fmt.Fprintf(w, "Same top p: %6.3f ± %5.3f %%\n", 100*top.Value, 100*top.Err)
}
