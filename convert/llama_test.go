package convert

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/quant"
	"github.com/gorun-dev/gorun/safetensors"
)

// tinyTokenizer is a byte-level BPE tokenizer.json of 8 tokens with the pre-tokenizer regex
// given (Llama 3's or Qwen2's).
func tinyTokenizer(regex string, ignoreMerges bool, normalizer string) string {
	re, _ := json.Marshal(regex)
	return fmt.Sprintf(`{"added_tokens": [{"id": 7, "content": "<|endoftext|>", "special": true}],
 "normalizer": %s,
 "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
  {"type": "Split", "pattern": {"Regex": %s}, "behavior": "Isolated", "invert": false},
  {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": false}]},
 "post_processor": {"type": "ByteLevel", "add_prefix_space": true, "trim_offsets": false, "use_regex": true},
 "decoder": {"type": "ByteLevel"},
 "model": {"type": "BPE", "byte_fallback": false, "ignore_merges": %v,
  "vocab": {"a": 0, "b": 1, "ab": 2, "c": 3, "Ġ": 4, "Ġa": 5, "d": 6, "<|endoftext|>": 7}, "merges": [["a", "b"], ["Ġ", "a"]]}}`,
		normalizer, re, ignoreMerges)
}

// tinyCheckpoint writes dir/model.safetensors with F32 tensors of the given shapes; element k
// of the i-th tensor (by name) is i + k/1024, so every row of every tensor is recognizable.
func tinyCheckpoint(t *testing.T, dir string, shapes map[string][]int64) map[string][]float32 {
	t.Helper()
	names := make([]string, 0, len(shapes))
	for n := range shapes {
		names = append(names, n)
	}
	slices.Sort(names)
	values := map[string][]float32{}
	var ts []safetensors.WriteTensor
	for i, name := range names {
		n := int64(1)
		for _, d := range shapes[name] {
			n *= d
		}
		v := make([]float32, n)
		data := make([]byte, 0, 4*n)
		for k := range v {
			v[k] = float32(i) + float32(k)/1024
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(v[k]))
		}
		values[name] = v
		ts = append(ts, safetensors.WriteTensor{Name: name, DType: safetensors.F32, Shape: shapes[name], Data: data})
	}
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, ts, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	writeNew(t, filepath.Join(dir, "model.safetensors"), buf.Bytes())
	return values
}

// llamaShapes are the tensors of a Llama-family model: hidden 16, 4 heads of head (2 KV heads),
// feed-forward 24, vocabulary 8, 2 layers; bias adds the attention biases, head the LM head.
func llamaShapes(head int64, bias, lmHead bool) map[string][]int64 {
	s := map[string][]int64{"model.embed_tokens.weight": {8, 16}, "model.norm.weight": {16}}
	if lmHead {
		s["lm_head.weight"] = []int64{8, 16}
	}
	for i := range 2 {
		p := fmt.Sprintf("model.layers.%d.", i)
		for name, shape := range map[string][]int64{"input_layernorm.weight": {16}, "post_attention_layernorm.weight": {16},
			"self_attn.q_proj.weight": {4 * head, 16}, "self_attn.k_proj.weight": {2 * head, 16}, "self_attn.v_proj.weight": {2 * head, 16},
			"self_attn.o_proj.weight": {16, 4 * head}, "mlp.gate_proj.weight": {24, 16}, "mlp.up_proj.weight": {24, 16},
			"mlp.down_proj.weight": {16, 24}, "self_attn.rotary_emb.inv_freq": {head / 2}} {
			s[p+name] = shape
		}
		if bias {
			s[p+"self_attn.q_proj.bias"] = []int64{4 * head}
			s[p+"self_attn.k_proj.bias"] = []int64{2 * head}
			s[p+"self_attn.v_proj.bias"] = []int64{2 * head}
		}
	}
	return s
}

// convertTiny writes config and tokenizer beside the tensors and converts to f32.
func convertTiny(t *testing.T, config, tok string, shapes map[string][]int64) (*gguf.File, map[string][]float32, Report) {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "tiny-model")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	writeNew(t, filepath.Join(dir, "config.json"), []byte(config))
	writeNew(t, filepath.Join(dir, "tokenizer.json"), []byte(tok))
	values := tinyCheckpoint(t, dir, shapes)
	out := filepath.Join(t.TempDir(), "out.gguf")
	rep, err := Convert(dir, out, Options{OutType: "f32"})
	if err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f, values, rep
}

func keysOf(f *gguf.File) []string {
	var ks []string
	for _, kv := range f.KV {
		ks = append(ks, kv.Key)
	}
	return ks
}

