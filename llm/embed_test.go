package llm

import (
	"context"
	"errors"
	"math"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gorun-dev/gorun/internal/testmodel"
	"github.com/gorun-dev/gorun/quant"
)

// tokenHidden is every token's final hidden state, computed one prefix at a time: the hidden
// state of token i is the last-token pooling of tokens[:i+1] (attention is causal), so this
// computes each row by a path of its own, without the pooling under test.
func tokenHidden(t *testing.T, s *Session, tokens []int32) [][]float32 {
	t.Helper()
	rows := make([][]float32, len(tokens))
	for i := range tokens {
		h, err := s.Embed(context.Background(), tokens[:i+1], EmbedOptions{Pooling: PoolingLast, Normalize: NormalizeNone})
		if err != nil {
			t.Fatal(err)
		}
		rows[i] = h
	}
	return rows
}

func embedOne(t *testing.T, s *Session, tokens []int32, o EmbedOptions) []float32 {
	t.Helper()
	v, err := s.Embed(context.Background(), tokens, o)
	if err != nil {
		t.Fatal(err)
	}
	return v
}

// Pooling over a sequence evaluated in several batches equals pooling the per-token hidden
// states directly: the rows are bit-identical whatever the batching (DESIGN.md), the mean is
// summed in the same float64 order, so every comparison is exact.
func TestEmbedPooling(t *testing.T) {
	for _, arch := range []string{"gpt2", "llama"} {
		m := tinyModel(t, func(c *testmodel.Config) { c.Type = quant.F32; c.Arch = arch }, Options{Threads: 2, BatchSize: 3})
		s, err := m.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		toks := testTokens[:10]
		rows := tokenHidden(t, s, toks)
		E := m.Hparams().NEmbd
		mean := make([]float32, E)
		for i := range mean {
			var sum float64
			for _, r := range rows {
				sum += float64(r[i])
			}
			mean[i] = float32(sum / float64(len(rows)))
		}
		none := EmbedOptions{Normalize: NormalizeNone}
		for _, c := range []struct {
			p    Pooling
			want []float32
		}{{PoolingMean, mean}, {PoolingCLS, rows[0]}, {PoolingLast, rows[len(rows)-1]}, {PoolingDefault, mean}} {
			none.Pooling = c.p
			if got := embedOne(t, s, toks, none); !slices.Equal(got, c.want) {
				t.Errorf("%s pooling %v: got %v..., want %v...", arch, c.p, got[:4], c.want[:4])
			}
		}
		if s.Pos() != len(toks) {
			t.Errorf("%s: the context holds %d tokens after Embed, want %d", arch, s.Pos(), len(toks))
		}
	}
}

