package llm

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gorun-dev/gorun/cpu/kernels"
	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/internal/fixtures"
	"github.com/gorun-dev/gorun/internal/testmodel"
	"github.com/gorun-dev/gorun/quant"
	"github.com/gorun-dev/gorun/quantize"
)

// Perplexity in llama-perplexity's protocol matches the exact values of the fixtures README
// on the float path (float32 activations: the weights' error alone, as the exact values). The
// default path (QuantActAuto: 8-bit activations for Q4_0 where the CPU has VNNI) must stay
// within intGate of them: the accuracy bar that made it the default.
func TestPerplexityFixtures(t *testing.T) {
	if testing.Short() {
		t.Skip("perplexity of four models takes a few minutes")
	}
	text, err := os.ReadFile(fixtures.Path(t, "eval_kjv.txt"))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		file     string
		scoreAll bool
		want     float64
	}{
		{"gpt2-tiny-f16.gguf", false, 68.961},
		{"gpt2-tiny-f16.gguf", true, 67.442},
		{"gpt2-tiny-q8_0.gguf", false, 68.948},
		{"gpt2-tiny-q4_K_M.gguf", false, 70.007},
		{"gpt2-tiny-q4_0.gguf", false, 70.367},
	}
	for _, c := range cases {
		m := loadFixtureModel(t, c.file, Options{Threads: 2, ContextLength: 512, QuantizedActivations: QuantActOff})
		tokens := m.Tokenizer().Encode(string(text))
		if len(tokens) != 4096 {
			t.Fatalf("eval text is %d tokens, want 4096", len(tokens))
		}
		s, _ := m.NewSession()
		res, err := s.Perplexity(context.Background(), tokens, PerplexityOptions{Chunk: 512, ScoreAll: c.scoreAll})
		if err != nil {
			t.Fatal(err)
		}
		wantScored := 8 * 255
		if c.scoreAll {
			wantScored = 8 * 511
		}
		t.Logf("%s score-all=%v: PPL %.4f +/- %.4f over %d tokens (exact: %.3f)", c.file, c.scoreAll, res.PPL, res.StdErr, res.Scored, c.want)
		if math.Abs(res.PPL-c.want) > 0.01 || res.Scored != wantScored {
			t.Errorf("%s score-all=%v: PPL %.4f over %d tokens, want %.3f over %d", c.file, c.scoreAll, res.PPL, res.Scored, c.want, wantScored)
		}
		if c.file == "gpt2-tiny-q4_0.gguf" {
			checkIntGate(t, c.file, fixtures.Path(t, c.file), tokens, res.PPL)
		}
	}
}

// intGate is the most the default path's perplexity may move from the float path's (relative):
// the bar for making 8-bit activations the default for a weight type (issue 19).
const intGate = 0.002

// checkIntGate computes the perplexity of the model at path on the default path (QuantActAuto)
// and checks it within intGate of the float path's, floatPPL. Where the CPU has SIMD integer
// kernels the default path must be the integer one (a different perplexity); elsewhere it is
// the float path, bit for bit.
func checkIntGate(t *testing.T, name, path string, tokens []int32, floatPPL float64) {
	t.Helper()
	m := loadPath(t, path, Options{Threads: 2, ContextLength: 512})
	s, err := m.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	res, err := s.Perplexity(context.Background(), tokens, PerplexityOptions{Chunk: 512})
	if err != nil {
		t.Fatal(err)
	}
	change := res.PPL/floatPPL - 1
	t.Logf("%s, default path: PPL %.4f, %+.3f%% from the float path's %.4f", name, res.PPL, 100*change, floatPPL)
	if math.Abs(change) > intGate {
		t.Errorf("%s: the default path's perplexity %.4f is %+.3f%% from the float path's %.4f (gate: %.1f%%)", name, res.PPL, 100*change, floatPPL, 100*intGate)
	}
	if simd := kernels.IntKernelFor(quant.Q4_0).SIMD(); simd == (res.PPL == floatPPL) {
		t.Errorf("%s: SIMD integer kernels %v, yet the default path's perplexity equals the float path's: %v", name, simd, res.PPL == floatPPL)
	}
}

func writeTiny(t *testing.T, edit func(c *testmodel.Config)) string {
	c, _ := testmodel.Preset("tiny")
	c.NEmbd, c.NFF = 256, 512 // rows long enough for K-quant blocks
	if edit != nil {
		edit(&c)
	}
	p := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := testmodel.Write(p, c); err != nil {
		t.Fatal(err)
	}
	return p
}

// Every recipe writes a model that loads and predicts nearly what the f32 model predicts
// (quantize's TestRecipes checks the files' types and keys).
func TestQuantizeRecipes(t *testing.T) {
	src := writeTiny(t, func(c *testmodel.Config) { c.Type = quant.F32 })
	base := batchLogits(t, loadFile(t, src), testTokens)
	// The logits of a random model move by about twice the relative RMSE of its weights; the
	// tolerances are 2.5 times each format's weight RMSE on Gaussian data (quant's tests).
	tols := map[string]float64{"f32": 0, "f16": 1e-3, "bf16": 1e-2, "q8_0": 2.5 * 0.0054, "q6_k": 2.5 * 0.018,
		"q5_k_m": 2.5 * 0.036, "q5_k_s": 2.5 * 0.036, "q5_0": 2.5 * 0.043, "q5_1": 2.5 * 0.038,
		"q4_k_m": 2.5 * 0.071, "q4_k_s": 2.5 * 0.071, "q4_0": 2.5 * 0.086, "q4_1": 2.5 * 0.078}
	for name, tol := range tols {
		for _, ref := range []bool{true, false} {
			ft, err := quantize.ParseFileType(name)
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), name+".gguf")
			_, err = quantize.File(src, out, quantize.Options{FileType: ft, Threads: 2, Reference: ref})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			m := loadFile(t, out)
			got := batchLogits(t, m, testTokens)
			if rel := relL2(got, base); rel > tol {
				t.Errorf("%s (reference %v): logits differ from f32 by %.3g (tolerance %g)", name, ref, rel, tol)
			}
		}
	}
}