func tensorF32(t *testing.T, f *gguf.File, name string) ([]float32, *gguf.TensorInfo) {
	t.Helper()
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if ti.Name == name {
			if ti.Type != quant.F32 {
				t.Fatalf("%s is %v", name, ti.Type)
			}
			b := f.Data(ti)
			v := make([]float32, len(b)/4)
			for k := range v {
				v[k] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*k:]))
			}
			return v, ti
		}
	}
	t.Fatalf("no tensor %s", name)
	return nil, nil
}

// A Qwen2 checkpoint: architecture qwen2 with Model.set_gguf_parameters' keys alone (no
// vocab_size, no rope.dimension_count), YaRN scaling keys, the Q/K/V biases kept (F32), no
// Q/K permutation, the rotary buffers dropped, no output.weight for tied embeddings, and the
// pre-tokenizer named after the Qwen2 regex (the tiny vocabulary's fingerprint is no model's).
func TestConvertQwen2(t *testing.T) {
	config := `{"architectures": ["Qwen2ForCausalLM"], "hidden_size": 16, "intermediate_size": 24, "num_attention_heads": 4,
	 "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 8, "max_position_embeddings": 64, "rms_norm_eps": 1e-6,
	 "rope_theta": 1000000.0, "tie_word_embeddings": true, "eos_token_id": 7,
	 "rope_scaling": {"type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32}}`
	f, values, rep := convertTiny(t, config, tinyTokenizer(qwen2Regex, false, `{"type": "NFC"}`), llamaShapes(4, true, false))
	wantKeys := []string{"general.architecture", "general.type", "general.name", "general.size_label",
		"qwen2.block_count", "qwen2.context_length", "qwen2.embedding_length", "qwen2.feed_forward_length",
		"qwen2.attention.head_count", "qwen2.attention.head_count_kv", "qwen2.rope.freq_base",
		"qwen2.attention.layer_norm_rms_epsilon", "general.file_type", "qwen2.rope.scaling.type",
		"qwen2.rope.scaling.factor", "qwen2.rope.scaling.original_context_length",
		"tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
		"tokenizer.ggml.merges", "tokenizer.ggml.eos_token_id", "general.quantization_version"}
	if got := keysOf(f); !reflect.DeepEqual(got, wantKeys) {
		t.Errorf("keys\n got %v\nwant %v", got, wantKeys)
	}
	if s, _ := f.String("general.architecture"); s != "qwen2" {
		t.Errorf("architecture %q", s)
	}
	if s, _ := f.String("tokenizer.ggml.pre"); s != "qwen2" || rep.Pre != "qwen2" || len(rep.Warnings) != 1 {
		t.Errorf("pre %q (report %q), warnings %q", s, rep.Pre, rep.Warnings)
	}
	if s, _ := f.String("qwen2.rope.scaling.type"); s != "yarn" {
		t.Errorf("scaling type %q", s)
	}
	if n, _ := f.Uint("qwen2.rope.scaling.original_context_length"); n != 32 {
		t.Errorf("original context %d", n)
	}
	if x, _ := f.Float("qwen2.rope.freq_base"); x != 1e6 {
		t.Errorf("freq_base %v", x)
	}
	var names []string
	for _, ti := range f.Tensors {
		names = append(names, ti.Name)
	}
	if len(names) != 2+2*12 || slices.Contains(names, "output.weight") {
		t.Errorf("%d tensors: %v", len(names), names)
	}
	for _, part := range []string{"q", "k", "v"} {
		for _, suffix := range []string{"weight", "bias"} {
			got, ti := tensorF32(t, f, "blk.1.attn_"+part+"."+suffix)
			if want := values["model.layers.1.self_attn."+part+"_proj."+suffix]; !slices.Equal(got, want) {
				t.Errorf("%s (%v) differs from the checkpoint's (permuted?)", ti.Name, ti.Dims)
			}
		}
	}
}

