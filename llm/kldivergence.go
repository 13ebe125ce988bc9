package llm

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
)

// KL divergence against a base model, as llama-perplexity's --kl-divergence-base and
// --kl-divergence (llama.cpp c392e509, examples/perplexity/perplexity.cpp). The base file holds
// the base model's log-probabilities over the scored positions of every chunk, quantized to
// 16 bits; the layout is llama-perplexity's, so either tool reads the other's files:
//
//	"_logits_"                        8 bytes
//	n_ctx (uint32), n_vocab (int32), n_chunk (int32)
//	n_ctx*n_chunk tokens (int32)      the evaluated text, chunk after chunk (without BOS)
//	per chunk, per scored position (n_ctx/2 .. n_ctx-2): nv = 2*((n_vocab+1)/2)+4 uint16:
//	  scale, min_log_prob (two float32), then per token q: log p = scale*q + min_log_prob
//	  (q = 0 for log-probabilities more than 16 below the largest)
//
// Everything is little-endian.

const logProbsMagic = "_logits_"

// logProbsHeaderSize is the magic and the three counts.
const logProbsHeaderSize = 8 + 3*4

// logProbsRowLen is nv, the uint16s of one position's record.
func logProbsRowLen(nvocab int) int { return 2*((nvocab+1)/2) + 4 }

// nearestInt is ggml's nearest_int (rounding half to even through a float32 addition of
// 1.5*2^23), for the values 0..65535 it is given.
func nearestInt(v float32) uint16 {
	return uint16(math.RoundToEven(float64(v)))
}

// encodeLogProbs stores one position's logits as llama-perplexity does (its log_softmax with
// a log_prob buffer), computed in float32 where it computes in float32, into dst (nv uint16s
// as bytes), and returns the negative log-likelihood of tok.
func encodeLogProbs(dst []byte, logits []float32, tok int32) float64 {
	maxLogit, minLogit := logits[0], logits[0]
	for _, l := range logits[1:] {
		maxLogit = max(maxLogit, l)
		minLogit = min(minLogit, l)
	}
	minLogit = max(minLogit, float32(maxLogit-16))
	var sumExp float64
	for _, l := range logits {
		sumExp += float64(float32(math.Exp(float64(float32(l - maxLogit)))))
	}
	logSumExp := float32(math.Log(sumExp))
	minLogProb := float32(float32(minLogit-maxLogit) - logSumExp)
	scale := float32(float32(maxLogit-minLogit) / 65535)
	binary.LittleEndian.PutUint32(dst[0:], math.Float32bits(scale))
	binary.LittleEndian.PutUint32(dst[4:], math.Float32bits(minLogProb))
	q := dst[8:]
	clear(q)
	if scale != 0 {
		inv := 1 / scale
		for i, l := range logits {
			if l > minLogit {
				binary.LittleEndian.PutUint16(q[2*i:], nearestInt(float32(inv*float32(l-minLogit))))
			}
		}
	}
	return float64(maxLogit) + float64(logSumExp) - float64(logits[tok])
}

// writeLogProbsHeader writes the base file's header and the tokens of its n chunks.
func writeLogProbsHeader(w io.Writer, nctx, nvocab, n int, tokens []int32) error {
	b := make([]byte, logProbsHeaderSize, logProbsHeaderSize+4*nctx*n)
	copy(b, logProbsMagic)
	binary.LittleEndian.PutUint32(b[8:], uint32(nctx))
	binary.LittleEndian.PutUint32(b[12:], uint32(nvocab))
	binary.LittleEndian.PutUint32(b[16:], uint32(n))
	for _, t := range tokens[:nctx*n] {
		b = binary.LittleEndian.AppendUint32(b, uint32(t))
	}
	_, err := w.Write(b)
	return err
}

// LogProbsBase is the header of a KL-divergence base file: the chunk size it was computed
// with, the vocabulary, and the chunks' tokens. Its log-probabilities follow in the reader.
type LogProbsBase struct {
	NCtx, NVocab, NChunk int
	Tokens               []int32
	r                    io.Reader
}

