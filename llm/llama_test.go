package llm

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/internal/fixtures"
	"github.com/gorun-dev/gorun/internal/testmodel"
	"github.com/gorun-dev/gorun/quant"
	"github.com/gorun-dev/gorun/quantize"
)

// The llama-kjv fixture (fixtures README): a trained Llama (RMSNorm, RoPE, SwiGLU, 4 query
// heads over 2 key/value heads, tied output) with GPT-2's vocabulary, and Hugging Face's
// float32 references for it.
const kjvModel = "llama-kjv-f16.gguf"

// kjvRefs is the part of llama_kjv_refs.json these tests use.
type kjvRefs struct {
	Prompts []struct {
		Text       string  `json:"text"`
		IDs        []int32 `json:"ids"`
		Greedy48   []int32 `json:"greedy48"`
		GreedyText string  `json:"greedy_text"`
		Top5       []int32 `json:"top5"`
	} `json:"prompts"`
	Perplexity map[string]struct {
		LlamaCpp float64 `json:"llama_cpp_protocol"`
		ScoreAll float64 `json:"score_all"`
	} `json:"perplexity_exact"`
}

// loadKjvRefs reads the references and the last-position logits of each prompt.
func loadKjvRefs(t *testing.T) (kjvRefs, []float32) {
	var r kjvRefs
	b, err := os.ReadFile(fixtures.Path(t, "llama_kjv_refs.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(fixtures.Path(t, "llama_kjv_logits.f32"))
	if err != nil {
		t.Fatal(err)
	}
	logits := slices.Clone(quant.AsF32(raw))
	if len(r.Prompts) != 5 || len(logits) != 5*50257 {
		t.Fatalf("llama-kjv references: %d prompts and %d logits, want 5 and 5 x 50257", len(r.Prompts), len(logits))
	}
	return r, logits
}

// The last prompt position's logits of the trained Llama match Hugging Face's float32
// reference: relative L2 error below 1e-3, the same top 5.
func TestLogitsMatchReferenceLlama(t *testing.T) {
	r, ref := loadKjvRefs(t)
	m := loadFixtureModel(t, kjvModel, Options{Threads: 2})
	V := m.Hparams().NVocab
	for i, p := range r.Prompts {
		if got := m.Tokenizer().Encode(p.Text); !slices.Equal(got, p.IDs) {
			t.Fatalf("%q tokenizes to %v, want %v", p.Text, got, p.IDs)
		}
		s, err := m.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Eval(p.IDs)
		if err != nil {
			t.Fatal(err)
		}
		want := ref[i*V : (i+1)*V]
		rel := relL2(got, want)
		t.Logf("%-40q relative L2 error %.2e", p.Text, rel)
		if rel >= 1e-3 {
			t.Errorf("%q: relative L2 error %.3g >= 1e-3", p.Text, rel)
		}
		if top := largest(got, 5); !slices.Equal(top, p.Top5) {
			t.Errorf("%q: top 5 %v, reference %v", p.Text, top, p.Top5)
		}
	}
}

// largest returns the ids of the k largest logits, largest first.
func largest(logits []float32, k int) []int32 {
	ids := make([]int32, len(logits))
	for i := range ids {
		ids[i] = int32(i)
	}
	slices.SortStableFunc(ids, func(a, b int32) int {
		switch {
		case logits[a] > logits[b]:
			return -1
		case logits[a] < logits[b]:
			return 1
		}
		return 0
	})
	return ids[:k]
}

// Greedy generation with the trained Llama reproduces Hugging Face's 48-token continuations,
// token for token and as text.
func TestGreedyMatchesReferenceLlama(t *testing.T) {
	r, _ := loadKjvRefs(t)
	m := loadFixtureModel(t, kjvModel, Options{Threads: 2})
	for _, p := range r.Prompts {
		s, err := m.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		var text strings.Builder
		st, err := s.Generate(context.Background(), p.Text, GenerateOptions{MaxTokens: 48, Sample: SampleOptions{Temperature: 0, RepeatPenalty: 1}},
			func(piece string) error { text.WriteString(piece); return nil })
		if err != nil {
			t.Fatal(err)
		}
		if st.Tokens != 48 || st.Stop != StopLength {
			t.Errorf("%q: %d tokens, stop %q", p.Text, st.Tokens, st.Stop)
		}
		if got := s.Tokens()[len(p.IDs):]; !slices.Equal(got, p.Greedy48) {
			t.Errorf("%q: tokens\n got %v\nwant %v", p.Text, got, p.Greedy48)
		}
		if text.String() != p.GreedyText {
			t.Errorf("%q:\n got %q\nwant %q", p.Text, text.String(), p.GreedyText)
		}
	}
}

// Perplexity of the trained Llama's f16 file over eval_kjv.txt equals the exact values (an
// independent float32 forward pass over the same weights) in both protocols.
func TestPerplexityFixturesLlama(t *testing.T) {
	if testing.Short() {
		t.Skip("perplexity over 4096 tokens takes a while")
	}
	r, _ := loadKjvRefs(t)
	text, err := os.ReadFile(fixtures.Path(t, "eval_kjv.txt"))
	if err != nil {
		t.Fatal(err)
	}
	exact, ok := r.Perplexity[kjvModel]
	if !ok || exact.LlamaCpp == 0 || exact.ScoreAll == 0 {
		t.Fatalf("llama_kjv_refs.json has no exact perplexity of %s", kjvModel)
	}
	m := loadFixtureModel(t, kjvModel, Options{Threads: 2, ContextLength: 512})
	tokens := m.Tokenizer().Encode(string(text))
	if len(tokens) != 4096 {
		t.Fatalf("eval text is %d tokens, want 4096", len(tokens))
	}
	for _, c := range []struct {
		scoreAll bool
		want     float64
		scored   int
	}{{false, exact.LlamaCpp, 8 * 255}, {true, exact.ScoreAll, 8 * 511}} {
		s, err := m.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Perplexity(context.Background(), tokens, PerplexityOptions{Chunk: 512, ScoreAll: c.scoreAll})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s score-all=%v: PPL %.4f +/- %.4f over %d tokens (exact: %.4f)", kjvModel, c.scoreAll, res.PPL, res.StdErr, res.Scored, c.want)
		if math.Abs(res.PPL-c.want) > 0.02 || res.Scored != c.scored {
			t.Errorf("%s score-all=%v: PPL %.4f over %d tokens, want %.4f over %d", kjvModel, c.scoreAll, res.PPL, res.Scored, c.want, c.scored)
		}
	}
}

// The Llama fixture quantized with the reference quantizers (llama.cpp's llama-quantize
// bytes: the same file sizes and types) scores the exact perplexity of llama.cpp's files: the
// quantized Llama path (Q8_0, Q4_0, Q6_K weights with float32 activations) is exact too. The
// default path of q4_0 (8-bit activations where the CPU has VNNI) stays within intGate of it.
func TestPerplexityFixturesLlamaQuantized(t *testing.T) {
	if testing.Short() {
		t.Skip("quantizing and scoring two models takes a while")
	}
	r, _ := loadKjvRefs(t)
	text, err := os.ReadFile(fixtures.Path(t, "eval_kjv.txt"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		recipe string
		ref    string // the file llama_kjv_refs.json names
		size   int64  // its bytes
	}{{"q8_0", "llama-kjv-q8_0.gguf", 20467232}, {"q4_0", "llama-kjv-q4_0.gguf", 14992000}} {
		exact := r.Perplexity[c.ref].LlamaCpp
		if exact == 0 {
			t.Fatalf("llama_kjv_refs.json has no exact perplexity of %s", c.ref)
		}
		ft, err := quantize.ParseFileType(c.recipe)
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), c.ref)
		if _, err := quantize.File(fixtures.Path(t, kjvModel), path, quantize.Options{FileType: ft, Reference: true, Threads: 2}); err != nil {
			t.Fatal(err)
		}
		if st, err := os.Stat(path); err != nil || st.Size() != c.size {
			t.Fatalf("%s: %v, want %d bytes as llama.cpp's file", c.ref, err, c.size)
		}
		m := loadPath(t, path, Options{Threads: 2, ContextLength: 512, QuantizedActivations: QuantActOff})
		s, err := m.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		tokens := m.Tokenizer().Encode(string(text))
		res, err := s.Perplexity(context.Background(), tokens, PerplexityOptions{Chunk: 512})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s (reference quantizers): PPL %.4f over %d tokens (exact: %.4f)", c.ref, res.PPL, res.Scored, exact)
		if math.Abs(res.PPL-exact) > 0.02 || res.Scored != 8*255 {
			t.Errorf("%s: PPL %.4f over %d tokens, want %.4f over %d", c.ref, res.PPL, res.Scored, exact, 8*255)
		}
		if c.recipe == "q4_0" {
			checkIntGate(t, c.ref, path, tokens, res.PPL)
		}
	}
}

// llamaPresets are the random Llama-family models the self-contained tests run: grouped-query
// attention with a tied output; one key/value head, a separate output, RoPE base 500000 and
// Llama 3.1's frequency factors; Qwen2's biases and NeoX RoPE.
var llamaPresets = []string{"llama-tiny", "llama-tiny-untied", "qwen2-tiny"}

// writePreset writes a random model of a testmodel preset, edited, and returns its path.
func writePreset(t testing.TB, preset string, edit func(c *testmodel.Config)) string {
	t.Helper()
	c, err := testmodel.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&c)
	}
	path := filepath.Join(t.TempDir(), preset+".gguf")
	if err := testmodel.Write(path, c); err != nil {
		t.Fatal(err)
	}
	return path
}

