package llm

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gorun-dev/gorun/internal/fixtures"
	"github.com/gorun-dev/gorun/quantize"
)

// Issue 16's quantization claim on the trained Llama fixture, measured by KL divergence from
// the f16 model (llama-perplexity's protocol on the eval text: 8 chunks of 512, 2040 positions,
// float32 activations so that only the weights differ): gorun's default quantizer writes a
// q4_0 file of llama-quantize's size whose next-token distributions are closer to the f16
// model's than those of llama-quantize's file (--reference, byte-identical to it), by a margin
// far outside the noise of the paired per-position differences. quant/QUALITY.md has the
// table (perplexity on these 2040 tokens cannot rank these files: llama-quantize's are below
// the f16 model's own).
func TestDefaultQuantizerBeatsReferenceLlamaKJV(t *testing.T) {
	if testing.Short() {
		t.Skip("quantizing and scoring three Llama files takes about a minute")
	}
	base := kjvLogProbsBase(t)
	for _, c := range []struct {
		recipe string
		size   int64   // llama-quantize's file
		ratio  float64 // the most ours' mean KLD may be of the reference's (measured: 0.881)
	}{{"q4_0", 14992000, 0.93}} {
		ours := quantizedKLD(t, base, c.recipe, c.size, false)
		ref := quantizedKLD(t, base, c.recipe, c.size, true)
		diff, diffErr := pairedMeanDiff(ours.kld, ref.kld)
		t.Logf("%s: mean KLD ours %.6f ± %.6f, llama-quantize's %.6f ± %.6f (ratio %.3f, paired difference %.6f ± %.6f); PPL %.4f vs %.4f",
			c.recipe, ours.KLD().Value, ours.KLD().Err, ref.KLD().Value, ref.KLD().Err, ours.KLD().Value/ref.KLD().Value,
			diff, diffErr, ours.PPL().Value, ref.PPL().Value)
		if ours.KLD().Value > c.ratio*ref.KLD().Value || diff+4*diffErr >= 0 {
			t.Errorf("%s: gorun's mean KLD %.6f is not clearly below llama-quantize's %.6f (want at most %.2fx, and the paired difference %.6f ± %.6f below zero by 4 standard errors)",
				c.recipe, ours.KLD().Value, ref.KLD().Value, c.ratio, diff, diffErr)
		}
	}
}

// kjvLogProbsBase computes the KL-divergence base file of the f16 Llama fixture on the eval
// text.
func kjvLogProbsBase(t *testing.T) []byte {
	t.Helper()
	text, err := os.ReadFile(fixtures.Path(t, "eval_kjv.txt"))
	if err != nil {
		t.Fatal(err)
	}
	m := loadFixtureModel(t, kjvModel, Options{Threads: 2, ContextLength: 512, QuantizedActivations: QuantActOff})
	s, err := m.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	res, err := s.Perplexity(context.Background(), m.Tokenize(string(text), true), PerplexityOptions{Chunk: 512, LogProbs: &buf})
	if err != nil {
		t.Fatal(err)
	}
	if res.Scored != 8*255 {
		t.Fatalf("f16 base: %d positions scored, want %d", res.Scored, 8*255)
	}
	return buf.Bytes()
}

// quantizedKLD quantizes the f16 Llama fixture with the recipe (llama-quantize's algorithm when
// reference is set, gorun's default search otherwise), checks the file's size and compares it
// with the base file's distributions on the float path.
func quantizedKLD(t *testing.T, baseFile []byte, recipe string, size int64, reference bool) *KLDivergenceStats {
	t.Helper()
	ft, err := quantize.ParseFileType(recipe)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), recipe+".gguf")
	if _, err := quantize.File(fixtures.Path(t, kjvModel), path, quantize.Options{FileType: ft, Reference: reference, Threads: 2}); err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(path); err != nil || st.Size() != size {
		t.Fatalf("%s (reference %v): %v, want %d bytes as llama-quantize's file", recipe, reference, err, size)
	}
	m := loadPath(t, path, Options{Threads: 2, ContextLength: 512, QuantizedActivations: QuantActOff})
	s, err := m.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	base, err := ReadLogProbsBase(bytes.NewReader(baseFile), int64(len(baseFile))) // a stream: read once
	if err != nil {
		t.Fatal(err)
	}
	k, err := s.KLDivergence(context.Background(), base, KLDivergenceOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if k.Count() != 8*255 {
		t.Fatalf("%s (reference %v): %d positions compared, want %d", recipe, reference, k.Count(), 8*255)
	}
	return k
}

// pairedMeanDiff returns the mean of a[i]-b[i] and its standard error: the two files are
// compared at the same positions, so the positions' common difficulty cancels.
func pairedMeanDiff(a, b []float32) (mean, stdErr float64) {
	var sum, sum2 float64
	for i := range a {
		d := float64(a[i]) - float64(b[i])
		sum += d
		sum2 += d * d
	}
	n := float64(len(a))
	mean = sum / n
	return mean, math.Sqrt(max(sum2/n-mean*mean, 0) / (n - 1))
}
