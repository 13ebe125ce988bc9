package quantize

import (
	"crypto/sha256"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/quant"
)

var llamaShapeOut = flag.String("llama-shape-out", "", "keep the Llama 3.2 1B-shaped test model in this `dir` (to quantize it with llama-quantize)")

// llamaShape is Llama 3.2 1B's layout (16 layers, 32 heads, 8 KV heads: 4 query heads per KV
// head, tied embeddings, rope_freqs) at a small width and vocabulary.
const (
	shapeVocab, shapeEmbd, shapeFF   = 2048, 256, 512
	shapeLayers, shapeHeads, shapeKV = 16, 32, 8
)

// writeLlamaShape writes the llamaShape model with deterministic pseudo-random f16 weights.
func writeLlamaShape(t *testing.T) string {
	t.Helper()
	headDim := int64(shapeEmbd / shapeHeads)
	w := gguf.NewWriter()
	for _, kv := range []struct {
		k string
		v any
	}{
		{"general.architecture", "llama"}, {"general.name", "Llama 3.2 1B shape"},
		{"llama.block_count", uint32(shapeLayers)}, {"llama.context_length", uint32(131072)},
		{"llama.embedding_length", uint32(shapeEmbd)}, {"llama.feed_forward_length", uint32(shapeFF)},
		{"llama.attention.head_count", uint32(shapeHeads)}, {"llama.attention.head_count_kv", uint32(shapeKV)},
		{"llama.rope.freq_base", float32(500000)}, {"llama.attention.layer_norm_rms_epsilon", float32(1e-5)},
		{"general.file_type", uint32(FileF16)}, {"llama.vocab_size", uint32(shapeVocab)},
		{"llama.rope.dimension_count", uint32(headDim)}, {"general.quantization_version", uint32(2)},
	} {
		if err := w.Set(kv.k, kv.v); err != nil {
			t.Fatal(err)
		}
	}
	add := func(name string, typ quant.Type, dims ...int64) {
		if err := w.AddTensor(name, typ, dims); err != nil {
			t.Fatal(err)
		}
	}
	add("rope_freqs.weight", quant.F32, headDim/2)
	add("token_embd.weight", quant.F16, shapeEmbd, shapeVocab)
	for i := 0; i < shapeLayers; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		add(p+"attn_k.weight", quant.F16, shapeEmbd, shapeKV*headDim)
		add(p+"attn_norm.weight", quant.F32, shapeEmbd)
		add(p+"attn_output.weight", quant.F16, shapeEmbd, shapeEmbd)
		add(p+"attn_q.weight", quant.F16, shapeEmbd, shapeEmbd)
		add(p+"attn_v.weight", quant.F16, shapeEmbd, shapeKV*headDim)
		add(p+"ffn_down.weight", quant.F16, shapeFF, shapeEmbd)
		add(p+"ffn_gate.weight", quant.F16, shapeEmbd, shapeFF)
		add(p+"ffn_norm.weight", quant.F32, shapeEmbd)
		add(p+"ffn_up.weight", quant.F16, shapeEmbd, shapeFF)
	}
	add("output_norm.weight", quant.F32, shapeEmbd)
	dir := t.TempDir()
	if *llamaShapeOut != "" {
		dir = *llamaShapeOut
	}
	path := filepath.Join(dir, "llama-shape-f16.gguf")
	next := weightSource()
	err := w.WriteFileStream(path, func(i int, ti *gguf.TensorInfo, dst io.Writer) error {
		var buf []byte
		for j := int64(0); j < ti.Elements(); j++ {
			switch {
			case ti.Name == "rope_freqs.weight":
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(float32(int(1)<<(j%4))))
			case ti.Type == quant.F32:
				buf = binary.LittleEndian.AppendUint32(buf, math.Float32bits(1+next()))
			default:
				buf = binary.LittleEndian.AppendUint16(buf, quant.F32ToF16(next()))
			}
		}
		_, err := dst.Write(buf)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return path
}

// weightSource returns a deterministic stream of weight-like values: roughly Gaussian (a sum
// of four uniforms) with standard deviation about 0.035 and one value in 1024 eight times
// larger, as the outliers of trained matrices are.
func weightSource() func() float32 {
	s := uint64(0x9E3779B97F4A7C15)
	return func() float32 {
		s ^= s >> 12 // xorshift64*
		s ^= s << 25
		s ^= s >> 27
		r := s * 2685821657736338717
		a := float32(r&0xffff)/65536 + float32(r>>16&0xffff)/65536 + float32(r>>32&0xffff)/65536 + float32(r>>48&0xffff)/65536 - 2
		if r&0x3ff == 7 {
			a *= 8
		}
		return a * 0.03
	}
}

