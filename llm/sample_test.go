package llm

import (
	"context"
	"errors"
	"fmt"
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

// Issue 17 item 7: a NaN or infinite logit is an error naming the token, never a token picked
// from garbage (every comparison with NaN is false, so argmax and the sort would pick one).
func TestSamplerRefusesNonFiniteLogits(t *testing.T) {
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		for _, o := range []SampleOptions{Greedy, {Temperature: 0.8, Seed: 1}, {Temperature: 0.8, Seed: 1, RepeatPenalty: 1.3, LogitBias: map[int32]float32{0: 1}}} {
			logits := []float32{1, 2, 3, 4}
			logits[2] = bad
			id, err := NewSampler(o, len(logits)).SampleAt(logits, []int32{1, 2}, 2)
			if !errors.Is(err, ErrNonFiniteLogits) || !strings.Contains(err.Error(), "token 2") || id != -1 {
				t.Errorf("logit %v, options %+v: token %d, error %v", bad, o, id, err)
			}
		}
	}
}

// The chain's first links, in order: the bias, then the frequency and presence penalties, then
// the repetition penalty, each as llama.cpp and OpenAI define them; the caller's logits stay.
func TestSamplerBiasAndPenalties(t *testing.T) {
	// Greedy choice between tokens 0..3 whose logits are close: what each link does decides it.
	pick := func(o SampleOptions, logits []float32, recent []int32) int32 {
		t.Helper()
		in := append([]float32(nil), logits...)
		id, err := NewSampler(o, len(logits)).SampleAt(logits, recent, uint64(len(recent)))
		if err != nil {
			t.Fatal(err)
		}
		for i := range in {
			if in[i] != logits[i] {
				t.Fatalf("the sampler changed the caller's logits: %v -> %v", in, logits)
			}
		}
		return id
	}
	logits := []float32{4, 3.5, 2, 1}
	if id := pick(SampleOptions{LogitBias: map[int32]float32{3: 3.5}}, logits, nil); id != 3 {
		t.Errorf("bias +3.5 on token 3: chose %d", id)
	}
	if id := pick(SampleOptions{LogitBias: map[int32]float32{0: float32(math.Inf(-1))}}, logits, nil); id != 1 {
		t.Errorf("bias -Inf on token 0: chose %d", id)
	}
	// Token 0 twice and token 1 once in the context: frequency 0.6 takes 1.2 from token 0
	// (2.8) and 0.6 from token 1 (2.9): token 1.
	recent := []int32{0, 1, 0}
	if id := pick(SampleOptions{FrequencyPenalty: 0.6, RepeatLastN: 64}, logits, recent); id != 1 {
		t.Errorf("frequency penalty: chose %d", id)
	}
	// Presence 0.7 takes 0.7 from both: 3.3, 2.8: token 0.
	if id := pick(SampleOptions{PresencePenalty: 0.7, RepeatLastN: 64}, logits, recent); id != 0 {
		t.Errorf("presence penalty: chose %d", id)
	}
	// The window: with RepeatLastN 1 only the last token (0) counts.
	if id := pick(SampleOptions{PresencePenalty: 0.7, RepeatLastN: 1}, logits, recent); id != 1 {
		t.Errorf("presence penalty over the last token: chose %d", id)
	}
	// OpenAI's: only tokens after the first draw's context count. The first draw sees none.
	s := NewSampler(SampleOptions{FrequencyPenalty: 1, PenalizeGenerated: true}, len(logits))
	if id, _ := s.SampleAt(logits, recent, 3); id != 0 {
		t.Errorf("generated-only penalty, first draw: chose %d (the prompt's tokens counted)", id)
	}
	if id, _ := s.SampleAt(logits, append(recent, 0), 4); id != 1 {
		t.Errorf("generated-only penalty, second draw: chose %d (the generated token not counted)", id)
	}
	// Order: the frequency penalty before the repetition penalty (gorun's texts were made so;
	// llama.cpp's penalties sampler divides first). Token 0: (4 - 2*0.3) / 2 = 1.7 beats token
	// 2's 1.6; in llama.cpp's order it would be 4/2 - 0.6 = 1.4 and lose.
	logits = []float32{4, 0, 1.6, 0}
	o := SampleOptions{FrequencyPenalty: 0.3, RepeatPenalty: 2, RepeatLastN: 64}
	if id := pick(o, logits, []int32{0, 0}); id != 0 {
		t.Errorf("frequency then repetition penalty: chose %d, want 0 (1.7 > 1.6)", id)
	}
}

