package llm

import (
	"bytes"
	"context"
	"errors"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/internal/testmodel"
	"github.com/gorun-dev/gorun/quant"
	"github.com/gorun-dev/gorun/quantize"
)

// tinyModel writes a random tiny GPT-2 and loads it.
func tinyModel(t testing.TB, edit func(c *testmodel.Config), opts Options) *Model {
	t.Helper()
	c, err := testmodel.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&c)
	}
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := testmodel.Write(path, c); err != nil {
		t.Fatal(err)
	}
	m, err := Load(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

var testTokens = []int32{5, 300, 17, 42, 42, 511, 0, 256, 99, 100, 101, 7, 3, 250, 251, 400, 12, 13, 14, 15}

// stepLogits evaluates tokens one at a time (the decode graph) and collects every logit row.
func stepLogits(t *testing.T, m *Model, tokens []int32) []float32 {
	s, err := m.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	var all []float32
	for _, tok := range tokens {
		l, err := s.Eval([]int32{tok})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, l...)
	}
	return all
}

func batchLogits(t *testing.T, m *Model, tokens []int32) []float32 {
	s, err := m.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	out := make([]float32, len(tokens)*m.Hparams().NVocab)
	if err := s.EvalAll(tokens, out); err != nil {
		t.Fatal(err)
	}
	return out
}

// Evaluating a sequence in one batch, in several batches, or token by token through the KV
// cache gives bit-identical logits (the kernels sum in the same order on every path).
func TestBatchEqualsIncremental(t *testing.T) {
	for _, typ := range []quant.Type{quant.F32, quant.F16} {
		m := tinyModel(t, func(c *testmodel.Config) { c.Type = typ }, Options{Threads: 2})
		step := stepLogits(t, m, testTokens)
		batch := batchLogits(t, m, testTokens)
		small := tinyModel(t, func(c *testmodel.Config) { c.Type = typ }, Options{Threads: 2, BatchSize: 7})
		chunked := batchLogits(t, small, testTokens)
		for i := range step {
			if step[i] != batch[i] || step[i] != chunked[i] {
				t.Fatalf("%v: logit %d: step %v, batch %v, batches of 7 %v", typ, i, step[i], batch[i], chunked[i])
			}
		}
	}
}

// The result does not depend on the number of threads.
func TestThreadCountInvariant(t *testing.T) {
	a := batchLogits(t, tinyModel(t, nil, Options{Threads: 1}), testTokens)
	b := batchLogits(t, tinyModel(t, nil, Options{Threads: 3}), testTokens)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("logit %d: 1 thread %v, 3 threads %v", i, a[i], b[i])
		}
	}
}

// A model without output.weight uses token_embd.weight (tied), which the generator writes
// identically, so the logits are the same.
func TestTiedOutput(t *testing.T) {
	a := batchLogits(t, tinyModel(t, nil, Options{Threads: 2}), testTokens)
	b := batchLogits(t, tinyModel(t, func(c *testmodel.Config) { c.NoOutput = true }, Options{Threads: 2}), testTokens)
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("logit %d: %v with output.weight, %v tied", i, a[i], b[i])
		}
	}
}

// Generating a token runs the prebuilt decode graph and allocates nothing.
func TestDecodeDoesNotAllocate(t *testing.T) {
	m := tinyModel(t, nil, Options{Threads: 2})
	s, err := m.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Eval(testTokens[:4]); err != nil {
		t.Fatal(err)
	}
	one := []int32{9}
	allocs := testing.AllocsPerRun(20, func() {
		if _, err := s.Eval(one); err != nil {
			t.Fatal(err)
		}
	})
	if allocs != 0 {
		t.Errorf("%v allocations per generated token", allocs)
	}
}

func TestContextLimits(t *testing.T) {
	m := tinyModel(t, nil, Options{Threads: 2, ContextLength: 16})
	s, err := m.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Eval(testTokens[:17]); !errors.Is(err, ErrContextFull) {
		t.Errorf("17 tokens into a context of 16: %v", err)
	}
	if s.Pos() != 0 {
		t.Errorf("a refused batch moved the position to %d", s.Pos())
	}
	if _, err := s.Eval(testTokens[:16]); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Eval(testTokens[:1]); !errors.Is(err, ErrContextFull) {
		t.Errorf("token past the end: %v", err)
	}
	// Generation stops cleanly at the end of the context.
	s.Reset()
	st, err := s.Generate(context.Background(), "ab", GenerateOptions{MaxTokens: 100, IgnoreEOS: true, Sample: SampleOptions{RepeatPenalty: 1}}, func(string) error { return nil })
	if err != nil || st.Stop != StopContextFull || s.Pos() != 16 {
		t.Errorf("generation at the end of the context: %+v, pos %d, %v", st, s.Pos(), err)
	}
	// A prompt that fills the context is refused before any work.
	s.Reset()
	long := strings.Repeat("a b c d ", 40)
	if _, err := s.Generate(context.Background(), long, GenerateOptions{MaxTokens: 1}, func(string) error { return nil }); !errors.Is(err, ErrContextFull) {
		t.Errorf("too-long prompt: %v", err)
	}
	if _, err := Load(m.Path(), Options{ContextLength: 65}); err == nil {
		t.Error("a context longer than the model's position embeddings was accepted")
	}
}

