package quantize

import (
	"fmt"
	"testing"

	"github.com/gorun-dev/gorun/quant"
)

// The q4_K_M recipe for an 8-layer GPT-2 gives the types llama.cpp's q4_K_M fixture has.
func TestChooseTypeQ4KMMatchesLlamaCpp(t *testing.T) {
	info := MixInfo{NLayer: 8, HasOutput: true}
	want := map[string]quant.Type{
		"output.weight":        quant.Q6_K,
		"token_embd.weight":    quant.Q4_K,
		"position_embd.weight": quant.F32,
		"output_norm.weight":   quant.F32,
	}
	for i := 0; i < 8; i++ {
		p := fmt.Sprintf("blk.%d.", i)
		want[p+"attn_qkv.weight"] = quant.Q5_K
		want[p+"attn_output.weight"] = quant.Q4_K
		want[p+"ffn_up.weight"] = quant.Q4_K
		want[p+"attn_qkv.bias"] = quant.F32
		want[p+"attn_norm.weight"] = quant.F32
		want[p+"ffn_down.weight"] = quant.Q4_K
	}
	for _, i := range []int{0, 3, 6, 7} {
		want[fmt.Sprintf("blk.%d.ffn_down.weight", i)] = quant.Q6_K
	}
	for name, w := range want {
		dims := []int64{256, 1024}
		cur := quant.F16
		if w == quant.F32 {
			cur = quant.F32
			if name != "position_embd.weight" {
				dims = []int64{256}
			}
		}
		if got := ChooseType(FileQ4_K_M, name, dims, cur, info); got.Type != w {
			t.Errorf("%s: %v, want %v", name, got.Type, w)
		}
	}
}

func TestChooseTypeQ4_0AndFallbacks(t *testing.T) {
	info := MixInfo{NLayer: 12, HasOutput: true}
	if p := ChooseType(FileQ4_0, "output.weight", []int64{768, 50257}, quant.F16, info); p.Type != quant.Q6_K {
		t.Errorf("q4_0 output: %v", p.Type)
	}
	if p := ChooseType(FileQ4_0, "token_embd.weight", []int64{768, 50257}, quant.F16, info); p.Type != quant.Q4_0 {
		t.Errorf("q4_0 token_embd: %v", p.Type)
	}
	// GPT-2 1.5B rows of 1600 are not a whole number of 256-element K blocks.
	if p := ChooseType(FileQ4_K_M, "blk.1.ffn_up.weight", []int64{1600, 6400}, quant.F16, MixInfo{NLayer: 48, HasOutput: true}); p.Type != quant.Q5_0 || p.Note == "" {
		t.Errorf("fallback: %v %q", p.Type, p.Note)
	}
	if p := ChooseType(FileQ4_0, "blk.0.ffn_up.weight", []int64{100, 8}, quant.F16, info); p.Type != quant.F16 || p.Quantize {
		t.Errorf("rows of 100 in q4_0: %+v", p)
	}
	if p := ChooseType(FileQ8_0, "output.weight", []int64{768, 50257}, quant.F16, info); p.Type != quant.Q8_0 {
		t.Errorf("q8_0 output: %v", p.Type)
	}
	if p := ChooseType(FileQ4_K_M, "blk.0.ffn_down.weight", []int64{3072, 768}, quant.F16, MixInfo{NLayer: 12, Pure: true}); p.Type != quant.Q4_K {
		t.Errorf("pure: %v", p.Type)
	}
	if p := ChooseType(FileF16, "output.weight", []int64{768, 50257}, quant.F32, info); p.Type != quant.F16 || !p.Quantize {
		t.Errorf("f16 output: %+v", p)
	}
}

func TestParseFileType(t *testing.T) {
	for name, want := range map[string]FileType{"q4_k_m": FileQ4_K_M, "Q4_K": FileQ4_K_M, "q8_0": FileQ8_0, "bf16": FileBF16, "q5_k": FileQ5_K_M} {
		if got, err := ParseFileType(name); err != nil || got != want {
			t.Errorf("%s: %v %v", name, got, err)
		}
	}
	if _, err := ParseFileType("q3_x"); err == nil {
		t.Error("unknown type accepted")
	}
}
