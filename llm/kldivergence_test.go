package llm

import (
	"bytes"
	"context"
	"encoding/binary"
	"math"
	"math/rand/v2"
	"os"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/internal/fixtures"
)

// A stored record decodes to the log-probabilities within half a quantization step
// (16/65535/2 in log p) for every token within 16 of the largest logit; tokens below are
// stored as the floor; the returned NLL is the exact one.
func TestEncodeLogProbs(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{5, 6, 1000} {
		logits := make([]float32, n)
		for i := range logits {
			logits[i] = float32(r.NormFloat64() * 6)
		}
		rec := make([]byte, 2*logProbsRowLen(n))
		nll := encodeLogProbs(rec, logits, 3)
		mx, ls := logSoftmaxParts(logits)
		if want := mx + ls - float64(logits[3]); math.Abs(nll-want) > 1e-5 {
			t.Errorf("n %d: NLL %v, want %v", n, nll, want)
		}
		scale := float64(math.Float32frombits(binary.LittleEndian.Uint32(rec)))
		off := float64(math.Float32frombits(binary.LittleEndian.Uint32(rec[4:])))
		for i, l := range logits {
			lp := float64(l) - mx - ls
			got := scale*float64(binary.LittleEndian.Uint16(rec[8+2*i:])) + off
			if float64(l) >= mx-16 && math.Abs(got-lp) > scale/2+1e-5 {
				t.Fatalf("n %d token %d: stored log p %v, exact %v (step %v)", n, i, got, lp, scale)
			}
			if float64(l) < mx-16 && got > lp+1e-5 && got != off {
				t.Fatalf("n %d token %d below the window: %v", n, i, got)
			}
		}
	}
	// A uniform distribution has no spread: scale 0 and every q 0.
	rec := make([]byte, 2*logProbsRowLen(4))
	encodeLogProbs(rec, []float32{2, 2, 2, 2}, 0)
	if off := math.Float32frombits(binary.LittleEndian.Uint32(rec[4:])); math.Abs(float64(off)+math.Log(4)) > 1e-6 || binary.LittleEndian.Uint32(rec) != 0 {
		t.Errorf("uniform: %x", rec)
	}
}

// klBase writes a KL-divergence base file of the f16 fixture: chunks of 64 tokens of the eval
// text, 4 of them (4 x 31 scored positions, over llama-perplexity's 100 for statistics).
func klBase(t *testing.T) []byte {
	t.Helper()
	m := loadFixtureModel(t, "gpt2-tiny-f16.gguf", Options{Threads: 2, ContextLength: 64})
	text, err := os.ReadFile(fixtures.Path(t, "eval_kjv.txt"))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := m.NewSession()
	var buf bytes.Buffer
	res, err := s.Perplexity(context.Background(), m.Tokenize(string(text), true), PerplexityOptions{Chunk: 64, MaxChunks: 4, LogProbs: &buf})
	if err != nil {
		t.Fatal(err)
	}
	if res.Chunks != 4 || res.Scored != 124 {
		t.Fatalf("%d chunks, %d scored", res.Chunks, res.Scored)
	}
	if want := logProbsHeaderSize + 4*(4*64+31*logProbsRowLen(50257)*2); buf.Len() != want {
		t.Fatalf("base file of %d bytes, want %d", buf.Len(), want)
	}
	return buf.Bytes()
}