// The integer path (8-bit activations) allocates nothing per token either, nor per prompt
// batch once its graph is built.
func TestQuantizedActivationsDoNotAllocate(t *testing.T) {
	src := writeTiny(t, func(c *testmodel.Config) { c.Type = quant.F32 })
	for _, typ := range []string{"q8_0", "q4_0"} {
		ft, _ := quantize.ParseFileType(typ)
		out := filepath.Join(t.TempDir(), typ+".gguf")
		if _, err := quantize.File(src, out, quantize.Options{FileType: ft, Threads: 2}); err != nil {
			t.Fatal(err)
		}
		m, err := Load(out, Options{Threads: 2, QuantizedActivations: QuantActOn})
		if err != nil {
			t.Fatal(err)
		}
		defer m.Close()
		s, err := m.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		if _, err := s.Eval(testTokens[:8]); err != nil {
			t.Fatal(err)
		}
		one := []int32{9}
		if allocs := testing.AllocsPerRun(20, func() {
			if _, err := s.Eval(one); err != nil {
				t.Fatal(err)
			}
		}); allocs != 0 {
			t.Errorf("%v: %v allocations per generated token", typ, allocs)
		}
	}
}

func TestBadTokens(t *testing.T) {
	m := tinyModel(t, nil, Options{Threads: 2})
	s, _ := m.NewSession()
	for _, bad := range [][]int32{{-1}, {512}, {1, 2, 1 << 30}} {
		if _, err := s.Eval(bad); err == nil {
			t.Errorf("tokens %v accepted", bad)
		}
	}
}

// The same seed gives the same text; sampling respects top-k = 1 (greedy).
func TestSamplingDeterministic(t *testing.T) {
	m := tinyModel(t, nil, Options{Threads: 2})
	gen := func(opts SampleOptions) string {
		s, _ := m.NewSession()
		var sb strings.Builder
		if _, err := s.Generate(context.Background(), "hello world", GenerateOptions{MaxTokens: 24, IgnoreEOS: true, Sample: opts},
			func(p string) error { sb.WriteString(p); return nil }); err != nil {
			t.Fatal(err)
		}
		return sb.String()
	}
	opts := DefaultSampling()
	opts.Seed = 42
	if a, b := gen(opts), gen(opts); a != b {
		t.Errorf("same seed, different text: %q vs %q", a, b)
	}
	greedy := gen(SampleOptions{Temperature: 0, RepeatPenalty: 1})
	topk1 := gen(SampleOptions{Temperature: 1, TopK: 1, TopP: 1, RepeatPenalty: 1, Seed: 3})
	if greedy != topk1 {
		t.Errorf("top-k 1 %q differs from greedy %q", topk1, greedy)
	}
}

// Perplexity of a chunk equals exp of the mean NLL computed from EvalAll's logits.
func TestPerplexityMatchesLogits(t *testing.T) {
	m := tinyModel(t, nil, Options{Threads: 2})
	s, _ := m.NewSession()
	toks := append(append([]int32{}, testTokens...), testTokens...)[:32]
	res, err := s.Perplexity(context.Background(), toks, PerplexityOptions{Chunk: 16})
	if err != nil {
		t.Fatal(err)
	}
	V := m.Hparams().NVocab
	var sum float64
	var n int
	for c := 0; c < 2; c++ {
		chunk := toks[c*16 : (c+1)*16]
		logits := batchLogits(t, m, chunk)
		for j := 8; j < 15; j++ {
			sum += nll(logits[j*V:(j+1)*V], chunk[j+1])
			n++
		}
	}
	if want := math.Exp(sum / float64(n)); res.Scored != n || math.Abs(res.PPL-want) > 1e-9*want {
		t.Errorf("perplexity %v over %d tokens, want %v over %d", res.PPL, res.Scored, want, n)
	}
}

// Corrupting bytes of a model's header and metadata gives an error or a model that still
// runs; never a panic or a hang.
func TestCorruptedFilesNeverPanic(t *testing.T) {
	c, _ := testmodel.Preset("tiny")
	dir := t.TempDir()
	good := filepath.Join(dir, "good.gguf")
	if err := testmodel.Write(good, c); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(good)
	if err != nil {
		t.Fatal(err)
	}
	header := int(f.DataOffset)
	f.Close()
	orig, _ := os.ReadFile(good)
	rng := rand.New(rand.NewPCG(3, 4))
	bad := filepath.Join(dir, "bad.gguf")
	loaded := 0
	for i := 0; i < 300; i++ {
		b := bytes.Clone(orig)
		for k := 0; k < 1+rng.IntN(3); k++ {
			b[rng.IntN(header)] ^= byte(1 + rng.IntN(255))
		}
		os.WriteFile(bad, b, 0o644)
		m, err := Load(bad, Options{Threads: 2})
		if err != nil {
			continue
		}
		loaded++
		s, err := m.NewSession()
		if err == nil {
			s.Generate(context.Background(), "hello", GenerateOptions{MaxTokens: 4, Sample: SampleOptions{RepeatPenalty: 1}}, func(string) error { return nil })
		}
		m.Close()
	}
	t.Logf("%d of 300 corrupted files still loaded (changed bytes in strings or values that stay valid)", loaded)
}
