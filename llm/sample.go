package llm

import (
	"cmp"
	"fmt"
	"math"
	"math/rand/v2"
	"slices"

	"github.com/gorun-dev/gorun/cpu/kernels"
	"github.com/gorun-dev/gorun/grammar"
)

// SampleOptions choose how the next token is picked from the logits. The sampler is a chain,
// as llama.cpp's common sampler: logit bias, frequency and presence penalties, repetition
// penalty, top-k, top-p, min-p, temperature, then a random draw. (Within the penalties,
// llama.cpp applies the repetition penalty first; gorun subtracts the frequency and presence
// penalties first, as it always has, so that its seeded texts stay as they were.)
//
// A zero field turns its step off, as 0 does for the gorun command's option of the same name
// (--temp 0 is greedy, --top-k 0, --min-p 0 and --repeat-last-n 0 are off, --seed 0 is the
// seed 0): the zero SampleOptions is greedy decoding. Start from DefaultSampling, llama.cpp's
// defaults, to sample as llama-cli and gorun do when no option is given. NaN and Inf are
// rejected.
type SampleOptions struct {
	// Temperature divides the logits before the draw. 0 (or less): greedy, the most likely
	// token after the logit bias and the penalties; the other filters and the seed then do not
	// matter.
	Temperature float32
	// TopK keeps the k most likely tokens. 0 (or less): off, all tokens.
	TopK int
	// TopP keeps the smallest set of most likely tokens whose probability reaches p.
	// 0 or 1: off. Must be in [0, 1].
	TopP float32
	// MinP drops tokens less likely than MinP times the most likely one. 0 (or less): off.
	// Must be at most 1.
	MinP float32
	// RepeatPenalty divides positive logits (multiplies negative ones) of tokens among the last
	// RepeatLastN of the context. 0 or 1: off. Must not be negative.
	RepeatPenalty float32
	// RepeatLastN is how many recent context tokens the penalties look at. 0: none (the
	// penalties are off, except the generated tokens PenalizeGenerated counts); WholeContext
	// (-1): the whole context.
	RepeatLastN int
	// FrequencyPenalty is subtracted from a token's logit once per occurrence among the counted
	// tokens, and PresencePenalty once if it occurs there (0: off). They count the last
	// RepeatLastN tokens of the context, prompt included (llama.cpp's), or with
	// PenalizeGenerated the tokens generated since the sampler's first draw (OpenAI's).
	FrequencyPenalty, PresencePenalty float32
	// PenalizeGenerated makes FrequencyPenalty and PresencePenalty count only the generated
	// tokens, as OpenAI's API defines them (the repetition penalty still looks at the context).
	PenalizeGenerated bool
	// LogitBias is added to the logits of its tokens before every other step; -Inf bans a token.
	// Token ids must be in the vocabulary; NaN and +Inf are rejected.
	LogitBias map[int32]float32
	// Grammar, when set, constrains the text to a grammar (grammar.Parse for GBNF,
	// grammar.CompileJSONSchema for a JSON schema): tokens whose text the grammar refuses are
	// removed from the candidates before top-k, as llama.cpp applies the grammar before the
	// other filters, and end-of-generation tokens are allowed only where the text is a
	// complete match. Each Generate call starts at the grammar's root: it constrains the text
	// that call generates (the prompt and earlier calls' text are not matched). A Grammar is
	// immutable and may be shared by concurrent generations. NewSampler ignores it (a grammar
	// needs the vocabulary's token texts): Model.NewSampler applies it.
	Grammar *grammar.Grammar
	// Seed makes sampling reproducible; 0 is a seed like any other. RandomSeed: a random seed,
	// drawn per Generate call and reported in Stats.Seed (give it back to reproduce the text).
	// The draw for the token at context position p depends only on (Seed, p), so generating
	// N*k tokens in one call or in N calls of k gives the same text.
	Seed uint64
}

// RandomSeed as SampleOptions.Seed draws a random seed per generation: the gorun command's
// --seed -1 and the server's absent or -1 seed (llama.cpp's LLAMA_DEFAULT_SEED, all ones).
const RandomSeed = math.MaxUint64

// Values that turn a sampling filter off (see SampleOptions). NoTopK and NoMinP are 0, the
// zero value; they name it where a filter is turned off on purpose.
const (
	NoTopK       = 0
	NoMinP       = 0
	WholeContext = -1
)

