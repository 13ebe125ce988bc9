package main

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gorun-dev/gorun/llm"
)

// generator generates the run command's text in one session with the library's generation
// loop and sampler chain. When shifting is on, a full context is shifted as llama.cpp does
// (--keep, n_keep/n_discard) and generation goes on.
type generator struct {
	m      *llm.Model
	sess   *llm.Session
	opts   llm.GenerateOptions // sampling, IgnoreEOS, stop strings that end the text unseen
	tokens bool                // pass every token to emit (GenerateTokens), not only text
	shift  bool                // shift a full context instead of stopping there
	// onlyBefore shifts only to make room for a text, never during generation (conversation
	// mode: an answer that fills the context stops there, with a word to the user, instead of
	// rambling through shift after shift when the model never ends its turn).
	onlyBefore bool
	keep       int // tokens at the start of the context that a shift keeps

	// trackDrops keeps the tokens context shifts drop (dropped), in order: a conversation
	// with a chat template compares the whole conversation's text with its rendering.
	trackDrops bool
	dropped    []int32
	// verbose, when set, gets each text put into the context and its token count
	// (--verbose-prompt).
	verbose io.Writer

	shifts      int           // context shifts done
	shiftTokens int           // tokens they evaluated again
	shiftTime   time.Duration // and the time that took
}

// run appends text to the context and generates up to maxTokens tokens after it (< 0: no
// limit), shifting the context each time it fills when shifting is on. The statistics add up
// the calls between shifts. Text that does not fit even after shifting is refused
// (llm.ErrContextFull), before anything is evaluated.
//
// Across a shift, a character cut between tokens is shown as U+FFFD and a hidden stop string
// (opts.Stop) that spans the shift is not found: each call between shifts is a library call.
func (g *generator) run(ctx context.Context, text string, maxTokens int, emit func(llm.Piece) error) (llm.Stats, error) {
	if err := g.makeRoom(text); err != nil {
		return llm.Stats{Stop: llm.StopContextFull}, err
	}
	g.showPrompt(text)
	var total llm.Stats
	for {
		st, err := g.once(ctx, text, maxTokens, emit)
		total = addStats(total, st)
		if err != nil || st.Stop != llm.StopContextFull || !g.shift || g.onlyBefore {
			return total, err
		}
		if maxTokens > 0 {
			if maxTokens -= st.Tokens; maxTokens <= 0 {
				total.Stop = llm.StopLength
				return total, nil
			}
		}
		if ok, err := g.shiftContext(); !ok || err != nil {
			return total, err // nothing to drop (--keep holds the context): it stays full
		}
		text = ""
	}
}

// feed appends text to the context without generating (-if's prompt, -n 0 in interactive
// mode), shifting first if it needs room. Nothing generated: no stop reason.
func (g *generator) feed(ctx context.Context, text string) (llm.Stats, error) {
	var st llm.Stats
	if err := g.makeRoom(text); err != nil {
		return st, err
	}
	g.showPrompt(text)
	ids := g.m.Tokenize(text, g.sess.Pos() == 0)
	if len(ids) == 0 {
		return st, nil
	}
	start := time.Now()
	_, err := g.sess.EvalContext(ctx, ids)
	st.PromptTokens, st.PromptTime = len(ids), time.Since(start)
	if err != nil {
		st.Stop = stopOnError(ctx)
	}
	return st, err
}

// showPrompt prints, with --verbose-prompt, the text about to go into the context (quoted, so
// that special tokens and white space show), its tokens and the context's tokens before it.
func (g *generator) showPrompt(text string) {
	if g.verbose == nil {
		return
	}
	ids := g.m.Tokenize(text, g.sess.Pos() == 0)
	fmt.Fprintf(g.verbose, "prompt: %q\nnumber of tokens in prompt = %d, after %d in the context\n", text, len(ids), g.sess.Pos())
}

