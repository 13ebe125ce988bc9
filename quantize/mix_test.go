package quantize

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/quant"
)

// modelTensor is a tensor of a synthetic model for the type rules.
type modelTensor struct {
	name string
	dims []int64
	typ  quant.Type
}

// llamaTensors lists a Llama's tensors (f16 matrices, f32 norms), tied embeddings unless
// output: hidden 256, feed-forward 768, the K/V projections 128 wide.
func llamaTensors(nLayer int, output bool) []modelTensor {
	ts := []modelTensor{{"token_embd.weight", []int64{256, 1000}, quant.F16}, {"output_norm.weight", []int64{256}, quant.F32}}
	if output {
		ts = append(ts, modelTensor{"output.weight", []int64{256, 1000}, quant.F16})
	}
	for i := 0; i < nLayer; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		ts = append(ts,
			modelTensor{p + "attn_norm.weight", []int64{256}, quant.F32},
			modelTensor{p + "ffn_norm.weight", []int64{256}, quant.F32},
			modelTensor{p + "attn_q.weight", []int64{256, 256}, quant.F16},
			modelTensor{p + "attn_k.weight", []int64{256, 128}, quant.F16},
			modelTensor{p + "attn_v.weight", []int64{256, 128}, quant.F16},
			modelTensor{p + "attn_output.weight", []int64{256, 256}, quant.F16},
			modelTensor{p + "ffn_gate.weight", []int64{256, 768}, quant.F16},
			modelTensor{p + "ffn_up.weight", []int64{256, 768}, quant.F16},
			modelTensor{p + "ffn_down.weight", []int64{768, 256}, quant.F16})
	}
	return ts
}

// llamaInfo is what MixInfoOf reads from such a Llama.
func llamaInfo(nLayer, nHead, nHeadKV int, output bool) MixInfo {
	return MixInfo{Arch: "llama", NLayer: nLayer, NHead: nHead, NHeadKV: nHeadKV, NAttentionV: nLayer, HasOutput: output}
}

// chooseAll runs a Mixer over the tensors in llama-quantize's order, as File does.
func chooseAll(t *testing.T, ft FileType, info MixInfo, ts []modelTensor) map[string]quant.Type {
	t.Helper()
	ts = slices.Clone(ts)
	slices.SortStableFunc(ts, func(a, b modelTensor) int { return compareTensorNames(a.name, b.name) })
	m := NewMixer(ft, info)
	got := map[string]quant.Type{}
	for _, x := range ts {
		p, err := m.ChooseType(x.name, x.dims, x.typ)
		if err != nil {
			t.Fatalf("%v %s: %v", ft, x.name, err)
		}
		got[x.name] = p.Type
	}
	return got
}

// checkTypes compares the chosen types with want; names want leaves out must have def (the
// f32 vectors: F32).
func checkTypes(t *testing.T, ft FileType, got, want map[string]quant.Type, def quant.Type) {
	t.Helper()
	for name, typ := range got {
		w, ok := want[name]
		if !ok {
			w = def
			if strings.HasSuffix(name, "_norm.weight") {
				w = quant.F32
			}
		}
		if typ != w {
			t.Errorf("%v %s: %v, want %v", ft, name, typ, w)
		}
	}
}

// The q4_K_M recipe for an 8-layer GPT-2 gives the types llama.cpp's q4_K_M fixture has.
func TestChooseTypeQ4KMMatchesLlamaCpp(t *testing.T) {
	ts := []modelTensor{
		{"output.weight", []int64{256, 1024}, quant.F16},
		{"token_embd.weight", []int64{256, 1024}, quant.F16},
		{"position_embd.weight", []int64{256, 512}, quant.F32},
		{"output_norm.weight", []int64{256}, quant.F32},
	}
	want := map[string]quant.Type{"output.weight": quant.Q6_K, "position_embd.weight": quant.F32}
	for i := 0; i < 8; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		for _, n := range []string{"attn_qkv.weight", "attn_output.weight", "ffn_up.weight", "ffn_down.weight"} {
			ts = append(ts, modelTensor{p + n, []int64{256, 1024}, quant.F16})
		}
		ts = append(ts, modelTensor{p + "attn_qkv.bias", []int64{768}, quant.F32}, modelTensor{p + "attn_norm.weight", []int64{256}, quant.F32})
		want[p+"attn_qkv.weight"] = quant.Q5_K
		want[p+"attn_qkv.bias"] = quant.F32
	}
	for _, i := range []int{0, 3, 6, 7} {
		want[fmt.Sprintf("blk.%d.ffn_down.weight", i)] = quant.Q6_K
	}
	info := MixInfo{Arch: "gpt2", NLayer: 8, NHead: 4, NHeadKV: 4, NAttentionV: 8, HasOutput: true}
	checkTypes(t, FileQ4_K_M, chooseAll(t, FileQ4_K_M, info, ts), want, quant.Q4_K)
}