// Greedy is greedy decoding: always the most likely token (the zero SampleOptions).
var Greedy = SampleOptions{}

// DefaultSampling returns llama.cpp's sampling defaults, what the gorun command and the server
// use when no option is given: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05, no
// repetition penalty (1, over the last 64 tokens) and a random seed. Change the fields wanted:
//
//	o := llm.DefaultSampling()
//	o.Temperature, o.Seed = 0.7, 42
func DefaultSampling() SampleOptions {
	return SampleOptions{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1, RepeatLastN: 64, Seed: RandomSeed}
}

// DefaultSampleOptions is DefaultSampling.
//
// Deprecated: use DefaultSampling.
func DefaultSampleOptions() SampleOptions { return DefaultSampling() }

// Validate reports an option that is NaN, infinite or out of range, naming it.
func (o SampleOptions) Validate() error {
	for _, f := range []struct {
		name string
		v    float32
	}{{"Temperature", o.Temperature}, {"TopP", o.TopP}, {"MinP", o.MinP}, {"RepeatPenalty", o.RepeatPenalty},
		{"FrequencyPenalty", o.FrequencyPenalty}, {"PresencePenalty", o.PresencePenalty}} {
		if math.IsNaN(float64(f.v)) || math.IsInf(float64(f.v), 0) {
			return fmt.Errorf("%w: SampleOptions.%s is %v", ErrInvalidOption, f.name, f.v)
		}
	}
	switch {
	case o.TopP < 0 || o.TopP > 1:
		return fmt.Errorf("%w: SampleOptions.TopP = %v is outside [0, 1]", ErrInvalidOption, o.TopP)
	case o.MinP > 1:
		return fmt.Errorf("%w: SampleOptions.MinP = %v is above 1", ErrInvalidOption, o.MinP)
	case o.RepeatPenalty < 0:
		return fmt.Errorf("%w: SampleOptions.RepeatPenalty = %v is negative", ErrInvalidOption, o.RepeatPenalty)
	}
	for id, b := range o.LogitBias {
		if math.IsNaN(float64(b)) || math.IsInf(float64(b), 1) {
			return fmt.Errorf("%w: SampleOptions.LogitBias[%d] is %v", ErrInvalidOption, id, b)
		}
	}
	return nil
}

// checkVocab reports a LogitBias token outside a vocabulary of n tokens.
func (o SampleOptions) checkVocab(n int) error {
	for id := range o.LogitBias {
		if id < 0 || int(id) >= n {
			return fmt.Errorf("%w: SampleOptions.LogitBias token %d is outside the vocabulary of %d", ErrInvalidOption, id, n)
		}
	}
	return nil
}

// randomSeed returns a random seed other than RandomSeed.
func randomSeed() uint64 {
	for {
		if s := rand.Uint64(); s != RandomSeed {
			return s
		}
	}
}

type candidate struct {
	id    int32
	logit float32
}

// Sampler picks tokens. Its buffers are allocated once; Sample allocates nothing. It does not
// modify the logits it is given.
type Sampler struct {
	opts   SampleOptions
	gram   *grammarStage // nil without a grammar
	cand   []candidate
	idx    []int32   // topKOf's scratch, made on first use
	work   []float32 // the logits after the bias and the penalties
	counts []int32   // occurrences per token, for the frequency and presence penalties
	calls  uint64
	start  int // len(recent) at the first draw: where the generated tokens begin
}

// NewSampler makes a sampler for a vocabulary of n tokens (see SampleOptions). RandomSeed is
// replaced by a random seed (Seed reports it).
func NewSampler(opts SampleOptions, n int) *Sampler {
	switch {
	case opts.Temperature <= 0:
		opts.Seed = 0 // greedy decoding draws nothing: no seed to report
	case opts.Seed == RandomSeed:
		opts.Seed = randomSeed()
	}
	s := &Sampler{opts: opts, cand: make([]candidate, n), work: make([]float32, n), start: -1}
	if opts.FrequencyPenalty != 0 || opts.PresencePenalty != 0 {
		s.counts = make([]int32, n)
	}
	return s
}

// indexes returns the sampler's index scratch (a vocabulary's length).
func (s *Sampler) indexes() []int32 {
	if s.idx == nil {
		s.idx = make([]int32, len(s.cand))
	}
	return s.idx
}

