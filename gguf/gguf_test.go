package gguf

import (
	"bytes"
	"errors"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/quant"
)

// allKVs is one metadata entry of every type and shape the format has.
func allKVs() []KV {
	must := func(x any) Value {
		v, err := ValueOf(x)
		if err != nil {
			panic(err)
		}
		return v
	}
	return []KV{
		{"t.u8", must(uint8(200))},
		{"t.i8", must(int8(-100))},
		{"t.u16", must(uint16(60000))},
		{"t.i16", must(int16(-30000))},
		{"t.u32", must(uint32(4000000000))},
		{"t.i32", must(int32(-2000000000))},
		{"t.f32", must(float32(1e-5))},
		{"t.bool", must(true)},
		{"t.false", must(false)},
		{"t.str", must("héllo, wörld")},
		{"t.emptystr", must("")},
		{"t.u64", must(uint64(math.MaxUint64))},
		{"t.i64", must(int64(math.MinInt64))},
		{"t.f64", must(math.Pi)},
		{"a.u8", must([]uint8{1, 2, 255})},
		{"a.i8", must([]int8{-1, 2})},
		{"a.u16", must([]uint16{65535})},
		{"a.i16", must([]int16{-32768, 7})},
		{"a.u32", must([]uint32{1, 4000000000})},
		{"a.i32", must([]int32{1, 3, -5})},
		{"a.f32", must([]float32{0.5, -2, float32(math.Inf(1))})},
		{"a.bool", must([]bool{true, false, true})},
		{"a.str", must([]string{"a b", "", "Ġthe", "<|endoftext|>"})},
		{"a.u64", must([]uint64{math.MaxUint64})},
		{"a.i64", must([]int64{-1, math.MaxInt64})},
		{"a.f64", must([]float64{1e300})},
		{"a.empty", must([]int32{})},
		{"a.emptystr", must([]string(nil))},
		{"a.nested", must([]Value{must([]string{"x", "yz"}), must([]uint8{}), must([]Value{must([]float32{1})})})},
	}
}

type testTensor struct {
	name string
	typ  quant.Type
	dims []int64
}

var testTensors = []testTensor{
	{"w.f32", quant.F32, []int64{8, 3}},
	{"w.f16", quant.F16, []int64{17}},
	{"w.q8_0", quant.Q8_0, []int64{64, 2}},
	{"w.q4_K", quant.Q4_K, []int64{256, 2, 1, 3}},
	{"w.bf16", quant.BF16, []int64{4, 1, 2}},
}

// testData is deterministic bytes for tensor i.
func testData(i int, ti *TensorInfo) ([]byte, error) {
	b := make([]byte, ti.Size)
	for j := range b {
		b[j] = byte(i*31 + j*7 + 1)
	}
	return b, nil
}

func newTestWriter(t testing.TB) *Writer {
	t.Helper()
	w := NewWriter()
	for _, kv := range allKVs() {
		if err := w.Set(kv.Key, kv.Value); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range testTensors {
		if err := w.AddTensor(tt.name, tt.typ, tt.dims); err != nil {
			t.Fatal(err)
		}
	}
	return w
}

func encode(t testing.TB, w *Writer) []byte {
	t.Helper()
	var buf bytes.Buffer
	n, err := w.WriteTo(&buf, testData)
	if err != nil {
		t.Fatal(err)
	}
	if n != int64(buf.Len()) {
		t.Fatalf("WriteTo reported %d bytes, wrote %d", n, buf.Len())
	}
	return buf.Bytes()
}

func TestRoundTrip(t *testing.T) {
	for _, align := range []int{32, 64, 8} {
		w := newTestWriter(t)
		if err := w.SetAlignment(align); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "m.gguf")
		if err := w.WriteFile(path, testData); err != nil {
			t.Fatal(err)
		}
		raw, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(raw, encode(t, w)) {
			t.Fatal("WriteFile and WriteTo differ")
		}
		mf, err := Open(path)
		if err != nil {
			t.Fatal(err)
		}
		pf, err := Parse(raw)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range []*File{mf, pf} {
			checkRoundTrip(t, f, w, align)
		}
		if err := mf.Close(); err != nil {
			t.Fatal(err)
		}
		if err := mf.Close(); err != nil {
			t.Fatal("second Close:", err)
		}
		if mf.Data(&mf.Tensors[0]) != nil {
			t.Error("Data after Close is not nil")
		}
	}
}

