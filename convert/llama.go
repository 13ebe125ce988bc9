package convert

import (
	"encoding/json"
	"fmt"
	"math"
	"path/filepath"
	"strings"

	"github.com/gorun-dev/gorun/quantize"
)

// llama is llama.cpp's LlamaModel (LlamaForCausalLM, MistralForCausalLM: architecture
// "llama", Q/K rows permuted for its RoPE) and Qwen2Model (Qwen2ForCausalLM: "qwen2", Q/K/V
// biases, NeoX RoPE, no permutation).
type llama struct {
	h     hparams
	path  string
	qwen2 bool

	nEmbd, nHead, nHeadKV, nFF, headDim int
	hasHeadKV, hasHeadDim               bool
	nCtx                                int // 0: not in the config
	ropeTheta                           float64
	rmsEps, normEps                     float64 // 0: not in the config
	scaling                             ropeScaling
}

// ropeScaling is the part of rope_scaling llama.cpp's converter writes.
type ropeScaling struct {
	typ        string  // "linear" (llama), "yarn" (qwen2), or ""
	factor     float64 // rope.scaling.factor
	origCtx    int     // yarn's original_max_position_embeddings
	llama3     bool    // Llama 3.1's frequency factors: the rope_freqs tensor
	llama3Args map[string]json.RawMessage
}

// classOptions are Convert's options that change what a class reads from config.json.
type classOptions struct {
	// ropeParameters reads rope_theta and the scaling from transformers 5's rope_parameters when
	// config.json has no rope_theta (rope_scaling). llama.cpp c392e509 predates that layout: it
	// writes no rope.freq_base for such a config, so its runtime uses 10000.
	ropeParameters bool
}

func newLlama(path string, cfg map[string]json.RawMessage, arch string, o classOptions) (*llama, error) {
	m := &llama{h: hparams{arch: arch, spacePrefixKey: arch == "llama"}, path: path, qwen2: arch == "qwen2"}
	for _, k := range []struct {
		dst  *int
		keys []string
	}{{&m.h.nLayer, []string{"n_layers", "num_hidden_layers", "n_layer", "num_layers"}},
		{&m.nEmbd, []string{"hidden_size", "n_embd"}},
		{&m.nFF, []string{"intermediate_size", "n_inner"}},
		{&m.nHead, []string{"num_attention_heads", "n_head"}},
		{&m.h.vocab, []string{"vocab_size"}}} {
		if _, err := configInt(path, cfg, k.dst, true, k.keys...); err != nil {
			return nil, err
		}
	}
	var err error
	if _, err = configInt(path, cfg, &m.nCtx, false, "max_position_embeddings", "n_ctx"); err != nil {
		return nil, err
	}
	if m.hasHeadKV, err = configInt(path, cfg, &m.nHeadKV, false, "num_key_value_heads"); err != nil {
		return nil, err
	}
	if m.hasHeadDim, err = configInt(path, cfg, &m.headDim, false, "head_dim"); err != nil {
		return nil, err
	}
	if err := m.checkHeads(); err != nil {
		return nil, err
	}
	if m.rmsEps, _, err = configFloat(path, cfg, "rms_norm_eps"); err != nil {
		return nil, err
	}
	for _, k := range []string{"layer_norm_eps", "layer_norm_epsilon", "norm_epsilon"} {
		if _, ok := cfg[k]; ok {
			if m.normEps, _, err = configFloat(path, cfg, k); err != nil {
				return nil, err
			}
			break
		}
	}
	for _, k := range []string{"num_local_experts", "num_experts_per_tok"} {
		if raw, ok := cfg[k]; ok && string(raw) != "null" {
			return nil, fmt.Errorf("%s: %s: mixture-of-experts checkpoints are not supported", path, k)
		}
	}
	if err := m.readRope(cfg, o); err != nil {
		return nil, err
	}
	m.h.tie = false // transformers' default for these classes
	if raw, ok := cfg["tie_word_embeddings"]; ok {
		_ = json.Unmarshal(raw, &m.h.tie)
	}
	return m, nil
}