// ReadLogProbsBase reads and checks a base file's header from r, whose total size is size:
// the counts must describe exactly size bytes, so a truncated or hostile file fails here,
// before anything the size of its claims is allocated.
func ReadLogProbsBase(r io.Reader, size int64) (*LogProbsBase, error) {
	var h [logProbsHeaderSize]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		return nil, fmt.Errorf("not a KL-divergence base file: %d-byte header: %w", logProbsHeaderSize, err)
	}
	if string(h[:8]) != logProbsMagic {
		return nil, fmt.Errorf("not a KL-divergence base file (no %q magic; llama-perplexity --kl-divergence-base writes them)", logProbsMagic)
	}
	nctx := int64(binary.LittleEndian.Uint32(h[8:]))
	nvocab := int64(int32(binary.LittleEndian.Uint32(h[12:])))
	nchunk := int64(int32(binary.LittleEndian.Uint32(h[16:])))
	if nctx < 3 || nctx > 1<<24 || nvocab < 1 || nvocab > 1<<24 || nchunk < 1 {
		return nil, fmt.Errorf("KL-divergence base file: chunk of %d tokens, vocabulary %d, %d chunks: want at least 3, 1 and 1", nctx, nvocab, nchunk)
	}
	rows := nctx - 1 - nctx/2
	perChunk := 4*nctx + rows*int64(logProbsRowLen(int(nvocab)))*2
	if (size-logProbsHeaderSize)/perChunk != nchunk || (size-logProbsHeaderSize)%perChunk != 0 {
		return nil, fmt.Errorf("KL-divergence base file: %d bytes, but %d chunks of %d tokens over a vocabulary of %d take %d (truncated?)",
			size, nchunk, nctx, nvocab, logProbsHeaderSize+perChunk*nchunk)
	}
	b := make([]byte, 4*nctx*nchunk)
	if _, err := io.ReadFull(r, b); err != nil {
		return nil, fmt.Errorf("KL-divergence base file: tokens: %w", err)
	}
	base := &LogProbsBase{NCtx: int(nctx), NVocab: int(nvocab), NChunk: int(nchunk), Tokens: make([]int32, nctx*nchunk), r: r}
	for i := range base.Tokens {
		t := int32(binary.LittleEndian.Uint32(b[4*i:]))
		if t < 0 || int64(t) >= nvocab {
			return nil, fmt.Errorf("KL-divergence base file: token %d of the text is %d, outside the vocabulary of %d", i, t, nvocab)
		}
		base.Tokens[i] = t
	}
	return base, nil
}

// KLDivergenceOptions configure Session.KLDivergence.
type KLDivergenceOptions struct {
	// MaxChunks limits the chunks compared (0: all of the base file's).
	MaxChunks int
	// Progress, when set, is called after each chunk with the running statistics.
	Progress func(done, total int, running *KLDivergenceStats)
}

// KLDivergenceStats accumulates llama-perplexity's statistics of a model's next-token
// distributions against a base's, over the scored positions.
type KLDivergenceStats struct {
	sumNLL, sumNLL2, sumNLLBase, sumNLLBase2, sumNLLNLLBase float64
	sumKLD, sumKLD2                                         float64
	sumPDiff, sumPDiff2, sumPDiff4                          float64
	maxPDiff                                                float64
	sameTop, count                                          int
	kld, pDiff                                              []float32 // per position, for the percentiles
}

// add compares one position: logits of the model, the base's stored record, the next token.
func (k *KLDivergenceStats) add(logits []float32, base []byte, tok int32) {
	mx, logSum := logSoftmaxParts(logits)
	top := 0
	for i, l := range logits {
		if l > logits[top] {
			top = i
		}
	}
	scale := float64(math.Float32frombits(binary.LittleEndian.Uint32(base[0:])))
	minLogProb := float64(math.Float32frombits(binary.LittleEndian.Uint32(base[4:])))
	q := base[8:]
	logBase := func(i int) float64 { return scale*float64(binary.LittleEndian.Uint16(q[2*i:])) + minLogProb }

	nll := mx + logSum - float64(logits[tok])
	nllBase := -logBase(int(tok))
	k.sumNLL += nll
	k.sumNLL2 += nll * nll
	k.sumNLLBase += nllBase
	k.sumNLLBase2 += nllBase * nllBase
	k.sumNLLNLLBase += nll * nllBase

	// KL(base || model) over the tokens the base stores (log p > -16, as llama-perplexity).
	var kld float64
	topBase, maxBase := 0, math.Inf(-1)
	for i := range logits {
		lb := logBase(i)
		if lb > maxBase {
			topBase, maxBase = i, lb
		}
		if lb > -16 {
			kld += math.Exp(lb) * (lb - (float64(logits[i]) - mx - logSum))
		}
	}
	k.sumKLD += kld
	k.sumKLD2 += kld * kld
	k.count++
	if top == topBase {
		k.sameTop++
	}
	pDiff := math.Exp(-nll) - math.Exp(-nllBase)
	k.sumPDiff += pDiff
	k.sumPDiff2 += pDiff * pDiff
	k.sumPDiff4 += pDiff * pDiff * pDiff * pDiff
	k.maxPDiff = max(k.maxPDiff, math.Abs(pDiff))
	k.kld = append(k.kld, float32(kld))
	k.pDiff = append(k.pDiff, float32(pDiff))
}