// Seed is the seed the sampler draws with (0 for greedy decoding, which draws nothing).
func (s *Sampler) Seed() uint64 { return s.opts.Seed }

// Sample returns the next token given the logits and the recent tokens, drawing the random
// number from (seed, number of previous Sample calls).
func (s *Sampler) Sample(logits []float32, recent []int32) (int32, error) {
	s.calls++
	return s.SampleAt(logits, recent, s.calls-1)
}

// SampleAt returns the token to put at context position pos, given the logits after the
// context and the context's tokens (recent, what the penalties look at): its random draw
// depends only on the seed and pos. Logits that are NaN or infinite are an error (a broken
// model or backend), as is a bias that bans every token.
func (s *Sampler) SampleAt(logits []float32, recent []int32, pos uint64) (int32, error) {
	if len(logits) == 0 || len(logits) > len(s.cand) {
		return -1, fmt.Errorf("%w: %d logits for a sampler of %d tokens", ErrInvalidOption, len(logits), len(s.cand))
	}
	if s.start < 0 {
		s.start = len(recent)
	}
	best, finite := kernels.MaxFinite(logits) // the greedy pick, and the finiteness check
	if !finite {
		return -1, checkFinite(logits)
	}
	adjusted, err := s.adjust(logits, recent)
	if err != nil {
		return -1, err
	}
	if s.gram != nil {
		return s.gram.sample(s, adjusted, pos)
	}
	o := &s.opts
	if o.Temperature <= 0 {
		if &adjusted[0] != &logits[0] { // penalties or a bias changed them
			best = int(argmax(adjusted))
		}
		if math.IsInf(float64(adjusted[best]), -1) {
			return -1, errAllBanned
		}
		return int32(best), nil
	}
	logits = adjusted
	if o.TopK > 0 && o.TopK < len(logits) {
		return s.draw(topKOf(s.cand, s.indexes(), logits, o.TopK), pos)
	}
	return s.drawAll(logits, pos)
}

// drawAll is draw for the whole vocabulary (top-k off), without sorting it: the candidates
// start in id order and are put in the sampler's order a prefix at a time (ordered.upTo), only
// as far as top-p, min-p and the draw look. Sorting 50k-128k candidates for every token took
// 8-23 ms.
func (s *Sampler) drawAll(logits []float32, pos uint64) (int32, error) {
	c := s.cand[:len(logits)]
	for i, l := range logits {
		c[i] = candidate{id: int32(i), logit: l}
	}
	return s.drawOrdered(ordered{c: c}, pos)
}

// expSum is the sum of exp((logit - mx) / t) over c, in c's order (softmax's terms).
func expSum(c []candidate, mx, t float32) float64 {
	var sum float64
	for _, x := range c {
		sum += math.Exp(float64((x.logit - mx) / t))
	}
	return sum
}

// ordered is a candidate list whose prefix c[:n] is in the sampler's order (before) and holds
// the n first candidates of that order.
type ordered struct {
	c []candidate
	n int
}

// upTo extends the ordered prefix to at least m candidates: the next ones selected from the
// rest (selectFirst, linear) and sorted, at least doubling the prefix each time.
func (o *ordered) upTo(m int) {
	if m <= o.n {
		return
	}
	m = min(len(o.c), max(m, 2*o.n, 64))
	selectFirst(o.c[o.n:], m-o.n)
	sortDesc(o.c[o.n:m])
	o.n = m
}

// draw is the chain after top-k: top-p, min-p, temperature and the seeded draw, over
// candidates sorted by logit, most likely first.
func (s *Sampler) draw(c []candidate, pos uint64) (int32, error) {
	return s.drawOrdered(ordered{c: c, n: len(c)}, pos)
}

