package llm

import (
	"context"
	"time"
)

// GenerateOptions control Generate.
type GenerateOptions struct {
	MaxTokens int // tokens to generate (<= 0: until end of text or a full context)
	Sample    SampleOptions
	// IgnoreEOS keeps generating past the end-of-text token.
	IgnoreEOS bool
}

// Stats report what a generation did and how fast.
type Stats struct {
	PromptTokens int
	PromptTime   time.Duration
	Tokens       int // generated
	GenTime      time.Duration
	Stop         StopReason
}

// StopReason says why generation ended.
type StopReason string

const (
	StopLength      StopReason = "length"       // MaxTokens generated
	StopEOS         StopReason = "eos"          // the model ended the text
	StopContextFull StopReason = "context full" // no room left in the context
)

// Generate appends the prompt to the session's context and generates text after it, passing
// each piece of valid UTF-8 to emit as soon as it is complete. An error from emit or a
// cancelled ctx stops generation and is returned.
func (s *Session) Generate(ctx context.Context, prompt string, opts GenerateOptions, emit func(string) error) (Stats, error) {
	var st Stats
	tok := s.m.tok
	ids := tok.Encode(prompt)
	if len(ids) == 0 && s.pos == 0 {
		// GPT-2 has no BOS token; like Hugging Face, start unconditional text at end-of-text.
		ids = []int32{tok.EOS()}
	}
	st.PromptTokens = len(ids)
	if s.pos+len(ids) >= s.cache.Size {
		return st, errPromptTooLong(len(ids), s.pos, s.cache.Size)
	}
	start := time.Now()
	var logits []float32
	var err error
	if len(ids) > 0 {
		if logits, err = s.Eval(ids); err != nil {
			return st, err
		}
	} else {
		logits = s.logits
	}
	st.PromptTime = time.Since(start)

	recent := make([]int32, 0, 1024)
	recent = append(recent, ids...)
	sampler := NewSampler(opts.Sample, len(logits))
	dec := tok.NewDecoder()
	var one [1]int32
	start = time.Now()
	for {
		if err := ctx.Err(); err != nil {
			return st, err
		}
		next := sampler.Sample(logits, recent)
		if next == tok.EOS() && !opts.IgnoreEOS {
			st.Stop = StopEOS
			break
		}
		st.Tokens++
		if len(recent) == cap(recent) {
			recent = append(recent[:0], recent[len(recent)-256:]...)
		}
		recent = append(recent, next)
		if piece := dec.Next(next); piece != "" {
			if err := emit(piece); err != nil {
				return st, err
			}
		}
		if opts.MaxTokens > 0 && st.Tokens == opts.MaxTokens {
			st.Stop = StopLength
			break
		}
		if s.pos >= s.cache.Size {
			st.Stop = StopContextFull
			break
		}
		one[0] = next
		if logits, err = s.Eval(one[:]); err != nil {
			return st, err
		}
	}
	if rest := dec.Flush(); rest != "" {
		if err := emit(rest); err != nil {
			return st, err
		}
	}
	st.GenTime = time.Since(start)
	return st, nil
}