// checkHeads validates the attention shape: heads that divide the width (or a head_dim), key
// and value heads that divide the heads, and an even head size (RoPE turns pairs).
func (m *llama) checkHeads() error {
	if !m.hasHeadKV {
		m.nHeadKV = m.nHead
	}
	if !m.hasHeadDim {
		if m.nEmbd%m.nHead != 0 {
			return fmt.Errorf("%s: hidden_size %d is not a multiple of num_attention_heads %d", m.path, m.nEmbd, m.nHead)
		}
		m.headDim = m.nEmbd / m.nHead
	}
	if m.nHead%m.nHeadKV != 0 {
		return fmt.Errorf("%s: num_attention_heads %d is not a multiple of num_key_value_heads %d", m.path, m.nHead, m.nHeadKV)
	}
	if m.headDim%2 != 0 {
		return fmt.Errorf("%s: the head size %d is odd: RoPE rotates pairs of values", m.path, m.headDim)
	}
	if int64(m.nHead)*int64(m.headDim) > 1<<31 {
		return fmt.Errorf("%s: %d heads of %d values are too many", m.path, m.nHead, m.headDim)
	}
	return nil
}

// readRope reads rope_theta and rope_scaling as LlamaModel and Qwen2Model do, or, with
// o.ropeParameters, transformers 5's rope_parameters in their absence.
func (m *llama) readRope(cfg map[string]json.RawMessage, o classOptions) error {
	var err error
	if m.ropeTheta, _, err = configFloat(m.path, cfg, "rope_theta"); err != nil {
		return err
	}
	var scaling map[string]json.RawMessage
	typeKey := "type"
	if raw, ok := cfg["rope_scaling"]; ok && string(raw) != "null" {
		if err := json.Unmarshal(raw, &scaling); err != nil {
			return fmt.Errorf("%s: rope_scaling is %s, want an object", m.path, raw)
		}
	}
	if raw, ok := cfg["rope_parameters"]; ok && o.ropeParameters && string(raw) != "null" {
		var params map[string]json.RawMessage
		if err := json.Unmarshal(raw, &params); err != nil {
			return fmt.Errorf("%s: rope_parameters is %s, want an object", m.path, raw)
		}
		if _, has := cfg["rope_theta"]; !has {
			if m.ropeTheta, _, err = configFloat(m.path, params, "rope_theta"); err != nil {
				return err
			}
		}
		if scaling == nil {
			scaling, typeKey = params, "rope_type"
		}
	}
	if len(scaling) == 0 {
		return nil
	}
	typ := strings.ToLower(jsonString(scaling[typeKey]))
	if !m.qwen2 && strings.ToLower(jsonString(scaling["rope_type"])) == "llama3" {
		m.scaling.llama3, m.scaling.llama3Args = true, scaling
	}
	factor, hasFactor, err := configFloat(m.path, scaling, "factor")
	if err != nil || !hasFactor {
		return err
	}
	switch {
	case typ == "linear" && !m.qwen2:
		m.scaling.typ, m.scaling.factor = "linear", factor
	case typ == "yarn" && m.qwen2:
		m.scaling.typ, m.scaling.factor = "yarn", factor
		if _, err := configInt(m.path, scaling, &m.scaling.origCtx, true, "original_max_position_embeddings"); err != nil {
			return fmt.Errorf("rope_scaling: %w", err)
		}
	}
	return nil
}

func jsonString(raw json.RawMessage) string {
	var s string
	_ = json.Unmarshal(raw, &s)
	return s
}

func (m *llama) hp() *hparams { return &m.h }

// llamaLayerNames are the GGUF names of the layer tensors, after "model.layers.N.".
var llamaLayerNames = map[string]string{
	"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
	"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
	"self_attn.o_proj": "attn_output",
	"mlp.gate_proj":    "ffn_gate", "mlp.up_proj": "ffn_up", "mlp.down_proj": "ffn_down",
}