// Estimate is a mean and its standard error.
type Estimate struct{ Value, Err float64 }

// meanAndErr is llama-perplexity's mean_and_uncertainty.
func meanAndErr(sum, sum2 float64, n int) Estimate {
	if n < 1 {
		return Estimate{}
	}
	f := sum / float64(n)
	df := sum2/float64(n) - f*f
	if df > 0 && n > 10 {
		return Estimate{f, math.Sqrt(df / float64(n-1))}
	}
	return Estimate{f, 0}
}

// covariance is llama-perplexity's covariance of the mean log-likelihoods.
func covariance(a, b, ab float64, n int) float64 {
	if n < 10 {
		return 0
	}
	c := ab/float64(n) - (a/float64(n))*(b/float64(n))
	return c / float64(n-1)
}

// Count is the number of positions compared.
func (k *KLDivergenceStats) Count() int { return k.count }

// PPL is the model's perplexity over the positions, with its uncertainty.
func (k *KLDivergenceStats) PPL() Estimate {
	l := meanAndErr(k.sumNLL, k.sumNLL2, k.count)
	p := math.Exp(l.Value)
	return Estimate{p, p * l.Err}
}

// BasePPL is the base's perplexity over the same positions (from its stored log-probabilities).
func (k *KLDivergenceStats) BasePPL() Estimate {
	l := meanAndErr(k.sumNLLBase, k.sumNLLBase2, k.count)
	p := math.Exp(l.Value)
	return Estimate{p, p * l.Err}
}

// LogPPLRatio is mean ln(PPL(Q)/PPL(base)), its uncertainty from both variances and their
// covariance.
func (k *KLDivergenceStats) LogPPLRatio() Estimate {
	l, lb := meanAndErr(k.sumNLL, k.sumNLL2, k.count), meanAndErr(k.sumNLLBase, k.sumNLLBase2, k.count)
	cov := covariance(k.sumNLL, k.sumNLLBase, k.sumNLLNLLBase, k.count)
	return Estimate{l.Value - lb.Value, math.Sqrt(max(0, l.Err*l.Err+lb.Err*lb.Err-2*cov))}
}

// LogPPLCorrelation is the correlation of the two mean log-likelihoods.
func (k *KLDivergenceStats) LogPPLCorrelation() float64 {
	l, lb := meanAndErr(k.sumNLL, k.sumNLL2, k.count), meanAndErr(k.sumNLLBase, k.sumNLLBase2, k.count)
	if l.Err == 0 || lb.Err == 0 {
		return 0
	}
	return covariance(k.sumNLL, k.sumNLLBase, k.sumNLLNLLBase, k.count) / (l.Err * lb.Err)
}

// PPLRatio is PPL(Q)/PPL(base).
func (k *KLDivergenceStats) PPLRatio() Estimate {
	r := k.LogPPLRatio()
	v := math.Exp(r.Value)
	return Estimate{v, v * r.Err}
}

// PPLDiff is PPL(Q)-PPL(base).
func (k *KLDivergenceStats) PPLDiff() Estimate {
	p, pb := k.PPL(), k.BasePPL()
	cov := p.Value * pb.Value * covariance(k.sumNLL, k.sumNLLBase, k.sumNLLNLLBase, k.count)
	return Estimate{p.Value - pb.Value, math.Sqrt(max(0, p.Err*p.Err+pb.Err*pb.Err-2*cov))}
}

// KLD is the mean KL divergence of the model's distributions from the base's.
func (k *KLDivergenceStats) KLD() Estimate { return meanAndErr(k.sumKLD, k.sumKLD2, k.count) }

// SameTop is the fraction of positions where both put the highest probability on the same
// token, with its binomial uncertainty.
func (k *KLDivergenceStats) SameTop() Estimate {
	if k.count < 2 {
		return Estimate{float64(k.sameTop) / float64(max(k.count, 1)), 0}
	}
	p := float64(k.sameTop) / float64(k.count)
	return Estimate{p, math.Sqrt(p * (1 - p) / float64(k.count-1))}
}

// PDiff is the mean of p(Q) - p(base) of the next token.
func (k *KLDivergenceStats) PDiff() Estimate { return meanAndErr(k.sumPDiff, k.sumPDiff2, k.count) }

// PDiffRMS is the root mean square of p(Q) - p(base).
func (k *KLDivergenceStats) PDiffRMS() Estimate {
	mse := meanAndErr(k.sumPDiff2, k.sumPDiff4, k.count)
	v := math.Sqrt(mse.Value)
	if v == 0 {
		return Estimate{}
	}
	return Estimate{v, 0.5 / v * mse.Err}
}