// A Llama checkpoint with attention biases and an LM head: Q and K (weights and biases) are
// permuted per head from rotate-half pairs (i, i+d/2) to interleaved ones (2i, 2i+1), K with
// the KV heads; V and the rest are copied; the LM head is output.weight.
func TestConvertLlamaPermutesQK(t *testing.T) {
	config := `{"architectures": ["LlamaForCausalLM"], "hidden_size": 16, "intermediate_size": 24, "num_attention_heads": 4,
	 "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 8, "rms_norm_eps": 1e-5, "rope_theta": 10000,
	 "tie_word_embeddings": false, "attention_bias": true}`
	f, values, _ := convertTiny(t, config, tinyTokenizer(llama3Regex, true, "null"), llamaShapes(4, true, true))
	// Head size 4: within each head, rows 0 1 2 3 become 0 2 1 3.
	perm := func(src []float32, heads, cols int) []float32 {
		var out []float32
		for h := range heads {
			for _, r := range []int{0, 2, 1, 3} {
				row := (h*4 + r) * cols
				out = append(out, src[row:row+cols]...)
			}
		}
		return out
	}
	for _, c := range []struct {
		part  string
		heads int
	}{{"q", 4}, {"k", 2}} {
		w, _ := tensorF32(t, f, "blk.0.attn_"+c.part+".weight")
		if want := perm(values["model.layers.0.self_attn."+c.part+"_proj.weight"], c.heads, 16); !slices.Equal(w, want) {
			t.Errorf("attn_%s.weight is not permuted per head", c.part)
		}
		b, _ := tensorF32(t, f, "blk.0.attn_"+c.part+".bias")
		if want := perm(values["model.layers.0.self_attn."+c.part+"_proj.bias"], c.heads, 1); !slices.Equal(b, want) {
			t.Errorf("attn_%s.bias is not permuted per head", c.part)
		}
	}
	if v, _ := tensorF32(t, f, "blk.0.attn_v.weight"); !slices.Equal(v, values["model.layers.0.self_attn.v_proj.weight"]) {
		t.Errorf("attn_v.weight changed")
	}
	if o, ti := tensorF32(t, f, "output.weight"); !slices.Equal(o, values["lm_head.weight"]) || !reflect.DeepEqual(ti.Dims, []int64{16, 8}) {
		t.Errorf("output.weight %v differs from lm_head.weight", ti.Dims)
	}
	if s, _ := f.String("tokenizer.ggml.pre"); s != "llama-bpe" {
		t.Errorf("pre %q, want llama-bpe for the Llama 3 regex with ignore_merges", s)
	}
}

// A MistralForCausalLM config converts as llama.cpp's LlamaModel: architecture llama, an
// explicit head_dim (here 8, not hidden/heads) written as key and value length and rope
// dimension, sliding_window ignored, rope.freq_base from rope_theta, linear RoPE scaling keys.
func TestConvertMistralConfig(t *testing.T) {
	config := `{"architectures": ["MistralForCausalLM"], "model_type": "mistral", "hidden_size": 16, "intermediate_size": 24,
	 "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 8, "num_hidden_layers": 2, "vocab_size": 8,
	 "max_position_embeddings": 128, "rms_norm_eps": 1e-5, "rope_theta": 1000000.0, "sliding_window": 32,
	 "rope_scaling": {"type": "linear", "factor": 2.0}, "bos_token_id": 0, "eos_token_id": 7}`
	f, values, _ := convertTiny(t, config, tinyTokenizer(llama3Regex, false, "null"), llamaShapes(8, false, true))
	wantKeys := []string{"general.architecture", "general.type", "general.name", "general.size_label",
		"llama.block_count", "llama.context_length", "llama.embedding_length", "llama.feed_forward_length",
		"llama.attention.head_count", "llama.attention.head_count_kv", "llama.rope.freq_base",
		"llama.attention.layer_norm_rms_epsilon", "llama.attention.key_length", "llama.attention.value_length",
		"general.file_type", "llama.vocab_size", "llama.rope.dimension_count", "llama.rope.scaling.type",
		"llama.rope.scaling.factor", "tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens",
		"tokenizer.ggml.token_type", "tokenizer.ggml.merges", "tokenizer.ggml.bos_token_id",
		"tokenizer.ggml.eos_token_id", "general.quantization_version"}
	if got := keysOf(f); !reflect.DeepEqual(got, wantKeys) {
		t.Errorf("keys\n got %v\nwant %v", got, wantKeys)
	}
	for key, want := range map[string]uint64{"llama.attention.key_length": 8, "llama.rope.dimension_count": 8,
		"llama.vocab_size": 8, "llama.context_length": 128} {
		if got, _ := f.Uint(key); got != want {
			t.Errorf("%s = %d, want %d", key, got, want)
		}
	}
	if s, _ := f.String("general.architecture"); s != "llama" {
		t.Errorf("architecture %q", s)
	}
	if s, _ := f.String("tokenizer.ggml.pre"); s != "smaug-bpe" {
		t.Errorf("pre %q, want smaug-bpe for the Llama 3 regex without ignore_merges", s)
	}
	// Head size 8: rows 0..7 of each head become 0 4 1 5 2 6 3 7.
	q, _ := tensorF32(t, f, "blk.1.attn_q.weight")
	src := values["model.layers.1.self_attn.q_proj.weight"]
	for h := range 4 {
		for k, r := range []int{0, 4, 1, 5, 2, 6, 3, 7} {
			if !slices.Equal(q[(h*8+k)*16:][:16], src[(h*8+r)*16:][:16]) {
				t.Fatalf("head %d row %d is not source row %d", h, k, r)
			}
		}
	}
}