func (m *llama) mapTensor(hf string) (tensorMap, error) {
	for _, drop := range []string{".attention.masked_bias", ".attention.bias", ".rotary_emb.inv_freq"} {
		if strings.HasSuffix(hf, drop) {
			return tensorMap{}, nil // buffers llama.cpp's converter skips
		}
	}
	base, suffix, ok := cutLast(hf, ".")
	if !ok || (suffix != "weight" && suffix != "bias") {
		return tensorMap{}, fmt.Errorf("cannot map tensor %q", hf)
	}
	switch base {
	case "model.embed_tokens":
		return tensorMap{name: "token_embd." + suffix}, nil
	case "model.norm":
		return tensorMap{name: "output_norm." + suffix}, nil
	case "lm_head":
		return tensorMap{name: "output." + suffix}, nil
	}
	if rest, ok := strings.CutPrefix(base, "model.layers."); ok {
		layer, part, ok := strings.Cut(rest, ".")
		if g := llamaLayerNames[part]; ok && g != "" && isUint(layer) {
			t := tensorMap{name: "blk." + layer + "." + g + "." + suffix}
			if !m.qwen2 && g == "attn_q" {
				t.permuteHeads = m.nHead
			}
			if !m.qwen2 && g == "attn_k" {
				t.permuteHeads = m.nHeadKV
			}
			return t, nil
		}
	}
	return tensorMap{}, fmt.Errorf("cannot map tensor %q", hf)
}