func checkRoundTrip(t *testing.T, f *File, w *Writer, align int) {
	t.Helper()
	want := allKVs()
	if align != 32 {
		want = append(want, KV{KeyAlignment, Value{typ: TypeUint32, bits: uint64(align)}})
	}
	if f.Version != 3 || f.Alignment != align || f.DataOffset%int64(align) != 0 {
		t.Errorf("version %d alignment %d data offset %d", f.Version, f.Alignment, f.DataOffset)
	}
	if !sameKVs(f.KV, want) {
		t.Errorf("KVs differ:\n got %v\nwant %v", f.KV, want)
	}
	if !reflect.DeepEqual(f.Tensors, w.Tensors()) {
		t.Errorf("tensors differ:\n got %+v\nwant %+v", f.Tensors, w.Tensors())
	}
	var off int64
	for i, tt := range testTensors {
		ti := f.Tensor(tt.name)
		if ti == nil || ti != &f.Tensors[i] {
			t.Fatalf("Tensor(%q) = %v", tt.name, ti)
		}
		size, _ := tensorSize(tt.typ, tt.dims)
		if ti.Type != tt.typ || !reflect.DeepEqual(ti.Dims, tt.dims) || ti.Size != size || ti.Offset != off {
			t.Errorf("%s: %+v", tt.name, ti)
		}
		off += alignUp(size, int64(align))
		wantData, _ := testData(i, ti)
		if got := f.Data(ti); !bytes.Equal(got, wantData) || cap(got) != len(got) {
			t.Errorf("%s: data differs", tt.name)
		}
	}
	if f.Tensor("absent") != nil {
		t.Error("Tensor(absent) is not nil")
	}
}

