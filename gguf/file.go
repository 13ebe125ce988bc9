// Package gguf reads and writes GGUF files, the container llama.cpp stores models in.
//
// A file is a header of metadata key-value pairs and tensor descriptions followed by the tensor
// data, each tensor aligned. Open memory-maps the file read-only, so weights are never copied:
// Data returns slices of the mapping. Every count, length, shape and offset in the header is
// validated against the file size before use, so a truncated or hostile file gives an error,
// never a panic or a huge allocation.
//
// Versions 2 and 3 are read (they share one layout; version 3 also allows big-endian files,
// which are refused); version 3 is written, byte for byte as llama.cpp writes it.
package gguf

import (
	"errors"
	"fmt"

	"github.com/gorun-dev/gorun/internal/mmap"
	"github.com/gorun-dev/gorun/quant"
)

// DefaultAlignment is the data alignment when general.alignment is absent.
const DefaultAlignment = 32

// KeyAlignment is the metadata key that overrides DefaultAlignment (a uint32 power of two).
const KeyAlignment = "general.alignment"

// ErrNotFound is wrapped by the typed getters when a key is absent.
var ErrNotFound = errors.New("key not found")

// KV is one metadata entry.
type KV struct {
	Key   string
	Value Value
}

// TensorInfo describes one tensor of a file.
type TensorInfo struct {
	Name   string
	Type   quant.Type
	Dims   []int64 // ne0 (the contiguous dimension) first
	Offset int64   // of the first byte, relative to the start of the data section
	Size   int64   // bytes
}

// Elements is the number of elements (the product of Dims; validated not to overflow).
func (ti *TensorInfo) Elements() int64 {
	n := int64(1)
	for _, d := range ti.Dims {
		n *= d
	}
	return n
}

// File is a parsed GGUF file.
type File struct {
	Version    uint32
	Alignment  int
	DataOffset int64 // absolute file offset of the data section
	KV         []KV  // in file order
	Tensors    []TensorInfo

	data        []byte // the whole file: a mapping (Open) or the caller's bytes (Parse)
	mapped      bool
	kvIndex     map[string]int
	tensorIndex map[string]int
}

// Open memory-maps path read-only and parses it. The weights are not read until touched.
// Close the file when done; slices from Data become invalid then.
func Open(path string) (*File, error) {
	data, err := mmap.Map(path, nil) // a regular file, opened without blocking; empty refused
	if err != nil {
		return nil, fmt.Errorf("gguf: %w", err)
	}
	f, err := parse(data)
	if err != nil {
		_ = mmap.Unmap(data)
		return nil, fmt.Errorf("gguf: %s: %w", path, err)
	}
	f.mapped = true
	mmap.WillNeed(data)
	return f, nil
}

// Close unmaps a file made by Open. It is safe to call twice; for a file made by Parse it does
// nothing.
func (f *File) Close() error {
	if !f.mapped || f.data == nil {
		return nil
	}
	data := f.data
	f.data = nil
	if err := mmap.Unmap(data); err != nil {
		return fmt.Errorf("gguf: munmap: %w", err)
	}
	return nil
}

// Tensor returns the named tensor's description, or nil when the file has none.
func (f *File) Tensor(name string) *TensorInfo {
	i, ok := f.tensorIndex[name]
	if !ok {
		return nil
	}
	return &f.Tensors[i]
}

// Data returns the bytes of a tensor of this file, exactly ti.Size long, without copying. It
// returns nil for nil, for a description that does not lie inside the file, and after Close.
// The slice is read-only memory for a file made by Open: writing to it faults.
func (f *File) Data(ti *TensorInfo) []byte {
	if ti == nil || ti.Offset < 0 || ti.Size < 0 {
		return nil
	}
	size := int64(len(f.data))
	if f.DataOffset > size || ti.Offset > size-f.DataOffset || ti.Size > size-f.DataOffset-ti.Offset {
		return nil
	}
	start := f.DataOffset + ti.Offset
	end := start + ti.Size
	return f.data[start:end:end]
}

// Has reports whether key is present.
func (f *File) Has(key string) bool {
	_, ok := f.kvIndex[key]
	return ok
}

// Get returns the value of key.
func (f *File) Get(key string) (Value, bool) {
	i, ok := f.kvIndex[key]
	if !ok {
		return Value{}, false
	}
	return f.KV[i].Value, true
}

// lookup runs a typed accessor on key's value and names the key in any error.
func lookup[T any](f *File, key string, as func(Value) (T, error)) (T, error) {
	v, ok := f.Get(key)
	if !ok {
		var zero T
		return zero, fmt.Errorf("gguf: %q: %w", key, ErrNotFound)
	}
	x, err := as(v)
	if err != nil {
		return x, fmt.Errorf("gguf: %q: %w", key, err)
	}
	return x, nil
}

// String returns a string value.
func (f *File) String(key string) (string, error) { return lookup(f, key, Value.AsString) }

// Uint returns a value of any integer type that is not negative.
func (f *File) Uint(key string) (uint64, error) { return lookup(f, key, Value.AsUint) }

// Int returns a value of any integer type that fits in int64.
func (f *File) Int(key string) (int64, error) { return lookup(f, key, Value.AsInt) }

// Float returns a float32, float64 or integer value.
func (f *File) Float(key string) (float64, error) { return lookup(f, key, Value.AsFloat) }

// Bool returns a bool value.
func (f *File) Bool(key string) (bool, error) { return lookup(f, key, Value.AsBool) }

// Strings returns a copy of an array of strings.
func (f *File) Strings(key string) ([]string, error) { return lookup(f, key, Value.AsStrings) }

// Int32s returns an array of any integer type as int32s (a copy), failing when an element does
// not fit.
func (f *File) Int32s(key string) ([]int32, error) { return lookup(f, key, Value.AsInt32s) }

// Float32s returns an array of floats or integers as float32s (a copy).
func (f *File) Float32s(key string) ([]float32, error) { return lookup(f, key, Value.AsFloat32s) }
