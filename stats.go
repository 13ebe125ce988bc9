package main

import (
	"context"
	"fmt"
	"io"

	"github.com/gorun-dev/gorun/llm"
)

// The end-of-run report the run command and interactive mode print.

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
	case llm.StopGrammar:
		return "grammar (the text is complete)"
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
