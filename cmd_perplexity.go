package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"time"

	"github.com/gorun-dev/gorun/llm"
)

func cmdPerplexity(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("perplexity", "gorun perplexity -m MODEL.gguf -f TEXT [-c 512] [--score-all]: measure perplexity", stderr)
	var mf modelFlags
	mf.register(fs)
	file := fs.String("f", "", "text `FILE` to score")
	fs.StringVar(file, "file", "", "same as -f")
	scoreAll := fs.Bool("score-all", false, "score every position after the first of each chunk (default: the second half, as llama-perplexity)")
	if err := parseModelFlags(fs, args, &mf.model, stderr); err != nil {
		return err
	}
	if *file == "" {
		return usageError(fs, stderr, "no text: use -f FILE")
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
	chunks := len(tokens) / mf.ctx
	fmt.Fprintf(stderr, "perplexity: %d tokens, %d chunks of %d, scoring %s\n", len(tokens), chunks, mf.ctx,
		map[bool]string{false: "the second half of each chunk", true: "every position after the first"}[*scoreAll])
	s, err := m.NewSession()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	res, err := s.Perplexity(ctx, tokens, llm.PerplexityOptions{Chunk: mf.ctx, ScoreAll: *scoreAll,
		Progress: func(done, total int, r llm.PerplexityResult) {
			fmt.Fprintf(stdout, "[%d]%.4f,", done, r.PPL)
			if f, ok := stdout.(*os.File); ok {
				f.Sync()
			}
			if done == 1 {
				eta := time.Since(start) * time.Duration(total-1)
				fmt.Fprintf(stderr, "perplexity: %.2f s per chunk, about %.0f s left\n", time.Since(start).Seconds(), eta.Seconds())
			}
		}})
	fmt.Fprintln(stdout)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "Final estimate: PPL = %.4f +/- %.5f\n", res.PPL, res.StdErr)
	fmt.Fprintf(stderr, "perplexity: %d tokens scored in %.2f s\n", res.Scored, time.Since(start).Seconds())
	return nil
}
