package llm

import (
	"context"
	"fmt"
	"math"
	"strings"

	"github.com/gorun-dev/gorun/quant"
)

// Pooling is how an embedding is made of a sequence's final hidden states (llama.cpp's
// --pooling).
type Pooling int

const (
	// PoolingDefault is the file's ARCH.pooling_type when it names mean, cls or last, else mean.
	PoolingDefault Pooling = iota
	// PoolingMean averages the hidden states of every token.
	PoolingMean
	// PoolingCLS takes the first token's hidden state.
	PoolingCLS
	// PoolingLast takes the last token's hidden state.
	PoolingLast
)

var poolingNames = [...]string{PoolingDefault: "default", PoolingMean: "mean", PoolingCLS: "cls", PoolingLast: "last"}

func (p Pooling) String() string {
	if p >= 0 && int(p) < len(poolingNames) {
		return poolingNames[p]
	}
	return fmt.Sprintf("Pooling(%d)", int(p))
}

// ParsePooling reads llama.cpp's --pooling names: mean, cls, last (and "" for the default).
// none and rank (per-token vectors, rerankers) are refused by name.
func ParsePooling(name string) (Pooling, error) {
	switch strings.ToLower(name) {
	case "", "default":
		return PoolingDefault, nil
	case "mean":
		return PoolingMean, nil
	case "cls":
		return PoolingCLS, nil
	case "last":
		return PoolingLast, nil
	}
	return 0, fmt.Errorf("%w: pooling %q (want mean, cls or last; gorun does not do none or rank)", ErrInvalidOption, name)
}

// Embedding normalizations (llama.cpp's --embd-normalize values); any p > 2 is a p-norm.
const (
	NormalizeNone      = -1 // the pooled hidden state as it is
	NormalizeMaxAbs    = 0  // scaled so that the largest magnitude is 32760 (the int16 range)
	NormalizeTaxicab   = 1  // sum of magnitudes 1
	NormalizeEuclidean = 2  // Euclidean length 1 (the default)
)

// EmbedOptions configure Embed. The zero value is not the default (Normalize 0 is llama.cpp's
// max-abs scaling): start from DefaultEmbedOptions.
type EmbedOptions struct {
	Pooling Pooling
	// Normalize is llama.cpp's --embd-normalize: -1 none, 0 max absolute scaled to int16,
	// 1 taxicab, 2 Euclidean, p > 2 the p-norm.
	Normalize int
}

// DefaultEmbedOptions are llama.cpp's defaults: the model's pooling, Euclidean normalization.
func DefaultEmbedOptions() EmbedOptions {
	return EmbedOptions{Pooling: PoolingDefault, Normalize: NormalizeEuclidean}
}

// maxNormalize bounds the p of a p-norm (beyond it, |x|^p overflows float64 for any x > 2).
const maxNormalize = 1000

func (o EmbedOptions) validate() error {
	if o.Pooling < PoolingDefault || o.Pooling > PoolingLast {
		return fmt.Errorf("%w: pooling %v", ErrInvalidOption, o.Pooling)
	}
	if o.Normalize < NormalizeNone || o.Normalize > maxNormalize {
		return fmt.Errorf("%w: embedding normalization %d (want -1 none, 0 max-abs, 1 taxicab, 2 Euclidean or a p-norm up to %d)", ErrInvalidOption, o.Normalize, maxNormalize)
	}
	return nil
}

// Pooling resolves p for this model: PoolingDefault becomes the file's ARCH.pooling_type
// (llama.cpp's enum: 1 mean, 2 cls, 3 last) when it names one of those, else PoolingMean.
// (llama.cpp leaves a causal model without that key unpooled; gorun returns one vector per
// text, so it averages.)
func (m *Model) Pooling(p Pooling) Pooling {
	if p != PoolingDefault {
		return p
	}
	key := m.arch.Hparams().Arch + ".pooling_type"
	if m.file.Has(key) {
		if v, err := m.file.Uint(key); err == nil {
			switch v {
			case 1:
				return PoolingMean
			case 2:
				return PoolingCLS
			case 3:
				return PoolingLast
			}
		}
	}
	return PoolingMean
}

// Embed returns one embedding per text: the text tokenized as a context's start (BOS and EOS
// as the file asks, as llama-embedding does), run through the model, its final hidden states
// (after the output norm, the output layer's input) pooled and normalized as opts say. Each
// text is a sequence of its own. It uses one session, made for the call.
func (m *Model) Embed(ctx context.Context, texts []string, opts EmbedOptions) ([][]float32, error) {
	seqs := make([][]int32, len(texts))
	for i, t := range texts {
		seqs[i] = m.Tokenize(t, true)
	}
	return m.EmbedTokens(ctx, seqs, opts)
}

