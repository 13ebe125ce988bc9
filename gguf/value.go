package gguf

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// ValueType is the type tag of a GGUF metadata value (gguf_type in ggml).
type ValueType uint32

// The GGUF metadata types, numbered as in the file format.
const (
	TypeUint8   ValueType = 0
	TypeInt8    ValueType = 1
	TypeUint16  ValueType = 2
	TypeInt16   ValueType = 3
	TypeUint32  ValueType = 4
	TypeInt32   ValueType = 5
	TypeFloat32 ValueType = 6
	TypeBool    ValueType = 7
	TypeString  ValueType = 8
	TypeArray   ValueType = 9
	TypeUint64  ValueType = 10
	TypeInt64   ValueType = 11
	TypeFloat64 ValueType = 12
)

var typeNames = [...]string{"uint8", "int8", "uint16", "int16", "uint32", "int32", "float32", "bool", "string", "array", "uint64", "int64", "float64"}

// String is the type's name as gguf-py spells it, e.g. "uint32".
func (t ValueType) String() string {
	if int(t) < len(typeNames) {
		return typeNames[t]
	}
	return "type(" + strconv.FormatUint(uint64(t), 10) + ")"
}

// fixedSize is the encoded size of a scalar of type t, 0 for strings, arrays and unknown types.
func (t ValueType) fixedSize() int {
	switch t {
	case TypeUint8, TypeInt8, TypeBool:
		return 1
	case TypeUint16, TypeInt16:
		return 2
	case TypeUint32, TypeInt32, TypeFloat32:
		return 4
	case TypeUint64, TypeInt64, TypeFloat64:
		return 8
	}
	return 0
}

// minSize is the fewest bytes an encoded value of type t can take (a string is at least its
// 8-byte length, an array its 4-byte element type and 8-byte count); 0 for unknown types.
// Counts read from a file are checked against it before anything is allocated.
func (t ValueType) minSize() int {
	switch t {
	case TypeString:
		return 8
	case TypeArray:
		return 12
	}
	return t.fixedSize()
}

func (t ValueType) valid() bool { return t.minSize() > 0 }

func (t ValueType) isInt() bool {
	switch t {
	case TypeUint8, TypeInt8, TypeUint16, TypeInt16, TypeUint32, TypeInt32, TypeUint64, TypeInt64:
		return true
	}
	return false
}

func (t ValueType) isSigned() bool {
	return t == TypeInt8 || t == TypeInt16 || t == TypeInt32 || t == TypeInt64
}

// Value is one metadata value: a scalar, a string, or an array of any of them (arrays of arrays
// included). It is immutable: the accessors copy, so a Value can be shared between files and
// writers. The zero Value is the uint8 0.
type Value struct {
	typ  ValueType
	elem ValueType // element type of an array
	// bits holds a scalar exactly as stored: integers widened (signed ones sign-extended),
	// float32 as its 32 raw bits and float64 as its 64, so NaN payloads survive a copy.
	bits uint64
	str  string
	// arr is the array as a typed slice: []uint8 ... []float64, []bool, []string, or []Value
	// for arrays of arrays; a parsed array of strings is a packedStrings.
	arr any
}

// packedStrings is an array of strings as a file stores it, n times a u64 length and the
// bytes, held in one string copied out of the file (whose lengths the reader checked). Parsed
// string arrays stay packed, so a vocabulary costs its bytes in the file and no more until a
// caller asks for the strings: a header that declares ten million empty tokens costs 80 MB,
// not the 160 MB of their string headers on top.
type packedStrings struct {
	n   int
	raw string
}

// each calls fn with every element in order until fn returns false.
func (p packedStrings) each(fn func(i int, s string) bool) {
	off := 0
	for i := 0; i < p.n; i++ {
		l := int(le64(p.raw[off : off+8]))
		s := p.raw[off+8 : off+8+l]
		off += 8 + l
		if !fn(i, s) {
			return
		}
	}
}

func le64(s string) uint64 {
	_ = s[7]
	return uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
		uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
}

// strings returns the elements (substrings of raw: no copy of the bytes).
func (p packedStrings) strings() []string {
	out := make([]string, p.n)
	p.each(func(i int, s string) bool { out[i] = s; return true })
	return out
}