// The sha256 of the llamaShape model and of llama-quantize's files made from it (llama.cpp
// c392e509, `llama-quantize llama-shape-f16.gguf OUT TYPE`; run this test with
// -llama-shape-out DIR to get the input). They exercise the rules the 6-layer fixture does not
// reach: q2_K's attn_v (Q4_K with 4 query heads per KV head), q4_K_S's and q3_K_M's first
// layers, useMoreBits over 16 layers, and a 1-D tensor among the weights (rope_freqs).
const llamaShapeInput = "75291a60a7a7ae096d33902184a16c3655d94ba8a5fe8ec855eaf3d557c0f1e7"

var llamaQuantizeShape = map[string]string{
	"f32":    "7446e166a0dc9176f9b05be5b85060e2ccc94a8fb6e982bd7ddf2955d6bcaee4",
	"f16":    "5aca19dc8372f1b757f10a8fe5a832151225711fd2fe02c24426705bb4e06853",
	"bf16":   "f51fe977fd249297b96d995e129ebea215e9995e17728e3879d0fb7f11e25739",
	"q8_0":   "ac822a4e02e74dc46e6adaff89d292e67caaaa09a5aa1c18f32aeba06b8a9af2",
	"q4_0":   "0f7c984a23dc14440a26534ae8733579fdad94b7eccae5f4efab0013a93e3a54",
	"q4_1":   "b05e7b682975b979533c0b94b58c24fa682bad94713fb1787725cb9e4991dbed",
	"q5_0":   "a746279584d8af246aef27571d3985afaad6a6eb00ba2f2ddd0bf56422ae746a",
	"q5_1":   "939e0cdafcab62328f8ccc24f61ead2b4e8f78965ccb76fef2742017e88a5677",
	"q2_k":   "669a4fc81f5f29f40eddba89067339744492a9d8d466ee25f6b78a73d0586db8",
	"q3_k_s": "2dc3b13f9f58bc37cbc0c95b539e9c36211791bbdca5cbce86160a5d20353ca8",
	"q3_k_m": "dc73fb00139e7d5205db3e29b8bd7539a99e7d938d58c74e22b1412838f17bf9",
	"q3_k_l": "05a7c514219c38a5153c9cf302992071e59bd85f266ddf8de1e48fbb45281d9d",
	"q4_k_s": "d7c531e7f1667d783cbe1a94d957470d58b8a83eb50853631f81ff76ee3ca3fb",
	"q4_k_m": "9084251630ade34643bbf292738b755a60973b94aeec250ebf37dd4b6fa73796",
	"q5_k_s": "38e49c2e5037e2297b15ddd397c1e2c8ef654d36349696a204b72eb17f512884",
	"q5_k_m": "14f2efcdcd645118e5445531f455ddf9db8d542e0f5754c985e4bc8960139529",
	"q6_k":   "93f17107efad7a21fd0db02b2376317c3379fb6d2c9a023897b4cbb288d43213",
	// iq4_nl and iq4_xs (attn_v Q5_K at 4 query heads per KV head, ffn_down of the first two
	// layers Q5_K): llama_model_quantize with llama-quantize's default parameters, libllama of
	// c392e509 built on the CPU.
	"iq4_nl": "6c845a4742cb157399ec615490958524ab659e86280359c224c478ce4cd5b089",
	"iq4_xs": "1a6a90644578e97896dca8075eb7dc85fbf7d70001776b94f97372e9c23ccb13",
}

// With the reference quantizers, File writes exactly the files llama-quantize wrote from a
// grouped-query model of Llama 3.2 1B's layout.
func TestReferenceMatchesLlamaQuantizeGQA(t *testing.T) {
	src := writeLlamaShape(t)
	if got := fileSHA256(t, src); got != llamaShapeInput {
		t.Fatalf("the test model's sha256 is %s, want %s: its generator changed", got, llamaShapeInput)
	}
	for _, recipe := range fileTypes {
		name := strings.ToLower(recipe.name)
		want, ok := llamaQuantizeShape[name]
		if !ok {
			t.Errorf("%s: no llama-quantize hash pinned for this recipe", name)
			continue
		}
		out := filepath.Join(t.TempDir(), name+".gguf")
		if _, err := File(src, out, Options{FileType: recipe.ft, Reference: true, Threads: 2}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := fileSHA256(t, out); got != want {
			t.Errorf("%s: sha256 %s, llama-quantize's file has %s", name, got, want)
		}
	}
}

func fileSHA256(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("%x", sha256.Sum256(b))
}