// loadFile loads the model at path on the float path (float32 activations), which the tests
// that measure the weights' error alone ask for.
func loadFile(t *testing.T, path string) *Model {
	m, err := Load(path, Options{Threads: 2, QuantizedActivations: QuantActOff})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// hasIntWeights reports whether the model file at path has a matrix of a type with integer
// kernels (which the integer path quantizes the activations for).
func hasIntWeights(t *testing.T, path string) bool {
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	for _, ti := range f.Tensors {
		if len(ti.Dims) == 2 && kernels.IntKernelFor(ti.Type) != nil {
			return true
		}
	}
	return false
}

func relL2(a, b []float32) float64 {
	var num, den float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		num += d * d
		den += float64(b[i]) * float64(b[i])
	}
	return math.Sqrt(num / den)
}

// ggml's integer path (8-bit activations) agrees with the float32 path within the error of
// quantizing activations to 8 bits, does not depend on threads, and leaves the weight types
// without integer kernels on the float32 path, bit for bit. The default (auto) gives the
// integer path's bits for Q4_0 on a CPU with SIMD integer kernels, the float path's otherwise.
func TestQuantizedActivations(t *testing.T) {
	src := writeTiny(t, func(c *testmodel.Config) { c.Type = quant.F32 })
	for _, name := range []string{"q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k_m", "q5_k_m", "q6_k"} {
		ft, _ := quantize.ParseFileType(name)
		out := filepath.Join(t.TempDir(), name+".gguf")
		if _, err := quantize.File(src, out, quantize.Options{FileType: ft, Threads: 2}); err != nil {
			t.Fatal(err)
		}
		exact := batchLogits(t, loadFile(t, out), testTokens)
		load := func(threads int) *Model {
			m, err := Load(out, Options{Threads: threads, QuantizedActivations: QuantActOn})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			return m
		}
		q1 := batchLogits(t, load(1), testTokens)
		q3 := batchLogits(t, load(3), testTokens)
		// 8-bit activations carry a relative error of about 0.5% per matmul input.
		if rel := relL2(q1, exact); !hasIntWeights(t, out) && rel != 0 {
			t.Errorf("%s: no weight has integer kernels, yet the integer path differs from the float32 one by %.3g", name, rel)
		} else if hasIntWeights(t, out) && (rel > 0.02 || rel == 0) {
			t.Errorf("%s: integer path differs from float32 activations by %.3g", name, rel)
		}
		for i := range q1 {
			if q1[i] != q3[i] {
				t.Fatalf("%s: integer path depends on the thread count", name)
			}
		}
		// One batch, batches of 7 (the tile kernels on 7 and 4+3 rows) and token by token
		// (the streaming row kernels) give the same bits.
		step := stepLogits(t, load(2), testTokens)
		m7, err := Load(out, Options{Threads: 2, QuantizedActivations: QuantActOn, BatchSize: 7})
		if err != nil {
			t.Fatal(err)
		}
		chunked := batchLogits(t, m7, testTokens)
		m7.Close()
		for i := range q1 {
			if step[i] != q1[i] || chunked[i] != q1[i] {
				t.Fatalf("%s: integer path, logit %d: batch %v, token by token %v, batches of 7 %v", name, i, q1[i], step[i], chunked[i])
			}
		}
		checkDefaultPath(t, name, out, exact, q1)
	}
}

// checkDefaultPath checks that the default (QuantActAuto) gives the integer path's logits
// (intLogits) for Q4_0 files where the CPU has SIMD integer kernels and the float path's
// (floatLogits) otherwise, in one batch and token by token alike.
func checkDefaultPath(t *testing.T, name, path string, floatLogits, intLogits []float32) {
	t.Helper()
	m, err := Load(path, Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	want, which := floatLogits, "float"
	if name == "q4_0" && kernels.IntKernelFor(quant.Q4_0).SIMD() {
		want, which = intLogits, "integer"
	}
	batch, step := batchLogits(t, m, testTokens), stepLogits(t, m, testTokens)
	for i := range want {
		if batch[i] != want[i] || step[i] != want[i] {
			t.Fatalf("%s: default path, logit %d: batch %v, token by token %v, want the %s path's %v", name, i, batch[i], step[i], which, want[i])
		}
	}
}

// An out-of-range Options.QuantizedActivations is refused, not taken for one of the modes.
func TestQuantizedActivationsInvalid(t *testing.T) {
	src := writeTiny(t, nil)
	if _, err := Load(src, Options{Threads: 1, QuantizedActivations: QuantActOn + 1}); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("QuantizedActivations %d: %v, want ErrInvalidOption", QuantActOn+1, err)
	}
	for _, s := range []string{"auto", "on", "true", "1", "off", "false", "0", "OFF"} {
		if _, err := ParseQuantAct(s); err != nil {
			t.Errorf("ParseQuantAct(%q): %v", s, err)
		}
	}
	if q, err := ParseQuantAct("yes"); err == nil {
		t.Errorf("ParseQuantAct(yes) = %v, want an error", q)
	}
}
