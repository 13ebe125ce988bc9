package server

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"time"

	"github.com/gorun-dev/gorun/llm"
)

// statusClientGone marks a request whose client disconnected (nothing more is written).
const statusClientGone = 499

// acquire waits for a slot for a request (all its choices run in it), preferring the free slot
// whose context holds the longest prefix of prompt.
func (s *Server) acquire(ctx context.Context, prompt []int32) (*slot, *apiError) {
	sl, err := s.pool.acquire(ctx, prompt)
	if err != nil {
		return nil, ctxError(ctx, err)
	}
	return sl, nil
}

// promptLogprobsFunc gets the prompt tokens' log-probabilities (the first is NaN) and, when
// top alternatives are asked for, each position's most likely tokens (echo with logprobs).
type promptLogprobsFunc func(lps []float32, alts [][]llm.TokenLogProb)

// generate runs one generation in a slot: it reuses the longest prefix of the prompt that the
// slot's context holds, evaluates the rest and generates with the library's loop, passing
// every token to emit. onPrompt, when set, first gets the prompt's log-probabilities. ctx
// ending (the client gone) stops it before the next token or prompt batch.
func (s *Server) generate(ctx context.Context, sl *slot, prompt []int32, opts llm.GenerateOptions, onPrompt promptLogprobsFunc, emit func(llm.Piece) error) (llm.Stats, time.Duration, *apiError) {
	st, promptTime, e := s.generateIn(ctx, sl, prompt, opts, onPrompt, func(p llm.Piece) error {
		noteToken(ctx)
		return emit(p)
	})
	var text func() string
	if s.cfg.LogPrompts {
		text = func() string { return s.model.Tokenizer().Decode(prompt) }
	}
	noteGeneration(ctx, st, text)
	return st, promptTime, e
}

func (s *Server) generateIn(ctx context.Context, sl *slot, prompt []int32, opts llm.GenerateOptions, onPrompt promptLogprobsFunc, emit func(llm.Piece) error) (llm.Stats, time.Duration, *apiError) {
	var st llm.Stats
	st.PromptTokens = len(prompt)
	sess := sl.sess
	sl.cached.Store(0)
	if onPrompt != nil {
		if err := s.promptLogprobs(ctx, sess, prompt, opts.TopLogprobs, onPrompt); err != nil {
			return st, 0, ctxError(ctx, err)
		}
	}
	if opts.MaxTokens == 0 { // max_tokens 0: nothing to generate
		st.Stop = llm.StopLength
		return st, 0, nil
	}
	cached := sess.Tokens()
	keep := commonPrefix(cached, prompt)
	sess.SetPrefixCache(!sl.fresh) // cache_prompt false: no blocks of other slots either
	if sl.fresh {
		keep = 0
	}
	if keep == len(prompt) {
		keep-- // evaluate at least the last prompt token, for its logits
	}
	start := time.Now()
	if err := sess.Rewind(keep); err != nil {
		return st, 0, libError(err)
	}
	keep, err := s.admit(ctx, sl, keep, len(prompt), opts.MaxTokens)
	if err != nil {
		return st, 0, ctxError(ctx, err)
	}
	sl.cached.Store(int64(keep))
	_, err = sess.EvalContext(ctx, prompt[keep:])
	if err != nil {
		return st, 0, ctxError(ctx, err)
	}
	promptTime := time.Since(start)
	sl.npast.Store(int64(len(prompt)))
	counted := func(p llm.Piece) error {
		if p.Token >= 0 {
			sl.npast.Add(1)
		}
		return emit(p)
	}
	gst, err := sess.GenerateTokens(ctx, "", opts, counted)
	gst.PromptTokens = len(prompt)
	gst.PromptTime = promptTime
	s.metrics.record(len(prompt)-keep, keep, gst.Tokens, promptTime, gst.GenTime)
	if err != nil {
		return gst, promptTime, ctxError(ctx, err)
	}
	return gst, promptTime, nil
}

// ErrShutdown is the cause to cancel requests' base context with when the server stops: their
// streams then end with an error event saying so (a client's own disconnect ends them
// silently).
var ErrShutdown = errors.New("the server is shutting down")

// ctxError is libError, telling a shutdown from a client that left.
func ctxError(ctx context.Context, err error) *apiError {
	if ctx.Err() != nil && errors.Is(context.Cause(ctx), ErrShutdown) {
		return &apiError{Status: http.StatusServiceUnavailable, Message: ErrShutdown.Error(), Type: "server_error"}
	}
	return libError(err)
}

// errWrite marks a failure to write to the client (it is gone).
var errWrite = errors.New("writing to the client failed")

