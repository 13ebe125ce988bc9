//go:build cuda

package cuda_test

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/gorun-dev/gorun/cuda"
	"github.com/gorun-dev/gorun/internal/fixtures"
	"github.com/gorun-dev/gorun/internal/testmodel"
	"github.com/gorun-dev/gorun/llm"
)

func argmax(v []float32) (int32, float32) {
	best, second := 0, -1
	for i := range v {
		if v[i] > v[best] {
			best, second = i, best
		} else if i != best && (second < 0 || v[i] > v[second]) {
			second = i
		}
	}
	return int32(best), v[best] - v[second]
}

func relL2(got, want []float32) float64 {
	var num, den float64
	for i := range got {
		d := float64(got[i]) - float64(want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
	}
	return math.Sqrt(num / den)
}

// pair is one file loaded on the CPU and on the GPU.
type pair struct{ cpu, gpu *llm.Model }

// loadPair loads the file on both; the CPU on its float path, since the GPU computes float32
// activations (the CPU's default quantizes them to 8 bits for Q4_0 weights on a VNNI CPU).
func loadPair(t *testing.T, g *cuda.Backend, path string) pair {
	t.Helper()
	mc, err := llm.Load(path, llm.Options{QuantizedActivations: llm.QuantActOff})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mc.Close() })
	mg, err := llm.Load(path, llm.Options{Backend: g})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mg.Close() })
	return pair{mc, mg}
}

// greedy evaluates the prompt on both backends, compares the last position's logits, then
// generates n tokens greedily on each and returns the relative L2 error of the prompt's logits,
// the index of the first differing token (-1 if none) and the CPU's top-2 logit margin there.
func (p pair) greedy(t *testing.T, prompt []int32, n int) (rel float64, diverge int, margin float32) {
	t.Helper()
	sc, err := p.cpu.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	sg, err := p.gpu.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	lc, err := sc.Eval(prompt)
	if err != nil {
		t.Fatal(err)
	}
	lg, err := sg.Eval(prompt)
	if err != nil {
		t.Fatal(err)
	}
	for i, v := range lg {
		if math.IsNaN(float64(v)) {
			t.Fatalf("GPU logit %d is NaN", i)
		}
	}
	rel = relL2(lg, lc)
	diverge = -1
	for i := 0; i < n; i++ {
		tc, m := argmax(lc)
		tg, _ := argmax(lg)
		if tc != tg {
			return rel, i, m
		}
		if lc, err = sc.Eval([]int32{tc}); err != nil {
			t.Fatal(err)
		}
		if lg, err = sg.Eval([]int32{tg}); err != nil {
			t.Fatal(err)
		}
	}
	return rel, -1, 0
}

// On the trained tiny fixtures: the five reference prompts' last-position logits agree with
// the CPU's (relative L2 below 1e-3 for F16 weights, 5e-3 for quantized ones), greedy
// continuations of 64 tokens are identical, and perplexity (llama-perplexity protocol, 8
// chunks of 512) is within 0.05 of the CPU's.
func TestTinyFixtures(t *testing.T) {
	g := openGPU(t)
	dir := fixtures.Dir(t)
	var refs struct {
		Prompts []struct {
			Text string  `json:"text"`
			IDs  []int32 `json:"ids"`
		} `json:"prompts"`
	}
	b, err := os.ReadFile(fixtures.Path(t, "refs.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &refs); err != nil {
		t.Fatal(err)
	}
	var kjv []int32
	if b, err = os.ReadFile(fixtures.Path(t, "eval_kjv_ids.json")); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &kjv); err != nil {
		t.Fatal(err)
	}
	ran := 0
	for _, c := range []struct {
		file string
		tol  float64
	}{{"gpt2-tiny-f16.gguf", 1e-3}, {"gpt2-tiny-q8_0.gguf", 5e-3}, {"gpt2-tiny-q4_0.gguf", 5e-3}, {"gpt2-tiny-q4_K_M.gguf", 5e-3}} {
		path := filepath.Join(dir, c.file)
		if _, err := os.Stat(path); err != nil {
			t.Logf("%s: not present, skipped", c.file)
			continue
		}
		ran++
		t.Run(c.file, func(t *testing.T) {
			p := loadPair(t, g, path)
			for i, pr := range refs.Prompts {
				rel, div, margin := p.greedy(t, pr.IDs, 64)
				t.Logf("prompt %d: last-position logits rel L2 %.3g; greedy 64 tokens: first difference at %d (margin %.4f)", i, rel, div, margin)
				if rel > c.tol {
					t.Errorf("prompt %d %q: logits relative L2 error %.3g > %.3g", i, pr.Text, rel, c.tol)
				}
				if div >= 0 {
					t.Errorf("prompt %d %q: greedy continuation differs at token %d (CPU top-2 margin %.4f)", i, pr.Text, div, margin)
				}
			}
			var ppl [2]float64
			for i, m := range []*llm.Model{p.cpu, p.gpu} {
				s, err := m.NewSession()
				if err != nil {
					t.Fatal(err)
				}
				r, err := s.Perplexity(context.Background(), kjv, llm.PerplexityOptions{Chunk: 512})
				if err != nil {
					t.Fatal(err)
				}
				ppl[i] = r.PPL
			}
			t.Logf("perplexity: cpu %.4f gpu %.4f (diff %.2g)", ppl[0], ppl[1], ppl[1]-ppl[0])
			if math.Abs(ppl[1]-ppl[0]) > 0.05 || math.IsNaN(ppl[1]) {
				t.Errorf("perplexity: GPU %.4f, CPU %.4f", ppl[1], ppl[0])
			}
		})
	}
	if ran == 0 {
		t.Skip("no tiny fixture present")
	}
}

