package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"

	"github.com/gorun-dev/gorun/quant"
)

// Limits on what a reader accepts beyond what the file size already bounds.
const (
	// MaxTensorName bounds tensor names; llama.cpp writes at most 63 bytes.
	MaxTensorName = 64 << 10
	// MaxDims is ggml's GGML_MAX_DIMS.
	MaxDims = 4
	// MaxAlignment bounds general.alignment: llama.cpp only asks for a power of two, but
	// padding every tensor to gigabytes would make a tiny file describe (and a copy of it
	// write) gigabytes of nothing.
	MaxAlignment = 1 << 20
	// maxNesting bounds arrays of arrays so a hostile file cannot recurse deeply.
	maxNesting = 8
	// Smallest encodings, used to check counts before allocating: a KV is a key length, a
	// type and a one-byte value; a tensor info is a name length, n_dims, one dimension, a
	// type and an offset.
	minKVSize     = 8 + 4 + 1
	minTensorSize = 8 + 4 + 8 + 4 + 8
	// headerSize is magic, version, n_tensors and n_kv.
	headerSize = 4 + 4 + 8 + 8
)

// reader decodes little-endian fields from b, checking every length against what is left.
type reader struct {
	b   []byte
	off int
}

func (r *reader) left() int { return len(r.b) - r.off }

// need fails unless n more bytes are available; n is unsigned so a hostile 64-bit length
// cannot wrap to a small or negative int.
func (r *reader) need(n uint64, what string) error {
	if n > uint64(r.left()) {
		return fmt.Errorf("truncated at byte %d: %s needs %d bytes, %d left", r.off, what, n, r.left())
	}
	return nil
}

func (r *reader) u32(what string) (uint32, error) {
	if err := r.need(4, what); err != nil {
		return 0, err
	}
	v := binary.LittleEndian.Uint32(r.b[r.off:])
	r.off += 4
	return v, nil
}

func (r *reader) u64(what string) (uint64, error) {
	if err := r.need(8, what); err != nil {
		return 0, err
	}
	v := binary.LittleEndian.Uint64(r.b[r.off:])
	r.off += 8
	return v, nil
}

// str reads a length-prefixed string of at most max bytes, copied out of b (which may be an
// mmap that is unmapped later).
func (r *reader) str(what string, max uint64) (string, error) {
	n, err := r.u64(what + " length")
	if err != nil {
		return "", err
	}
	if n > max {
		return "", fmt.Errorf("%s length %d is over the limit of %d bytes", what, n, max)
	}
	if err := r.need(n, what); err != nil {
		return "", err
	}
	s := string(r.b[r.off : r.off+int(n)])
	r.off += int(n)
	return s, nil
}

// countFits checks that n elements of at least minSize bytes each fit in what is left.
func (r *reader) countFits(n uint64, minSize int, what string) error {
	if n > uint64(r.left()/minSize) {
		return fmt.Errorf("%s count %d cannot fit in the %d bytes left at byte %d", what, n, r.left(), r.off)
	}
	return nil
}

// Parse reads a GGUF file held in memory. Tensor data is not copied: Data returns slices of b.
// Every count, length, shape and offset is checked against len(b) before it is used.
func Parse(b []byte) (*File, error) {
	f, err := parse(b)
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	return f, nil
}

func parse(b []byte) (*File, error) {
	r := &reader{b: b}
	f := &File{data: b, Alignment: DefaultAlignment}
	nTensors, nKV, err := parseHeader(r, f)
	if err != nil {
		return nil, err
	}
	if err := parseKVs(r, f, nKV); err != nil {
		return nil, err
	}
	if err := f.setAlignment(); err != nil {
		return nil, err
	}
	if err := parseTensorInfos(r, f, nTensors); err != nil {
		return nil, err
	}
	f.DataOffset = alignUp(int64(r.off), int64(f.Alignment))
	return f, f.checkTensorData()
}

