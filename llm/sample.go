package llm

import (
	"cmp"
	"math"
	"math/rand/v2"
	"slices"
)

// SampleOptions choose how the next token is picked from the logits. The filters run in
// llama.cpp's order: repetition penalty, top-k, top-p, min-p, temperature, then a random draw.
type SampleOptions struct {
	Temperature   float32 // <= 0: greedy (the most likely token)
	TopK          int     // keep the k most likely tokens (<= 0: all)
	TopP          float32 // keep the smallest set whose probability reaches p (>= 1: all)
	MinP          float32 // drop tokens less likely than MinP times the most likely (<= 0: off)
	RepeatPenalty float32 // divide positive logits (multiply negative ones) of recent tokens (1: off)
	RepeatLastN   int     // how many recent tokens the penalty looks at
	Seed          uint64
}

// DefaultSampleOptions are llama.cpp's defaults.
func DefaultSampleOptions() SampleOptions {
	return SampleOptions{Temperature: 0.8, TopK: 40, TopP: 0.95, MinP: 0.05, RepeatPenalty: 1, RepeatLastN: 64}
}

type candidate struct {
	id    int32
	logit float32
	p     float32
}

// Sampler picks tokens. Its buffers are allocated once; Sample allocates nothing.
type Sampler struct {
	opts SampleOptions
	rng  *rand.Rand
	cand []candidate
}

// NewSampler makes a sampler for a vocabulary of n tokens.
func NewSampler(opts SampleOptions, n int) *Sampler {
	return &Sampler{opts: opts, rng: rand.New(rand.NewPCG(opts.Seed, 0x9e3779b97f4a7c15)), cand: make([]candidate, n)}
}

// Sample returns the next token given the logits (which it modifies when a repetition penalty
// applies) and the recent tokens.
func (s *Sampler) Sample(logits []float32, recent []int32) int32 {
	o := &s.opts
	if o.RepeatPenalty != 1 && o.RepeatPenalty > 0 {
		penalize(logits, recent, o.RepeatLastN, o.RepeatPenalty)
	}
	if o.Temperature <= 0 {
		return argmax(logits)
	}
	c := s.cand[:len(logits)]
	for i, l := range logits {
		c[i] = candidate{id: int32(i), logit: l}
	}
	if o.TopK > 0 && o.TopK < len(c) {
		c = topK(c, o.TopK)
	} else {
		sortDesc(c)
	}
	softmax(c, 1)
	if o.TopP < 1 {
		var cum float32
		for i := range c {
			cum += c[i].p
			if cum >= o.TopP {
				c = c[:i+1]
				break
			}
		}
	}
	if o.MinP > 0 {
		limit := c[0].p * o.MinP
		for i := range c {
			if c[i].p < limit {
				c = c[:max(i, 1)]
				break
			}
		}
	}
	softmax(c, o.Temperature)
	r := float32(s.rng.Float64())
	var cum float32
	for i := range c {
		cum += c[i].p
		if r < cum {
			return c[i].id
		}
	}
	return c[len(c)-1].id
}

// argmax returns the first index of the largest logit (as torch.argmax does).
func argmax(logits []float32) int32 {
	best := 0
	for i, l := range logits {
		if l > logits[best] {
			best = i
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

// topK moves the k largest candidates to the front, sorted, in O(n log k).
func topK(c []candidate, k int) []candidate {
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

// softmax sets p of sorted candidates from their logits divided by temp.
func softmax(c []candidate, temp float32) {
	mx := c[0].logit
	var sum float64
	for i := range c {
		e := math.Exp(float64((c[i].logit - mx) / temp))
		c[i].p = float32(e)
		sum += e
	}
	for i := range c {
		c[i].p = float32(float64(c[i].p) / sum)
	}
}
