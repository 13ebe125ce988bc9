package quant

import (
	"encoding/binary"
	"fmt"
)

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

	// QuantizeSearch stores src in dst in the same format as Quantize, searching for the scales
	// and rounding that minimize the weighted squared error sum_j w_j (src_j - stored_j)^2,
	// where w is importance (per element of src, typically the mean square of the activations
	// that meet each weight column; nil means a default weighting). s is how thoroughly it
	// searches (SearchGrid, the zero value and gorun's default: a grid of candidate scales;
	// SearchFull: complete sweeps, several times slower, a little lower error; each's bytes
	// pinned). Every block is compared with
	// Quantize's, which is kept when it is no worse under the same weighted error. nil when the
	// type has no such quantizer; callers then use Quantize.
	QuantizeSearch func(dst []byte, src, importance []float32, s Search) error

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

// ScalesFinite reports whether every block of a row of type t has finite float16 scales
// (and mins), reading only those fields; known is false for the types it does not cover. For
// the covered types a block's values are its scales times bounded integers, so they are all
// finite exactly when its scales are (IQ4_XS's block scales are its d times 6-bit codes): a
// cheaper check than dequantizing the row.
func ScalesFinite(t Type, row []byte) (finite, known bool) {
	var offs []int
	switch t {
	case Q4_0, Q5_0, Q8_0, IQ4_NL, IQ4_XS:
		offs = []int{0}
	case Q4_1, Q5_1, Q4_K, Q5_K:
		offs = []int{0, 2}
	case Q6_K:
		offs = []int{208}
	case Q2_K:
		offs = []int{80, 82}
	case Q3_K:
		offs = []int{108}
	default:
		return false, false
	}
	size := t.TypeSize()
	for b := 0; b+size <= len(row); b += size {
		for _, o := range offs {
			if binary.LittleEndian.Uint16(row[b+o:])&0x7c00 == 0x7c00 {
				return false, true
			}
		}
	}
	return true, true
}
