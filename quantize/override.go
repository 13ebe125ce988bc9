package quantize

import (
	"fmt"

	"github.com/gorun-dev/gorun/quant"
)

// The types a user forces on the two embedding-sized matrices, as llama-quantize's
// --output-tensor-type, --token-embedding-type and --leave-output-tensor do
// (llama_model_quantize_params' output_tensor_type, token_embedding_type and
// quantize_output_tensor in llama.cpp's llama-quant.cpp).

// checkOverrides refuses forced types that cannot hold weights.
func checkOverrides(opts Options) error {
	for _, o := range []struct {
		flag string
		t    *quant.Type
	}{{"output tensor type", opts.OutputTensorType}, {"token embedding type", opts.TokenEmbeddingType}} {
		if o.t == nil {
			continue
		}
		switch f, err := quant.FormatOf(*o.t); {
		case err != nil:
			return fmt.Errorf("%s: %w", o.flag, err)
		case *o.t == quant.Q8_1 || *o.t == quant.Q8_K:
			return fmt.Errorf("%s %v: ggml uses it for activations only, not for weights", o.flag, *o.t)
		case f.Quantize == nil:
			return fmt.Errorf("%s %v: gorun cannot quantize to it", o.flag, *o.t)
		}
	}
	return nil
}

// overrideType applies the forced types to the mixer's plan for a tensor, with
// llama-quantize's rules: --leave-output-tensor copies output.weight as it is; the token
// embedding type goes to token_embd.weight; the output type goes to output.weight and, in the
// mixed recipes (not --pure, not f16/f32), to a token_embd.weight that is also the output
// matrix (a model without output.weight), unless a token embedding type was given too. A
// forced type whose blocks do not divide the rows falls back as the recipe's types do.
func overrideType(p TensorPlan, name string, dims []int64, current quant.Type, opts Options, info MixInfo) TensorPlan {
	if !quantizable(name, dims) {
		return p
	}
	if opts.LeaveOutputTensor && name == "output.weight" {
		return TensorPlan{Type: current}
	}
	var forced *quant.Type
	switch {
	case name == "token_embd.weight" && opts.TokenEmbeddingType != nil:
		forced = opts.TokenEmbeddingType
	case name == "output.weight":
		forced = opts.OutputTensorType
	case name == "token_embd.weight" && !info.HasOutput && !info.Pure && opts.FileType.DefaultType().Quantized():
		forced = opts.OutputTensorType
	}
	if forced == nil {
		return p
	}
	t, note := *forced, ""
	if dims[0]%int64(t.BlockSize()) != 0 {
		t, note = fallback(t, dims[0])
	}
	return TensorPlan{Type: t, Quantize: t != current, Note: note}
}