// Llama 3.1's rope_type "llama3" adds rope_freqs.weight first: 1 for short wavelengths, factor
// for long ones, and the smooth blend between (values from the formula in float64).
func TestConvertLlama3RopeFreqs(t *testing.T) {
	config := `{"architectures": ["LlamaForCausalLM"], "hidden_size": 16, "intermediate_size": 24, "num_attention_heads": 2,
	 "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 8, "rms_norm_eps": 1e-5, "rope_theta": 500000.0,
	 "tie_word_embeddings": true, "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
	 "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}}`
	shapes := llamaShapes(8, false, false)
	for _, k := range []string{"q", "o"} {
		for n, s := range shapes {
			if strings.Contains(n, k+"_proj") {
				s = slices.Clone(s)
				if k == "q" {
					s[0] = 16
				} else {
					s[1] = 16
				}
				shapes[n] = s
			}
		}
	}
	f, _, _ := convertTiny(t, config, tinyTokenizer(llama3Regex, true, "null"), shapes)
	if f.Tensors[0].Name != "rope_freqs.weight" {
		t.Fatalf("first tensor %s", f.Tensors[0].Name)
	}
	got, _ := tensorF32(t, f, "rope_freqs.weight")
	var want []float64
	for i := 0; i < 8; i += 2 {
		wavelen := 2 * math.Pi * math.Pow(500000, float64(i)/8)
		switch {
		case wavelen < 8192/4.0:
			want = append(want, 1)
		case wavelen > 8192:
			want = append(want, 8)
		default:
			smooth := (8192/wavelen - 1) / 3
			want = append(want, 1/((1-smooth)/8+smooth))
		}
	}
	if len(got) != len(want) {
		t.Fatalf("rope_freqs %v, want %v", got, want)
	}
	for i := range want {
		if math.Abs(float64(got[i])-want[i]) > 1e-5*want[i] {
			t.Errorf("rope_freqs %v, want %v", got, want)
		}
	}
}

// Tokenizers gorun's converter does not read get errors naming them.
func TestConvertLlamaTokenizerRefusals(t *testing.T) {
	config := `{"architectures": ["LlamaForCausalLM"], "hidden_size": 16, "intermediate_size": 24, "num_attention_heads": 4,
	 "num_key_value_heads": 2, "num_hidden_layers": 2, "vocab_size": 8, "tie_word_embeddings": true}`
	spmJSON := strings.Replace(strings.Replace(tinyTokenizer(llama3Regex, false, "null"), `"byte_fallback": false`, `"byte_fallback": true`, 1),
		`"decoder": {"type": "ByteLevel"}`, `"decoder": {"type": "Sequence"}`, 1)
	for _, c := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"tokenizer.model", map[string]string{"tokenizer.model": "\x0a\x00", "tokenizer.json": tinyTokenizer(llama3Regex, true, "null")}, "tokenizer.model: a SentencePiece tokenizer"},
		{"llama 2 tokenizer.json", map[string]string{"tokenizer.json": spmJSON}, "SentencePiece-style BPE"},
		{"unknown pre-tokenizer", map[string]string{"tokenizer.json": strings.Replace(tinyTokenizer(llama3Regex, true, "null"), `\\p{N}{1,3}`, `\\p{N}{1,2}`, 1)}, "not a byte-level BPE gorun implements"},
		{"no output", map[string]string{"tokenizer.json": tinyTokenizer(llama3Regex, true, "null"),
			"config.json": strings.Replace(config, `"tie_word_embeddings": true`, `"tie_word_embeddings": false`, 1)}, "lm_head.weight; tie_word_embeddings is false"},
		{"odd heads", map[string]string{"tokenizer.json": tinyTokenizer(llama3Regex, true, "null"),
			"config.json": strings.Replace(config, `"num_key_value_heads": 2`, `"num_key_value_heads": 3`, 1)}, "not a multiple of num_key_value_heads 3"},
		{"experts", map[string]string{"tokenizer.json": tinyTokenizer(llama3Regex, true, "null"),
			"config.json": strings.Replace(config, `"vocab_size": 8`, `"vocab_size": 8, "num_local_experts": 8`, 1)}, "mixture-of-experts"},
	} {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			if _, ok := c.files["config.json"]; !ok {
				c.files["config.json"] = config
			}
			for name, body := range c.files {
				writeNew(t, filepath.Join(dir, name), []byte(body))
			}
			tinyCheckpoint(t, dir, llamaShapes(4, false, false))
			out := filepath.Join(t.TempDir(), "m.gguf")
			if _, err := Convert(dir, out, Options{}); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("output written: %v", err)
			}
		})
	}
}
