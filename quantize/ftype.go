package quantize

import (
	"fmt"
	"sort"
	"strings"

	"github.com/gorun-dev/gorun/quant"
)

// FileType is llama.cpp's llama_ftype: the quantization recipe a whole model file was made with,
// stored as general.file_type.
type FileType uint32

const (
	FileAllF32 FileType = 0
	FileF16    FileType = 1
	FileQ4_0   FileType = 2
	FileQ4_1   FileType = 3
	FileQ8_0   FileType = 7
	FileQ5_0   FileType = 8
	FileQ5_1   FileType = 9
	FileQ2_K   FileType = 10
	FileQ3_K_S FileType = 11
	FileQ3_K_M FileType = 12
	FileQ3_K_L FileType = 13
	FileQ4_K_S FileType = 14
	FileQ4_K_M FileType = 15
	FileQ5_K_S FileType = 16
	FileQ5_K_M FileType = 17
	FileQ6_K   FileType = 18
	FileIQ4_NL FileType = 25
	FileIQ4_XS FileType = 30
	FileBF16   FileType = 32
)

// fileTypes lists the recipes gorun can make: llama-quantize's name and the type most tensors
// get. Q2_K_S and the IQ recipes below 4 bits are left out: llama-quantize refuses them without
// an importance matrix, and gorun's Q2_K quantizer takes none (nor has gorun their quantizers).
// IQ4_NL and IQ4_XS need none.
var fileTypes = []struct {
	ft   FileType
	name string
	typ  quant.Type
	desc string
}{
	{FileAllF32, "F32", quant.F32, "float32, no quantization"},
	{FileF16, "F16", quant.F16, "float16"},
	{FileBF16, "BF16", quant.BF16, "bfloat16"},
	{FileQ8_0, "Q8_0", quant.Q8_0, "8.50 bits per weight"},
	{FileQ4_0, "Q4_0", quant.Q4_0, "4.50 bpw; output.weight Q6_K"},
	{FileQ4_1, "Q4_1", quant.Q4_1, "5.00 bpw; output.weight Q6_K"},
	{FileQ5_0, "Q5_0", quant.Q5_0, "5.50 bpw; output.weight Q6_K"},
	{FileQ5_1, "Q5_1", quant.Q5_1, "6.00 bpw; output.weight Q6_K"},
	{FileQ2_K, "Q2_K", quant.Q2_K, "Q2_K; attn_v Q3_K (Q4_K with 4 or more query heads per KV head); ffn_down and attn_output Q3_K; output.weight Q6_K"},
	{FileQ3_K_S, "Q3_K_S", quant.Q3_K, "Q3_K; output.weight Q6_K"},
	{FileQ3_K_M, "Q3_K_M", quant.Q3_K, "Q3_K; attn_v Q5_K in the first 2 layers, else Q4_K; ffn_down Q5_K in the first 1/16 of layers, else Q4_K; attn_output and attn_qkv Q4_K; output.weight Q6_K"},
	{FileQ3_K_L, "Q3_K_L", quant.Q3_K, "Q3_K; attn_v, ffn_down and attn_output Q5_K; attn_qkv Q4_K; output.weight Q6_K"},
	{FileQ4_K_S, "Q4_K_S", quant.Q4_K, "Q4_K; attn_v of the first 4 layers and ffn_down of the first 1/8 Q5_K; output.weight Q6_K"},
	{FileQ4_K_M, "Q4_K_M", quant.Q4_K, "Q4_K; attn_qkv Q5_K; attn_v and ffn_down Q6_K in about half the layers; output.weight Q6_K"},
	{FileQ5_K_S, "Q5_K_S", quant.Q5_K, "Q5_K; output.weight Q6_K"},
	{FileQ5_K_M, "Q5_K_M", quant.Q5_K, "Q5_K; attn_qkv Q6_K; attn_v and ffn_down Q6_K in about half the layers; output.weight Q6_K"},
	{FileQ6_K, "Q6_K", quant.Q6_K, "6.56 bpw"},
	{FileIQ4_NL, "IQ4_NL", quant.IQ4_NL, "IQ4_NL (4.50 bpw, non-linear levels); attn_v Q5_K with 4 or more query heads per KV head; ffn_down Q5_K in the first 1/8 of layers without importance statistics; output.weight Q6_K"},
	{FileIQ4_XS, "IQ4_XS", quant.IQ4_XS, "IQ4_XS (4.25 bpw, non-linear levels); attn_v Q5_K with 4 or more query heads per KV head; ffn_down Q5_K in the first 1/8 of layers without importance statistics; rows not a multiple of 256 IQ4_NL; output.weight Q6_K"},
}

// fileTypeAliases are llama-quantize's other names for a recipe.
var fileTypeAliases = map[string]FileType{"Q3_K": FileQ3_K_M, "Q4_K": FileQ4_K_M, "Q5_K": FileQ5_K_M}

// ParseFileType finds a recipe by llama-quantize's name, ignoring case ("q4_k_m", "Q8_0").
func ParseFileType(name string) (FileType, error) {
	up := strings.ToUpper(name)
	if ft, ok := fileTypeAliases[up]; ok {
		return ft, nil
	}
	for _, f := range fileTypes {
		if f.name == up {
			return f.ft, nil
		}
	}
	return 0, fmt.Errorf("unknown quantization type %q (known: %s)", name, strings.Join(FileTypeNames(), ", "))
}

// FileTypeNames lists the recipe names gorun accepts, aliases included.
func FileTypeNames() []string {
	var names []string
	for _, f := range fileTypes {
		names = append(names, strings.ToLower(f.name))
	}
	for a := range fileTypeAliases {
		names = append(names, strings.ToLower(a))
	}
	sort.Strings(names)
	return names
}

// String is llama-quantize's name of the recipe.
func (ft FileType) String() string {
	for _, f := range fileTypes {
		if f.ft == ft {
			return f.name
		}
	}
	return fmt.Sprintf("file_type(%d)", uint32(ft))
}

// Describe says which tensors of a model get which type.
func (ft FileType) Describe() string {
	for _, f := range fileTypes {
		if f.ft == ft {
			return f.desc
		}
	}
	return ""
}

// DefaultType is the type most tensors of the recipe get.
func (ft FileType) DefaultType() quant.Type {
	for _, f := range fileTypes {
		if f.ft == ft {
			return f.typ
		}
	}
	return quant.F32
}
