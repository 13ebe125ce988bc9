// Package quant knows the ggml tensor element types: their block layouts, their names, and how
// to convert between them and float32.
//
// The numeric values of Type are ggml's enum ggml_type, so they can be read from and written to
// GGUF files directly. Every type a GGUF file may name is registered with its block size and
// byte size (so a reader can validate any file), even when gorun cannot compute with it.
package quant

import (
	"fmt"
	"math"
	"strings"
)

// Type is a ggml tensor element type (the value of enum ggml_type).
type Type uint32

// The ggml types. Gaps (4, 5, 31..33, 36..38) are types ggml removed from GGUF files.
const (
	F32     Type = 0
	F16     Type = 1
	Q4_0    Type = 2
	Q4_1    Type = 3
	Q5_0    Type = 6
	Q5_1    Type = 7
	Q8_0    Type = 8
	Q8_1    Type = 9
	Q2_K    Type = 10
	Q3_K    Type = 11
	Q4_K    Type = 12
	Q5_K    Type = 13
	Q6_K    Type = 14
	Q8_K    Type = 15
	IQ2_XXS Type = 16
	IQ2_XS  Type = 17
	IQ3_XXS Type = 18
	IQ1_S   Type = 19
	IQ4_NL  Type = 20
	IQ3_S   Type = 21
	IQ2_S   Type = 22
	IQ4_XS  Type = 23
	I8      Type = 24
	I16     Type = 25
	I32     Type = 26
	I64     Type = 27
	F64     Type = 28
	IQ1_M   Type = 29
	BF16    Type = 30
	TQ1_0   Type = 34
	TQ2_0   Type = 35
	MXFP4   Type = 39
)

// QK_K is the super-block size of the K-quants.
const QK_K = 256

// traits describes the storage of one type: BlockSize elements are stored in TypeSize bytes.
type traits struct {
	name      string
	blockSize int
	typeSize  int
}

// registry holds every type a GGUF file may contain. Sizes follow ggml-common.h.
var registry = map[Type]traits{
	F32:     {"f32", 1, 4},
	F16:     {"f16", 1, 2},
	Q4_0:    {"q4_0", 32, 2 + 16},
	Q4_1:    {"q4_1", 32, 2 + 2 + 16},
	Q5_0:    {"q5_0", 32, 2 + 4 + 16},
	Q5_1:    {"q5_1", 32, 2 + 2 + 4 + 16},
	Q8_0:    {"q8_0", 32, 2 + 32},
	Q8_1:    {"q8_1", 32, 2 + 2 + 32},
	Q2_K:    {"q2_K", QK_K, QK_K/16 + QK_K/4 + 2 + 2},
	Q3_K:    {"q3_K", QK_K, QK_K/8 + QK_K/4 + 12 + 2},
	Q4_K:    {"q4_K", QK_K, 2 + 2 + 12 + QK_K/2},
	Q5_K:    {"q5_K", QK_K, 2 + 2 + 12 + QK_K/8 + QK_K/2},
	Q6_K:    {"q6_K", QK_K, QK_K/2 + QK_K/4 + QK_K/16 + 2},
	Q8_K:    {"q8_K", QK_K, 4 + QK_K + QK_K/16*2},
	IQ2_XXS: {"iq2_xxs", QK_K, 2 + QK_K/8*2},
	IQ2_XS:  {"iq2_xs", QK_K, 2 + QK_K/8*2 + QK_K/32},
	IQ3_XXS: {"iq3_xxs", QK_K, 2 + 3*QK_K/8},
	IQ1_S:   {"iq1_s", QK_K, 2 + QK_K/8 + QK_K/16},
	IQ4_NL:  {"iq4_nl", 32, 2 + 16},
	IQ3_S:   {"iq3_s", QK_K, 2 + QK_K/4 + QK_K/32 + QK_K/8 + QK_K/64},
	IQ2_S:   {"iq2_s", QK_K, 2 + QK_K/4 + QK_K/32 + QK_K/32},
	IQ4_XS:  {"iq4_xs", QK_K, 2 + 2 + QK_K/64 + QK_K/2},
	I8:      {"i8", 1, 1},
	I16:     {"i16", 1, 2},
	I32:     {"i32", 1, 4},
	I64:     {"i64", 1, 8},
	F64:     {"f64", 1, 8},
	IQ1_M:   {"iq1_m", QK_K, QK_K/8 + QK_K/16 + QK_K/32},
	BF16:    {"bf16", 1, 2},
	TQ1_0:   {"tq1_0", QK_K, (QK_K-4*QK_K/64)/5 + QK_K/64 + 2},
	TQ2_0:   {"tq2_0", QK_K, 2 + QK_K/4},
	MXFP4:   {"mxfp4", 32, 1 + 16},
}

// Known reports whether t is a type ggml defines (so its storage size is known).
func (t Type) Known() bool { _, ok := registry[t]; return ok }

// fastTraits mirrors registry in an array: BlockSize and TypeSize sit in kernels' inner loops
// (a tensor's row size), where a map lookup costs more than the work.
var fastTraits = func() (a [64]traits) {
	for t, tr := range registry {
		if uint32(t) < uint32(len(a)) {
			a[t] = tr
		}
	}
	return
}()

func traitsOf(t Type) traits {
	if uint32(t) < uint32(len(fastTraits)) {
		return fastTraits[t]
	}
	return registry[t]
}

// BlockSize is the number of elements in one block (1 for plain types).
func (t Type) BlockSize() int { return traitsOf(t).blockSize }

// TypeSize is the number of bytes of one block.
func (t Type) TypeSize() int { return traitsOf(t).typeSize }

// Quantized reports whether t stores elements in blocks of more than one.
func (t Type) Quantized() bool { return registry[t].blockSize > 1 }

// String is ggml's name of the type (ggml_type_name), e.g. "q4_K".
func (t Type) String() string {
	if tr, ok := registry[t]; ok {
		return tr.name
	}
	return fmt.Sprintf("type(%d)", uint32(t))
}

// ParseType finds a type by its ggml name, ignoring case ("Q4_K" and "q4_k" both work).
func ParseType(name string) (Type, error) {
	for t, tr := range registry {
		if strings.EqualFold(tr.name, name) {
			return t, nil
		}
	}
	return 0, fmt.Errorf("unknown tensor type %q", name)
}

// RowSize is the byte size of n elements of type t. It fails when t is unknown or n is not a
// whole number of blocks, and never overflows.
func (t Type) RowSize(n int64) (int64, error) {
	tr, ok := registry[t]
	if !ok {
		return 0, fmt.Errorf("unknown tensor type %d", uint32(t))
	}
	if n < 0 {
		return 0, fmt.Errorf("negative element count %d", n)
	}
	if n%int64(tr.blockSize) != 0 {
		return 0, fmt.Errorf("%d elements of %s is not a whole number of %d-element blocks", n, tr.name, tr.blockSize)
	}
	blocks := n / int64(tr.blockSize)
	if blocks > math.MaxInt64/int64(tr.typeSize) {
		return 0, fmt.Errorf("%d elements of %s overflow a byte size", n, tr.name)
	}
	return blocks * int64(tr.typeSize), nil
}
