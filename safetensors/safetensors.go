// Package safetensors reads Hugging Face safetensors checkpoints: single files and sharded
// checkpoints with a model.safetensors.index.json. Files are memory-mapped (never copied) and
// treated as untrusted input: the header's length, JSON, every tensor's dtype, shape and byte
// range are validated before any tensor is handed out, so a hostile file gets an error, never a
// panic or an allocation out of proportion to its size.
//
// The format: an 8-byte little-endian header length N, N bytes of JSON mapping tensor names to
// {"dtype", "shape", "data_offsets": [begin, end]} (offsets relative to the end of the header)
// plus an optional "__metadata__" map of strings, then the tensor bytes, which must be covered
// exactly, without holes or overlaps, as the reference implementation requires.
package safetensors

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/gorun-dev/gorun/internal/mmap"
)

// MaxHeader is the longest JSON header accepted: the reference implementation's limit (100 MB).
const MaxHeader = 100_000_000

// MaxDims is the most dimensions a tensor may have.
const MaxDims = 8

// DType is a safetensors element type, as spelled in the header ("F32", "BF16", ...).
type DType string

// The element types of the format. Only F32, F16 and BF16 can be read as floats (Float32s);
// the others are validated and exposed as bytes.
const (
	F64    DType = "F64"
	F32    DType = "F32"
	F16    DType = "F16"
	BF16   DType = "BF16"
	I64    DType = "I64"
	I32    DType = "I32"
	I16    DType = "I16"
	I8     DType = "I8"
	U64    DType = "U64"
	U32    DType = "U32"
	U16    DType = "U16"
	U8     DType = "U8"
	Bool   DType = "BOOL"
	F8E4M3 DType = "F8_E4M3"
	F8E5M2 DType = "F8_E5M2"
)

// Size returns the bytes per element, or 0 for an unknown type.
func (d DType) Size() int {
	switch d {
	case F64, I64, U64:
		return 8
	case F32, I32, U32:
		return 4
	case F16, BF16, I16, U16:
		return 2
	case I8, U8, Bool, F8E4M3, F8E5M2:
		return 1
	}
	return 0
}

// Float reports whether the type is one Float32s converts (F32, F16, BF16).
func (d DType) Float() bool { return d == F32 || d == F16 || d == BF16 }

// Tensor is one tensor of a file. Data aliases the file's mapping: it is valid until the file
// is closed and must not be written.
type Tensor struct {
	Name  string
	DType DType
	Shape []int64 // outermost dimension first, as PyTorch and numpy list them
	Data  []byte
	File  string // the file holding it
	begin int64  // range in the data section
	end   int64
}

// Elements returns the number of elements (1 for a scalar).
func (t *Tensor) Elements() int64 {
	n := int64(1)
	for _, d := range t.Shape {
		n *= d
	}
	return n
}

// File is one parsed safetensors file.
type File struct {
	Path     string
	Metadata map[string]string
	Tensors  []Tensor // sorted by name, as safetensors' keys() lists them
	data     []byte
	mapped   bool
	index    map[string]int
}

// Open memory-maps path read-only and validates it. Close it when done.
func Open(path string) (*File, error) {
	data, err := mmap.Map(path, checkSize)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	f, err := parse(data, path)
	if err != nil {
		_ = mmap.Unmap(data)
		return nil, fmt.Errorf("safetensors: %s: %w", path, err)
	}
	f.mapped = true
	return f, nil
}

// Parse validates a whole file held in memory (the tensors alias b).
func Parse(b []byte) (*File, error) {
	f, err := parse(b, "")
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	return f, nil
}

// Close unmaps the file; safe to call twice.
func (f *File) Close() error {
	if f == nil || !f.mapped || f.data == nil {
		return nil
	}
	err := mmap.Unmap(f.data)
	f.data, f.Tensors = nil, nil
	return err
}

// Tensor returns the named tensor, or nil.
func (f *File) Tensor(name string) *Tensor {
	if i, ok := f.index[name]; ok {
		return &f.Tensors[i]
	}
	return nil
}

// checkSize refuses a file too short to hold the 8-byte header length before it is mapped.
func checkSize(size int64) error {
	if size < 8 {
		return fmt.Errorf("%d bytes is too short for a safetensors file (at least the 8-byte header length)", size)
	}
	return nil
}

type entry struct {
	DType       *string  `json:"dtype"`
	Shape       *[]int64 `json:"shape"`
	DataOffsets *[]int64 `json:"data_offsets"`
}