func parseHeader(r *reader, f *File) (nTensors, nKV uint64, err error) {
	if len(r.b) < 4 {
		return 0, 0, fmt.Errorf("not a GGUF file: only %d bytes", len(r.b))
	}
	if string(r.b[:4]) != "GGUF" {
		return 0, 0, fmt.Errorf("not a GGUF file: magic %q, want \"GGUF\"", r.b[:4])
	}
	r.off = 4
	if f.Version, err = r.u32("version"); err != nil {
		return 0, 0, err
	}
	if err := checkVersion(f.Version); err != nil {
		return 0, 0, err
	}
	if nTensors, err = r.u64("tensor count"); err != nil {
		return 0, 0, err
	}
	if nKV, err = r.u64("metadata count"); err != nil {
		return 0, 0, err
	}
	if err := r.countFits(nKV, minKVSize, "metadata"); err != nil {
		return 0, 0, err
	}
	if err := r.countFits(nTensors, minTensorSize, "tensor"); err != nil {
		return 0, 0, err
	}
	// Each fits alone, so this sum cannot overflow; both sections must fit together.
	if nKV*minKVSize+nTensors*minTensorSize > uint64(r.left()) {
		return 0, 0, fmt.Errorf("%d metadata entries and %d tensors cannot fit in the %d bytes left", nKV, nTensors, r.left())
	}
	return nTensors, nKV, nil
}

func checkVersion(v uint32) error {
	switch {
	case v == 2 || v == 3:
		return nil
	case v == 1:
		return fmt.Errorf("GGUF version 1 is not supported (it used 32-bit counts); re-convert the model with a current llama.cpp")
	case bits.ReverseBytes32(v) >= 1 && bits.ReverseBytes32(v) <= 3:
		return fmt.Errorf("file is big-endian (version %d byte-swapped); only little-endian GGUF is supported", bits.ReverseBytes32(v))
	}
	return fmt.Errorf("unsupported GGUF version %d (want 2 or 3)", v)
}

func parseKVs(r *reader, f *File, n uint64) error {
	f.KV = make([]KV, 0, min(n, 1024)) // grow as read: the count alone never sizes an allocation
	f.kvIndex = make(map[string]int, min(n, 1024))
	for i := uint64(0); i < n; i++ {
		key, err := r.str("key", uint64(r.left()))
		if err != nil {
			return fmt.Errorf("metadata entry %d: %w", i, err)
		}
		if _, dup := f.kvIndex[key]; dup {
			return fmt.Errorf("duplicate key %q", key)
		}
		v, err := readTypedValue(r, 0)
		if err != nil {
			return fmt.Errorf("key %q: %w", key, err)
		}
		f.kvIndex[key] = len(f.KV)
		f.KV = append(f.KV, KV{Key: key, Value: v})
	}
	return nil
}

// readTypedValue reads a type tag and the value that follows it.
func readTypedValue(r *reader, depth int) (Value, error) {
	t, err := r.u32("value type")
	if err != nil {
		return Value{}, err
	}
	if ValueType(t) == TypeArray {
		return readArray(r, depth)
	}
	return readScalar(r, ValueType(t))
}

func readScalar(r *reader, t ValueType) (Value, error) {
	if t == TypeString {
		s, err := r.str("string", uint64(r.left()))
		return Value{typ: TypeString, str: s}, err
	}
	size := t.fixedSize()
	if size == 0 {
		return Value{}, fmt.Errorf("invalid value type %d", uint32(t))
	}
	if err := r.need(uint64(size), t.String()); err != nil {
		return Value{}, err
	}
	v := Value{typ: t, bits: loadScalar(r.b[r.off:], t)}
	r.off += size
	if t == TypeBool && v.bits > 1 {
		return Value{}, fmt.Errorf("invalid bool byte %d", v.bits)
	}
	return v, nil
}

// loadScalar returns the raw bits of a fixed-size scalar, sign-extending signed integers.
func loadScalar(b []byte, t ValueType) uint64 {
	switch t {
	case TypeUint8, TypeBool:
		return uint64(b[0])
	case TypeInt8:
		return uint64(int64(int8(b[0])))
	case TypeUint16:
		return uint64(binary.LittleEndian.Uint16(b))
	case TypeInt16:
		return uint64(int64(int16(binary.LittleEndian.Uint16(b))))
	case TypeUint32, TypeFloat32:
		return uint64(binary.LittleEndian.Uint32(b))
	case TypeInt32:
		return uint64(int64(int32(binary.LittleEndian.Uint32(b))))
	}
	return binary.LittleEndian.Uint64(b)
}

