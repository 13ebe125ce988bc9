package testmodel

import (
	"math"
	"strconv"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/quant"
)

// planLlama lists a Llama's (or Qwen2's) tensors in the order llama.cpp's converter writes
// them: the token embeddings, each block's tensors in Hugging Face's sorted parameter names
// (Qwen2's Q/K/V biases beside their matrices), the output norm, then output.weight unless the
// output is tied, and Llama 3.1's rope_freqs.weight when asked for.
func planLlama(c *Config, nVocab int) []tensorPlan {
	E, F, V := int64(c.NEmbd), int64(c.NFF), int64(nVocab)
	D := int64(c.NEmbd / c.NHead)
	Q, KV := D*int64(c.NHead), D*int64(c.kvHeads())
	std, proj := 0.02, 0.02/math.Sqrt(2*float64(c.NLayer))
	bias, norm := dist{0, 0.02}, dist{1, 0.02}
	biases := c.arch() == "qwen2"
	var p []tensorPlan
	add := func(name string, matrix bool, d dist, dims ...int64) {
		typ := quant.F32
		if matrix {
			typ = c.Type
		}
		p = append(p, tensorPlan{name: name, typ: typ, dims: dims, d: d, stream: uint64(len(p))})
	}
	if c.RopeFreqs {
		p = append(p, tensorPlan{name: "rope_freqs.weight", typ: quant.F32, dims: []int64{D / 2},
			values: llama3RopeFactors(int(D), c.ropeBase())})
	}
	add("token_embd.weight", true, dist{0, std}, E, V)
	for i := 0; i < c.NLayer; i++ {
		blk := "blk." + strconv.Itoa(i) + "."
		add(blk+"attn_norm.weight", false, norm, E)
		add(blk+"ffn_down.weight", true, dist{0, proj}, F, E)
		add(blk+"ffn_gate.weight", true, dist{0, std}, E, F)
		add(blk+"ffn_up.weight", true, dist{0, std}, E, F)
		add(blk+"ffn_norm.weight", false, norm, E)
		if biases {
			add(blk+"attn_k.bias", false, bias, KV)
		}
		add(blk+"attn_k.weight", true, dist{0, std}, E, KV)
		add(blk+"attn_output.weight", true, dist{0, proj}, Q, E)
		if biases {
			add(blk+"attn_q.bias", false, bias, Q)
		}
		add(blk+"attn_q.weight", true, dist{0, std}, E, Q)
		if biases {
			add(blk+"attn_v.bias", false, bias, KV)
		}
		add(blk+"attn_v.weight", true, dist{0, std}, E, KV)
	}
	add("output_norm.weight", false, norm, E)
	if !c.NoOutput {
		add("output.weight", true, dist{0, std}, E, V)
	}
	return p
}

func (c *Config) ropeBase() float32 {
	if c.RopeBase == 0 {
		return 10000
	}
	return c.RopeBase
}

// llama3RopeFactors are the frequency factors llama.cpp's converter writes as
// rope_freqs.weight for Llama 3.1 and 3.2 (rope_scaling: factor 32, low_freq_factor 1,
// high_freq_factor 4, original context 8192): 1 for short wavelengths, 32 for long ones, a
// smooth blend between.
func llama3RopeFactors(headDim int, base float32) []float32 {
	const factor, low, high, oldCtx = 32.0, 1.0, 4.0, 8192.0
	lowWavelen, highWavelen := oldCtx/low, oldCtx/high
	f := make([]float32, headDim/2)
	for i := range f {
		freq := 1 / math.Pow(float64(base), float64(2*i)/float64(headDim))
		wavelen := 2 * math.Pi / freq
		switch {
		case wavelen < highWavelen:
			f[i] = 1
		case wavelen > lowWavelen:
			f[i] = factor
		default:
			smooth := (oldCtx/wavelen - low) / (high - low)
			f[i] = float32(1 / ((1-smooth)/factor + smooth))
		}
	}
	return f
}

// llamaMetadata is a Llama's or Qwen2's metadata, with the keys llama.cpp's converter writes.
func (m *model) llamaMetadata(c *Config, v *vocab) []gguf.KV {
	u32 := func(n int) uint32 { return uint32(n) }
	a := c.arch()
	D := c.NEmbd / c.NHead
	kvs := []gguf.KV{
		kv("general.architecture", a),
		kv("general.type", "model"),
		kv("general.name", c.Name),
		kv("general.size_label", sizeLabel(m.paramCount())),
		kv(a+".block_count", u32(c.NLayer)),
		kv(a+".context_length", u32(c.NCtx)),
		kv(a+".embedding_length", u32(c.NEmbd)),
		kv(a+".feed_forward_length", u32(c.NFF)),
		kv(a+".attention.head_count", u32(c.NHead)),
		kv(a+".attention.head_count_kv", u32(c.kvHeads())),
	}
	if c.RopeBase != 0 {
		kvs = append(kvs, kv(a+".rope.freq_base", c.RopeBase))
	}
	kvs = append(kvs,
		kv(a+".attention.layer_norm_rms_epsilon", float32(1e-5)),
		kv(a+".attention.key_length", u32(D)),
		kv(a+".attention.value_length", u32(D)),
		kv("general.file_type", fileType(c.Type)),
		kv(a+".vocab_size", u32(len(v.tokens))),
		kv(a+".rope.dimension_count", u32(D)),
	)
	return kvs
}
