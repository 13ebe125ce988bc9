package gguf

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/quant"
)

func TestAddTensorRefusals(t *testing.T) {
	w := NewWriter()
	if err := w.AddTensor("x", quant.F32, []int64{4}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		typ  quant.Type
		dims []int64
		want string
	}{
		{strings.Repeat("n", 64), quant.F32, []int64{4}, "64 bytes, longer than 63"},
		{"", quant.F32, []int64{4}, "empty name"},
		{"x", quant.F32, []int64{4}, "duplicate"},
		{"y", quant.F32, nil, "0 dimensions"},
		{"y", quant.F32, []int64{1, 1, 1, 1, 1}, "5 dimensions"},
		{"y", quant.F32, []int64{4, 0}, "dimension 1 is 0"},
		{"y", quant.F32, []int64{-4}, "dimension 0 is -4"},
		{"y", quant.Q4_K, []int64{128}, "not a multiple of the q4_K block size 256"},
		{"y", quant.Type(4), []int64{32}, "unknown tensor type 4"},
		{"y", quant.F32, []int64{1 << 62, 4}, "more than 2^63-1 elements"},
		{"y", quant.F32, []int64{1 << 61, 2}, "overflow a byte size"},
		{"y", quant.F32, []int64{1 << 60, 2}, "overflows a byte size"},
	}
	for _, c := range cases {
		err := w.AddTensor(c.name, c.typ, c.dims)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("AddTensor(%.10q, %v, %v): %v, want %q", c.name, c.typ, c.dims, err, c.want)
		}
	}
	if n := len(w.Tensors()); n != 1 {
		t.Errorf("%d tensors after refusals", n)
	}
	if err := w.AddTensor(strings.Repeat("n", 63), quant.F32, []int64{4}); err != nil {
		t.Errorf("63-byte name: %v", err)
	}
}

func TestSetRefusals(t *testing.T) {
	w := NewWriter()
	for _, v := range []any{3, uint(3), []int{1}, map[string]int{}, nil, struct{}{}} {
		if err := w.Set("k", v); err == nil {
			t.Errorf("Set(%T) accepted", v)
		}
	}
	if err := w.Set("", "x"); err == nil {
		t.Error("empty key accepted")
	}
	for _, v := range []any{uint32(0), uint32(3), uint64(64), "32"} {
		if err := w.Set(KeyAlignment, v); err == nil {
			t.Errorf("alignment %T %v accepted", v, v)
		}
	}
	for _, n := range []int{0, 3, -32, 1 << 33} {
		if err := w.SetAlignment(n); err == nil {
			t.Errorf("SetAlignment(%d) accepted", n)
		}
	}
	if len(w.KV()) != 0 {
		t.Errorf("refused values were kept: %v", w.KV())
	}
}