func parse(b []byte, path string) (*File, error) {
	if len(b) < 8 {
		return nil, fmt.Errorf("%d bytes is too short for a safetensors file (at least the 8-byte header length)", len(b))
	}
	n := binary.LittleEndian.Uint64(b)
	switch {
	case n > MaxHeader:
		return nil, fmt.Errorf("header length %d is over the limit of %d bytes (not a safetensors file?)", n, MaxHeader)
	case n > uint64(len(b)-8):
		return nil, fmt.Errorf("header length %d runs past the end of the %d-byte file (truncated or not a safetensors file)", n, len(b))
	case n < 2:
		return nil, fmt.Errorf("header length %d is too short for a JSON object", n)
	}
	hdr := b[8 : 8+n]
	if hdr[0] != '{' {
		return nil, errors.New("header is not a JSON object (not a safetensors file?)")
	}
	if !utf8.Valid(hdr) {
		return nil, errors.New("header is not valid UTF-8")
	}
	data := b[8+n:]
	f := &File{Path: path, data: b, index: map[string]int{}}
	dec := json.NewDecoder(bytes.NewReader(hdr))
	dec.UseNumber()
	if _, err := dec.Token(); err != nil { // '{'
		return nil, fmt.Errorf("header: %w", err)
	}
	seen := map[string]bool{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, fmt.Errorf("header: %w", err)
		}
		name, _ := tok.(string)
		if seen[name] {
			return nil, fmt.Errorf("header: %q appears twice", name)
		}
		seen[name] = true
		if name == "__metadata__" {
			if err := dec.Decode(&f.Metadata); err != nil {
				return nil, fmt.Errorf("header: __metadata__ must map strings to strings: %w", err)
			}
			continue
		}
		var e entry
		if err := dec.Decode(&e); err != nil {
			return nil, fmt.Errorf("header: tensor %q: %w", name, err)
		}
		t, err := checkEntry(name, e, int64(len(data)))
		if err != nil {
			return nil, fmt.Errorf("header: tensor %q: %w", name, err)
		}
		t.File = path
		f.Tensors = append(f.Tensors, t)
	}
	if _, err := dec.Token(); err != nil { // '}'
		return nil, fmt.Errorf("header: %w", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		// Trailing spaces are allowed (writers pad the header to 8 bytes); anything else is not.
		return nil, errors.New("header: data after the JSON object")
	}
	if err := checkCoverage(f.Tensors, int64(len(data))); err != nil {
		return nil, err
	}
	slices.SortFunc(f.Tensors, func(a, b Tensor) int { return strings.Compare(a.Name, b.Name) })
	for i := range f.Tensors {
		t := &f.Tensors[i]
		t.Data = data[t.begin:t.end:t.end]
		f.index[t.Name] = i
	}
	return f, nil
}

// checkEntry validates one tensor's description (Data is set once the whole layout is checked).
func checkEntry(name string, e entry, dataLen int64) (Tensor, error) {
	t := Tensor{Name: name}
	if name == "" {
		return t, errors.New("empty tensor name")
	}
	if e.DType == nil || e.Shape == nil || e.DataOffsets == nil {
		return t, errors.New(`needs "dtype", "shape" and "data_offsets"`)
	}
	t.DType = DType(*e.DType)
	es := int64(t.DType.Size())
	if es == 0 {
		return t, fmt.Errorf("unknown dtype %q", *e.DType)
	}
	if len(*e.Shape) > MaxDims {
		return t, fmt.Errorf("%d dimensions, at most %d supported", len(*e.Shape), MaxDims)
	}
	t.Shape = slices.Clone(*e.Shape)
	bytesWant := es
	for _, d := range t.Shape {
		if d < 0 {
			return t, fmt.Errorf("negative dimension in shape %v", t.Shape)
		}
		if d != 0 && bytesWant > math.MaxInt64/d {
			return t, fmt.Errorf("shape %v overflows a 64-bit size", t.Shape)
		}
		bytesWant *= d
	}
	off := *e.DataOffsets
	if len(off) != 2 {
		return t, fmt.Errorf("data_offsets has %d values, want [begin, end]", len(off))
	}
	begin, end := off[0], off[1]
	switch {
	case begin < 0 || end < begin:
		return t, fmt.Errorf("data_offsets [%d, %d] are not an increasing range", begin, end)
	case end > dataLen:
		return t, fmt.Errorf("data_offsets [%d, %d] run past the end of the %d bytes of data (truncated file?)", begin, end, dataLen)
	case end-begin != bytesWant:
		return t, fmt.Errorf("%s %v needs %d bytes, data_offsets [%d, %d] hold %d", t.DType, t.Shape, bytesWant, begin, end, end-begin)
	}
	t.begin, t.end = begin, end
	return t, nil
}

// checkCoverage requires the tensors' byte ranges to tile the data section exactly: no overlap
// (two tensors sharing bytes), no hole, nothing after the last tensor.
func checkCoverage(ts []Tensor, dataLen int64) error {
	order := make([]int, len(ts))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		if c := cmpInt(ts[a].begin, ts[b].begin); c != 0 {
			return c
		}
		return cmpInt(ts[a].end, ts[b].end)
	})
	var pos int64
	prev := ""
	for _, i := range order {
		t := &ts[i]
		switch {
		case t.begin < pos:
			return fmt.Errorf("tensor %q (bytes %d to %d) overlaps tensor %q (ending at %d)", t.Name, t.begin, t.end, prev, pos)
		case t.begin > pos:
			return fmt.Errorf("bytes %d to %d of the data belong to no tensor (a hole before %q)", pos, t.begin, t.Name)
		}
		pos, prev = t.end, t.Name
	}
	if pos != dataLen {
		return fmt.Errorf("the tensors end at byte %d of the data, the file has %d more bytes after them", pos, dataLen-pos)
	}
	return nil
}

func cmpInt(a, b int64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}