// The trained Llama fixture (llama-kjv-f16.gguf: RMSNorm, RoPE, SwiGLU, 4 query heads over 2
// key/value heads, tied output) on the GPU: each of the 5 prompts' last-position logits within
// 1e-3 (relative L2) of Hugging Face's and of the CPU backend's, the GPU's greedy 48 tokens
// equal to Hugging Face's, and perplexity (llama-perplexity protocol, 8 x 512) within 0.02 of
// the CPU's.
func TestLlamaKJV(t *testing.T) {
	g := openGPU(t)
	path := fixtures.Path(t, "llama-kjv-f16.gguf")
	var refs struct {
		Prompts []struct {
			Text     string  `json:"text"`
			IDs      []int32 `json:"ids"`
			Greedy48 []int32 `json:"greedy48"`
		} `json:"prompts"`
	}
	readJSON(t, fixtures.Path(t, "llama_kjv_refs.json"), &refs)
	raw, err := os.ReadFile(fixtures.Path(t, "llama_kjv_logits.f32"))
	if err != nil {
		t.Fatal(err)
	}
	var kjv []int32
	readJSON(t, fixtures.Path(t, "eval_kjv_ids.json"), &kjv)
	p := loadPair(t, g, path)
	V := p.gpu.Hparams().NVocab
	if len(refs.Prompts) != 5 || len(raw) != 4*5*V {
		t.Fatalf("references: %d prompts, %d bytes of logits", len(refs.Prompts), len(raw))
	}
	for i, pr := range refs.Prompts {
		hf := make([]float32, V)
		for j := range hf {
			hf[j] = math.Float32frombits(binary.LittleEndian.Uint32(raw[4*(i*V+j):]))
		}
		rel, div, margin := p.greedy(t, pr.IDs, 48)
		s, err := p.gpu.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		st, err := s.Generate(context.Background(), pr.Text, llm.GenerateOptions{MaxTokens: 48, Sample: llm.SampleOptions{Temperature: 0, RepeatPenalty: 1}},
			func(string) error { return nil })
		if err != nil {
			t.Fatal(err)
		}
		got := s.Tokens()[len(pr.IDs):]
		sg, err := p.gpu.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		lg, err := sg.Eval(pr.IDs)
		if err != nil {
			t.Fatal(err)
		}
		relHF := relL2(lg, hf)
		t.Logf("prompt %d: logits rel L2 vs CPU %.3g, vs HF %.3g; greedy vs CPU: first difference at %d; %d tokens, HF's 48: %v",
			i, rel, relHF, div, st.Tokens, slices.Equal(got, pr.Greedy48))
		if rel > 1e-3 || relHF > 1e-3 {
			t.Errorf("prompt %d %q: logits relative L2 error %.3g against the CPU's, %.3g against HF's (limit 1e-3)", i, pr.Text, rel, relHF)
		}
		if div >= 0 {
			t.Errorf("prompt %d %q: greedy continuation differs from the CPU's at token %d (CPU top-2 margin %.4f)", i, pr.Text, div, margin)
		}
		if !slices.Equal(got, pr.Greedy48) {
			t.Errorf("prompt %d %q: GPU greedy tokens\n got %v\nwant %v (Hugging Face)", i, pr.Text, got, pr.Greedy48)
		}
	}
	var ppl [2]float64
	for i, m := range []*llm.Model{p.cpu, p.gpu} {
		s, err := m.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		r, err := s.Perplexity(context.Background(), kjv, llm.PerplexityOptions{Chunk: 512})
		if err != nil {
			t.Fatal(err)
		}
		ppl[i] = r.PPL
	}
	t.Logf("perplexity: cpu %.4f gpu %.4f (diff %.2g)", ppl[0], ppl[1], ppl[1]-ppl[0])
	if math.Abs(ppl[1]-ppl[0]) > 0.02 || math.IsNaN(ppl[1]) {
		t.Errorf("perplexity: GPU %.4f, CPU %.4f: more than 0.02 apart", ppl[1], ppl[0])
	}
}