// The Llama rules of llama-quantize for the llama-kjv fixture's shape (6 layers, 4 heads, 2 KV
// heads, tied embeddings): the tied token embedding is the output matrix (Q6_K); q4_K_M and
// q5_K_M give attn_v and ffn_down of layers 2 and 5 (useMoreBits of 6: no first eighth) Q6_K; q4_K_S gives
// attn_v of the first 4 layers Q5_K (its ffn_down rule, the first eighth, picks none of 6);
// the Q3_K mixes raise attn_v, ffn_down and attn_output; q2_K's attn_v stays Q3_K below 4 query
// heads per KV head.
func TestChooseTypeLlamaKJV(t *testing.T) {
	ts, info := llamaTensors(6, false), llamaInfo(6, 4, 2, false)
	layers := func(name string, typ quant.Type, is ...int) map[string]quant.Type {
		m := map[string]quant.Type{}
		for _, i := range is {
			m[fmt.Sprintf("blk.%d.%s.weight", i, name)] = typ
		}
		return m
	}
	all := []int{0, 1, 2, 3, 4, 5}
	join := func(ms ...map[string]quant.Type) map[string]quant.Type {
		out := map[string]quant.Type{"token_embd.weight": quant.Q6_K}
		for _, m := range ms {
			for k, v := range m {
				out[k] = v
			}
		}
		return out
	}
	for _, c := range []struct {
		ft   FileType
		def  quant.Type
		want map[string]quant.Type
	}{
		{FileQ8_0, quant.Q8_0, map[string]quant.Type{"token_embd.weight": quant.Q8_0}},
		{FileQ4_0, quant.Q4_0, join()},
		{FileQ5_1, quant.Q5_1, join()},
		{FileQ6_K, quant.Q6_K, join()},
		{FileQ5_K_S, quant.Q5_K, join()},
		{FileQ4_K_M, quant.Q4_K, join(layers("attn_v", quant.Q6_K, 2, 5), layers("ffn_down", quant.Q6_K, 2, 5))},
		{FileQ5_K_M, quant.Q5_K, join(layers("attn_v", quant.Q6_K, 2, 5), layers("ffn_down", quant.Q6_K, 2, 5))},
		{FileQ4_K_S, quant.Q4_K, join(layers("attn_v", quant.Q5_K, 0, 1, 2, 3))},
		{FileQ3_K_S, quant.Q3_K, join()},
		{FileQ3_K_M, quant.Q3_K, join(layers("attn_v", quant.Q5_K, 0, 1), layers("attn_v", quant.Q4_K, 2, 3, 4, 5),
			layers("ffn_down", quant.Q4_K, all...), layers("attn_output", quant.Q4_K, all...))},
		{FileQ3_K_L, quant.Q3_K, join(layers("attn_v", quant.Q5_K, all...), layers("ffn_down", quant.Q5_K, all...),
			layers("attn_output", quant.Q5_K, all...))},
		{FileQ2_K, quant.Q2_K, join(layers("attn_v", quant.Q3_K, all...), layers("ffn_down", quant.Q3_K, all...),
			layers("attn_output", quant.Q3_K, all...))},
		{FileF16, quant.F16, nil},
	} {
		checkTypes(t, c.ft, chooseAll(t, c.ft, info, ts), c.want, c.def)
	}
}

