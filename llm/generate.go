package llm

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"time"

	"github.com/gorun-dev/gorun/internal/stopstr"
)

// GenerateOptions control Generate and Stream. As in SampleOptions, a zero field means what
// the gorun command's 0 means: MaxTokens 0 generates nothing (-n 0), and the zero Sample is
// greedy decoding. Set MaxTokens (or NoLimit) and start Sample from DefaultSampling to
// generate as the command does.
type GenerateOptions struct {
	// MaxTokens is the most tokens to generate. 0: none (the prompt is added to the context,
	// to be evaluated with the next call); NoLimit (< 0): until the end of text, a stop string
	// or a full context.
	MaxTokens int
	// Sample chooses the tokens; the zero value is greedy decoding (see SampleOptions).
	Sample SampleOptions
	// Stop ends generation at the first of these strings in the generated text. The stop
	// string and what follows are not emitted (text that might begin one is held back until
	// it cannot); a stop string is found even when it spans several tokens. The tokens stay in
	// the context (Rewind removes them).
	Stop []string
	// IgnoreEOS keeps generating past the end-of-text token.
	IgnoreEOS bool
	// TopLogprobs > 0 gives each Piece of GenerateTokens and Stream the TopLogprobs most likely
	// tokens of its step (Piece.Top), and its LogProb. Must not be negative.
	TopLogprobs int
	// LogProbs fills Piece.LogProb for GenerateTokens and Stream. It costs a log-softmax over
	// the vocabulary per token (about 1 ms for a 50k-token vocabulary on one core, more than
	// a GPU's whole step), so it is off unless asked for.
	LogProbs bool
}

// DefaultMaxTokens is a bound for callers that want one: the server's max_tokens when a
// request gives none (server.Config.DefaultMaxTokens 0).
const DefaultMaxTokens = 128

// NoLimit as GenerateOptions.MaxTokens generates until the end of text, a stop string or a
// full context.
const NoLimit = -1

// Stats report what a generation did and how fast.
type Stats struct {
	PromptTokens int
	PromptTime   time.Duration // includes the last token of the previous call, when pending
	Tokens       int           // generated and added to the context
	GenTime      time.Duration
	Stop         StopReason
	StopString   string // the stop string found, when Stop is StopString
	Seed         uint64 // the seed sampling drew with (the one drawn for RandomSeed); 0 when greedy
}

// StopReason says why generation ended.
type StopReason string

const (
	StopLength      StopReason = "length"       // MaxTokens generated
	StopEOS         StopReason = "eos"          // the model ended the text
	StopContextFull StopReason = "context full" // no room left in the context
	StopString      StopReason = "stop string"  // a stop string was generated
	StopCancelled   StopReason = "cancelled"    // the context.Context was cancelled
	StopCaller      StopReason = "caller"       // the callback returned an error or the loop broke
	StopClosed      StopReason = "closed"       // the model was closed
	StopError       StopReason = "error"        // a computation failed
	StopGrammar     StopReason = "grammar"      // the grammar was complete and allowed nothing more
)

// Piece is one generated token and the text it completes.
type Piece struct {
	// Text is the text this token releases: empty when the token ends inside a UTF-8
	// character or may begin a stop string (the text comes with a later piece). The Texts of
	// all pieces are the generated text.
	Text string
	// Token is the token id, or -1 for a last piece that only releases held-back text.
	Token int32
	// LogProb is the token's log-probability under the model (log softmax of the logits,
	// before the logit bias, the penalties and the sampling filters); 0 unless
	// GenerateOptions.LogProbs or TopLogprobs asked for it.
	LogProb float32
	// Top is the step's GenerateOptions.TopLogprobs most likely tokens under the model, most
	// likely first (nil unless asked for).
	Top []TokenLogProb
}