// drawOrdered is draw over candidates of which the prefix c.n is in the sampler's order,
// ordering more of them only as far as the filters and the draw look. A probability is
// softmax's: float32(e / sum) with e = float32(exp(logit - max)) and the float64 sum of the
// exps over the candidates in their order in c (the sampler's order once sorted).
func (s *Sampler) drawOrdered(c ordered, pos uint64) (int32, error) {
	o := &s.opts
	mx := c.c[0].logit
	for _, x := range c.c[c.n:] {
		mx = max(mx, x.logit)
	}
	if math.IsInf(float64(mx), -1) {
		return -1, errAllBanned
	}
	sum := expSum(c.c, mx, 1)
	p := func(i int) float32 { return float32(float64(float32(math.Exp(float64(c.c[i].logit-mx)))) / sum) }
	kept := len(c.c)
	if o.TopP > 0 && o.TopP < 1 {
		var cum float32
		for i := range c.c {
			c.upTo(i + 1)
			if cum += p(i); cum >= o.TopP {
				kept = i + 1
				break
			}
		}
	}
	if o.MinP > 0 {
		c.upTo(1)
		limit := p(0) * o.MinP
		for i := range kept {
			c.upTo(i + 1)
			if p(i) < limit {
				kept = max(i, 1)
				break
			}
		}
	}
	if t := o.Temperature; t != 1 || kept < len(c.c) { // at 1 over every candidate: the sum above
		sum = expSum(c.c[:kept], mx, t)
	}
	r := float32(uniform(o.Seed, pos))
	var cum float32
	for i := range kept {
		c.upTo(i + 1)
		cum += float32(float64(float32(math.Exp(float64((c.c[i].logit-mx)/o.Temperature)))) / sum)
		if r < cum {
			return c.c[i].id, nil
		}
	}
	c.upTo(kept)
	return c.c[kept-1].id, nil
}

// errAllBanned: the logit bias left no token to choose.
var errAllBanned = fmt.Errorf("%w: the logit bias bans every token (all logits are -Inf)", ErrInvalidOption)

// checkFinite reports the first logit that is NaN or infinite: sampling would pick an arbitrary
// token from it (every comparison with NaN is false).
func checkFinite(logits []float32) error {
	const exponent = 0x7f800000 // all ones: infinite or NaN
	for i, l := range logits {
		if math.Float32bits(l)&exponent == exponent {
			return fmt.Errorf("%w: the logit of token %d is %v", ErrNonFiniteLogits, i, l)
		}
	}
	return nil
}

// adjust applies the first links of the chain, the logit bias, the frequency and presence
// penalties and the repetition penalty, in that order, to a copy of the logits (the caller's
// stay as they are). With none of them on, it returns the logits themselves.
func (s *Sampler) adjust(logits []float32, recent []int32) ([]float32, error) {
	o := &s.opts
	repeat := o.RepeatPenalty != 1 && o.RepeatPenalty > 0 && o.RepeatLastN != 0 && len(recent) > 0
	counted := s.counted(recent)
	if len(o.LogitBias) == 0 && len(counted) == 0 && !repeat {
		return logits, nil
	}
	w := s.work[:len(logits)]
	copy(w, logits)
	for id, b := range o.LogitBias {
		if id < 0 || int(id) >= len(w) {
			return nil, o.checkVocab(len(w))
		}
		w[id] += b // -Inf bans the token
	}
	if len(counted) > 0 {
		s.penalizeCounts(w, counted)
	}
	if repeat {
		penalize(w, recent, o.RepeatLastN, o.RepeatPenalty)
	}
	// Huge (finite) options can overflow: a logit made +Inf or NaN would decide the draw alone.
	for i, l := range w {
		if math.IsNaN(float64(l)) || math.IsInf(float64(l), 1) {
			return nil, fmt.Errorf("%w: the logit bias and penalties make the logit of token %d %v", ErrInvalidOption, i, l)
		}
	}
	return w, nil
}

// counted is the tokens the frequency and presence penalties count (none when they are off).
func (s *Sampler) counted(recent []int32) []int32 {
	o := &s.opts
	switch {
	case s.counts == nil:
		return nil
	case o.PenalizeGenerated:
		return recent[min(s.start, len(recent)):]
	case o.RepeatLastN >= 0 && len(recent) > o.RepeatLastN:
		return recent[len(recent)-o.RepeatLastN:]
	}
	return recent
}

// penalizeCounts subtracts, once per distinct token of toks, FrequencyPenalty times its count
// plus PresencePenalty. s.counts is all zeros before and after.
func (s *Sampler) penalizeCounts(w []float32, toks []int32) {
	c := s.counts
	for _, t := range toks {
		if t >= 0 && int(t) < len(w) {
			c[t]++
		}
	}
	for _, t := range toks {
		if t < 0 || int(t) >= len(w) || c[t] == 0 {
			continue
		}
		w[t] -= s.opts.FrequencyPenalty*float32(c[t]) + s.opts.PresencePenalty
		c[t] = 0
	}
}