// Llama 3.2 1B's shape (16 layers, 32 heads, 8 KV heads, tied embeddings): q4_K_M favours
// layers 0, 1, 4, 7, 10, 13, 14, 15; q4_K_S raises ffn_down of layers 0 and 1; q3_K_M
// ffn_down of layer 0; and with 4 query heads per KV head q2_K gives attn_v Q4_K.
func TestChooseTypeLlama1BShape(t *testing.T) {
	ts, info := llamaTensors(16, false), llamaInfo(16, 32, 8, false)
	more := []int{0, 1, 4, 7, 10, 13, 14, 15}
	got := chooseAll(t, FileQ4_K_M, info, ts)
	for i := 0; i < 16; i++ {
		want := quant.Q4_K
		if slices.Contains(more, i) {
			want = quant.Q6_K
		}
		for _, n := range []string{"attn_v", "ffn_down"} {
			if g := got[fmt.Sprintf("blk.%d.%s.weight", i, n)]; g != want {
				t.Errorf("q4_K_M blk.%d.%s: %v, want %v", i, n, g, want)
			}
		}
	}
	got = chooseAll(t, FileQ4_K_S, info, ts)
	for i := 0; i < 16; i++ {
		want := quant.Q4_K
		if i < 2 {
			want = quant.Q5_K
		}
		if g := got[fmt.Sprintf("blk.%d.ffn_down.weight", i)]; g != want {
			t.Errorf("q4_K_S blk.%d.ffn_down: %v, want %v", i, g, want)
		}
	}
	got = chooseAll(t, FileQ3_K_M, info, ts)
	if got["blk.0.ffn_down.weight"] != quant.Q5_K || got["blk.1.ffn_down.weight"] != quant.Q4_K {
		t.Errorf("q3_K_M ffn_down: %v %v", got["blk.0.ffn_down.weight"], got["blk.1.ffn_down.weight"])
	}
	got = chooseAll(t, FileQ2_K, info, ts)
	if got["blk.3.attn_v.weight"] != quant.Q4_K || got["token_embd.weight"] != quant.Q6_K {
		t.Errorf("q2_K: attn_v %v, token_embd %v", got["blk.3.attn_v.weight"], got["token_embd.weight"])
	}
}

// The rules that depend on the model's size and kind: an 80-layer grouped-query Llama is a
// 70B (attn_v Q4_K and Q3_K become Q5_K; not with as many KV heads as heads: the 65B); 8
// experts give attn_v and attn_k Q8_0 and attn_output Q5_K and take the layer from the name;
// calibration statistics give q4_0's first ffn_down layers Q4_1; Falcon's output is Q8_0.
func TestChooseTypeModelRules(t *testing.T) {
	v := func(ft FileType, info MixInfo, name string, i int) quant.Type {
		t.Helper()
		got := chooseAll(t, ft, info, llamaTensors(info.NLayer, info.HasOutput))
		return got[fmt.Sprintf("blk.%d.%s.weight", i, name)]
	}
	b70 := llamaInfo(80, 64, 8, true)
	if g := v(FileQ4_K_M, b70, "attn_v", 20); g != quant.Q5_K {
		t.Errorf("70B q4_K_M attn_v of a plain layer: %v, want q5_K", g)
	}
	if g := v(FileQ4_K_M, b70, "attn_v", 0); g != quant.Q6_K {
		t.Errorf("70B q4_K_M attn_v of a favoured layer: %v, want q6_K", g)
	}
	if g := v(FileQ3_K_S, b70, "attn_v", 20); g != quant.Q5_K {
		t.Errorf("70B q3_K_S attn_v: %v, want q5_K", g)
	}
	b65 := llamaInfo(80, 64, 64, true)
	if g := v(FileQ4_K_M, b65, "attn_v", 20); g != quant.Q4_K {
		t.Errorf("65B q4_K_M attn_v: %v, want q4_K", g)
	}
	qwen := b65
	qwen.Arch = "qwen2"
	if g := v(FileQ4_K_M, qwen, "attn_v", 20); g != quant.Q5_K {
		t.Errorf("80-layer qwen2 q4_K_M attn_v: %v, want q5_K", g)
	}

	moe := llamaInfo(32, 32, 8, true)
	moe.NExpert = 8
	for _, c := range []struct {
		ft   FileType
		name string
		want quant.Type
	}{{FileQ4_0, "attn_v", quant.Q8_0}, {FileQ4_K_M, "attn_k", quant.Q8_0}, {FileQ4_K_M, "attn_output", quant.Q5_K},
		{FileQ5_K_M, "attn_output", quant.Q5_K}, {FileQ4_K_M, "attn_q", quant.Q4_K}} {
		if g := v(c.ft, moe, c.name, 3); g != c.want {
			t.Errorf("8 experts %v %s: %v, want %v", c.ft, c.name, g, c.want)
		}
	}
	// Expert matrices out of layer order: the layer comes from the name.
	m := NewMixer(FileQ4_K_M, moe)
	if p, err := m.ChooseType("blk.5.ffn_down_exps.weight", []int64{256, 256, 8}, quant.F16); err != nil || p.Type != quant.Q4_K {
		t.Errorf("8 experts, ffn_down of layer 5 first: %v %v, want q4_K", p.Type, err)
	}
	if _, err := m.ChooseType("ffn_down_exps.weight", []int64{256, 256, 8}, quant.F16); err == nil || !strings.Contains(err.Error(), "layer") {
		t.Errorf("8 experts, ffn_down without a layer: %v", err)
	}
	if _, err := m.ChooseType("blk.40.ffn_up_exps.weight", []int64{256, 256, 8}, quant.F16); err == nil || !strings.Contains(err.Error(), "32") {
		t.Errorf("8 experts, layer 40 of 32: %v", err)
	}
	if p, _ := m.ChooseType("blk.1.ffn_gate_inp.weight", []int64{256, 8}, quant.F32); p.Quantize {
		t.Errorf("the expert router was quantized to %v", p.Type)
	}

	calib := llamaInfo(16, 32, 8, false)
	calib.HasImportance = true
	if g := v(FileQ4_0, calib, "ffn_down", 1); g != quant.Q4_1 {
		t.Errorf("q4_0 with statistics, ffn_down of layer 1: %v, want q4_1", g)
	}
	if g := v(FileQ5_0, calib, "ffn_down", 2); g != quant.Q5_0 {
		t.Errorf("q5_0 with statistics, ffn_down of layer 2: %v, want q5_0", g)
	}

	falcon := llamaInfo(32, 32, 8, true)
	falcon.Arch = "falcon"
	got := chooseAll(t, FileQ4_K_M, falcon, llamaTensors(32, true))
	if got["output.weight"] != quant.Q8_0 || got["blk.1.ffn_down.weight"] != quant.Q6_K || got["blk.2.ffn_down.weight"] != quant.Q5_K ||
		got["blk.5.ffn_down.weight"] != quant.Q4_K {
		t.Errorf("falcon q4_K_M: output %v, ffn_down 1 %v, 2 %v, 5 %v", got["output.weight"], got["blk.1.ffn_down.weight"],
			got["blk.2.ffn_down.weight"], got["blk.5.ffn_down.weight"])
	}
}