func loadPath(t testing.TB, path string, opts Options) *Model {
	t.Helper()
	m, err := Load(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// TestBatchEqualsIncremental for the Llama family: one batch, batches of 7 and token by token
// give bit-identical logits, with any number of threads.
func TestBatchEqualsIncrementalLlama(t *testing.T) {
	for _, preset := range llamaPresets {
		for _, typ := range []quant.Type{quant.F32, quant.F16} {
			path := writePreset(t, preset, func(c *testmodel.Config) { c.Type = typ })
			step := stepLogits(t, loadPath(t, path, Options{Threads: 2}), testTokens)
			batch := batchLogits(t, loadPath(t, path, Options{Threads: 3}), testTokens)
			chunked := batchLogits(t, loadPath(t, path, Options{Threads: 1, BatchSize: 7}), testTokens)
			for i := range step {
				if step[i] != batch[i] || step[i] != chunked[i] || math.IsNaN(float64(step[i])) {
					t.Fatalf("%s %v: logit %d: step %v, batch %v, batches of 7 %v", preset, typ, i, step[i], batch[i], chunked[i])
				}
			}
		}
	}
}

// TestBatchedStepBitIdentical for the Llama family: rows of a batched step (BuildRows, with
// grouped-query attention over each row's own cache) equal each session's step alone.
func TestBatchedStepBitIdenticalLlama(t *testing.T) {
	for _, preset := range []string{"llama-tiny-untied", "qwen2-tiny"} {
		checkBatchedStep(t, preset, false)
	}
}

// Variants of the architectures that gorun does not compute are refused at load, by name.
func TestLlamaVariantsRefused(t *testing.T) {
	cases := []struct {
		preset string
		key    string
		value  any
		want   string
	}{
		{"llama-tiny", "llama.rope.scaling.type", "yarn", `llama.rope.scaling.type = "yarn"`},
		{"qwen2-tiny", "qwen2.rope.scaling.type", "longrope", `qwen2.rope.scaling.type = "longrope"`},
		{"llama-tiny", "llama.expert_count", uint32(8), "mixture of experts"},
		{"llama-tiny", "llama.attention.value_length", uint32(8), "value_length"},
		{"llama-tiny", "llama.rope.dimension_count", uint32(17), "rope.dimension_count"},
		{"llama-tiny", "llama.attention.head_count_kv", uint32(3), "key/value heads"},
	}
	for _, c := range cases {
		cfg, _ := testmodel.Preset(c.preset)
		w, data, err := testmodel.Writer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if err := w.Set(c.key, c.value); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "variant.gguf")
		if err := w.WriteFile(path, data); err != nil {
			t.Fatal(err)
		}
		_, err = Load(path, Options{Threads: 1})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s with %s = %v: error %v, want one naming %q", c.preset, c.key, c.value, err, c.want)
		}
	}
}