// uniform is a number in [0, 1) that depends only on seed and pos (a PCG stream per position).
func uniform(seed, pos uint64) float64 {
	var p rand.PCG
	p.Seed(seed, pos^0x9e3779b97f4a7c15)
	return float64(p.Uint64()>>11) / (1 << 53)
}

// TokenLogProb is a token and its log-probability under the model.
type TokenLogProb struct {
	Token   int32
	LogProb float32
}

// logSoftmaxParts returns the largest logit and the log of the sum of exp(logit - largest):
// log softmax(logits)[i] is logits[i] - mx - logSum.
func logSoftmaxParts(logits []float32) (mx, logSum float64) {
	mx = math.Inf(-1)
	for _, l := range logits {
		mx = math.Max(mx, float64(l))
	}
	var sum float64
	for _, l := range logits {
		sum += math.Exp(float64(l) - mx)
	}
	return mx, math.Log(sum)
}

// LogProb is log softmax(logits)[id], computed in float64.
func LogProb(logits []float32, id int32) float32 {
	mx, logSum := logSoftmaxParts(logits)
	return float32(float64(logits[id]) - mx - logSum)
}

// TopLogProbs appends to dst the n most likely tokens of the logits (all of them when n is
// larger than the vocabulary) with their log-probabilities, most likely first; of equal logits
// the lower id comes first.
func TopLogProbs(dst []TokenLogProb, logits []float32, n int) []TokenLogProb {
	n = min(n, len(logits))
	if n <= 0 {
		return dst
	}
	base := len(dst)
	for i, l := range logits {
		top := dst[base:]
		if len(top) == n && l <= logits[top[n-1].Token] {
			continue
		}
		if len(top) < n {
			dst = append(dst, TokenLogProb{Token: int32(i)})
			top = dst[base:]
		} else {
			top[n-1] = TokenLogProb{Token: int32(i)}
		}
		for j := len(top) - 1; j > 0 && logits[top[j].Token] > logits[top[j-1].Token]; j-- {
			top[j], top[j-1] = top[j-1], top[j]
		}
	}
	mx, logSum := logSoftmaxParts(logits)
	lse := mx + logSum
	for i := base; i < len(dst); i++ {
		dst[i].LogProb = float32(float64(logits[dst[i].Token]) - lse)
	}
	return dst
}

// argmax returns the first index of the largest logit (as torch.argmax does).
func argmax(logits []float32) int32 {
	best, mx := 0, logits[0]
	for i, l := range logits {
		if l > mx {
			best, mx = i, l
		}
	}
	return int32(best)
}

func penalize(logits []float32, recent []int32, lastN int, penalty float32) {
	if lastN >= 0 && len(recent) > lastN {
		recent = recent[len(recent)-lastN:]
	}
	// A token repeated in the window is penalized once, as llama.cpp does: mark by sign trick
	// would need memory; the window is short, so check earlier occurrences directly.
	for i, t := range recent {
		if slices.Contains(recent[:i], t) || int(t) >= len(logits) || t < 0 {
			continue
		}
		if logits[t] > 0 {
			logits[t] /= penalty
		} else {
			logits[t] *= penalty
		}
	}
}

func sortDesc(c []candidate) {
	slices.SortFunc(c, func(a, b candidate) int {
		if r := cmp.Compare(b.logit, a.logit); r != 0 {
			return r
		}
		return cmp.Compare(a.id, b.id)
	})
}

// topKOf returns the k most likely tokens of logits as candidates sorted in the sampler's
// order (larger logit first, then lower id), in c's memory (len(c) >= len(logits); idx is
// scratch of the same length). Where k is small against the vocabulary it does not make a
// candidate of every token (building 50k candidates and inserting into a sorted top cost
// 0.1-0.3 ms a token, a fifth of a GPU step): a threshold read off a sample of the logits lets
// through about 4k+20 of them (found by a SIMD scan), and only those become candidates. The
// result is exact: when at least k logits pass, the k-th largest passes, and so does every
// logit a top-k token has. When fewer pass (a sample that missed), or far more, it falls back
// to every token.
func topKOf(c []candidate, idx []int32, logits []float32, k int) []candidate {
	n := len(logits)
	if n >= 4096 && k*16 <= n {
		if w := aboveThreshold(c, idx, logits, k, n, nil); w >= k {
			return topK(c[:w], k)
		}
	}
	c = c[:n]
	for i, l := range logits {
		c[i] = candidate{id: int32(i), logit: l}
	}
	return topK(c, k)
}

