package quantize

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gorun-dev/gorun/quant"
)

// TensorPlan is the decision for one tensor of a model being quantized.
type TensorPlan struct {
	Type     quant.Type
	Quantize bool   // false: copied as it is
	Note     string // why the type differs from the recipe's (fallbacks), for the user
}

// MixInfo is what the type rules need to know about the model.
type MixInfo struct {
	NLayer    int
	HasOutput bool // the file has output.weight (else token_embd.weight doubles as the output)
	Pure      bool // every quantized tensor gets the default type, no mixing
}

// ChooseType decides the type of one tensor for a recipe, following llama-quantize's rules for
// the tensors gorun's architectures have: only matrices whose name ends in "weight" are
// quantized (not norms, not position embeddings); the output matrix gets Q6_K in quantized
// recipes; the K-quant mixes give attn_qkv and some ffn_down layers more bits; and a row length
// that is not a whole number of blocks falls back to a type that fits.
func ChooseType(ft FileType, name string, dims []int64, current quant.Type, info MixInfo) TensorPlan {
	if !strings.HasSuffix(name, "weight") || len(dims) < 2 || strings.Contains(name, "_norm.weight") ||
		name == "position_embd.weight" || name == "token_types.weight" {
		return TensorPlan{Type: current}
	}
	def := ft.DefaultType()
	t := def
	if !info.Pure && def.Quantized() {
		t = mixType(ft, def, name, dims[0], info)
	}
	var note string
	if dims[0]%int64(t.BlockSize()) != 0 {
		t, note = fallback(t, dims[0])
	}
	if t == current {
		return TensorPlan{Type: t, Note: note}
	}
	return TensorPlan{Type: t, Quantize: true, Note: note}
}

// mixType applies the recipe's per-tensor rules.
func mixType(ft FileType, def quant.Type, name string, ne0 int64, info MixInfo) quant.Type {
	isOutput := name == "output.weight" || (!info.HasOutput && name == "token_embd.weight")
	switch {
	case isOutput:
		if ne0%int64(def.BlockSize()) != 0 {
			return quant.Q8_0
		}
		if def != quant.Q8_0 {
			return quant.Q6_K
		}
		return def
	case strings.Contains(name, "attn_v.weight"):
		// Only for architectures with a separate V projection; GPT-2 fuses QKV.
		return def
	case strings.Contains(name, "attn_qkv.weight"):
		switch ft {
		case FileQ4_K_M:
			return quant.Q5_K
		case FileQ5_K_M:
			return quant.Q6_K
		}
	case strings.Contains(name, "ffn_down"):
		i := LayerOf(name)
		switch {
		case (ft == FileQ4_K_M || ft == FileQ5_K_M) && useMoreBits(i, info.NLayer):
			return quant.Q6_K
		case ft == FileQ4_K_S && i < info.NLayer/8:
			return quant.Q5_K
		}
	}
	return def
}

// useMoreBits picks the layers llama.cpp's mixes favour: the first and last eighth, and every
// third layer in between.
func useMoreBits(i, n int) bool {
	return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2
}

// LayerOf returns N of a "blk.N." tensor name, or -1.
func LayerOf(name string) int {
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return -1
	}
	num, _, _ := strings.Cut(rest, ".")
	i, err := strconv.Atoi(num)
	if err != nil {
		return -1
	}
	return i
}

// fallback picks a type with a smaller block for rows that K-quant blocks do not divide, as
// llama-quantize does, and says so.
func fallback(t quant.Type, ne0 int64) (quant.Type, string) {
	to := quant.F16
	switch t {
	case quant.Q4_K:
		to = quant.Q5_0
	case quant.Q5_K:
		to = quant.Q5_1
	case quant.Q6_K:
		to = quant.Q8_0
	}
	if ne0%int64(to.BlockSize()) != 0 {
		to = quant.F16
	}
	return to, fmt.Sprintf("rows of %d are not a whole number of %d-element %v blocks: %v instead", ne0, t.BlockSize(), t, to)
}