func readArray(r *reader, depth int) (Value, error) {
	if depth >= maxNesting {
		return Value{}, fmt.Errorf("arrays nested more than %d deep", maxNesting)
	}
	et, err := r.u32("array element type")
	if err != nil {
		return Value{}, err
	}
	elem := ValueType(et)
	if !elem.valid() {
		return Value{}, fmt.Errorf("array of invalid type %d", et)
	}
	n, err := r.u64("array length")
	if err != nil {
		return Value{}, err
	}
	if err := r.countFits(n, elem.minSize(), "array of "+elem.String()); err != nil {
		return Value{}, err
	}
	v := Value{typ: TypeArray, elem: elem}
	switch elem {
	case TypeString:
		v.arr, err = readStrings(r, int(n))
		if err != nil {
			return Value{}, err
		}
	case TypeArray:
		v.arr, err = readArrays(r, int(n), depth)
	default:
		v.arr, err = readNumbers(r, elem, int(n))
	}
	return v, err
}

// readStrings checks the lengths of a run of strings and copies the run, as it is stored, into
// one Go string: one allocation of the file's own bytes, whatever the count.
func readStrings(r *reader, n int) (packedStrings, error) {
	start := r.off
	for i := 0; i < n; i++ {
		l, err := r.u64("string length")
		if err != nil {
			return packedStrings{}, fmt.Errorf("element %d: %w", i, err)
		}
		if err := r.need(l, "string"); err != nil {
			return packedStrings{}, fmt.Errorf("element %d: %w", i, err)
		}
		r.off += int(l)
	}
	return packedStrings{n: n, raw: string(r.b[start:r.off])}, nil
}

func readArrays(r *reader, n int, depth int) ([]Value, error) {
	out := make([]Value, n)
	for i := range out {
		v, err := readArray(r, depth+1)
		if err != nil {
			return nil, fmt.Errorf("element %d: %w", i, err)
		}
		out[i] = v
	}
	return out, nil
}

// readNumbers decodes n fixed-size elements; the caller has checked they fit.
func readNumbers(r *reader, t ValueType, n int) (any, error) {
	size := n * t.fixedSize()
	b := r.b[r.off : r.off+size]
	var dst any
	switch t {
	case TypeUint8:
		dst = make([]uint8, n)
	case TypeInt8:
		dst = make([]int8, n)
	case TypeUint16:
		dst = make([]uint16, n)
	case TypeInt16:
		dst = make([]int16, n)
	case TypeUint32:
		dst = make([]uint32, n)
	case TypeInt32:
		dst = make([]int32, n)
	case TypeFloat32:
		dst = make([]float32, n)
	case TypeUint64:
		dst = make([]uint64, n)
	case TypeInt64:
		dst = make([]int64, n)
	case TypeFloat64:
		dst = make([]float64, n)
	case TypeBool:
		bs, err := readBools(b)
		r.off += size
		return bs, err
	}
	if _, err := binary.Decode(b, binary.LittleEndian, dst); err != nil {
		return nil, err
	}
	r.off += size
	return dst, nil
}

func readBools(b []byte) ([]bool, error) {
	out := make([]bool, len(b))
	for i, c := range b {
		if c > 1 {
			return nil, fmt.Errorf("element %d: invalid bool byte %d", i, c)
		}
		out[i] = c == 1
	}
	return out, nil
}

// setAlignment applies general.alignment, which must be a u32 power of two.
func (f *File) setAlignment() error {
	v, ok := f.Get(KeyAlignment)
	if !ok {
		return nil
	}
	if v.Type() != TypeUint32 {
		return fmt.Errorf("%s is %s, must be uint32", KeyAlignment, v.Type())
	}
	a := v.bits
	if a == 0 || a&(a-1) != 0 || a > MaxAlignment {
		return fmt.Errorf("%s is %d, must be a power of two of at most %d", KeyAlignment, a, MaxAlignment)
	}
	f.Alignment = int(a)
	return nil
}

func parseTensorInfos(r *reader, f *File, n uint64) error {
	f.Tensors = make([]TensorInfo, 0, min(n, 1024))
	f.tensorIndex = make(map[string]int, min(n, 1024))
	for i := uint64(0); i < n; i++ {
		ti, err := readTensorInfo(r, f.Alignment)
		if err != nil {
			if ti.Name != "" {
				return fmt.Errorf("tensor %q: %w", ti.Name, err)
			}
			return fmt.Errorf("tensor %d: %w", i, err)
		}
		if _, dup := f.tensorIndex[ti.Name]; dup {
			return fmt.Errorf("duplicate tensor name %q", ti.Name)
		}
		f.tensorIndex[ti.Name] = len(f.Tensors)
		f.Tensors = append(f.Tensors, ti)
	}
	return nil
}