// Generate appends the prompt to the session's context and generates text after it, passing
// each piece of valid UTF-8 to emit as soon as it is complete. An error from emit or a
// cancelled ctx stops generation and is returned (a cancellation matches ErrCancelled); the
// session stays usable, holding every token sampled so far.
//
// Every sampled token joins the context (Pos counts it; the last one is evaluated when the
// next call needs it), so generating N*k tokens in one call or k tokens in N calls with an
// empty prompt gives the same text and Pos, for greedy and seeded sampling alike. An empty
// prompt on an empty context starts at the end-of-text token, as Hugging Face does.
//
// This is gorun's one generation loop: the gorun command (one-shot and interactive) and the
// server generate through it, with the sampler chain of SampleOptions, so the same options and
// seed give the same text everywhere.
func (s *Session) Generate(ctx context.Context, prompt string, opts GenerateOptions, emit func(string) error) (Stats, error) {
	return s.generate(ctx, prompt, opts, false, func(p Piece) error {
		if p.Text == "" {
			return nil
		}
		return emit(p.Text)
	})
}

// GenerateTokens is Generate passing every token as a Piece (id, log-probability, text).
func (s *Session) GenerateTokens(ctx context.Context, prompt string, opts GenerateOptions, emit func(Piece) error) (Stats, error) {
	return s.generate(ctx, prompt, opts, true, emit)
}

// Stream is Generate as an iterator of pieces: it yields each generated token as a Piece with
// a nil error, and a final (Piece{}, err) when generation fails. Breaking out of the loop stops
// generation (Stop is StopCaller). LastStats reports the generation afterwards.
//
//	for p, err := range s.Stream(ctx, "Hello", llm.GenerateOptions{MaxTokens: 64}) {
//		if err != nil { return err }
//		fmt.Print(p.Text)
//	}
func (s *Session) Stream(ctx context.Context, prompt string, opts GenerateOptions) iter.Seq2[Piece, error] {
	return func(yield func(Piece, error) bool) {
		_, err := s.generate(ctx, prompt, opts, true, func(p Piece) error {
			if !yield(p, nil) {
				return errStopped
			}
			return nil
		})
		if err != nil && !errors.Is(err, errStopped) {
			yield(Piece{}, err)
		}
	}
}

// errStopped is how Stream's loop body breaking reaches generate.
var errStopped = errors.New("stopped by the caller")

// LastStats reports the session's last Generate, GenerateTokens or Stream.
func (s *Session) LastStats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.last
}