func compareWithBase(t *testing.T, model string, base []byte) *KLDivergenceStats {
	t.Helper()
	b, err := ReadLogProbsBase(bytes.NewReader(base), int64(len(base)))
	if err != nil {
		t.Fatal(err)
	}
	m := loadFixtureModel(t, model, Options{Threads: 2, ContextLength: 64})
	s, _ := m.NewSession()
	k, err := s.KLDivergence(context.Background(), b, KLDivergenceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if k.Count() != 124 {
		t.Fatalf("%d positions compared, want 124", k.Count())
	}
	return k
}

// The base compared with its own model: KL divergence 0 up to the 16-bit storage of the
// log-probabilities (a step of 2.4e-4 in log p), the same top token everywhere, the same
// perplexity; the q8_0 fixture: a small positive divergence, measurably above that floor.
func TestKLDivergenceFixtures(t *testing.T) {
	base := klBase(t)
	self := compareWithBase(t, "gpt2-tiny-f16.gguf", base)
	if kld := self.KLD(); math.Abs(kld.Value) > 1e-5 || self.KLDPercentile(1) > 1e-4 {
		t.Errorf("KLD against itself: %v ± %v, max %v", kld.Value, kld.Err, self.KLDPercentile(1))
	}
	if top := self.SameTop(); top.Value != 1 || top.Err != 0 {
		t.Errorf("same top token against itself: %v", top)
	}
	if r := self.LogPPLRatio(); math.Abs(r.Value) > 1e-4 || math.Abs(self.PPL().Value-self.BasePPL().Value) > 0.01*self.PPL().Value {
		t.Errorf("PPL %v vs base %v, ln ratio %v", self.PPL(), self.BasePPL(), r)
	}
	q8 := compareWithBase(t, "gpt2-tiny-q8_0.gguf", base)
	kld := q8.KLD()
	if kld.Value < 2e-5 || kld.Value > 2e-3 || kld.Err <= 0 || kld.Err > kld.Value/2 {
		t.Errorf("KLD of q8_0: %v ± %v; want small and positive", kld.Value, kld.Err)
	}
	if top := q8.SameTop(); top.Value < 0.95 || top.Value == 1 && top.Err != 0 {
		t.Errorf("same top token of q8_0: %v", top)
	}
	if p := []float64{q8.KLDPercentile(0), q8.KLDPercentile(0.1), q8.KLDPercentile(0.5), q8.KLDPercentile(0.99), q8.KLDPercentile(1)}; !(p[0] <= p[1] && p[1] <= p[2] && p[2] <= p[3] && p[3] <= p[4]) {
		t.Errorf("KLD percentiles not ordered: %v", p)
	}
	if rms := q8.PDiffRMS(); rms.Value <= 0 || rms.Value > 0.02 {
		t.Errorf("RMS delta p of q8_0: %v", rms)
	}
	t.Logf("q8_0 vs f16: KLD %.6f ± %.6f, same top %.2f%%, PPL ratio %.5f", kld.Value, kld.Err, 100*q8.SameTop().Value, q8.PPLRatio().Value)
}

// Hostile base files are errors naming the problem, before anything the size of their
// claims is allocated: every truncation, a wrong magic, counts that do not fit the size,
// tokens outside the vocabulary, another vocabulary, chunks longer than the context, and
// records that are not log-probabilities.
func TestKLDivergenceHostileBase(t *testing.T) {
	good := klBase(t)
	for n := 0; n < len(good); n += 1 + n/8 {
		if _, err := ReadLogProbsBase(bytes.NewReader(good[:n]), int64(n)); err == nil {
			t.Fatalf("truncated to %d bytes: no error", n)
		}
	}
	le := binary.LittleEndian
	edit := func(f func(b []byte)) []byte {
		b := bytes.Clone(good[:logProbsHeaderSize+4*64*4+2*logProbsRowLen(50257)*31*4])
		f(b)
		return b
	}
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"magic", edit(func(b []byte) { copy(b, "_LOGITS_") }), "magic"},
		{"huge chunk", edit(func(b []byte) { le.PutUint32(b[8:], 1<<30) }), "chunk of"},
		{"tiny chunk", edit(func(b []byte) { le.PutUint32(b[8:], 2) }), "at least 3"},
		{"negative vocabulary", edit(func(b []byte) { le.PutUint32(b[12:], 0xffffffff) }), "vocabulary -1"},
		{"huge chunk count", edit(func(b []byte) { le.PutUint32(b[16:], 1<<30) }), "truncated"},
		{"token outside the vocabulary", edit(func(b []byte) { le.PutUint32(b[20+4*7:], 50257) }), "outside the vocabulary"},
		{"negative token", edit(func(b []byte) { le.PutUint32(b[20:], 0xffffffff) }), "outside the vocabulary"},
	} {
		_, err := ReadLogProbsBase(bytes.NewReader(c.b), int64(len(c.b)))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", c.name, err, c.want)
		}
	}
	run := func(b []byte, opts Options) error {
		base, err := ReadLogProbsBase(bytes.NewReader(b), int64(len(b)))
		if err != nil {
			return err
		}
		m := loadFixtureModel(t, "gpt2-tiny-f16.gguf", opts)
		s, _ := m.NewSession()
		_, err = s.KLDivergence(context.Background(), base, KLDivergenceOptions{})
		return err
	}
	nanScale := edit(func(b []byte) { le.PutUint32(b[20+4*4*64:], 0x7fc00000) })
	if err := run(nanScale, Options{Threads: 2, ContextLength: 64}); err == nil || !strings.Contains(err.Error(), "not log-probabilities") {
		t.Errorf("NaN scale: %v", err)
	}
	if err := run(good, Options{Threads: 2, ContextLength: 32}); err == nil || !strings.Contains(err.Error(), "raise -c") {
		t.Errorf("chunks longer than the context: %v", err)
	}
	otherVocab := edit(func(b []byte) { le.PutUint32(b[12:], 50300) })
	otherVocab = append(otherVocab, make([]byte, 2*(logProbsRowLen(50300)-logProbsRowLen(50257))*31*4)...)
	if err := run(otherVocab, Options{Threads: 2, ContextLength: 64}); err == nil || !strings.Contains(err.Error(), "this model's 50257") {
		t.Errorf("another vocabulary: %v", err)
	}
}