// Random tiny Llama-family models (testmodel presets: Llama with tied output and 2 query heads
// per key/value head; untied with 4 per key/value head, Llama 3.1 frequency factors and
// freq_base 500000; Qwen2 with Q/K/V biases and NeoX RoPE; head size 16, so the per-query
// attention kernel): GPU vs CPU on a random prompt, last-position logits within 1e-4, and the
// greedy continuation's first difference reported (random weights have near ties).
func TestTinyLlamaShapes(t *testing.T) {
	g := openGPU(t)
	for _, name := range []string{"llama-tiny", "llama-tiny-untied", "qwen2-tiny"} {
		t.Run(name, func(t *testing.T) {
			c, err := testmodel.Preset(name)
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join(t.TempDir(), name+".gguf")
			if err := testmodel.Write(path, c); err != nil {
				t.Fatal(err)
			}
			p := loadPair(t, g, path)
			rng := rand.New(rand.NewPCG(16, 16))
			prompt := make([]int32, 20)
			for i := range prompt {
				prompt[i] = int32(rng.IntN(p.cpu.Hparams().NVocab))
			}
			rel, div, margin := p.greedy(t, prompt, 24)
			t.Logf("logits rel L2 %.3g; greedy 24: first difference at %d (CPU top-2 margin %.4f)", rel, div, margin)
			if rel > 1e-4 {
				t.Errorf("logits relative L2 error %.3g > 1e-4", rel)
			}
		})
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

// GORUN_CUDA_MODELS names more models (comma-separated, e.g. random 124M files made by
// gorun random-model and gorun quantize) to compare on a random prompt: last-position logits
// within 1e-3 (files named *f16*) or 5e-3, and the greedy continuation's first difference with
// the CPU's top-2 margin there (random weights have near ties, so it is reported, not required).
func TestModels(t *testing.T) {
	list := os.Getenv("GORUN_CUDA_MODELS")
	if list == "" {
		t.Skip("GORUN_CUDA_MODELS not set")
	}
	g := openGPU(t)
	for _, path := range strings.Split(list, ",") {
		t.Run(filepath.Base(path), func(t *testing.T) {
			p := loadPair(t, g, path)
			tol := 5e-3
			if strings.Contains(filepath.Base(path), "f16") {
				tol = 1e-3
			}
			rng := rand.New(rand.NewPCG(9, 9))
			prompt := make([]int32, 32)
			for i := range prompt {
				prompt[i] = int32(rng.IntN(p.cpu.Hparams().NVocab))
			}
			rel, div, margin := p.greedy(t, slices.Clip(prompt), 64)
			t.Logf("last-position logits rel L2 %.3g (limit %.0e); greedy 64: first difference at %d (CPU top-2 margin %.4f)", rel, tol, div, margin)
			if rel > tol {
				t.Errorf("logits relative L2 error %.3g > %.3g", rel, tol)
			}
		})
	}
}

// openGPU opens the first GPU for a test, or skips it.
func openGPU(t testing.TB) *cuda.Backend {
	t.Helper()
	b, err := cuda.New(0)
	if err != nil {
		t.Skipf("no usable CUDA GPU: %v", err)
	}
	t.Cleanup(func() { b.Close() })
	return b
}

// Concurrent sessions on the GPU run their decode steps as the rows of one batch
// (store_kv_rows, attention_rows): each still generates Hugging Face's greedy tokens.
func TestConcurrentSessionsBatch(t *testing.T) {
	g := openGPU(t)
	var refs struct {
		Prompts []struct {
			Text     string  `json:"text"`
			IDs      []int32 `json:"ids"`
			Greedy48 []int32 `json:"greedy48"`
		} `json:"prompts"`
	}
	readJSON(t, fixtures.Path(t, "llama_kjv_refs.json"), &refs)
	m, err := llm.Load(fixtures.Path(t, "llama-kjv-f16.gguf"), llm.Options{Backend: g})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	got := make([][]int32, len(refs.Prompts))
	errs := make([]error, len(refs.Prompts))
	var wg sync.WaitGroup
	for i, pr := range refs.Prompts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := m.NewSession()
			if err != nil {
				errs[i] = err
				return
			}
			defer s.Close()
			_, errs[i] = s.Generate(context.Background(), pr.Text, llm.GenerateOptions{MaxTokens: 48, Sample: llm.SampleOptions{Temperature: 0, RepeatPenalty: 1}},
				func(string) error { return nil })
			got[i] = s.Tokens()[len(pr.IDs):]
		}()
	}
	wg.Wait()
	for i, pr := range refs.Prompts {
		if errs[i] != nil {
			t.Fatalf("prompt %d: %v", i, errs[i])
		}
		if !slices.Equal(got[i], pr.Greedy48) {
			t.Errorf("prompt %d %q batched on the GPU:\n got %v\nwant %v (Hugging Face)", i, pr.Text, got[i], pr.Greedy48)
		}
	}
	st := m.DecodeStats()
	t.Logf("decode steps %d, rows %d, largest batch %d", st.Steps, st.Rows, st.MaxRows)
	if st.MaxRows < 2 {
		t.Errorf("the sessions never ran in one batch (largest batch %d)", st.MaxRows)
	}
}

