package graph

import (
	"fmt"
	"unsafe"

	"github.com/gorun-dev/gorun/quant"
)

// MaxDims is the number of dimensions a tensor can have.
const MaxDims = 4

// MaxSrc is the number of inputs an op can take.
const MaxSrc = 4

// Flags mark tensors whose memory the planner must treat specially.
type Flags uint8

const (
	// FlagInput tensors are written by the caller before Compute; they get their own memory.
	FlagInput Flags = 1 << iota
	// FlagOutput tensors are read after Compute; their memory is never reused within a graph.
	FlagOutput
	// FlagStatic tensors (weights, KV cache) live in a buffer of their own, outside the arena.
	FlagStatic
)

// Buffer is a block of backend memory: host bytes for the CPU, a device pointer for CUDA.
type Buffer struct {
	Host []byte  // host-addressable bytes, nil for device-only memory
	Dev  uintptr // device address, 0 for host memory
	Size int
	// Release frees the memory (nil when the owner frees it, e.g. an mmap'ed file).
	Release func()
}

// Tensor is a node or a leaf of a graph. Leaves (Op == OpNone) are weights, inputs or caches.
type Tensor struct {
	Type  quant.Type
	Ne    [MaxDims]int // elements per dimension, Ne[0] innermost
	Nb    [MaxDims]int // byte stride per dimension
	Op    Op
	Src   [MaxSrc]*Tensor
	Flags Flags
	Name  string

	// Op parameters; their meaning depends on Op.
	IParams [4]int
	FParams [2]float32

	// Caches are the per-row caches of OpStoreKVRows (row i goes to Caches[i]).
	Caches []*Tensor

	// Memory: Buf plus byte offset Off. Views share their source's buffer.
	Buf *Buffer
	Off int

	viewOf *Tensor // the tensor whose memory this view aliases (nil if not a view)
}

// NRows is the number of rows (all dimensions but the first).
func (t *Tensor) NRows() int { return t.Ne[1] * t.Ne[2] * t.Ne[3] }

// NElements is the element count.
func (t *Tensor) NElements() int { return t.Ne[0] * t.Ne[1] * t.Ne[2] * t.Ne[3] }

// RowBytes is the byte size of one contiguous row of Ne[0] elements.
func (t *Tensor) RowBytes() int { return t.Ne[0] / t.Type.BlockSize() * t.Type.TypeSize() }

// Bytes is the byte size of the memory the tensor spans (its contiguous size for a packed
// tensor, the extent of its strides for a view).
func (t *Tensor) Bytes() int {
	n := t.RowBytes()
	for i := 1; i < MaxDims; i++ {
		n += (t.Ne[i] - 1) * t.Nb[i]
	}
	return n
}

// Contiguous reports whether rows follow each other without gaps.
func (t *Tensor) Contiguous() bool {
	want := t.RowBytes()
	for i := 1; i < MaxDims; i++ {
		if t.Ne[i] > 1 && t.Nb[i] != want {
			return false
		}
		want *= t.Ne[i]
	}
	return true
}

// IsView reports whether the tensor aliases another tensor's memory.
func (t *Tensor) IsView() bool { return t.viewOf != nil }

// Base returns the tensor that owns the memory a view chain aliases.
func (t *Tensor) Base() *Tensor {
	for t.viewOf != nil {
		t = t.viewOf
	}
	return t
}

// Data returns the host bytes the tensor spans. It panics when the tensor has no host memory:
// that is a programming error (a CPU kernel given a device tensor), not bad input.
func (t *Tensor) Data() []byte {
	if t.Buf == nil || t.Buf.Host == nil {
		panic(fmt.Sprintf("graph: tensor %q has no host memory", t.Name))
	}
	return t.Buf.Host[t.Off : t.Off+t.Bytes()]
}

// Row returns the bytes of row i (counting over dimensions 1..3) of a host tensor.
func (t *Tensor) Row(i int) []byte {
	i1 := i % t.Ne[1]
	i2 := i / t.Ne[1] % t.Ne[2]
	i3 := i / (t.Ne[1] * t.Ne[2])
	off := t.Off + i1*t.Nb[1] + i2*t.Nb[2] + i3*t.Nb[3]
	return t.Buf.Host[off : off+t.RowBytes()]
}

// F32Row returns row i of a float32 host tensor as []float32.
func (t *Tensor) F32Row(i int) []float32 {
	b := t.Row(i)
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), t.Ne[0])
}

// F32 returns the elements of a contiguous float32 host tensor.
func (t *Tensor) F32() []float32 { return quant.AsF32(t.Data()) }

// I32 returns the elements of a contiguous int32 host tensor.
func (t *Tensor) I32() []int32 {
	b := t.Data()
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*int32)(unsafe.Pointer(&b[0])), len(b)/4)
}

// setShape sets Ne and packed strides for the type.
func (t *Tensor) setShape(typ quant.Type, ne []int) {
	t.Type = typ
	for i := range t.Ne {
		t.Ne[i] = 1
	}
	copy(t.Ne[:], ne)
	t.Nb[0] = typ.TypeSize()
	t.Nb[1] = t.Ne[0] / typ.BlockSize() * typ.TypeSize()
	for i := 2; i < MaxDims; i++ {
		t.Nb[i] = t.Nb[i-1] * t.Ne[i-1]
	}
}

func (t *Tensor) String() string {
	return fmt.Sprintf("%s %v %v %v", t.Name, t.Op, t.Type, t.Ne)
}
