package quant

import "fmt"

// Format holds the row kernels of one element type. A row is n elements, n a multiple of the
// type's block size, stored in exactly RowSize(n) bytes. The functions are plain Go; SIMD
// versions replace them per CPU at start-up without changing callers.
type Format struct {
	Type Type

	// Dequantize writes the len(dst) values stored in src.
	Dequantize func(dst []float32, src []byte)

	// Quantize stores src in dst with the reference algorithm (ggml's quantize_row_*_ref for
	// the block types, so files match llama.cpp's byte for byte). It reports NaN or Inf
	// input as an error.
	Quantize func(dst []byte, src []float32) error

	// QuantizeBetter stores src in dst in the same format as Quantize, choosing scales and
	// rounding to minimize the weighted squared error sum_j w_j (src_j - stored_j)^2, where w is
	// importance (per element of src, typically the mean square of the activations that meet
	// each weight column; nil means a default weighting). nil when the type has no such
	// quantizer; callers then use Quantize.
	QuantizeBetter func(dst []byte, src []float32, importance []float32) error

	// QuantizeFast is QuantizeBetter with a faster, less thorough search (SearchFast: a grid
	// of candidate scales instead of complete sweeps); its bytes differ from QuantizeBetter's.
	// Its blocks are never worse than Quantize's under the same weighted error. nil exactly
	// when QuantizeBetter is.
	QuantizeFast func(dst []byte, src []float32, importance []float32) error

	// DotF32 returns the dot product of the row w (this type) with the float32 vector x,
	// dequantizing on the fly: the exact path, used where float32 activations are wanted.
	DotF32 func(w []byte, x []float32) float32

	// VecDotType is the type activations are quantized to for VecDot (as ggml's
	// vec_dot_type: Q8_0, Q8_1 or Q8_K); zero value F32 means VecDot is not provided.
	VecDotType Type

	// VecDot returns the dot product of the row w with a row xq already quantized to
	// VecDotType.
	VecDot func(w []byte, xq []byte) float32
}

var formats = map[Type]*Format{}

// register adds a format; each file that implements a type registers it in init.
func register(f *Format) {
	if _, dup := formats[f.Type]; dup {
		panic(fmt.Sprintf("quant: %v registered twice", f.Type))
	}
	formats[f.Type] = f
}

// FormatOf returns the kernels for t, or an error naming t when gorun cannot compute with it.
func FormatOf(t Type) (*Format, error) {
	if f, ok := formats[t]; ok {
		return f, nil
	}
	if !t.Known() {
		return nil, fmt.Errorf("unknown tensor type %d", uint32(t))
	}
	return nil, fmt.Errorf("tensor type %v is not supported", t)
}