func TestSetReplacesInPlace(t *testing.T) {
	w := NewWriter()
	for _, k := range []string{"a", "b", "c"} {
		if err := w.Set(k, k); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Set("b", uint32(7)); err != nil {
		t.Fatal(err)
	}
	kv := w.KV()
	if len(kv) != 3 || kv[1].Key != "b" || kv[1].Value.Interface() != uint32(7) {
		t.Fatalf("%v", kv)
	}
	// A slice given to Set is copied.
	s := []int32{1, 2}
	if err := w.Set("s", s); err != nil {
		t.Fatal(err)
	}
	s[0] = 9
	if got := w.KV()[3].Value.Array().([]int32); got[0] != 1 {
		t.Error("Set kept the caller's slice")
	}
}

// Changing the alignment after adding tensors re-lays them out.
func TestAlignmentLayout(t *testing.T) {
	w := NewWriter()
	for _, n := range []string{"a", "b", "c"} {
		if err := w.AddTensor(n, quant.F32, []int64{3}); err != nil {
			t.Fatal(err)
		}
	}
	offsets := func() (o []int64) {
		for _, ti := range w.Tensors() {
			o = append(o, ti.Offset)
		}
		return o
	}
	if o := offsets(); o[1] != 32 || o[2] != 64 {
		t.Fatal(o)
	}
	if err := w.SetAlignment(16); err != nil {
		t.Fatal(err)
	}
	if o := offsets(); o[1] != 16 || o[2] != 32 {
		t.Fatal(o)
	}
	if v := w.KV(); len(v) != 1 || v[0].Key != KeyAlignment || v[0].Value.Interface() != uint32(16) {
		t.Fatal(v)
	}
	if err := w.SetAlignment(32); err != nil {
		t.Fatal(err)
	}
	if v := w.KV(); len(v) != 1 || v[0].Value.Interface() != uint32(32) {
		t.Fatal("alignment key not updated:", v)
	}
}

// Failed writes leave no file at path and no temporary file beside it, and never replace an
// existing file.
func TestWriteFileFailures(t *testing.T) {
	newW := func() *Writer {
		w := NewWriter()
		for _, n := range []string{"a", "b"} {
			if err := w.AddTensor(n, quant.F16, []int64{10, 2}); err != nil {
				t.Fatal(err)
			}
		}
		return w
	}
	boom := errors.New("boom")
	cases := []struct {
		name string
		data func(i int, ti *TensorInfo) ([]byte, error)
		want string
	}{
		{"short", func(i int, ti *TensorInfo) ([]byte, error) { return make([]byte, ti.Size-1), nil }, `tensor "a": data is 39 bytes, want 40`},
		{"long", func(i int, ti *TensorInfo) ([]byte, error) { return make([]byte, ti.Size+int64(i)), nil }, `tensor "b": data is 41 bytes, want 40`},
		{"error", func(i int, ti *TensorInfo) ([]byte, error) {
			if i == 1 {
				return nil, boom
			}
			return make([]byte, ti.Size), nil
		}, "boom"},
	}
	for _, c := range cases {
		for _, existing := range []bool{false, true} {
			dir := t.TempDir()
			path := filepath.Join(dir, "out.gguf")
			if existing {
				if err := os.WriteFile(path, []byte("old"), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			err := newW().WriteFile(path, c.data)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("%s: error %v, want %q", c.name, err, c.want)
			}
			if c.name == "error" && !errors.Is(err, boom) {
				t.Errorf("callback error not wrapped: %v", err)
			}
			entries, _ := os.ReadDir(dir)
			got, _ := os.ReadFile(path)
			if existing && (len(entries) != 1 || string(got) != "old") {
				t.Errorf("%s: existing file disturbed: %v %q", c.name, entries, got)
			}
			if !existing && len(entries) != 0 {
				t.Errorf("%s: left behind %v", c.name, entries)
			}
		}
	}
	if err := newW().WriteFile(filepath.Join(t.TempDir(), "no", "such", "dir.gguf"), nil); err == nil {
		t.Error("write into a missing directory succeeded")
	}
}

func TestWriteStream(t *testing.T) {
	w := newTestWriter(t)
	var buf bytes.Buffer
	// Stream each tensor in 3-byte pieces; the result must equal the one-slice path.
	_, err := w.WriteStream(&buf, func(i int, ti *TensorInfo, dst io.Writer) error {
		b, _ := testData(i, ti)
		for len(b) > 0 {
			k := min(3, len(b))
			if _, err := dst.Write(b[:k]); err != nil {
				return err
			}
			b = b[k:]
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), encode(t, w)) {
		t.Fatal("streamed file differs")
	}
	_, err = w.WriteStream(io.Discard, func(i int, ti *TensorInfo, dst io.Writer) error {
		_, err := dst.Write(make([]byte, ti.Size+1))
		return err
	})
	if err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("overlong stream: %v", err)
	}
	path := filepath.Join(t.TempDir(), "s.gguf")
	err = w.WriteFileStream(path, func(i int, ti *TensorInfo, dst io.Writer) error {
		b, _ := testData(i, ti)
		_, err := dst.Write(b)
		return err
	})
	if got, _ := os.ReadFile(path); err != nil || !bytes.Equal(got, buf.Bytes()) {
		t.Fatalf("WriteFileStream: %v", err)
	}
	if st, err := os.Stat(path); err != nil || st.Mode().Perm() != 0o644 {
		t.Errorf("mode %v, %v", st.Mode(), err)
	}
}

// The writer's header layout, checked against the format by hand for a minimal file.
func TestHeaderBytes(t *testing.T) {
	w := NewWriter()
	if err := w.Set("k", uint8(5)); err != nil {
		t.Fatal(err)
	}
	if err := w.AddTensor("t", quant.F32, []int64{2}); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf, func(int, *TensorInfo) ([]byte, error) { return []byte{1, 2, 3, 4, 5, 6, 7, 8}, nil }); err != nil {
		t.Fatal(err)
	}
	want := (&raw{}).bytes('G', 'G', 'U', 'F').u32(3).u64(1).u64(1).
		str("k").u32(0).bytes(5).
		str("t").u32(1).u64(2).u32(0).u64(0).b
	want = append(want, make([]byte, 96-len(want))...) // 71 header bytes padded to 32
	want = append(want, 1, 2, 3, 4, 5, 6, 7, 8)
	want = append(want, make([]byte, 24)...)
	if !bytes.Equal(buf.Bytes(), want) {
		t.Fatalf("got  %x\nwant %x", buf.Bytes(), want)
	}
}
