package quantize

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/internal/fixtures"
	"github.com/gorun-dev/gorun/internal/testmodel"
	"github.com/gorun-dev/gorun/quant"
)

func typ(t quant.Type) *quant.Type { return &t }

// With the reference quantizers, the forced types give exactly llama-quantize's files (llama.cpp
// c392e509, `llama-quantize OPTIONS IN OUT TYPE 2`): the tied Llama embedding takes the output
// type in a mixed recipe and the recipe's type under --pure; --leave-output-tensor copies
// GPT-2's output.weight; a K-quant output type on GPT-2's 256-wide rows.
func TestOverridesMatchLlamaQuantize(t *testing.T) {
	for _, c := range []struct {
		name, in string
		opts     Options
		want     string
	}{
		{"--output-tensor-type q8_0", "llama-kjv-f16.gguf", Options{FileType: FileQ4_K_M, OutputTensorType: typ(quant.Q8_0)},
			"205652bdb4904a9fd99974cea8df8626cbcf01b74b56eea2f236cd3905c5d491"},
		{"--token-embedding-type q5_0", "llama-kjv-f16.gguf", Options{FileType: FileQ4_K_M, TokenEmbeddingType: typ(quant.Q5_0)},
			"3068ad0e7a54ff5a40718f660a66e462196bed0c9f3d855feafe3f120aa28eaf"},
		{"--pure --output-tensor-type q8_0", "llama-kjv-f16.gguf", Options{FileType: FileQ4_K_M, Pure: true, OutputTensorType: typ(quant.Q8_0)},
			"0146e6655719e08106ad47f15ff0cdd27a25e3351e2f167612d790c267603a8e"},
		{"--leave-output-tensor --token-embedding-type q8_0", "gpt2-tiny-f16.gguf", Options{FileType: FileQ4_0, LeaveOutputTensor: true, TokenEmbeddingType: typ(quant.Q8_0)},
			"2c2c882e94287c9c148f89da32f52c92407cbea90fdefef4a2c6521ba857b0dd"},
		{"--output-tensor-type q4_K --token-embedding-type f16", "gpt2-tiny-f16.gguf", Options{FileType: FileQ8_0, OutputTensorType: typ(quant.Q4_K), TokenEmbeddingType: typ(quant.F16)},
			"7a9e965bb5fff4bdb180de2db238edd9f432ba5c0a28cb58fb0b997c0decd61a"},
	} {
		c.opts.Reference, c.opts.Threads = true, 2
		out := filepath.Join(t.TempDir(), "q.gguf")
		if _, err := File(fixtures.Path(t, c.in), out, c.opts); err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := fileSHA256(t, out); got != c.want {
			t.Errorf("%s %s: sha256 %s, llama-quantize's file has %s", c.in, c.name, got, c.want)
		}
	}
}

// The forced types reach the plan: the output type on output.weight only (an untied model's
// token embedding keeps the recipe's type), a type whose blocks do not divide the rows falls
// back with a note, and types that cannot hold weights are refused by name.
func TestOverrideTypes(t *testing.T) {
	src := writeTiny(t, nil) // GPT-2: output.weight and token_embd.weight, 256-wide rows
	types := func(opts Options) map[string]TensorReport {
		t.Helper()
		opts.Threads = 2
		rep, err := File(src, filepath.Join(t.TempDir(), "q.gguf"), opts)
		if err != nil {
			t.Fatal(err)
		}
		m := map[string]TensorReport{}
		for _, r := range rep.Tensors {
			m[r.Name] = r
		}
		return m
	}
	m := types(Options{FileType: FileQ4_0, OutputTensorType: typ(quant.Q5_1)})
	if m["output.weight"].To != quant.Q5_1 || m["token_embd.weight"].To != quant.Q4_0 {
		t.Errorf("output type q5_1: output %v, token_embd %v", m["output.weight"].To, m["token_embd.weight"].To)
	}
	m = types(Options{FileType: FileQ4_0, LeaveOutputTensor: true, OutputTensorType: typ(quant.Q5_1)})
	if r := m["output.weight"]; r.To != r.From || r.Quantized {
		t.Errorf("--leave-output-tensor: output.weight %v -> %v", r.From, r.To)
	}

	narrow := writeTiny(t, func(c *testmodel.Config) { c.NEmbd, c.NFF = 96, 192 }) // rows of 96: no K-quant block
	rep, err := File(narrow, filepath.Join(t.TempDir(), "n.gguf"), Options{FileType: FileQ8_0, Threads: 2, TokenEmbeddingType: typ(quant.Q6_K)})
	if err != nil {
		t.Fatal(err)
	}
	for _, r := range rep.Tensors {
		if r.Name == "token_embd.weight" && (r.To != quant.Q8_0 || !strings.Contains(r.Note, "q6_K")) {
			t.Errorf("Q6_K token embedding on rows of 96: %v, note %q; want the Q8_0 fallback", r.To, r.Note)
		}
	}

	for _, bad := range []Options{
		{FileType: FileQ4_0, OutputTensorType: typ(quant.Q8_K)},
		{FileType: FileQ4_0, TokenEmbeddingType: typ(quant.Q8_1)},
		{FileType: FileQ4_0, TokenEmbeddingType: typ(quant.Type(999))},
	} {
		_, err := File(src, filepath.Join(t.TempDir(), "x.gguf"), bad)
		if err == nil || !strings.Contains(err.Error(), "type") {
			t.Errorf("%+v: error %v", bad, err)
		}
	}
}

// --allow-requantize: a quantized input that the plan gives another type is refused without
// it, naming the tensor and the option, and requantized with it; one that keeps its type
// is copied without it.
func TestAllowRequantize(t *testing.T) {
	q4 := fixtures.Path(t, "gpt2-tiny-q4_0.gguf")
	dir := t.TempDir()
	_, err := File(q4, filepath.Join(dir, "a.gguf"), Options{FileType: FileQ8_0, Threads: 2, Reference: true})
	if err == nil || !strings.Contains(err.Error(), "allow-requantize") || !strings.Contains(err.Error(), "already") {
		t.Errorf("requantizing without the option: %v", err)
	}
	if _, err := File(q4, filepath.Join(dir, "b.gguf"), Options{FileType: FileQ8_0, Threads: 2, Reference: true, AllowRequantize: true}); err != nil {
		t.Errorf("requantizing with the option: %v", err)
	}
	rep, err := File(q4, filepath.Join(dir, "c.gguf"), Options{FileType: FileQ4_0, Threads: 2, Reference: true})
	if err != nil {
		t.Fatalf("the same recipe again: %v", err)
	}
	for _, r := range rep.Tensors {
		if r.Quantized {
			t.Errorf("%s was requantized (%v -> %v); it keeps its type", r.Name, r.From, r.To)
		}
	}
}