// aboveThreshold makes candidates, in c in id order, of the tokens whose logit reaches
// sampledThreshold(logits, k, of) and that set allows (nil: every token), and returns how many;
// 0 when more reach it than idx's share of room holds (the caller falls back to every token).
func aboveThreshold(c []candidate, idx []int32, logits []float32, k, of int, set []uint64) int {
	room := idx[:min(len(logits), 16*k+4096)]
	cnt := kernels.IndexAtLeast(logits, sampledThreshold(logits, k, of), room)
	if cnt > len(room) {
		return 0
	}
	w := 0
	for _, i := range room[:cnt] {
		if set == nil || set[i>>6]&(1<<(i&63)) != 0 {
			c[w] = candidate{id: i, logit: logits[i]}
			w++
		}
	}
	return w
}

// sampledThreshold returns a logit value about 4k+20 of the wanted tokens are expected to
// reach, from every (n/512)-th logit; of is how many tokens are wanted from (the vocabulary,
// or a grammar's allowed tokens).
func sampledThreshold(logits []float32, k, of int) float32 {
	var sample [512]float32
	stride := len(logits) / len(sample)
	for i := range sample {
		sample[i] = logits[i*stride]
	}
	r := min(len(sample)-1, 4*k*len(sample)/of+10) // rank from the top, with a margin
	return kthLargest(sample[:], r)
}

// kthLargest returns the element of a that would be a[r] sorted in decreasing order
// (quickselect; a is reordered).
func kthLargest(a []float32, r int) float32 {
	lo, hi := 0, len(a)-1
	for lo < hi {
		p := a[lo+(hi-lo)/2]
		i, j := lo, hi
		for i <= j {
			for a[i] > p {
				i++
			}
			for a[j] < p {
				j--
			}
			if i <= j {
				a[i], a[j] = a[j], a[i]
				i++
				j--
			}
		}
		switch {
		case r <= j:
			hi = j
		case r >= i:
			lo = i
		default:
			return a[r]
		}
	}
	return a[r]
}

// topK moves the k largest candidates to the front, sorted, in O(n log k). The candidates must
// be in id order: of equal logits, the earlier is kept and comes first (the sampler's order).
func topK(c []candidate, k int) []candidate {
	if k > 64 { // inserting into a long sorted top costs more than selecting, then sorting
		selectFirst(c, k)
		sortDesc(c[:k])
		return c[:k]
	}
	h := c[:k]
	sortDesc(h) // h[k-1] is the smallest kept
	for i := k; i < len(c); i++ {
		if c[i].logit > h[k-1].logit {
			// insert into the sorted prefix
			j := k - 1
			x := c[i]
			for j > 0 && h[j-1].logit < x.logit {
				h[j] = h[j-1]
				j--
			}
			h[j] = x
		}
	}
	return h
}

// before is the sampler's total order: larger logit first, then lower id.
func before(a, b candidate) bool {
	return a.logit > b.logit || a.logit == b.logit && a.id < b.id
}

// selectFirst moves the m first candidates in the order of before to c[:m] (unsorted), in
// expected linear time (quickselect with median-of-three pivots).
func selectFirst(c []candidate, m int) {
	lo, hi := 0, len(c)-1
	for lo < hi {
		mid := lo + (hi-lo)/2
		if before(c[mid], c[lo]) {
			c[mid], c[lo] = c[lo], c[mid]
		}
		if before(c[hi], c[lo]) {
			c[hi], c[lo] = c[lo], c[hi]
		}
		if before(c[hi], c[mid]) {
			c[hi], c[mid] = c[mid], c[hi]
		}
		pivot := c[mid]
		i, j := lo, hi
		for i <= j {
			for before(c[i], pivot) {
				i++
			}
			for before(pivot, c[j]) {
				j--
			}
			if i <= j {
				c[i], c[j] = c[j], c[i]
				i++
				j--
			}
		}
		switch {
		case m-1 <= j:
			hi = j
		case m-1 >= i:
			lo = i
		default:
			return
		}
	}
}