// Type is the value's type; TypeArray for arrays.
func (v Value) Type() ValueType { return v.typ }

// ElemType is an array's element type (TypeArray for arrays of arrays); for a scalar it is the
// scalar's own type.
func (v Value) ElemType() ValueType {
	if v.typ == TypeArray {
		return v.elem
	}
	return v.typ
}

// Len is an array's length, 0 for a scalar.
func (v Value) Len() int {
	switch a := v.arr.(type) {
	case []uint8:
		return len(a)
	case []int8:
		return len(a)
	case []uint16:
		return len(a)
	case []int16:
		return len(a)
	case []uint32:
		return len(a)
	case []int32:
		return len(a)
	case []float32:
		return len(a)
	case []bool:
		return len(a)
	case []string:
		return len(a)
	case packedStrings:
		return a.n
	case []uint64:
		return len(a)
	case []int64:
		return len(a)
	case []float64:
		return len(a)
	case []Value:
		return len(a)
	}
	return 0
}

func (v Value) typeError(want string) error {
	got := v.typ.String()
	if v.typ == TypeArray {
		got = "array of " + v.elem.String()
	}
	return fmt.Errorf("value is %s, not %s", got, want)
}

// AsUint returns an integer value of any integer type that is not negative.
func (v Value) AsUint() (uint64, error) {
	if !v.typ.isInt() {
		return 0, v.typeError("an integer")
	}
	if v.typ.isSigned() && int64(v.bits) < 0 {
		return 0, fmt.Errorf("value %d is negative", int64(v.bits))
	}
	return v.bits, nil
}

// AsInt returns an integer value of any integer type that fits in int64.
func (v Value) AsInt() (int64, error) {
	if !v.typ.isInt() {
		return 0, v.typeError("an integer")
	}
	if v.typ == TypeUint64 && v.bits > math.MaxInt64 {
		return 0, fmt.Errorf("value %d overflows int64", v.bits)
	}
	return int64(v.bits), nil
}

// AsFloat returns a float32, float64 or integer value as float64.
func (v Value) AsFloat() (float64, error) {
	switch {
	case v.typ == TypeFloat32:
		return float64(math.Float32frombits(uint32(v.bits))), nil
	case v.typ == TypeFloat64:
		return math.Float64frombits(v.bits), nil
	case v.typ == TypeUint64:
		return float64(v.bits), nil
	case v.typ.isInt():
		return float64(int64(v.bits)), nil
	}
	return 0, v.typeError("a number")
}

// AsBool returns a bool value.
func (v Value) AsBool() (bool, error) {
	if v.typ != TypeBool {
		return false, v.typeError("bool")
	}
	return v.bits != 0, nil
}

// AsString returns a string value.
func (v Value) AsString() (string, error) {
	if v.typ != TypeString {
		return "", v.typeError("string")
	}
	return v.str, nil
}

// AsStrings returns a copy of an array of strings.
func (v Value) AsStrings() ([]string, error) {
	if v.typ != TypeArray {
		return nil, v.typeError("an array of string")
	}
	switch a := v.arr.(type) {
	case []string:
		return slices.Clone(a), nil
	case packedStrings:
		return a.strings(), nil
	}
	return nil, v.typeError("an array of string")
}

// AsInt32s returns an array of any integer type as int32s, failing on an element that does
// not fit.
func (v Value) AsInt32s() ([]int32, error) {
	if v.typ != TypeArray || !v.elem.isInt() {
		return nil, v.typeError("an array of integers")
	}
	return convertInts(v.arr)
}

// AsFloat32s returns an array of floats or integers as float32s (float64 and large integers
// are rounded).
func (v Value) AsFloat32s() ([]float32, error) {
	if v.typ != TypeArray || (!v.elem.isInt() && v.elem != TypeFloat32 && v.elem != TypeFloat64) {
		return nil, v.typeError("an array of numbers")
	}
	switch a := v.arr.(type) {
	case []float32:
		return slices.Clone(a), nil
	case []float64:
		return convertSlice[float64, float32](a), nil
	}
	i64, err := int64s(v.arr)
	if err != nil {
		return nil, err
	}
	return convertSlice[int64, float32](i64), nil
}