// A bias that bans every token, a bias outside the vocabulary and options that overflow a logit
// are errors, not a token.
func TestSamplerBadBias(t *testing.T) {
	inf := float32(math.Inf(-1))
	logits := []float32{1, 2}
	for _, o := range []SampleOptions{
		{LogitBias: map[int32]float32{0: inf, 1: inf}},
		{Temperature: 1, Seed: 1, LogitBias: map[int32]float32{0: inf, 1: inf}},
		{LogitBias: map[int32]float32{2: 1}},
		{LogitBias: map[int32]float32{-1: 1}},
		{LogitBias: map[int32]float32{1: 3e38}, FrequencyPenalty: -3e38, RepeatLastN: 64},
	} {
		recent := []int32{1}
		if _, err := NewSampler(o, len(logits)).SampleAt(logits, recent, 1); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("%+v: %v", o, err)
		}
	}
	for _, o := range []SampleOptions{
		{LogitBias: map[int32]float32{0: float32(math.NaN())}},
		{LogitBias: map[int32]float32{0: float32(math.Inf(1))}},
		{FrequencyPenalty: float32(math.NaN())},
		{PresencePenalty: float32(math.Inf(-1))},
	} {
		if err := o.Validate(); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("Validate %+v: %v", o, err)
		}
	}
}

// Top log-probabilities: the n most likely tokens, most likely first, with log softmax values.
func TestTopLogProbs(t *testing.T) {
	logits := []float32{0, 3, 1, 3, -2}
	top := TopLogProbs(nil, logits, 3)
	if len(top) != 3 || top[0].Token != 1 || top[1].Token != 3 || top[2].Token != 2 {
		t.Fatalf("top 3: %+v", top)
	}
	for _, a := range top {
		if want := LogProb(logits, a.Token); math.Abs(float64(a.LogProb-want)) > 1e-6 {
			t.Errorf("token %d: %v, want %v", a.Token, a.LogProb, want)
		}
	}
	if all := TopLogProbs(nil, logits, 99); len(all) != len(logits) {
		t.Errorf("n above the vocabulary: %d tokens", len(all))
	}
}

// GenerateTokens with TopLogprobs gives each token's step alternatives: under greedy decoding
// the chosen token is the most likely one, with its own log-probability.
func TestGenerateTopLogprobs(t *testing.T) {
	m := tinyModel(t, nil, Options{Threads: 2})
	s, _ := m.NewSession()
	n := 0
	_, err := s.GenerateTokens(context.Background(), "a b", GenerateOptions{MaxTokens: 5, IgnoreEOS: true, TopLogprobs: 3}, func(p Piece) error {
		if p.Token < 0 {
			return nil
		}
		n++
		if len(p.Top) != 3 || p.Top[0].Token != p.Token || math.Abs(float64(p.Top[0].LogProb-p.LogProb)) > 1e-6 || p.Top[1].LogProb > p.Top[0].LogProb {
			t.Errorf("token %d (%v): top %+v", p.Token, p.LogProb, p.Top)
		}
		return nil
	})
	if err != nil || n != 5 {
		t.Fatalf("%d tokens, %v", n, err)
	}
	if _, err := s.GenerateTokens(context.Background(), "a", GenerateOptions{TopLogprobs: -1}, func(Piece) error { return nil }); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("TopLogprobs -1: %v", err)
	}
	bad := GenerateOptions{Sample: SampleOptions{LogitBias: map[int32]float32{int32(m.Tokenizer().VocabSize()): 1}}}
	if _, err := s.Generate(context.Background(), "a", bad, func(string) error { return nil }); !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), "LogitBias") {
		t.Errorf("bias outside the vocabulary: %v", err)
	}
}