// libError maps the library's and the pool's errors to responses.
func libError(err error) *apiError {
	var ae *apiError
	switch {
	case errors.As(err, &ae):
		return ae
	case errors.Is(err, errBusy), errors.Is(err, llm.ErrKVFull):
		return &apiError{Status: http.StatusServiceUnavailable, Message: err.Error(), Type: "server_error", Code: "server_busy", RetryAfter: 1}
	case errors.Is(err, errWrite), errors.Is(err, llm.ErrCancelled), errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return &apiError{Status: statusClientGone, Message: "request cancelled", Type: "invalid_request_error"}
	case errors.Is(err, llm.ErrClosed):
		return &apiError{Status: http.StatusServiceUnavailable, Message: "the server is shutting down", Type: "server_error"}
	case errors.Is(err, llm.ErrContextFull):
		return &apiError{Status: http.StatusBadRequest, Message: err.Error(), Type: "invalid_request_error", Code: "context_length_exceeded"}
	case errors.Is(err, llm.ErrInvalidOption):
		return badRequest("", "%v", err)
	}
	return &apiError{Status: http.StatusInternalServerError, Message: fmt.Sprintf("generation failed: %v", err), Type: "server_error"}
}

// finishReason is OpenAI's name for why a choice ended.
func finishReason(st llm.Stats) string {
	switch st.Stop {
	case llm.StopEOS, llm.StopString, llm.StopGrammar:
		return "stop"
	}
	return "length"
}

// sse writes server-sent events.
type sse struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
}

func newSSE(w http.ResponseWriter) *sse {
	return &sse{w: w, rc: http.NewResponseController(w)}
}

func (e *sse) start() {
	if e.started {
		return
	}
	e.started = true
	h := e.w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("Connection", "keep-alive")
	h.Set("X-Accel-Buffering", "no")
	e.w.WriteHeader(http.StatusOK)
}

// send writes one "data: JSON" event and flushes it.
func (e *sse) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	return e.raw(b)
}

// writeTimeout bounds each write to a client: one that stops reading loses its stream (and
// frees its slot) instead of holding it, and slowing the batch, forever.
var writeTimeout = 30 * time.Second

func (e *sse) raw(b []byte) error {
	e.start()
	e.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	buf := make([]byte, 0, len(b)+8)
	buf = append(buf, "data: "...)
	buf = append(buf, b...)
	buf = append(buf, "\n\n"...)
	if _, err := e.w.Write(buf); err != nil {
		return fmt.Errorf("%w: %w", errWrite, err)
	}
	if err := e.rc.Flush(); err != nil {
		return fmt.Errorf("%w: %w", errWrite, err)
	}
	return nil
}

func (e *sse) done() error { return e.raw([]byte("[DONE]")) }

// fail ends a stream with an error event, or answers with the error when nothing was sent.
func (e *sse) fail(ae *apiError) {
	if ae.Status == statusClientGone {
		return
	}
	if !e.started {
		writeError(e.w, ae)
		return
	}
	if ae.Type == "" {
		ae.Type = "server_error"
	}
	e.send(ae.body())
}

// promptLogprobs evaluates the prompt from the start, a few dozen tokens at a time, and passes
// each prompt token's log-probability given the ones before it (the first has none: NaN) and,
// with topN > 0, each position's most likely tokens, to onPrompt.
func (s *Server) promptLogprobs(ctx context.Context, sess *llm.Session, prompt []int32, topN int, onPrompt promptLogprobsFunc) error {
	const chunk = 32
	V := s.model.Tokenizer().VocabSize()
	if err := sess.Rewind(0); err != nil {
		return err
	}
	lps := make([]float32, len(prompt))
	lps[0] = float32(math.NaN())
	var alts [][]llm.TokenLogProb
	if topN > 0 {
		alts = make([][]llm.TokenLogProb, len(prompt))
	}
	buf := make([]float32, min(chunk, len(prompt))*V)
	for start := 0; start < len(prompt); start += chunk {
		if err := ctx.Err(); err != nil {
			return err
		}
		end := min(start+chunk, len(prompt))
		rows := buf[:(end-start)*V]
		if err := sess.EvalLogits(prompt[start:end], 0, rows); err != nil {
			return err
		}
		for pos := start; pos < end && pos+1 < len(prompt); pos++ {
			row := rows[(pos-start)*V : (pos-start+1)*V]
			lps[pos+1] = llm.LogProb(row, prompt[pos+1])
			if alts != nil {
				alts[pos+1] = llm.TopLogProbs(nil, row, topN)
			}
		}
	}
	onPrompt(lps, alts)
	return nil
}
