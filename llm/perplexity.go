package llm

import (
	"context"
	"fmt"
	"io"
	"math"
)

// PerplexityOptions choose the protocol.
type PerplexityOptions struct {
	// Chunk is the number of tokens per independently evaluated chunk (llama-perplexity's -c);
	// 0 means the session's context length.
	Chunk int
	// ScoreAll scores every position after the first of each chunk (Hugging Face style);
	// otherwise only the second half is scored, as llama-perplexity does, so every scored token
	// sees at least Chunk/2 tokens of context.
	ScoreAll bool
	// MaxChunks limits the chunks scored (llama-perplexity's --chunks); 0: all.
	MaxChunks int
	// LogProbs, when set, receives llama-perplexity's KL-divergence base file
	// (--kl-divergence-base): the chunks' tokens, then the log-probabilities at every scored
	// position (see ReadLogProbsBase). Not with ScoreAll.
	LogProbs io.Writer
	// Progress, when set, is called after each chunk with the running estimate.
	Progress func(done, total int, running PerplexityResult)
}

// PerplexityResult is exp(mean negative log-likelihood) with its standard error.
type PerplexityResult struct {
	PPL    float64
	StdErr float64
	Chunks int
	Scored int // tokens scored
	nll    float64
	nll2   float64
}

func (r *PerplexityResult) add(nll float64) {
	r.nll += nll
	r.nll2 += nll * nll
	r.Scored++
	mean := r.nll / float64(r.Scored)
	r.PPL = math.Exp(mean)
	r.StdErr = 0
	if r.Scored > 1 {
		// The error of the mean NLL, carried to PPL to first order (llama-perplexity's).
		v := r.nll2/float64(r.Scored) - mean*mean
		if v > 0 {
			r.StdErr = r.PPL * math.Sqrt(v/float64(r.Scored-1))
		}
	}
}

// Perplexity scores tokens chunk by chunk, each chunk in a fresh context. Tokens past the last
// whole chunk are not used (as llama-perplexity). The session's context is empty afterwards.
// Progress runs with the session unlocked, as Generate's callback (see Session).
func (s *Session) Perplexity(ctx context.Context, tokens []int32, opts PerplexityOptions) (PerplexityResult, error) {
	if err := s.begin(); err != nil {
		return PerplexityResult{}, err
	}
	defer s.end()
	if err := s.usable(); err != nil {
		return PerplexityResult{}, err
	}
	var res PerplexityResult
	nctx := s.m.nctx
	chunk := opts.Chunk
	if chunk == 0 {
		chunk = nctx
	}
	if chunk < 2 || chunk > nctx {
		return res, fmt.Errorf("chunk of %d tokens: must be 2..%d (the context length)", chunk, nctx)
	}
	n := len(tokens) / chunk
	if n == 0 {
		return res, fmt.Errorf("%d tokens are fewer than one chunk of %d; use a longer text or a smaller -c", len(tokens), chunk)
	}
	if opts.MaxChunks > 0 {
		n = min(n, opts.MaxChunks)
	}
	first := chunk / 2
	if opts.ScoreAll {
		if opts.LogProbs != nil {
			return res, fmt.Errorf("%w: a KL-divergence base file stores the second half of each chunk; it does not mix with scoring every position", ErrInvalidOption)
		}
		first = 0
	}
	if chunk-1-first < 1 {
		return res, fmt.Errorf("a chunk of %d tokens scores no token (only its second half is scored); use a chunk (-c) of at least 3 tokens", chunk)
	}
	V := s.m.arch.Hparams().NVocab
	logits := make([]float32, (chunk-first)*V)
	var stored []byte
	if opts.LogProbs != nil {
		if err := writeLogProbsHeader(opts.LogProbs, chunk, V, n, tokens); err != nil {
			return res, err
		}
		stored = make([]byte, (chunk-1-first)*logProbsRowLen(V)*2)
	}
	var progress func(PerplexityResult) error
	if opts.Progress != nil {
		progress = outside(s, func(r PerplexityResult) error {
			opts.Progress(r.Chunks, n, r)
			return nil
		})
	}
	var bosChunk []int32
	for c := 0; c < n; c++ {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		toks := tokens[c*chunk : (c+1)*chunk]
		if sp := s.m.tok.Special(); sp.AddBOS && sp.BOS >= 0 {
			// llama-perplexity begins every chunk at BOS when the model wants one.
			bosChunk = append(bosChunk[:0], toks...)
			bosChunk[0] = sp.BOS
			toks = bosChunk
		}
		s.rewind(0)
		if err := s.evalLogits(toks, first, logits); err != nil {
			return res, err
		}
		// Logits at position j predict token j+1; the last position predicts nothing here.
		for j := first; j < chunk-1; j++ {
			res.add(nll(logits[(j-first)*V:(j-first+1)*V], toks[j+1]))
		}
		if stored != nil {
			if err := saveLogProbs(opts.LogProbs, stored, logits, toks[first:], V); err != nil {
				return res, err
			}
		}
		res.Chunks++
		if progress != nil {
			progress(res)
		}
	}
	s.rewind(0)
	if res.Scored == 0 {
		return res, fmt.Errorf("no token was scored")
	}
	return res, nil
}

// saveLogProbs writes a chunk's scored positions to a KL-divergence base file: logits holds
// their rows, toks the tokens from the first of them on.
func saveLogProbs(w io.Writer, buf []byte, logits []float32, toks []int32, V int) error {
	nv2 := 2 * logProbsRowLen(V)
	for j := 0; j < len(buf)/nv2; j++ {
		encodeLogProbs(buf[j*nv2:(j+1)*nv2], logits[j*V:(j+1)*V], toks[j+1])
	}
	_, err := w.Write(buf)
	return err
}

// nll is -log softmax(logits)[target], computed in float64.
func nll(logits []float32, target int32) float64 {
	mx, logSum := logSoftmaxParts(logits)
	return logSum + mx - float64(logits[target])
}
