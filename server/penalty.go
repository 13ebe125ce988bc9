package server

import (
	"context"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/gorun-dev/gorun/internal/stopstr"
	"github.com/gorun-dev/gorun/llm"
)

// adjust is what the library's sampler lacks: OpenAI's presence and frequency penalties and
// logit bias. A request with any of them generates with the loop below, which changes the
// logits before the library's sampler sees them; other requests use the library's Generate.
type adjust struct {
	presence, frequency float32
	bias                map[int32]float32 // -100 bans a token (-Inf)
	// topN > 0 reports the topN most likely tokens of each step to onTop, before the step's
	// piece is emitted (the library reports only the chosen token's log-probability).
	topN  int
	onTop func([]alternative)
	// onPrompt, when set, gets the prompt tokens' log-probabilities (the first is NaN) and,
	// with topN, their alternatives (echo with logprobs).
	onPrompt func(lps []float32, alts [][]alternative)
}

// alternative is a likely token of a step and its log-probability.
type alternative struct {
	Token   int32
	LogProb float32
}

func (a *adjust) active() bool {
	return a != nil && (a.presence != 0 || a.frequency != 0 || len(a.bias) > 0 || a.topN > 0)
}

// parseAdjust validates the penalties and the bias (token ids as strings, values in
// [-100, 100], as OpenAI takes them).
func (p *sampling) parseAdjust(vocab int) (*adjust, *apiError) {
	a := &adjust{}
	if p.PresencePenalty != nil {
		a.presence = float32(*p.PresencePenalty)
	}
	if p.FrequencyPenalty != nil {
		a.frequency = float32(*p.FrequencyPenalty)
	}
	if len(p.LogitBias) > 1024 {
		return nil, badRequest("logit_bias", "logit_bias has %d entries (at most 1024)", len(p.LogitBias))
	}
	for k, v := range p.LogitBias {
		id, err := strconv.ParseInt(strings.TrimSpace(k), 10, 32)
		if err != nil || id < 0 || id >= int64(vocab) {
			return nil, badRequest("logit_bias", "logit_bias key %q is not a token id of the vocabulary of %d", k, vocab)
		}
		if math.IsNaN(v) || v < -100 || v > 100 {
			return nil, badRequest("logit_bias", "logit_bias[%s] = %v is outside [-100, 100]", k, v)
		}
		if a.bias == nil {
			a.bias = map[int32]float32{}
		}
		a.bias[int32(id)] = float32(v)
	}
	return a, nil
}

// apply writes the adjusted logits to dst: the bias, then each generated token's penalties
// (OpenAI's: frequency times its count, plus presence once it occurred).
func (a *adjust) apply(dst, logits []float32, counts map[int32]int) {
	copy(dst, logits)
	for id, b := range a.bias {
		if b <= -100 {
			dst[id] = float32(math.Inf(-1))
		} else {
			dst[id] += b
		}
	}
	for id, c := range counts {
		dst[id] -= a.frequency*float32(c) + a.presence
	}
}

// generateAdjusted is the library's generation with adjusted logits: the context's logits
// come from the session (its single-token steps batched with the other slots'), the token
// from the library's sampler (same filters, same random draw per position), the text from
// the tokenizer's decoder, stop strings held back until they cannot begin.
func (s *Server) generateAdjusted(ctx context.Context, sess *llm.Session, prompt []int32, opts llm.GenerateOptions, adj *adjust, emit func(llm.Piece) error) (llm.Stats, error) {
	var st llm.Stats
	start := time.Now()
	tok := s.model.Tokenizer()
	V := tok.VocabSize()
	sampler := llm.NewSampler(opts.Sample, V)
	st.Seed = sampler.Seed()
	dec := tok.NewDecoder()
	stops := stopstr.Matcher{Stops: opts.Stop}
	tokens := append(make([]int32, 0, s.model.ContextLength()), prompt...)
	counts := map[int32]int{}
	work := make([]float32, V)
	finish := func(reason llm.StopReason, flush bool) error {
		st.Stop = reason
		st.GenTime = time.Since(start)
		rest := stops.TakeHeld()
		if flush {
			rest += dec.Flush()
		}
		if i, which := stops.Find(rest); i >= 0 {
			rest, st.Stop, st.StopString = rest[:i], llm.StopString, which
		}
		if rest == "" {
			return nil
		}
		return emit(llm.Piece{Text: rest, Token: -1})
	}
	var pending []int32
	var alts []alternative
	for {
		if err := ctx.Err(); err != nil {
			st.Stop = llm.StopCancelled
			return st, err
		}
		if opts.MaxTokens > 0 && st.Tokens >= opts.MaxTokens {
			return st, finish(llm.StopLength, false)
		}
		if len(tokens) >= s.model.ContextLength() {
			return st, finish(llm.StopContextFull, true)
		}
		var logits []float32
		var err error
		if pending != nil {
			logits, err = sess.EvalContext(ctx, pending)
		} else {
			logits, err = sess.Logits(ctx)
		}
		if err != nil {
			st.Stop = llm.StopError
			return st, err
		}
		adj.apply(work, logits, counts)
		next := sampler.SampleAt(work, tokens, uint64(len(tokens)))
		if next == tok.EOS() && !opts.IgnoreEOS {
			return st, finish(llm.StopEOS, true)
		}
		tokens = append(tokens, next)
		pending = append(pending[:0], next)
		counts[next]++
		st.Tokens++
		if adj.topN > 0 && adj.onTop != nil {
			alts = topAlternatives(alts[:0], logits, adj.topN)
			adj.onTop(alts)
		}
		text, hit, which := stops.Add(dec.Next(next))
		if err := emit(llm.Piece{Text: text, Token: next, LogProb: logProb(logits, next)}); err != nil {
			st.Stop = llm.StopCaller
			return st, err
		}
		if hit {
			st.Stop, st.StopString = llm.StopString, which
			st.GenTime = time.Since(start)
			return st, nil
		}
	}
}

// topAlternatives appends the n most likely tokens (by the model's logits, before any
// adjustment) with their log-probabilities, most likely first.
func topAlternatives(dst []alternative, logits []float32, n int) []alternative {
	n = min(n, len(logits))
	for i, l := range logits {
		if len(dst) == n && l <= logits[dst[n-1].Token] {
			continue
		}
		if len(dst) < n {
			dst = append(dst, alternative{Token: int32(i)})
		} else {
			dst[n-1] = alternative{Token: int32(i)}
		}
		for j := len(dst) - 1; j > 0 && logits[dst[j].Token] > logits[dst[j-1].Token]; j-- {
			dst[j], dst[j-1] = dst[j-1], dst[j]
		}
	}
	mx := math.Inf(-1)
	for _, l := range logits {
		mx = math.Max(mx, float64(l))
	}
	var sum float64
	for _, l := range logits {
		sum += math.Exp(float64(l) - mx)
	}
	lse := mx + math.Log(sum)
	for i := range dst {
		dst[i].LogProb = float32(float64(logits[dst[i].Token]) - lse)
	}
	return dst
}

// logProb is log softmax(logits)[id].
func logProb(logits []float32, id int32) float32 {
	mx := math.Inf(-1)
	for _, l := range logits {
		mx = math.Max(mx, float64(l))
	}
	var sum float64
	for _, l := range logits {
		sum += math.Exp(float64(l) - mx)
	}
	return float32(float64(logits[id]) - mx - math.Log(sum))
}
