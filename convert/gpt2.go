package convert

import (
	"encoding/json"
	"fmt"
	"math"
	"strings"

	"github.com/gorun-dev/gorun/quantize"
)

// gpt2 is llama.cpp's GPT2Model: GPT2LMHeadModel checkpoints.
type gpt2 struct {
	h                  hparams
	nEmbd, nHead, nPos int
	nCtx               int
	eps                float32
}

func newGPT2(path string, cfg map[string]json.RawMessage) (*gpt2, error) {
	m := &gpt2{h: hparams{arch: "gpt2", squeeze: true, copyOutput: true}}
	var nFF int
	for _, k := range []struct {
		key string
		dst *int
		req bool
	}{{"n_layer", &m.h.nLayer, true}, {"n_embd", &m.nEmbd, true}, {"n_head", &m.nHead, true},
		{"n_positions", &m.nPos, true}, {"n_ctx", &m.nCtx, false}, {"n_inner", &nFF, false}, {"vocab_size", &m.h.vocab, true}} {
		if _, err := configInt(path, cfg, k.dst, k.req, k.key); err != nil {
			return nil, err
		}
	}
	if m.nCtx == 0 {
		m.nCtx = m.nPos
	}
	if nFF != 0 && nFF != 4*m.nEmbd {
		return nil, fmt.Errorf("%s: n_inner %d: llama.cpp's GPT-2 has a feed-forward width of 4*n_embd (%d)", path, nFF, 4*m.nEmbd)
	}
	if m.nEmbd%m.nHead != 0 {
		return nil, fmt.Errorf("%s: n_embd %d is not a multiple of n_head %d", path, m.nEmbd, m.nHead)
	}
	m.eps = 1e-5
	if raw, ok := cfg["layer_norm_epsilon"]; ok {
		var e float64
		if err := json.Unmarshal(raw, &e); err != nil || !(e > 0) || math.IsInf(e, 0) {
			return nil, fmt.Errorf("%s: layer_norm_epsilon is %s", path, raw)
		}
		m.eps = float32(e)
	}
	m.h.tie = true
	if raw, ok := cfg["tie_word_embeddings"]; ok {
		_ = json.Unmarshal(raw, &m.h.tie)
	}
	return m, nil
}

func (m *gpt2) hp() *hparams { return &m.h }

// gpt2LayerNames are the GGUF names of GPT-2's layer tensors, after "transformer.h.N.".
var gpt2LayerNames = map[string]string{
	"ln_1": "attn_norm", "attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output",
	"ln_2": "ffn_norm", "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down",
}

func (m *gpt2) mapTensor(hf string) (tensorMap, error) {
	n := strings.TrimPrefix(hf, "transformer.")
	if strings.HasSuffix(n, ".attn.bias") || strings.HasSuffix(n, ".attn.masked_bias") {
		return tensorMap{}, nil // causal-mask buffers of older checkpoints
	}
	if n == "lm_head.weight" && m.h.tie {
		return tensorMap{}, nil // tied: output.weight is written from wte
	}
	base, suffix, ok := cutLast(n, ".")
	if !ok || (suffix != "weight" && suffix != "bias") {
		return tensorMap{}, fmt.Errorf("cannot map tensor %q", hf)
	}
	switch base {
	case "wte":
		return tensorMap{name: "token_embd." + suffix}, nil
	case "wpe":
		return tensorMap{name: "position_embd." + suffix}, nil
	case "ln_f":
		return tensorMap{name: "output_norm." + suffix}, nil
	case "lm_head":
		return tensorMap{name: "output." + suffix}, nil
	}
	if rest, ok := strings.CutPrefix(base, "h."); ok {
		layer, part, ok := strings.Cut(rest, ".")
		if g := gpt2LayerNames[part]; ok && g != "" && isUint(layer) {
			conv := suffix == "weight" && (part == "attn.c_attn" || part == "attn.c_proj" || part == "mlp.c_fc" || part == "mlp.c_proj")
			return tensorMap{name: "blk." + layer + "." + g + "." + suffix, transpose: conv}, nil
		}
	}
	return tensorMap{}, fmt.Errorf("cannot map tensor %q", hf)
}

func (m *gpt2) expectedShape(gname string) []int64 {
	e, ff := int64(m.nEmbd), int64(4*m.nEmbd)
	switch gname {
	case "token_embd.weight", "output.weight":
		return []int64{int64(m.h.vocab), e}
	case "position_embd.weight":
		return []int64{int64(m.nPos), e}
	case "output_norm.weight", "output_norm.bias":
		return []int64{e}
	}
	_, rest, _ := strings.Cut(strings.TrimPrefix(gname, "blk."), ".")
	switch rest {
	case "attn_norm.weight", "attn_norm.bias", "ffn_norm.weight", "ffn_norm.bias", "attn_output.bias", "ffn_down.bias":
		return []int64{e}
	case "attn_qkv.weight":
		return []int64{e, 3 * e}
	case "attn_qkv.bias":
		return []int64{3 * e}
	case "attn_output.weight":
		return []int64{e, e}
	case "ffn_up.weight":
		return []int64{e, ff}
	case "ffn_up.bias":
		return []int64{ff}
	case "ffn_down.weight":
		return []int64{ff, e}
	}
	return nil
}

func (m *gpt2) required() []string {
	names := []string{"token_embd.weight", "position_embd.weight", "output_norm.weight", "output_norm.bias"}
	for i := range m.h.nLayer {
		for _, g := range []string{"attn_norm", "attn_qkv", "attn_output", "ffn_norm", "ffn_up", "ffn_down"} {
			names = append(names, fmt.Sprintf("blk.%d.%s.weight", i, g), fmt.Sprintf("blk.%d.%s.bias", i, g))
		}
	}
	return names
}

func (m *gpt2) extraTensors() []extraTensor { return nil }

// checkTokenizer accepts any: GPT2Model.set_vocab reads the tokenizer as byte-level BPE.
func (m *gpt2) checkTokenizer(string, *hfPipeline) error { return nil }

// hparamKVs are GPT2Model.set_gguf_parameters' keys.
func (m *gpt2) hparamKVs(ft quantize.FileType) []kv {
	return []kv{
		{"gpt2.block_count", uint32(m.h.nLayer)},
		{"gpt2.context_length", uint32(m.nCtx)},
		{"gpt2.embedding_length", uint32(m.nEmbd)},
		{"gpt2.feed_forward_length", uint32(4 * m.nEmbd)},
		{"gpt2.attention.head_count", uint32(m.nHead)},
		{"gpt2.attention.layer_norm_epsilon", m.eps},
		{"general.file_type", uint32(ft)},
	}
}