// Array returns the array as the typed slice it is stored in ([]uint8 ... []float64, []bool,
// []string, or []Value for arrays of arrays), or nil for a scalar. The slice is shared: do not
// modify it (a parsed array of strings is decoded afresh by each call).
func (v Value) Array() any {
	if v.typ != TypeArray {
		return nil
	}
	if p, ok := v.arr.(packedStrings); ok {
		return p.strings()
	}
	return v.arr
}

// Interface returns the value as a Go value of the matching type (uint8 ... float64, bool,
// string), or for an array the slice Array returns.
func (v Value) Interface() any {
	switch v.typ {
	case TypeUint8:
		return uint8(v.bits)
	case TypeInt8:
		return int8(v.bits)
	case TypeUint16:
		return uint16(v.bits)
	case TypeInt16:
		return int16(v.bits)
	case TypeUint32:
		return uint32(v.bits)
	case TypeInt32:
		return int32(v.bits)
	case TypeFloat32:
		return math.Float32frombits(uint32(v.bits))
	case TypeBool:
		return v.bits != 0
	case TypeString:
		return v.str
	case TypeUint64:
		return v.bits
	case TypeInt64:
		return int64(v.bits)
	case TypeFloat64:
		return math.Float64frombits(v.bits)
	}
	return v.Array()
}

// String renders the value for people: strings quoted, long arrays abbreviated.
func (v Value) String() string {
	if v.typ != TypeArray {
		if v.typ == TypeString {
			return strconv.Quote(v.str)
		}
		return fmt.Sprint(v.Interface())
	}
	const show = 8
	var b strings.Builder
	n := v.Len()
	fmt.Fprintf(&b, "[%s x %d:", v.elem, n)
	for i := 0; i < n && i < show; i++ {
		b.WriteByte(' ')
		b.WriteString(v.Index(i).String())
	}
	if n > show {
		b.WriteString(" ...")
	}
	b.WriteByte(']')
	return b.String()
}

// Index returns element i of an array as a Value; it panics when i is out of range, like
// indexing a slice. For a parsed array of strings it costs O(i): use AsStrings to walk one.
func (v Value) Index(i int) Value {
	e := Value{typ: v.elem}
	switch a := v.arr.(type) {
	case packedStrings:
		if i < 0 || i >= a.n {
			panic(fmt.Sprintf("gguf: index %d out of range [0:%d]", i, a.n))
		}
		a.each(func(j int, s string) bool { e.str = s; return j < i })
	case []uint8:
		e.bits = uint64(a[i])
	case []int8:
		e.bits = uint64(int64(a[i]))
	case []uint16:
		e.bits = uint64(a[i])
	case []int16:
		e.bits = uint64(int64(a[i]))
	case []uint32:
		e.bits = uint64(a[i])
	case []int32:
		e.bits = uint64(int64(a[i]))
	case []float32:
		e.bits = uint64(math.Float32bits(a[i]))
	case []bool:
		if a[i] {
			e.bits = 1
		}
	case []string:
		e.str = a[i]
	case []uint64:
		e.bits = a[i]
	case []int64:
		e.bits = uint64(a[i])
	case []float64:
		e.bits = math.Float64bits(a[i])
	case []Value:
		return a[i]
	default:
		panic("gguf: Index of a scalar value")
	}
	return e
}

// ValueOf makes a Value from a Go value: uint8, int8, uint16, int16, uint32, int32, float32,
// bool, string, uint64, int64, float64, a slice of one of those, a Value, or a []Value of
// arrays (an array of arrays). Slices are copied. Plain int and uint are refused because the
// file needs an explicit width.
func ValueOf(x any) (Value, error) {
	if v, ok := scalarOf(x); ok {
		return v, nil
	}
	if v, ok := sliceOf(x); ok {
		return v, nil
	}
	switch x := x.(type) {
	case Value:
		if !x.typ.valid() {
			return Value{}, fmt.Errorf("invalid value type %d", uint32(x.typ))
		}
		return x, nil
	case []Value:
		for i, e := range x {
			if e.typ != TypeArray {
				return Value{}, fmt.Errorf("element %d of an array of arrays is %s, not an array", i, e.typ)
			}
		}
		return arrayOf(TypeArray, x), nil
	}
	return Value{}, fmt.Errorf("unsupported metadata type %T", x)
}