// readTensorInfo reads one tensor's name, shape, type and offset and computes its size. On
// error the returned info carries the name when it was read, for the message.
func readTensorInfo(r *reader, alignment int) (TensorInfo, error) {
	var ti TensorInfo
	var err error
	if ti.Name, err = r.str("name", MaxTensorName); err != nil {
		return ti, err
	}
	if ti.Dims, err = readDims(r); err != nil {
		return ti, err
	}
	t, err := r.u32("type")
	if err != nil {
		return ti, err
	}
	ti.Type = quant.Type(t)
	if ti.Size, err = tensorSize(ti.Type, ti.Dims); err != nil {
		return ti, err
	}
	off, err := r.u64("offset")
	if err != nil {
		return ti, err
	}
	if off > math.MaxInt64 {
		return ti, fmt.Errorf("data offset %d is too large", off)
	}
	if off%uint64(alignment) != 0 {
		return ti, fmt.Errorf("data offset %d is not a multiple of the alignment %d", off, alignment)
	}
	ti.Offset = int64(off)
	return ti, nil
}

func readDims(r *reader) ([]int64, error) {
	nd, err := r.u32("dimension count")
	if err != nil {
		return nil, err
	}
	if nd == 0 || nd > MaxDims {
		return nil, fmt.Errorf("has %d dimensions, want 1 to %d", nd, MaxDims)
	}
	dims := make([]int64, nd)
	for j := range dims {
		d, err := r.u64("dimension")
		if err != nil {
			return nil, err
		}
		if d == 0 || d > math.MaxInt64 {
			return nil, fmt.Errorf("dimension %d is %d, want 1 to 2^63-1", j, int64(d))
		}
		dims[j] = int64(d)
	}
	return dims, nil
}

// tensorSize is the byte size of a tensor, with every product checked for overflow.
func tensorSize(t quant.Type, dims []int64) (int64, error) {
	if !t.Known() {
		return 0, fmt.Errorf("unknown tensor type %d", uint32(t))
	}
	if bs := int64(t.BlockSize()); dims[0]%bs != 0 {
		return 0, fmt.Errorf("%d elements per row is not a multiple of the %v block size %d", dims[0], t, bs)
	}
	if _, err := elements(dims); err != nil {
		return 0, err
	}
	size, err := t.RowSize(dims[0])
	if err != nil {
		return 0, err
	}
	for _, d := range dims[1:] {
		hi, lo := bits.Mul64(uint64(size), uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return 0, fmt.Errorf("shape %v of %v overflows a byte size", dims, t)
		}
		size = int64(lo)
	}
	return size, nil
}

// elements is the product of dims, failing when it overflows int64.
func elements(dims []int64) (int64, error) {
	n := int64(1)
	for _, d := range dims {
		hi, lo := bits.Mul64(uint64(n), uint64(d))
		if hi != 0 || lo > math.MaxInt64 {
			return 0, fmt.Errorf("shape %v has more than 2^63-1 elements", dims)
		}
		n = int64(lo)
	}
	return n, nil
}

// checkTensorData checks the layout llama.cpp's gguf_init_from_file requires: the tensors are
// stored in the order they are described, each at exactly the running sum of the sizes before
// it, each padded to the alignment (so tensors never overlap and a copy of the file is no
// larger than its data), and every tensor's bytes lie inside the file.
func (f *File) checkTensorData() error {
	size := int64(len(f.data))
	var want int64
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if ti.Offset != want {
			return fmt.Errorf("tensor %q has data offset %d, want %d (tensors must be stored in order, each padded to the alignment %d, as llama.cpp requires)",
				ti.Name, ti.Offset, want, f.Alignment)
		}
		want = saturatingAdd(want, alignUp(min(ti.Size, math.MaxInt64-int64(f.Alignment)), int64(f.Alignment)))
		if f.DataOffset > size || ti.Offset > size-f.DataOffset || ti.Size > size-f.DataOffset-ti.Offset {
			start := saturatingAdd(f.DataOffset, ti.Offset)
			return fmt.Errorf("tensor %q: data [%d, %d) ends past the end of the file (%d bytes)",
				ti.Name, start, saturatingAdd(start, ti.Size), size)
		}
	}
	return nil
}

func saturatingAdd(a, b int64) int64 {
	if a > math.MaxInt64-b {
		return math.MaxInt64
	}
	return a + b
}

func alignUp(n, a int64) int64 { return (n + a - 1) &^ (a - 1) }