func TestAccessors(t *testing.T) {
	f, err := Parse(encode(t, newTestWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	check := func(name string, got, want any, err error) {
		t.Helper()
		if err != nil || !reflect.DeepEqual(got, want) {
			t.Errorf("%s = %v, %v; want %v", name, got, err, want)
		}
	}
	s, err := f.String("t.str")
	check("String", s, "héllo, wörld", err)
	u, err := f.Uint("t.u64")
	check("Uint u64", u, uint64(math.MaxUint64), err)
	u, err = f.Uint("t.u8")
	check("Uint u8", u, uint64(200), err)
	i, err := f.Int("t.i8")
	check("Int i8", i, int64(-100), err)
	i, err = f.Int("t.u32")
	check("Int u32", i, int64(4000000000), err)
	x, err := f.Float("t.f32")
	check("Float f32", x, float64(float32(1e-5)), err)
	x, err = f.Float("t.i16")
	check("Float i16", x, float64(-30000), err)
	b, err := f.Bool("t.bool")
	check("Bool", b, true, err)
	ss, err := f.Strings("a.str")
	check("Strings", ss, []string{"a b", "", "Ġthe", "<|endoftext|>"}, err)
	is, err := f.Int32s("a.u16")
	check("Int32s u16", is, []int32{65535}, err)
	is, err = f.Int32s("a.i8")
	check("Int32s i8", is, []int32{-1, 2}, err)
	is, err = f.Int32s("a.empty")
	check("Int32s empty", is, []int32{}, err)
	fs, err := f.Float32s("a.f64")
	check("Float32s f64", fs, []float32{float32(math.Inf(1))}, err)
	fs, err = f.Float32s("a.i32")
	check("Float32s i32", fs, []float32{1, 3, -5}, err)
	if !f.Has("t.u8") || f.Has("nope") {
		t.Error("Has")
	}

	bad := []struct {
		name string
		err  error
		want string
	}{
		{"Uint negative", second(f.Uint("t.i64")), "negative"},
		{"Int overflow", second(f.Int("t.u64")), "overflows int64"},
		{"String of int", second(f.String("t.u8")), `"t.u8": value is uint8, not string`},
		{"Bool of string", second(f.Bool("t.str")), "not bool"},
		{"Float of string", second(f.Float("t.str")), "not a number"},
		{"Strings of ints", second(f.Strings("a.i32")), "array of int32, not an array of string"},
		{"Int32s range", second(f.Int32s("a.u32")), "does not fit in int32"},
		{"Int32s of u64", second(f.Int32s("a.u64")), "overflows int64"},
		{"Int32s of floats", second(f.Int32s("a.f32")), "not an array of integers"},
		{"Float32s of strings", second(f.Float32s("a.str")), "not an array of numbers"},
		{"missing", second(f.Uint("nope")), `"nope": key not found`},
	}
	for _, c := range bad {
		if c.err == nil || !strings.Contains(c.err.Error(), c.want) {
			t.Errorf("%s: error %v, want it to contain %q", c.name, c.err, c.want)
		}
	}
	if _, err := f.Int("nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("missing key error %v is not ErrNotFound", err)
	}
}

func second[T any](_ T, err error) error { return err }

func TestValueString(t *testing.T) {
	for _, kv := range allKVs() {
		if kv.Value.String() == "" {
			t.Errorf("%s renders empty", kv.Key)
		}
	}
	v, _ := ValueOf([]int32{1, 2, 3, 4, 5, 6, 7, 8, 9})
	if got := v.String(); got != "[int32 x 9: 1 2 3 4 5 6 7 8 ...]" {
		t.Errorf("String = %q", got)
	}
	if _, err := ValueOf(3); err == nil {
		t.Error("plain int accepted")
	}
	if _, err := ValueOf([]Value{{}}); err == nil {
		t.Error("array of arrays of a scalar accepted")
	}
}

// A file with metadata only needs no data section, and llama.cpp's padding after the header
// may be missing.
func TestNoTensors(t *testing.T) {
	w := NewWriter()
	if err := w.Set("general.architecture", "gpt2"); err != nil {
		t.Fatal(err)
	}
	b := encode(t, w)
	for _, n := range []int{len(b), 4 + 4 + 8 + 8 + 8 + 20 + 4 + 8 + 4} {
		f, err := Parse(b[:n])
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if s, _ := f.String("general.architecture"); s != "gpt2" || len(f.Tensors) != 0 {
			t.Errorf("%d bytes: %q %d", n, s, len(f.Tensors))
		}
	}
}

func TestVersion2(t *testing.T) {
	b := encode(t, newTestWriter(t))
	b[4] = 2
	f, err := Parse(b)
	if err != nil || f.Version != 2 {
		t.Fatalf("v2: %v", err)
	}
}

func TestOpenErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Open(filepath.Join(dir, "missing.gguf")); err == nil {
		t.Error("missing file opened")
	}
	empty := filepath.Join(dir, "empty.gguf")
	if err := os.WriteFile(empty, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(empty); err == nil || !strings.Contains(err.Error(), "empty file") {
		t.Errorf("empty file: %v", err)
	}
	if _, err := Open(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("directory: %v", err)
	}
	bad := filepath.Join(dir, "bad.gguf")
	if err := os.WriteFile(bad, []byte("GGUF\x01\x00\x00\x00"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(bad); err == nil || !strings.Contains(err.Error(), bad) {
		t.Errorf("bad file error %v does not name the path", err)
	}
}

// Lookups used while running a model allocate nothing.
func TestLookupsDoNotAllocate(t *testing.T) {
	f, err := Parse(encode(t, newTestWriter(t)))
	if err != nil {
		t.Fatal(err)
	}
	allocs := testing.AllocsPerRun(100, func() {
		ti := f.Tensor("w.q8_0")
		_ = f.Data(ti)
		_, _ = f.Get("t.u32")
		_ = f.Has("t.u32")
		_, _ = f.Uint("t.u32")
	})
	if allocs != 0 {
		t.Errorf("%v allocations per lookup", allocs)
	}
}

// plain turns a value into comparable Go values (parsed string arrays are packed, so Values are
// compared by content, not by representation).
func plain(v Value) any {
	if a, ok := v.Array().([]Value); ok {
		out := []any{v.ElemType()}
		for _, e := range a {
			out = append(out, plain(e))
		}
		return out
	}
	return []any{v.Type(), v.ElemType(), v.Interface()}
}

func sameKVs(a, b []KV) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Key != b[i].Key || !reflect.DeepEqual(plain(a[i].Value), plain(b[i].Value)) {
			return false
		}
	}
	return true
}