// EmbedTokens is Embed over token sequences.
func (m *Model) EmbedTokens(ctx context.Context, seqs [][]int32, opts EmbedOptions) ([][]float32, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	s, err := m.NewSession()
	if err != nil {
		return nil, err
	}
	defer s.Close()
	out := make([][]float32, len(seqs))
	for i, toks := range seqs {
		if out[i], err = s.Embed(ctx, toks, opts); err != nil {
			return nil, fmt.Errorf("input %d: %w", i, err)
		}
	}
	return out, nil
}

// Embed empties the session's context, evaluates tokens as a sequence of their own and returns
// their pooled, normalized final hidden states (n_embd values; see Model.Embed). The context
// holds the tokens afterwards (their logits are not computed). Like Eval, it stops between
// batches when ctx is done and returns ErrBusy while another call runs.
func (s *Session) Embed(ctx context.Context, tokens []int32, opts EmbedOptions) ([]float32, error) {
	if err := opts.validate(); err != nil {
		return nil, err
	}
	if len(tokens) == 0 {
		return nil, fmt.Errorf("%w: no tokens to embed", ErrInvalidOption)
	}
	if err := s.begin(); err != nil {
		return nil, err
	}
	defer s.end()
	if err := s.usable(); err != nil {
		return nil, err
	}
	if err := s.rewind(0); err != nil {
		return nil, err
	}
	if err := s.check(tokens); err != nil {
		return nil, err
	}
	pooled, err := s.poolHidden(ctx, tokens, s.m.Pooling(opts.Pooling))
	if err != nil {
		s.rollback(0)
		return nil, err
	}
	return normalize(pooled, opts.Normalize), nil
}

// poolHidden appends tokens to the (empty) context batch by batch, reading each batch's final
// hidden states, and pools them. The mean is summed in float64: llama.cpp sums in float32,
// which differs from the exact mean by float32 rounding only.
func (s *Session) poolHidden(ctx context.Context, tokens []int32, p Pooling) ([]float32, error) {
	E := s.m.arch.Hparams().NEmbd
	s.tokens = append(s.tokens, tokens...)
	s.logitsOK = false
	hidden := make([]float32, min(len(tokens), s.m.nbatch)*E)
	sum := make([]float64, E)
	out := make([]float32, E)
	for first := 0; s.npast < len(s.tokens); {
		if err := ctx.Err(); err != nil {
			return nil, cancelled(err)
		}
		if err := s.usable(); err != nil {
			return nil, err
		}
		n := min(len(s.tokens)-s.npast, s.m.nbatch)
		if n > promptSlice && s.m.batch.generating() {
			n = promptSlice // let generating sessions step between slices (see sync)
		}
		if err := s.runBatch(n, 0, true); err != nil {
			return nil, err
		}
		rows := hidden[:n*E]
		if err := s.m.be.Read(s.batch.step.Hidden, quant.F32Bytes(rows)); err != nil {
			return nil, err
		}
		switch {
		case p == PoolingMean:
			for i, v := range rows {
				sum[i%E] += float64(v)
			}
		case p == PoolingCLS && first == 0:
			copy(out, rows[:E])
		case p == PoolingLast && s.npast == len(s.tokens):
			copy(out, rows[(n-1)*E:])
		}
		first += n
	}
	if p == PoolingMean {
		for i, v := range sum {
			out[i] = float32(v / float64(len(tokens)))
		}
	}
	return out, nil
}

// normalize scales v as llama.cpp's common_embd_normalize does (sums in float64): by its
// largest magnitude onto the int16 range (0), its taxicab (1), Euclidean (2) or p-norm
// (p > 2), or not at all (-1). A zero vector stays zero.
func normalize(v []float32, p int) []float32 {
	var sum float64
	switch p {
	case NormalizeNone:
		return v
	case NormalizeMaxAbs:
		for _, x := range v {
			sum = max(sum, math.Abs(float64(x)))
		}
		sum /= 32760
	case NormalizeEuclidean:
		for _, x := range v {
			sum += float64(x * x) // llama.cpp squares in float32
		}
		sum = math.Sqrt(sum)
	default:
		for _, x := range v {
			sum += math.Pow(math.Abs(float64(x)), float64(p))
		}
		sum = math.Pow(sum, 1/float64(p))
	}
	scale := float32(0)
	if sum > 0 {
		scale = float32(1 / sum)
	}
	for i := range v {
		v[i] *= scale
	}
	return v
}
