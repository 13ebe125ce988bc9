package llm

import (
	"bytes"
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/internal/fixtures"
	"github.com/gorun-dev/gorun/internal/testmodel"
	"github.com/gorun-dev/gorun/quant"
)

// With the reference quantizers, gorun quantize writes exactly the files llama-quantize wrote.
func TestReferenceQuantizeMatchesLlamaCpp(t *testing.T) {
	src := fixtures.Path(t, "gpt2-tiny-f16.gguf")
	for _, name := range []string{"q8_0", "q4_0", "q4_K_M"} {
		want, err := os.ReadFile(fixtures.Path(t, "gpt2-tiny-"+name+".gguf"))
		if err != nil {
			t.Fatal(err)
		}
		ft, _ := quant.ParseFileType(name)
		out := filepath.Join(t.TempDir(), name+".gguf")
		if _, err := Quantize(src, out, QuantizeOptions{FileType: ft, Reference: true, Threads: 2}); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(out)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: our file (%d bytes) differs from llama.cpp's (%d bytes)", name, len(got), len(want))
		}
	}
}

// Perplexity in llama-perplexity's protocol matches the exact values of the fixtures README.
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
		m := loadFixtureModel(t, c.file, Options{Threads: 2, ContextLength: 512})
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

// Every recipe writes a model that loads, has the planned types, and predicts nearly what the
// f16 model predicts.
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
			ft, err := quant.ParseFileType(name)
			if err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(t.TempDir(), name+".gguf")
			rep, err := Quantize(src, out, QuantizeOptions{FileType: ft, Threads: 2, Reference: ref})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			m := loadFile(t, out)
			got := batchLogits(t, m, testTokens)
			if rel := relL2(got, base); rel > tol {
				t.Errorf("%s (reference %v): logits differ from f32 by %.3g (tolerance %g)", name, ref, rel, tol)
			}
			ft2, _ := m.File().Uint("general.file_type")
			if quant.FileType(ft2) != ft {
				t.Errorf("%s: general.file_type %d", name, ft2)
			}
			out0 := m.File().Tensor("output.weight")
			if ft.DefaultType().Quantized() && ft != quant.FileQ8_0 && ft != quant.FileQ6_K && out0.Type != quant.Q6_K {
				t.Errorf("%s: output.weight is %v", name, out0.Type)
			}
			if m.File().Tensor("blk.0.attn_norm.weight").Type != quant.F32 || m.File().Tensor("position_embd.weight").Type != quant.F32 {
				t.Errorf("%s: vectors or position embeddings were quantized", name)
			}
			if st, _ := os.Stat(out); st.Size() != rep.FileBytes {
				t.Errorf("%s: report says %d bytes, file has %d", name, rep.FileBytes, st.Size())
			}
		}
	}
}

func loadFile(t *testing.T, path string) *Model {
	m, err := Load(path, Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
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

func TestQuantizeRefusals(t *testing.T) {
	src := writeTiny(t, nil)
	dir := t.TempDir()
	if _, err := Quantize(src, src, QuantizeOptions{FileType: quant.FileQ4_0}); err == nil || !strings.Contains(err.Error(), "overwrite") {
		t.Errorf("overwriting the input: %v", err)
	}
	link := filepath.Join(dir, "link.gguf")
	os.Symlink(src, link)
	if _, err := Quantize(src, link, QuantizeOptions{FileType: quant.FileQ4_0}); err == nil {
		t.Error("overwriting the input through a link was allowed")
	}
	q := filepath.Join(dir, "q4.gguf")
	if _, err := Quantize(src, q, QuantizeOptions{FileType: quant.FileQ4_0}); err != nil {
		t.Fatal(err)
	}
	if _, err := Quantize(q, filepath.Join(dir, "q8.gguf"), QuantizeOptions{FileType: quant.FileQ8_0}); err == nil || !strings.Contains(err.Error(), "requantiz") {
		t.Errorf("requantizing without permission: %v", err)
	}
	if _, err := Quantize(q, filepath.Join(dir, "q8.gguf"), QuantizeOptions{FileType: quant.FileQ8_0, AllowRequantize: true}); err != nil {
		t.Errorf("requantizing with permission: %v", err)
	}
}

// A NaN in a weight fails the quantization with the tensor's name, and leaves no output file
// (nor any temporary file) behind.
func TestQuantizeNaNLeavesNothing(t *testing.T) {
	src := writeTiny(t, func(c *testmodel.Config) { c.Type = quant.F32 })
	bad := withNaN(t, src, "blk.1.ffn_up.weight")
	dir := t.TempDir()
	out := filepath.Join(dir, "out.gguf")
	_, err := Quantize(bad, out, QuantizeOptions{FileType: quant.FileQ4_0})
	if err == nil || !strings.Contains(err.Error(), "blk.1.ffn_up.weight") || !strings.Contains(err.Error(), "NaN") {
		t.Fatalf("NaN weight: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left behind: %v", entries)
	}
}

// withNaN copies a model with one element of the named f32 tensor set to NaN.
func withNaN(t *testing.T, src, tensor string) string {
	f, err := gguf.Open(src)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	w := gguf.NewWriter()
	for _, kv := range f.KV {
		w.Set(kv.Key, kv.Value)
	}
	for _, ti := range f.Tensors {
		w.AddTensor(ti.Name, ti.Type, ti.Dims)
	}
	out := filepath.Join(t.TempDir(), "nan.gguf")
	err = w.WriteFile(out, func(i int, ti *gguf.TensorInfo) ([]byte, error) {
		data := f.Data(&f.Tensors[i])
		if ti.Name != tensor {
			return data, nil
		}
		c := bytes.Clone(data)
		quant.AsF32(c)[100] = float32(math.NaN())
		return c, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// ggml's integer path (8-bit activations) agrees with the float32 path within the error of
// quantizing activations to 8 bits, for every weight type, and does not depend on threads.
func TestQuantizedActivations(t *testing.T) {
	src := writeTiny(t, func(c *testmodel.Config) { c.Type = quant.F32 })
	for _, name := range []string{"q8_0", "q4_0", "q4_1", "q5_0", "q5_1", "q4_k_m", "q5_k_m", "q6_k"} {
		ft, _ := quant.ParseFileType(name)
		out := filepath.Join(t.TempDir(), name+".gguf")
		if _, err := Quantize(src, out, QuantizeOptions{FileType: ft, Threads: 2}); err != nil {
			t.Fatal(err)
		}
		exact := batchLogits(t, loadFile(t, out), testTokens)
		load := func(threads int) *Model {
			m, err := Load(out, Options{Threads: threads, QuantizedActivations: true})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { m.Close() })
			return m
		}
		q1 := batchLogits(t, load(1), testTokens)
		q3 := batchLogits(t, load(3), testTokens)
		// 8-bit activations carry a relative error of about 0.5% per matmul input.
		if rel := relL2(q1, exact); rel > 0.02 || rel == 0 {
			t.Errorf("%s: integer path differs from float32 activations by %.3g", name, rel)
		}
		for i := range q1 {
			if q1[i] != q3[i] {
				t.Fatalf("%s: integer path depends on the thread count", name)
			}
		}
	}
}