func TestChooseTypeQ4_0AndFallbacks(t *testing.T) {
	choose := func(ft FileType, info MixInfo, name string, dims []int64, cur quant.Type) TensorPlan {
		t.Helper()
		p, err := NewMixer(ft, info).ChooseType(name, dims, cur)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	info := MixInfo{NLayer: 12, HasOutput: true}
	if p := choose(FileQ4_0, info, "output.weight", []int64{768, 50257}, quant.F16); p.Type != quant.Q6_K {
		t.Errorf("q4_0 output: %v", p.Type)
	}
	if p := choose(FileQ4_0, info, "token_embd.weight", []int64{768, 50257}, quant.F16); p.Type != quant.Q4_0 {
		t.Errorf("q4_0 token_embd: %v", p.Type)
	}
	// GPT-2 1.5B rows of 1600 are not a whole number of 256-element K blocks.
	if p := choose(FileQ4_K_M, MixInfo{NLayer: 48, HasOutput: true}, "blk.1.ffn_up.weight", []int64{1600, 6400}, quant.F16); p.Type != quant.Q5_0 || p.Note == "" {
		t.Errorf("fallback: %v %q", p.Type, p.Note)
	}
	// ... nor 32-element ones: the output matrix then gets Q8_0 whatever the recipe.
	if p := choose(FileQ4_K_M, info, "output.weight", []int64{1600, 50257}, quant.F16); p.Type != quant.Q8_0 {
		t.Errorf("q4_K_M output with rows of 1600: %v", p.Type)
	}
	if p := choose(FileQ2_K, info, "blk.0.ffn_up.weight", []int64{1600, 64}, quant.F16); p.Type != quant.IQ4_NL {
		t.Errorf("q2_K fallback: %v", p.Type)
	}
	if p := choose(FileQ4_0, info, "blk.0.ffn_up.weight", []int64{100, 8}, quant.F16); p.Type != quant.F16 || p.Quantize {
		t.Errorf("rows of 100 in q4_0: %+v", p)
	}
	if p := choose(FileQ8_0, info, "output.weight", []int64{768, 50257}, quant.F16); p.Type != quant.Q8_0 {
		t.Errorf("q8_0 output: %v", p.Type)
	}
	if p := choose(FileQ4_K_M, MixInfo{NLayer: 12, Pure: true}, "blk.0.ffn_down.weight", []int64{3072, 768}, quant.F16); p.Type != quant.Q4_K {
		t.Errorf("pure: %v", p.Type)
	}
	if p := choose(FileF16, info, "output.weight", []int64{768, 50257}, quant.F32); p.Type != quant.F16 || !p.Quantize {
		t.Errorf("f16 output: %+v", p)
	}
	// ggml counts [256 1] as a vector.
	if p := choose(FileQ4_0, info, "blk.0.x.weight", []int64{256, 1}, quant.F32); p.Quantize {
		t.Errorf("a [256 1] tensor was quantized to %v", p.Type)
	}
}

func TestParseFileType(t *testing.T) {
	for name, want := range map[string]FileType{"q4_k_m": FileQ4_K_M, "Q4_K": FileQ4_K_M, "q8_0": FileQ8_0, "bf16": FileBF16,
		"q5_k": FileQ5_K_M, "q3_k": FileQ3_K_M, "Q2_K": FileQ2_K, "q3_k_l": FileQ3_K_L} {
		if got, err := ParseFileType(name); err != nil || got != want {
			t.Errorf("%s: %v %v", name, got, err)
		}
	}
	if _, err := ParseFileType("q3_x"); err == nil {
		t.Error("unknown type accepted")
	}
}

// The IQ4 recipes' rules (llama_tensor_get_type): attn_v Q5_K with 4 or more query heads per
// KV head; ffn_down Q5_K in the first eighth of the layers unless there are calibration
// statistics; attn_output Q5_K with 8 experts; output Q6_K; IQ4_XS rows that 256 does not
// divide fall back to IQ4_NL (and the output to Q8_0).
func TestChooseTypeIQ4(t *testing.T) {
	for _, c := range []struct {
		ft  FileType
		def quant.Type
	}{{FileIQ4_NL, quant.IQ4_NL}, {FileIQ4_XS, quant.IQ4_XS}} {
		gqa := llamaInfo(16, 32, 8, false)
		got := chooseAll(t, c.ft, gqa, llamaTensors(16, false))
		want := map[string]quant.Type{"token_embd.weight": quant.Q6_K}
		for i := 0; i < 16; i++ {
			want[fmt.Sprintf("blk.%d.attn_v.weight", i)] = quant.Q5_K
			if i < 2 {
				want[fmt.Sprintf("blk.%d.ffn_down.weight", i)] = quant.Q5_K
			}
		}
		checkTypes(t, c.ft, got, want, c.def)

		mha := llamaInfo(16, 32, 16, true) // 2 query heads per KV head
		mha.HasImportance = true
		got = chooseAll(t, c.ft, mha, llamaTensors(16, true))
		checkTypes(t, c.ft, got, map[string]quant.Type{"output.weight": quant.Q6_K}, c.def)

		moe := llamaInfo(32, 32, 8, true)
		moe.NExpert = 8
		got = chooseAll(t, c.ft, moe, llamaTensors(32, true))
		if g := got["blk.3.attn_output.weight"]; g != quant.Q5_K {
			t.Errorf("%v 8 experts attn_output: %v, want q5_K", c.ft, g)
		}
		if g := got["blk.3.attn_v.weight"]; g != quant.Q8_0 {
			t.Errorf("%v 8 experts attn_v: %v, want q8_0", c.ft, g)
		}
	}
	m := NewMixer(FileIQ4_XS, MixInfo{NLayer: 48, HasOutput: true})
	if p, err := m.ChooseType("blk.1.ffn_up.weight", []int64{1600, 6400}, quant.F16); err != nil || p.Type != quant.IQ4_NL || p.Note == "" {
		t.Errorf("iq4_xs rows of 1600: %v %q %v, want iq4_nl with a note", p.Type, p.Note, err)
	}
	if p, err := m.ChooseType("output.weight", []int64{1600, 50257}, quant.F16); err != nil || p.Type != quant.Q8_0 {
		t.Errorf("iq4_xs output with rows of 1600: %v %v, want q8_0", p.Type, err)
	}
	for name, want := range map[string]FileType{"iq4_nl": FileIQ4_NL, "IQ4_XS": FileIQ4_XS} {
		if got, err := ParseFileType(name); err != nil || got != want {
			t.Errorf("%s: %v %v", name, got, err)
		}
	}
}