func (m *llama) expectedShape(gname string) []int64 {
	e, ff, v := int64(m.nEmbd), int64(m.nFF), int64(m.h.vocab)
	q, kv := int64(m.nHead*m.headDim), int64(m.nHeadKV*m.headDim)
	switch gname {
	case "token_embd.weight", "output.weight":
		return []int64{v, e}
	case "output_norm.weight":
		return []int64{e}
	}
	layer, rest, _ := strings.Cut(strings.TrimPrefix(gname, "blk."), ".")
	if !strings.HasPrefix(gname, "blk.") || !isUint(layer) || len(layer) > 9 {
		return nil
	}
	if n := atoi(layer); n >= m.h.nLayer {
		return nil
	}
	return map[string][]int64{
		"attn_norm.weight": {e}, "ffn_norm.weight": {e},
		"attn_q.weight": {q, e}, "attn_q.bias": {q},
		"attn_k.weight": {kv, e}, "attn_k.bias": {kv},
		"attn_v.weight": {kv, e}, "attn_v.bias": {kv},
		"attn_output.weight": {e, q}, "attn_output.bias": {e},
		"ffn_gate.weight": {ff, e}, "ffn_gate.bias": {ff},
		"ffn_up.weight": {ff, e}, "ffn_up.bias": {ff},
		"ffn_down.weight": {e, ff}, "ffn_down.bias": {e},
	}[rest]
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

func (m *llama) required() []string {
	names := []string{"token_embd.weight", "output_norm.weight"}
	parts := []string{"attn_norm", "attn_q", "attn_k", "attn_v", "attn_output", "ffn_norm", "ffn_gate", "ffn_up", "ffn_down"}
	for i := range m.h.nLayer {
		for _, g := range parts {
			names = append(names, fmt.Sprintf("blk.%d.%s.weight", i, g))
		}
		if m.qwen2 { // Qwen2's attention has biases; llama.cpp's qwen2 graph requires them
			for _, g := range []string{"attn_q", "attn_k", "attn_v"} {
				names = append(names, fmt.Sprintf("blk.%d.%s.bias", i, g))
			}
		}
	}
	return names
}

// hparamKVs are Model.set_gguf_parameters' keys, then LlamaModel's or Qwen2Model's.
func (m *llama) hparamKVs(ft quantize.FileType) []kv {
	a := m.h.arch + "."
	kvs := []kv{{a + "block_count", uint32(m.h.nLayer)}}
	if m.nCtx > 0 {
		kvs = append(kvs, kv{a + "context_length", uint32(m.nCtx)})
	}
	kvs = append(kvs, kv{a + "embedding_length", uint32(m.nEmbd)}, kv{a + "feed_forward_length", uint32(m.nFF)},
		kv{a + "attention.head_count", uint32(m.nHead)})
	if m.hasHeadKV {
		kvs = append(kvs, kv{a + "attention.head_count_kv", uint32(m.nHeadKV)})
	}
	if m.ropeTheta > 0 {
		kvs = append(kvs, kv{a + "rope.freq_base", float32(m.ropeTheta)})
	}
	if m.rmsEps > 0 {
		kvs = append(kvs, kv{a + "attention.layer_norm_rms_epsilon", float32(m.rmsEps)})
	}
	if m.normEps > 0 {
		kvs = append(kvs, kv{a + "attention.layer_norm_epsilon", float32(m.normEps)})
	}
	if m.hasHeadDim {
		kvs = append(kvs, kv{a + "attention.key_length", uint32(m.headDim)}, kv{a + "attention.value_length", uint32(m.headDim)})
	}
	kvs = append(kvs, kv{"general.file_type", uint32(ft)})
	if !m.qwen2 {
		kvs = append(kvs, kv{a + "vocab_size", uint32(m.h.vocab)}, kv{a + "rope.dimension_count", uint32(m.headDim)})
	}
	if m.scaling.typ != "" {
		kvs = append(kvs, kv{a + "rope.scaling.type", m.scaling.typ}, kv{a + "rope.scaling.factor", float32(m.scaling.factor)})
	}
	if m.scaling.typ == "yarn" {
		kvs = append(kvs, kv{a + "rope.scaling.original_context_length", uint32(m.scaling.origCtx)})
	}
	return kvs
}

// checkTokenizer refuses the tokenizers llama.cpp reads with SentencePiece (tokenizer.model) or,
// for Llama, as a Llama 2-style tokenizer.json (LlamaHfVocab): gorun converts byte-level BPE.
func (m *llama) checkTokenizer(dir string, p *hfPipeline) error {
	spm := filepath.Join(dir, "tokenizer.model")
	if ok, err := present(spm); err != nil {
		return err
	} else if ok {
		return fmt.Errorf("%s: a SentencePiece tokenizer, which llama.cpp's converter reads before tokenizer.json; gorun convert reads byte-level BPE tokenizers (tokenizer.json) only", spm)
	}
	if !m.qwen2 && p != nil && p.llama2Style() {
		return fmt.Errorf("%s: a SentencePiece-style BPE (byte_fallback) without tokenizer.model: llama.cpp's converter gives every token the placeholder score -1000 for it and its tokenizer then differs from Hugging Face's; gorun convert needs a byte-level BPE tokenizer", filepath.Join(dir, "tokenizer.json"))
	}
	return nil
}

// extraTensors is LlamaModel.generate_extra_tensors: for rope_type "llama3", rope_freqs, the
// factor dividing each RoPE frequency, computed in torch's float32 arithmetic (a Python number
// meeting a tensor is rounded to float32; scalar / tensor is the tensor's reciprocal times the
// scalar). Each product is converted explicitly so that Go does not fuse it into an FMA.
func (m *llama) extraTensors() []extraTensor {
	if !m.scaling.llama3 {
		return nil
	}
	get := func(key string, def float64) float64 {
		if v, ok, err := configFloat(m.path, m.scaling.llama3Args, key); err == nil && ok {
			return v
		}
		return def
	}
	base := m.ropeTheta
	if base == 0 {
		base = 10000
	}
	factor, low, high := get("factor", 8), get("low_freq_factor", 1), get("high_freq_factor", 4)
	oldCtx := get("original_max_position_embeddings", 8192)
	lowWave, highWave := float32(oldCtx/low), float32(oldCtx/high)
	dim := m.headDim
	out := make([]float32, 0, dim/2)
	for i := 0; i < dim; i += 2 {
		freq := 1 / float32(math.Pow(base, float64(float32(i)/float32(dim))))
		wavelen := float32((1 / freq) * float32(2*math.Pi))
		switch {
		case wavelen < highWave:
			out = append(out, 1)
		case wavelen > lowWave:
			out = append(out, float32(factor))
		default:
			smooth := (float32((1/wavelen)*float32(oldCtx)) - float32(low)) / float32(high-low)
			out = append(out, 1/(float32((1-smooth)/float32(factor))+smooth))
		}
	}
	return []extraTensor{{name: "rope_freqs.weight", data: out}}
}