// Random tiny GPT-2 and Llama models: twelve sessions generating at once on the GPU (their steps
// batched, more rows than one mat-vec group) give the tokens each gives alone.
func TestConcurrentSessionsBatchRandom(t *testing.T) {
	g := openGPU(t)
	for _, name := range []string{"tiny", "llama-tiny"} {
		t.Run(name, func(t *testing.T) {
			c, err := testmodel.Preset(name)
			if err != nil {
				t.Fatal(err)
			}
			c.NCtx = 256
			path := filepath.Join(t.TempDir(), name+".gguf")
			if err := testmodel.Write(path, c); err != nil {
				t.Fatal(err)
			}
			m, err := llm.Load(path, llm.Options{Backend: g})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			rng := rand.New(rand.NewPCG(21, 21))
			prompts := make([][]int32, 12)
			for i := range prompts {
				prompts[i] = make([]int32, 5+7*i)
				for j := range prompts[i] {
					prompts[i][j] = int32(rng.IntN(m.Hparams().NVocab))
				}
			}
			gen := func(p []int32) ([]int32, error) {
				s, err := m.NewSession()
				if err != nil {
					return nil, err
				}
				defer s.Close()
				if _, err := s.EvalContext(context.Background(), p); err != nil {
					return nil, err
				}
				_, err = s.GenerateTokens(context.Background(), "", llm.GenerateOptions{MaxTokens: 24, IgnoreEOS: true,
					Sample: llm.SampleOptions{Temperature: 0, RepeatPenalty: 1}}, func(llm.Piece) error { return nil })
				return s.Tokens()[len(p):], err
			}
			alone := make([][]int32, len(prompts))
			for i, p := range prompts {
				if alone[i], err = gen(p); err != nil {
					t.Fatal(err)
				}
			}
			before := m.DecodeStats()
			together := make([][]int32, len(prompts))
			errs := make([]error, len(prompts))
			var wg sync.WaitGroup
			for i, p := range prompts {
				wg.Add(1)
				go func() { defer wg.Done(); together[i], errs[i] = gen(p) }()
			}
			wg.Wait()
			for i := range prompts {
				if errs[i] != nil {
					t.Fatal(errs[i])
				}
				if !slices.Equal(together[i], alone[i]) {
					t.Errorf("session %d: batched %v, alone %v", i, together[i], alone[i])
				}
			}
			st := m.DecodeStats()
			t.Logf("batched: %d steps for %d rows, largest batch %d", st.Steps-before.Steps, st.Rows-before.Rows, st.MaxRows)
			if st.MaxRows <= 8 {
				t.Errorf("the sessions never ran in a batch of more than 8 (largest %d)", st.MaxRows)
			}
		})
	}
}