// once is one generation call, stopping at a full context.
func (g *generator) once(ctx context.Context, text string, maxTokens int, emit func(llm.Piece) error) (llm.Stats, error) {
	opts := g.opts
	opts.MaxTokens = maxTokens
	if maxTokens < 0 {
		opts.MaxTokens = llm.NoLimit
	}
	if g.tokens {
		return g.sess.GenerateTokens(ctx, text, opts, emit)
	}
	// Text only: no per-token log-probabilities to compute.
	return g.sess.Generate(ctx, text, opts, func(s string) error { return emit(llm.Piece{Text: s, Token: -1}) })
}

// makeRoom shifts the context until text and one generated token fit, as llama.cpp shifts
// before evaluating what does not fit. Without shifting, or when shifting cannot drop enough,
// the text is refused as the library refuses a prompt too long.
func (g *generator) makeRoom(text string) error {
	n, size := len(g.m.Tokenize(text, g.sess.Pos() == 0)), g.sess.ContextLength()
	for g.shift && g.sess.Pos()+n >= size {
		ok, err := g.shiftContext()
		if err != nil {
			return err
		}
		if !ok {
			break
		}
	}
	if g.sess.Pos()+n >= size {
		return fmt.Errorf("%w: the input has %d tokens, %d of the context's %d are in use (--keep %d), and at least one generated token needs room",
			llm.ErrContextFull, n, g.sess.Pos(), size, g.keep)
	}
	return nil
}

// shiftContext drops the older half of the tokens after the first g.keep, as llama.cpp's
// context shift does (n_discard = (n_past - n_keep) / 2), and reports whether it dropped any.
//
// llama.cpp moves the remaining keys in place: RoPE positions shift by rotating the keys.
// GPT-2 cannot: its positions are learned embeddings added to the input, so every layer's keys
// and values depend on the position, and the tokens that move must be evaluated again at their
// new positions. The first g.keep tokens do not move: Rewind keeps their cache rows, and only
// the newer half is evaluated again (one batched evaluation of at most half a context).
func (g *generator) shiftContext() (bool, error) {
	toks := g.sess.Tokens()
	keep := min(g.keep, len(toks))
	discard := (len(toks) - keep) / 2
	if discard == 0 {
		return false, nil
	}
	start := time.Now()
	if err := g.sess.Rewind(keep); err != nil {
		return false, err
	}
	// Not cancellable: stopping halfway would lose the newer half of the context. It takes
	// at most one prompt evaluation of half a context.
	if g.trackDrops {
		g.dropped = append(g.dropped, toks[keep:keep+discard]...)
	}
	moved := toks[keep+discard:]
	if _, err := g.sess.EvalContext(context.Background(), moved); err != nil {
		return false, err
	}
	g.shifts++
	g.shiftTokens += len(moved)
	g.shiftTime += time.Since(start)
	return true, nil
}

// dropHidden makes the context end with the text the user saw. The library keeps the tokens
// of a hidden stop string (and of a token it cuts) in the context, but a conversation goes on
// from the answer as shown. generated is the answer's tokens' bytes, shown the text emitted.
// It drops the answer's last tokens until none holds hidden text, and returns the shown text
// they held, for the next turn to append again.
func (g *generator) dropHidden(generated, shown string) (string, error) {
	if !strings.HasPrefix(generated, shown) {
		return "", nil // replacement characters were shown: leave the context as it is
	}
	hidden := len(generated) - len(shown)
	toks := g.sess.Tokens()
	tok := g.m.Tokenizer()
	n, dropped := 0, 0
	for dropped < hidden && n < len(toks) {
		n++
		dropped += len(tok.TokenBytes(toks[len(toks)-n]))
	}
	if n == 0 {
		return "", nil
	}
	text := tok.Decode(toks[len(toks)-n:])
	if err := g.sess.Rewind(len(toks) - n); err != nil {
		return "", err
	}
	return text[:max(dropped-hidden, 0)], nil
}

// addStats adds b's counts and times to a; the stop reason is b's, the seed the first one.
func addStats(a, b llm.Stats) llm.Stats {
	a.PromptTokens += b.PromptTokens
	a.PromptTime += b.PromptTime
	a.Tokens += b.Tokens
	a.GenTime += b.GenTime
	a.Stop, a.StopString = b.Stop, b.StopString
	if a.Seed == 0 {
		a.Seed = b.Seed
	}
	return a
}