func scalarOf(x any) (Value, bool) {
	switch x := x.(type) {
	case uint8:
		return Value{typ: TypeUint8, bits: uint64(x)}, true
	case int8:
		return Value{typ: TypeInt8, bits: uint64(int64(x))}, true
	case uint16:
		return Value{typ: TypeUint16, bits: uint64(x)}, true
	case int16:
		return Value{typ: TypeInt16, bits: uint64(int64(x))}, true
	case uint32:
		return Value{typ: TypeUint32, bits: uint64(x)}, true
	case int32:
		return Value{typ: TypeInt32, bits: uint64(int64(x))}, true
	case float32:
		return Value{typ: TypeFloat32, bits: uint64(math.Float32bits(x))}, true
	case bool:
		v := Value{typ: TypeBool}
		if x {
			v.bits = 1
		}
		return v, true
	case string:
		return Value{typ: TypeString, str: x}, true
	case uint64:
		return Value{typ: TypeUint64, bits: x}, true
	case int64:
		return Value{typ: TypeInt64, bits: uint64(x)}, true
	case float64:
		return Value{typ: TypeFloat64, bits: math.Float64bits(x)}, true
	}
	return Value{}, false
}

func sliceOf(x any) (Value, bool) {
	switch x := x.(type) {
	case []uint8:
		return arrayOf(TypeUint8, x), true
	case []int8:
		return arrayOf(TypeInt8, x), true
	case []uint16:
		return arrayOf(TypeUint16, x), true
	case []int16:
		return arrayOf(TypeInt16, x), true
	case []uint32:
		return arrayOf(TypeUint32, x), true
	case []int32:
		return arrayOf(TypeInt32, x), true
	case []float32:
		return arrayOf(TypeFloat32, x), true
	case []bool:
		return arrayOf(TypeBool, x), true
	case []string:
		return arrayOf(TypeString, x), true
	case []uint64:
		return arrayOf(TypeUint64, x), true
	case []int64:
		return arrayOf(TypeInt64, x), true
	case []float64:
		return arrayOf(TypeFloat64, x), true
	}
	return Value{}, false
}

// arrayOf copies s so later changes by the caller do not reach the Value. A nil slice becomes
// an empty one so Array never returns a typed nil for an array.
func arrayOf[T any](elem ValueType, s []T) Value {
	return Value{typ: TypeArray, elem: elem, arr: append(make([]T, 0, len(s)), s...)}
}

type integer interface {
	~uint8 | ~int8 | ~uint16 | ~int16 | ~uint32 | ~int32 | ~uint64 | ~int64
}

func convertSlice[From integer | ~float32 | ~float64, To integer | ~float32 | ~float64](a []From) []To {
	out := make([]To, len(a))
	for i, x := range a {
		out[i] = To(x)
	}
	return out
}

// int64s widens an integer array to int64, failing on uint64 elements above MaxInt64.
func int64s(arr any) ([]int64, error) {
	switch a := arr.(type) {
	case []uint8:
		return convertSlice[uint8, int64](a), nil
	case []int8:
		return convertSlice[int8, int64](a), nil
	case []uint16:
		return convertSlice[uint16, int64](a), nil
	case []int16:
		return convertSlice[int16, int64](a), nil
	case []uint32:
		return convertSlice[uint32, int64](a), nil
	case []int32:
		return convertSlice[int32, int64](a), nil
	case []int64:
		return slices.Clone(a), nil
	case []uint64:
		for i, x := range a {
			if x > math.MaxInt64 {
				return nil, fmt.Errorf("element %d (%d) overflows int64", i, x)
			}
		}
		return convertSlice[uint64, int64](a), nil
	}
	return nil, fmt.Errorf("not an integer array")
}

func convertInts(arr any) ([]int32, error) {
	if a, ok := arr.([]int32); ok {
		return slices.Clone(a), nil
	}
	wide, err := int64s(arr)
	if err != nil {
		return nil, err
	}
	for i, x := range wide {
		if x < math.MinInt32 || x > math.MaxInt32 {
			return nil, fmt.Errorf("element %d (%d) does not fit in int32", i, x)
		}
	}
	return convertSlice[int64, int32](wide), nil
}