func (s *Session) generate(ctx context.Context, prompt string, opts GenerateOptions, logProbs bool, emit func(Piece) error) (st Stats, err error) {
	if err := s.begin(); err != nil {
		return st, err
	}
	defer s.end()
	emit = outside(s, emit) // a step boundary: the callback may Save, read or Close the session
	defer func() { s.last = st }()
	if err := s.usable(); err != nil {
		st.Stop = StopClosed
		return st, err
	}
	if err := opts.Sample.Validate(); err != nil {
		return st, err
	}
	if err := opts.Sample.checkVocab(s.m.arch.Hparams().NVocab); err != nil {
		return st, err
	}
	if opts.TopLogprobs < 0 {
		return st, fmt.Errorf("%w: GenerateOptions.TopLogprobs = %d is negative", ErrInvalidOption, opts.TopLogprobs)
	}
	for _, stop := range opts.Stop {
		if stop == "" {
			return st, fmt.Errorf("%w: GenerateOptions.Stop holds an empty string", ErrInvalidOption)
		}
	}
	maxTokens := opts.MaxTokens
	tok := s.m.tok
	ids := s.m.Tokenize(prompt, len(s.tokens) == 0)
	if len(ids) == 0 && len(s.tokens) == 0 {
		ids = []int32{s.m.StartToken()}
	}
	st.PromptTokens = len(ids)
	if len(s.tokens)+len(ids) >= s.m.nctx {
		return st, errPromptTooLong(len(ids), len(s.tokens), s.m.nctx)
	}
	if err := s.check(ids); err != nil {
		return st, err
	}
	if len(ids) > 0 || s.dec == nil {
		s.dec = tok.NewDecoder() // text before a prompt is done with
	}
	keep := len(s.tokens)
	s.tokens = append(s.tokens, ids...)
	sampler := NewSampler(opts.Sample, s.m.arch.Hparams().NVocab)
	if opts.Sample.Grammar != nil {
		sampler.useGrammar(s.m.grammarVocab(), !opts.IgnoreEOS)
		defer sampler.gram.stop()
	}
	// On a GPU the host waits during each step: the grammar's next mask is computed then.
	overlap := sampler.gram != nil && s.m.onGPU
	st.Seed = sampler.Seed()
	stops := stopstr.Matcher{Stops: opts.Stop}
	start := time.Now()
	first := true
	joined := false
	defer func() {
		if joined {
			s.m.batch.leave()
		}
		// Every way out (cancellation and errors included) reports the time spent so far:
		// the prompt's until the first token is sampled, then the generation's.
		if first {
			st.PromptTime = time.Since(start)
		} else {
			st.GenTime = time.Since(start)
		}
	}()
	// finish ends generation for a reason other than a stop string and releases the text held
	// back: text that might have begun a stop string and, when the text cannot go on (end of
	// text, full context, failure), an incomplete UTF-8 character; after MaxTokens or a
	// cancellation the next call may complete the character.
	finish := func(reason StopReason) error {
		st.Stop = reason
		if reason == StopCaller {
			return nil
		}
		rest := stops.TakeHeld()
		if reason != StopLength && reason != StopCancelled {
			rest += s.dec.Flush()
		}
		if i, which := stops.Find(rest); i >= 0 {
			rest, st.Stop, st.StopString = rest[:i], StopString, which
		}
		if rest == "" {
			return nil
		}
		return emit(Piece{Text: rest, Token: -1})
	}
	for {
		if err := ctx.Err(); err != nil {
			if first {
				s.rollback(keep)
			}
			finish(StopCancelled)
			return st, cancelled(err)
		}
		if !first && sampler.grammarDone() {
			st.Stop = StopGrammar // stopped before evaluating a token only EOS could follow
			break
		}
		if maxTokens >= 0 && st.Tokens >= maxTokens {
			break
		}
		if len(s.tokens) >= s.m.nctx {
			st.Stop = StopContextFull
			break
		}
		if overlap {
			sampler.gram.startPrepare()
		}
		logits, err := s.sync(ctx, len(s.tokens))
		if overlap {
			sampler.gram.waitPrepare()
		}
		if err != nil {
			if first {
				s.rollback(keep)
			}
			st.Stop = StopError
			switch {
			case errors.Is(err, ErrCancelled):
				st.Stop = StopCancelled
			case errors.Is(err, ErrClosed):
				st.Stop = StopClosed
			}
			finish(st.Stop)
			return st, err
		}
		if err := ctx.Err(); err != nil && !first {
			// Cancelled while the step computed (Ctrl-C comes then, mostly): no token after
			// the cancellation. The logits stay for the next call.
			finish(StopCancelled)
			return st, cancelled(err)
		}
		if first {
			st.PromptTime = time.Since(start)
			start = time.Now()
			first = false
			s.m.batch.join()
			joined = true
			if sampler.grammarDone() { // a grammar that matches only the empty text
				st.Stop = StopGrammar
				break
			}
		}
		next, err := sampler.SampleAt(logits, s.tokens, uint64(len(s.tokens)))
		if err != nil {
			finish(StopError)
			return st, err
		}
		if tok.IsEOG(next) && !opts.IgnoreEOS {
			st.Stop = StopEOS
			break
		}
		p := Piece{Token: next}
		if logProbs && (opts.LogProbs || opts.TopLogprobs > 0) {
			p.LogProb = LogProb(logits, next)
			if opts.TopLogprobs > 0 {
				p.Top = TopLogProbs(nil, logits, opts.TopLogprobs)
			}
		}
		s.tokens = append(s.tokens, next)
		s.logitsOK = false
		st.Tokens++
		var hit bool
		p.Text, hit, st.StopString = stops.Add(s.dec.Next(next))
		if hit || p.Text != "" || logProbs {
			if err := emit(p); err != nil {
				finish(StopCaller)
				return st, err
			}
		}
		if hit {
			st.Stop = StopString
			s.dec = tok.NewDecoder()
			return st, nil
		}
	}
	if st.Stop == "" {
		st.Stop = StopLength
	}
	return st, finish(st.Stop)
}