// The hidden state is the output layer's input: the logits Eval computes are the output
// matrix (GPT-2: the token embeddings) times it, within float32 summation-order error.
func TestEmbedHiddenFeedsOutputLayer(t *testing.T) {
	m := tinyModel(t, func(c *testmodel.Config) { c.Type = quant.F32 }, Options{Threads: 2})
	s, err := m.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	toks := testTokens[:6]
	h := embedOne(t, s, toks, EmbedOptions{Pooling: PoolingLast, Normalize: NormalizeNone})
	// Generation continues after Embed: the last token's logits are computed on demand.
	logits, err := s.Logits(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	ti := m.File().Tensor("output.weight")
	if ti == nil {
		ti = m.File().Tensor("token_embd.weight")
	}
	w := quant.AsF32(m.File().Data(ti))
	E := len(h)
	var worst float64
	for v := range logits {
		var dot float64
		for i, x := range h {
			dot += float64(w[v*E+i]) * float64(x)
		}
		worst = max(worst, math.Abs(dot-float64(logits[v]))/(1+math.Abs(dot)))
	}
	if worst > 1e-5 {
		t.Errorf("logits differ from output.weight x hidden by up to %g (relative)", worst)
	}
}

// Each normalization scales as llama.cpp's common_embd_normalize: the chosen norm becomes 1
// (max-abs: the largest magnitude becomes 32760), and -1 leaves the vector as it is.
func TestEmbedNormalize(t *testing.T) {
	m := tinyModel(t, func(c *testmodel.Config) { c.Type = quant.F32 }, Options{Threads: 2})
	s, err := m.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	toks := testTokens[:5]
	raw := embedOne(t, s, toks, EmbedOptions{Pooling: PoolingMean, Normalize: NormalizeNone})
	pnorm := func(v []float32, p float64) float64 {
		var sum float64
		for _, x := range v {
			sum += math.Pow(math.Abs(float64(x)), p)
		}
		return math.Pow(sum, 1/p)
	}
	for _, p := range []int{1, 2, 3, 7} {
		got := embedOne(t, s, toks, EmbedOptions{Pooling: PoolingMean, Normalize: p})
		if n := pnorm(got, float64(p)); math.Abs(n-1) > 1e-5 {
			t.Errorf("normalize %d: norm %v, want 1", p, n)
		}
		// Same direction: got = raw / ||raw||.
		k := float32(1 / pnorm(raw, float64(p)))
		for i := range got {
			if d := math.Abs(float64(got[i] - raw[i]*k)); d > 1e-6 {
				t.Fatalf("normalize %d: element %d is %v, want %v", p, i, got[i], raw[i]*k)
			}
		}
	}
	got := embedOne(t, s, toks, EmbedOptions{Pooling: PoolingMean, Normalize: NormalizeMaxAbs})
	var mx float32
	for _, x := range got {
		mx = max(mx, float32(math.Abs(float64(x))))
	}
	if math.Abs(float64(mx)-32760) > 0.01 {
		t.Errorf("max-abs normalization: largest magnitude %v, want 32760", mx)
	}
	if zero := normalize(make([]float32, 4), NormalizeEuclidean); !slices.Equal(zero, make([]float32, 4)) {
		t.Errorf("a zero vector normalized to %v", zero)
	}
}

// Model.Embed tokenizes each text as a context's start and gives what Session.Embed gives
// for those tokens; a batch of texts gives each its own sequence.
func TestModelEmbedTexts(t *testing.T) {
	m := tinyModel(t, func(c *testmodel.Config) { c.Type = quant.F32 }, Options{Threads: 2})
	texts := []string{"hello world", "a b c", "hello world"}
	got, err := m.Embed(context.Background(), texts, DefaultEmbedOptions())
	if err != nil {
		t.Fatal(err)
	}
	s, err := m.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	for i, text := range texts {
		want := embedOne(t, s, m.Tokenize(text, true), DefaultEmbedOptions())
		if !slices.Equal(got[i], want) {
			t.Errorf("text %d: Model.Embed differs from Session.Embed", i)
		}
	}
	if !slices.Equal(got[0], got[2]) || slices.Equal(got[0], got[1]) {
		t.Errorf("equal texts must give equal embeddings, different texts different ones")
	}
}

// Bad input is an error naming it, never a panic.
func TestEmbedRefusesBadInput(t *testing.T) {
	m := tinyModel(t, nil, Options{Threads: 2, ContextLength: 16})
	s, err := m.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for name, c := range map[string]struct {
		toks []int32
		o    EmbedOptions
	}{
		"empty":          {nil, DefaultEmbedOptions()},
		"pooling":        {[]int32{1}, EmbedOptions{Pooling: 9, Normalize: 2}},
		"normalize -2":   {[]int32{1}, EmbedOptions{Normalize: -2}},
		"normalize huge": {[]int32{1}, EmbedOptions{Normalize: 1 << 20}},
		"token":          {[]int32{1, -5}, DefaultEmbedOptions()},
	} {
		if _, err := s.Embed(ctx, c.toks, c.o); !errors.Is(err, ErrInvalidOption) {
			t.Errorf("%s: got %v, want ErrInvalidOption", name, err)
		}
	}
	if _, err := s.Embed(ctx, make([]int32, 17), DefaultEmbedOptions()); !errors.Is(err, ErrContextFull) {
		t.Errorf("17 tokens in a 16-token context: %v", err)
	}
	done, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := s.Embed(done, []int32{1, 2}, DefaultEmbedOptions()); !errors.Is(err, ErrCancelled) {
		t.Errorf("cancelled: %v", err)
	}
	if s.Pos() != 0 {
		t.Errorf("a failed Embed left %d tokens in the context", s.Pos())
	}
	for _, name := range []string{"none", "rank", "avg"} {
		if _, err := ParsePooling(name); err == nil {
			t.Errorf("ParsePooling(%q) accepted", name)
		}
	}
	if p, err := ParsePooling("CLS"); p != PoolingCLS || err != nil {
		t.Errorf("ParsePooling(CLS) = %v, %v", p, err)
	}
}

// On the GPU (the CUDA backend in a cuda build, the test's fake GPU otherwise) embeddings
// equal the CPU's within the bounds used against llama.cpp (GPU kernels sum in other orders,
// and prompts may run on tensor cores).
func TestEmbedGPUMatchesCPU(t *testing.T) {
	for _, arch := range []string{"gpt2", "llama"} {
		c, err := testmodel.Preset("tiny")
		if err != nil {
			t.Fatal(err)
		}
		c.Type, c.Arch = quant.F16, arch
		path := filepath.Join(t.TempDir(), arch+".gguf")
		if err := testmodel.Write(path, c); err != nil {
			t.Fatal(err)
		}
		gpu, err := Load(path, Options{GPULayers: 99, Threads: 1})
		if errors.Is(err, ErrNoGPU) {
			t.Skip("no GPU backend in this build")
		}
		if err != nil {
			t.Fatal(err)
		}
		defer gpu.Close()
		cpu, err := Load(path, Options{Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		defer cpu.Close()
		texts := []string{"hello world, a longer text to embed on the device", "a b c"}
		for _, p := range []Pooling{PoolingMean, PoolingLast, PoolingCLS} {
			o := EmbedOptions{Pooling: p, Normalize: NormalizeEuclidean}
			g, err := gpu.Embed(context.Background(), texts, o)
			if err != nil {
				t.Fatalf("%s on %s: %v", arch, gpu.Backend().Name(), err)
			}
			want, err := cpu.Embed(context.Background(), texts, o)
			if err != nil {
				t.Fatal(err)
			}
			for i := range want {
				ref := make([]float64, len(want[i]))
				for j, x := range want[i] {
					ref[j] = float64(x)
				}
				if cos, diff := compareEmbedding(g[i], ref); cos < embedMinCosine || diff > embedMaxDiff {
					t.Errorf("%s %v text %d on %s: cosine %.8f, largest difference %.3g", arch, p, i, gpu.Backend().Name(), cos, diff)
				}
			}
		}
	}
}