// A tensor the graph would not use (here a mixture-of-experts router) makes the load fail
// naming it, instead of running a different model silently.
func TestLlamaUnknownTensorRefused(t *testing.T) {
	cfg, _ := testmodel.Preset("llama-tiny")
	w, data, err := testmodel.Writer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	n := len(w.Tensors())
	if err := w.AddTensor("blk.0.ffn_gate_inp.weight", quant.F32, []int64{64, 4}); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "moe.gguf")
	zeros := make([]byte, 64*4*4)
	err = w.WriteFile(path, func(i int, ti *gguf.TensorInfo) ([]byte, error) {
		if i == n {
			return zeros, nil
		}
		return data(i, ti)
	})
	if err != nil {
		t.Fatal(err)
	}
	_, err = Load(path, Options{Threads: 1})
	if !errors.Is(err, ErrUnsupportedArchitecture) || !strings.Contains(err.Error(), "blk.0.ffn_gate_inp.weight") {
		t.Errorf("error %v, want ErrUnsupportedArchitecture naming blk.0.ffn_gate_inp.weight", err)
	}
}

// Linear RoPE scaling (rope.scaling.type = linear) is read and applied: a factor of 4 changes
// the logits, a factor of 1 and the type "none" are no scaling. (The op's arithmetic with a
// scale is checked against float64 in cpu's TestRoPE.)
func TestLlamaLinearRopeScaling(t *testing.T) {
	logits := func(typ string, factor float32) []float32 {
		cfg, _ := testmodel.Preset("llama-tiny")
		w, data, err := testmodel.Writer(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if typ != "" {
			if err := w.Set("llama.rope.scaling.type", typ); err != nil {
				t.Fatal(err)
			}
			if err := w.Set("llama.rope.scaling.factor", factor); err != nil {
				t.Fatal(err)
			}
		}
		path := filepath.Join(t.TempDir(), "scaled.gguf")
		if err := w.WriteFile(path, data); err != nil {
			t.Fatal(err)
		}
		m := loadPath(t, path, Options{Threads: 1})
		if typ == "linear" && factor != 1 && m.Hparams().Rope.FreqScale != 1/factor {
			t.Errorf("rope scale %v, want 1/%v", m.Hparams().Rope.FreqScale, factor)
		}
		return batchLogits(t, m, testTokens)
	}
	plain, none, one, four := logits("", 0), logits("none", 4), logits("linear", 1), logits("linear", 4)
	if !slices.Equal(plain, none) || !slices.Equal(plain, one) {
		t.Errorf("no scaling, scaling type none, and linear scaling by 1 differ")
	}
	if slices.Equal(plain, four) {
		t.Errorf("linear scaling by 4 changes nothing")
	}
}

// A Llama without output.weight multiplies by token_embd.weight (tied): the same logits as a
// file whose output.weight is a copy of the embeddings; a different output.weight is used.
func TestTiedOutputLlama(t *testing.T) {
	cfg, _ := testmodel.Preset("llama-tiny")
	cfg.NoOutput = false
	w, data, err := testmodel.Writer(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ts := w.Tensors()
	emb := slices.IndexFunc(ts, func(ti gguf.TensorInfo) bool { return ti.Name == "token_embd.weight" })
	out := slices.IndexFunc(ts, func(ti gguf.TensorInfo) bool { return ti.Name == "output.weight" })
	if emb < 0 || out < 0 {
		t.Fatalf("no token_embd.weight or output.weight in %v", ts)
	}
	untied := filepath.Join(t.TempDir(), "untied.gguf")
	err = w.WriteFile(untied, func(i int, ti *gguf.TensorInfo) ([]byte, error) {
		if i == out {
			return data(emb, &ts[emb])
		}
		return data(i, ti)
	})
	if err != nil {
		t.Fatal(err)
	}
	a := batchLogits(t, loadPath(t, untied, Options{Threads: 2}), testTokens)
	b := batchLogits(t, loadPath(t, writePreset(t, "llama-tiny", nil), Options{Threads: 2}), testTokens)
	if !slices.Equal(a, b) {
		t.Errorf("output.weight = token_embd.weight and a tied output give different logits")
	}
	// A random output.weight of its own is used: the logits change.
	own := batchLogits(t, loadPath(t, writePreset(t, "llama-tiny", func(c *testmodel.Config) { c.NoOutput = false }), Options{Threads: 2}), testTokens)
	if slices.Equal(own, b) {
		t.Errorf("a separate output.weight is ignored")
	}
}

// Generating a token with a Llama runs the prebuilt decode graph and allocates nothing (RoPE's
// angles live in the backend's per-thread scratch).
func TestDecodeDoesNotAllocateLlama(t *testing.T) {
	m := loadPath(t, writePreset(t, "llama-tiny-untied", nil), Options{Threads: 2})
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