// BenchmarkTopK: the top 40 of a GPT-2-sized vocabulary, by a candidate per token (the
// sampler's way until topKOf) and by topKOf's sampled threshold.
func BenchmarkTopK(b *testing.B) {
	rng := rand.New(rand.NewPCG(1, 2))
	logits := make([]float32, 50257)
	for i := range logits {
		logits[i] = float32(rng.NormFloat64() * 3)
	}
	c := make([]candidate, len(logits))
	b.Run("every-token", func(b *testing.B) {
		for b.Loop() {
			for i, l := range logits {
				c[i] = candidate{id: int32(i), logit: l}
			}
			topK(c, 40)
		}
	})
	idx := make([]int32, len(logits))
	b.Run("threshold", func(b *testing.B) {
		for b.Loop() {
			topKOf(c, idx, logits, 40)
		}
	})
}

// topK gives the first k candidates of the sampler's order, sorted, by insertion (small k) and
// by selection (large k) alike, ties included.
func TestTopKLargeAndSmall(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	for trial := range 200 {
		n := 1 + rng.IntN(5000)
		c := make([]candidate, n)
		for i := range c {
			c[i] = candidate{id: int32(i), logit: float32(rng.IntN(1 + trial%40))}
		}
		want := append([]candidate(nil), c...)
		sortDesc(want)
		k := 1 + rng.IntN(min(n, 2000))
		got := topK(c, k)
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("n %d k %d: position %d is %+v, want %+v", n, k, i, got[i], want[i])
			}
		}
	}
}

// drawAll (top-k off) picks the token that sorting the whole vocabulary and walking it (draw)
// picks, for peaked and flat logits, with and without top-p and min-p, at several temperatures.
func TestDrawAllEqualsSortedDraw(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	const V = 5000
	logits := make([]float32, V)
	for trial := range 300 {
		scale := []float64{0.3, 2, 8}[trial%3]
		for i := range logits {
			logits[i] = float32(rng.NormFloat64() * scale)
		}
		if trial%7 == 0 {
			logits[rng.IntN(V)] = float32(math.Inf(-1)) // a banned token
		}
		o := SampleOptions{Temperature: []float32{0.5, 1, 1.7}[trial%3], Seed: uint64(trial + 1),
			TopP: []float32{1, 0.95, 0.5, 0}[trial%4], MinP: []float32{0, 0.05, 0.2}[trial%3]}
		s := NewSampler(o, V)
		got, err := s.drawAll(logits, uint64(trial))
		if err != nil {
			t.Fatal(err)
		}
		c := make([]candidate, V)
		for i, l := range logits {
			c[i] = candidate{id: int32(i), logit: l}
		}
		sortDesc(c)
		want, err := s.draw(c, uint64(trial))
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Fatalf("trial %d (%+v, scale %v): drawAll %d, sorted draw %d", trial, o, scale, got, want)
		}
	}
}

// BenchmarkDrawAll: one sampled token with top-k off (llama.cpp's --top-k 0) over a Llama 3
// sized vocabulary, peaked (a trained model's) and flat (random weights') logits.
func BenchmarkDrawAll(b *testing.B) {
	rng := rand.New(rand.NewPCG(5, 6))
	const V = 128256
	for _, scale := range []float64{8, 1} {
		logits := make([]float32, V)
		for i := range logits {
			logits[i] = float32(rng.NormFloat64() * scale)
		}
		o := SampleOptions{Temperature: 1, Seed: 1, TopP: 1}
		s := NewSampler(o, V)
		b.Run(fmt.Sprintf("scale=%v/drawAll", scale), func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				if _, err := s.drawAll(logits, uint64(i)); err != nil {
					b.Fatal(err)
				}
			}
		})
		c := make([]candidate, V)
		b.Run(fmt.Sprintf("scale=%v/sort", scale), func(b *testing.B) {
			for i := 0; b.Loop(); i++ {
				for j, l := range logits {
					c[j] = candidate{id: int32(j), logit: l}
				}
				sortDesc(c)
				if _, err := s.draw(c, uint64(i)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