// KLDPercentile interpolates the sorted per-position KL divergences as llama-perplexity
// does (fraction 0: the minimum, 1: the maximum, 0.5: the median).
func (k *KLDivergenceStats) KLDPercentile(f float64) float64 { return percentile(k.kld, f) }

// PDiffPercentile is KLDPercentile for p(Q) - p(base).
func (k *KLDivergenceStats) PDiffPercentile(f float64) float64 { return percentile(k.pDiff, f) }

func percentile(values []float32, f float64) float64 {
	if len(values) == 0 {
		return 0
	}
	v := slices.Clone(values)
	slices.Sort(v)
	switch {
	case f <= 0:
		return float64(v[0])
	case f >= 1:
		return float64(v[len(v)-1])
	case f == 0.5 && len(v)%2 == 0: // llama-perplexity's median
		return 0.5 * (float64(v[len(v)/2]) + float64(v[len(v)/2-1]))
	case f == 0.5:
		return float64(v[len(v)/2])
	}
	p := f * float64(len(v)-1)
	i := int(p)
	p -= float64(i)
	return (1-p)*float64(v[i]) + p*float64(v[min(i+1, len(v)-1)])
}

// KLDivergence evaluates the base file's chunks with this session's model and compares its
// next-token distributions with the base's at the scored positions (the second half of each
// chunk), as llama-perplexity --kl-divergence. Each chunk runs in a fresh context and begins
// with BOS when the model wants one. The session's context is empty afterwards.
func (s *Session) KLDivergence(ctx context.Context, base *LogProbsBase, opts KLDivergenceOptions) (*KLDivergenceStats, error) {
	if err := s.begin(); err != nil {
		return nil, err
	}
	defer s.end()
	if err := s.usable(); err != nil {
		return nil, err
	}
	V := s.m.arch.Hparams().NVocab
	chunk := base.NCtx
	switch {
	case base.NVocab != V:
		return nil, fmt.Errorf("the base's vocabulary has %d tokens, this model's %d: not the same model family", base.NVocab, V)
	case chunk > s.m.nctx:
		return nil, fmt.Errorf("%w: the base was computed with chunks of %d tokens; this context holds %d (raise -c)", ErrInvalidOption, chunk, s.m.nctx)
	}
	n := base.NChunk
	if opts.MaxChunks > 0 {
		n = min(n, opts.MaxChunks)
	}
	first := chunk / 2
	rows := chunk - 1 - first
	nv := logProbsRowLen(V)
	stored := make([]byte, rows*nv*2)
	logits := make([]float32, (chunk-first)*V)
	toks := make([]int32, chunk)
	k := &KLDivergenceStats{}
	var progress func(int) error
	if opts.Progress != nil {
		progress = outside(s, func(done int) error { opts.Progress(done, n, k); return nil })
	}
	for c := 0; c < n; c++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if _, err := io.ReadFull(base.r, stored); err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF
			}
			return nil, fmt.Errorf("KL-divergence base file: log-probabilities of chunk %d: %w", c+1, err)
		}
		text := base.Tokens[c*chunk : (c+1)*chunk] // the targets: the text's own tokens
		copy(toks, text)
		if sp := s.m.tok.Special(); sp.AddBOS && sp.BOS >= 0 {
			toks[0] = sp.BOS
		}
		s.rewind(0)
		if err := s.evalLogits(toks, first, logits); err != nil {
			return nil, err
		}
		for j := 0; j < rows; j++ {
			rec := stored[j*nv*2 : (j+1)*nv*2]
			if err := checkLogProbsRecord(rec); err != nil {
				return nil, fmt.Errorf("KL-divergence base file: chunk %d, position %d: %w", c+1, first+j, err)
			}
			k.add(logits[j*V:(j+1)*V], rec, text[first+j+1])
		}
		if progress != nil {
			progress(c + 1)
		}
	}
	s.rewind(0)
	return k, nil
}

// checkLogProbsRecord refuses a record whose scale or offset is not a finite number (a
// non-negative scale), which would turn every statistic into NaN.
func checkLogProbsRecord(rec []byte) error {
	scale := math.Float32frombits(binary.LittleEndian.Uint32(rec[0:]))
	off := math.Float32frombits(binary.LittleEndian.Uint32(rec[4:]))
	if !(scale >= 0) || math.IsInf(float64(scale), 0) || math.IsNaN(float64(off)) || math.IsInf(float64(off), 0) {
		return fmt.Errorf("scale %v, offset %v: not log-probabilities", scale, off)
	}
	return nil
}
