package safetensors

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime/metrics"
	"strings"
	"testing"
)

func f32Bytes(v ...float32) []byte {
	b := make([]byte, 4*len(v))
	for i, x := range v {
		binary.LittleEndian.PutUint32(b[4*i:], math.Float32bits(x))
	}
	return b
}

// small is a valid two-tensor file: a (F32 [2,3]) and b (BF16 [2]) plus metadata.
func small(t testing.TB) []byte {
	var buf bytes.Buffer
	err := Write(&buf, []WriteTensor{
		{Name: "b", DType: BF16, Shape: []int64{2}, Data: []byte{0x80, 0x3f, 0x00, 0xc0}},
		{Name: "a", DType: F32, Shape: []int64{2, 3}, Data: f32Bytes(1, 2, 3, 4, 5, 6)},
	}, map[string]string{"format": "pt"})
	if err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// raw builds a file from a header string and a data section.
func raw(hdr string, data []byte) []byte {
	b := binary.LittleEndian.AppendUint64(nil, uint64(len(hdr)))
	return append(append(b, hdr...), data...)
}

func TestParseValid(t *testing.T) {
	f, err := Parse(small(t))
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Tensors) != 2 || f.Tensors[0].Name != "a" || f.Tensors[1].Name != "b" || f.Metadata["format"] != "pt" {
		t.Fatalf("got %+v", f)
	}
	a := f.Tensor("a")
	got := make([]float32, 3)
	if err := a.Float32s(got, 3); err != nil || got[0] != 4 || got[2] != 6 {
		t.Fatalf("a[3:6] = %v, %v", got, err)
	}
	got = got[:2]
	if err := f.Tensor("b").Float32s(got, 0); err != nil || got[0] != 1 || got[1] != -2 {
		t.Fatalf("b = %v, %v", got, err)
	}
	if err := a.Float32s(got, 5); err == nil {
		t.Fatal("reading past the end succeeded")
	}
}

// Hostile files get errors that say what is wrong, never a panic.
func TestHostile(t *testing.T) {
	d := f32Bytes(1, 2)
	huge := binary.LittleEndian.AppendUint64(nil, 1<<62)
	cases := []struct {
		name string
		b    []byte
		want string
	}{
		{"empty", nil, "too short"},
		{"header past EOF", binary.LittleEndian.AppendUint64(nil, 100), "past the end"},
		{"huge header", append(huge, "{}"...), "over the limit"},
		{"bad JSON", raw(`{"a": {"dtype": "F32",`, d), "header"},
		{"not an object", raw(`[1,2,3,4]`, d), "not a JSON object"},
		{"trailing junk", raw(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}} x`, d), "after the JSON"},
		{"duplicate", raw(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, d), "twice"},
		{"unknown dtype", raw(`{"a":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}}`, d), "unknown dtype"},
		{"missing field", raw(`{"a":{"dtype":"F32","shape":[2]}}`, d), "data_offsets"},
		{"negative dim", raw(`{"a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}}`, d), "negative"},
		{"shape overflow", raw(`{"a":{"dtype":"F32","shape":[4294967296,4294967296],"data_offsets":[0,8]}}`, d), "overflows"},
		{"shape vs bytes", raw(`{"a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}}`, d), "needs 12 bytes"},
		{"dtype vs bytes", raw(`{"a":{"dtype":"F16","shape":[2],"data_offsets":[0,8]}}`, d), "needs 4 bytes"},
		{"past the end", raw(`{"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}}`, d), "past the end"},
		{"reversed", raw(`{"a":{"dtype":"F32","shape":[0],"data_offsets":[8,0]}}`, d), "increasing"},
		{"overlap", raw(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, d), "overlaps"},
		{"hole", raw(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}}`, d), "belong to no tensor"},
		{"extra bytes", raw(`{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}}`, d), "more bytes"},
		{"bad metadata", raw(`{"__metadata__":{"x":1}}`, nil), "__metadata__"},
		{"offsets count", raw(`{"a":{"dtype":"F32","shape":[2],"data_offsets":[0]}}`, d), "[begin, end]"},
		{"too many dims", raw(`{"a":{"dtype":"U8","shape":[1,1,1,1,1,1,1,1,1],"data_offsets":[0,1]}}`, d[:1]), "dimensions"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			_, err := Parse(c.b)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
}

func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func shard(t *testing.T, ts ...WriteTensor) []byte {
	var buf bytes.Buffer
	if err := Write(&buf, ts, nil); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

func TestOpenDir(t *testing.T) {
	one := WriteTensor{Name: "x.weight", DType: F32, Shape: []int64{2}, Data: f32Bytes(1, 2)}
	two := WriteTensor{Name: "a.weight", DType: F16, Shape: []int64{1}, Data: []byte{0, 0x3c}}
	t.Run("single", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, SingleName, shard(t, one))
		c, err := OpenDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if len(c.Tensors) != 1 || c.Tensor("x.weight") == nil {
			t.Fatalf("tensors %v", c.Tensors)
		}
	})
	t.Run("sharded", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, "model-00002-of-00002.safetensors", shard(t, two))
		writeFile(t, dir, "model-00001-of-00002.safetensors", shard(t, one))
		writeFile(t, dir, IndexName, []byte(`{"metadata":{},"weight_map":{"x.weight":"model-00001-of-00002.safetensors","a.weight":"model-00002-of-00002.safetensors"}}`))
		c, err := OpenDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		if len(c.Tensors) != 2 || c.Tensors[0].Name != "x.weight" || c.Tensors[1].Name != "a.weight" {
			t.Fatalf("order: %s, %s (want shard order)", c.Tensors[0].Name, c.Tensors[1].Name)
		}
		var v [1]float32
		if err := c.Tensor("a.weight").Float32s(v[:], 0); err != nil || v[0] != 1 {
			t.Fatalf("a.weight = %v, %v", v, err)
		}
	})
	bad := []struct {
		name  string
		index string
		want  string
	}{
		{"missing shard", `{"weight_map":{"x.weight":"model-00001-of-00002.safetensors","a.weight":"gone.safetensors"}}`, "shard gone.safetensors (holding tensor \"a.weight\") is missing"},
		{"path escape", `{"weight_map":{"x.weight":"../model-00001-of-00002.safetensors"}}`, "not a file name"},
		{"missing tensor", `{"weight_map":{"x.weight":"model-00001-of-00002.safetensors","y.weight":"model-00001-of-00002.safetensors"}}`, "y.weight (in model-00001"},
		{"extra tensor", `{"weight_map":{"y.weight":"model-00001-of-00002.safetensors"}}`, "not in the index"},
		{"bad JSON", `{"weight_map":`, "unexpected end"},
		{"empty", `{}`, "no weight_map"},
	}
	for _, c := range bad {
		t.Run(c.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, "model-00001-of-00002.safetensors", shard(t, one))
			writeFile(t, dir, IndexName, []byte(c.index))
			_, err := OpenDir(dir)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
		})
	}
	t.Run("pickle", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, "pytorch_model.bin", []byte("PK"))
		if _, err := OpenDir(dir); !errors.Is(err, ErrPickle) || !strings.Contains(err.Error(), "use the model's safetensors") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("truncated file", func(t *testing.T) {
		dir := t.TempDir()
		b := shard(t, one)
		writeFile(t, dir, SingleName, b[:len(b)-1])
		if _, err := OpenDir(dir); err == nil || !strings.Contains(err.Error(), "past the end") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("tiny file", func(t *testing.T) {
		dir := t.TempDir()
		writeFile(t, dir, SingleName, []byte{1, 2})
		if _, err := OpenDir(dir); err == nil || !strings.Contains(err.Error(), "too short") {
			t.Fatalf("error %v", err)
		}
	})
}

func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// FuzzParse: any bytes give a file or an error, never a panic, with allocations bounded by a
// small multiple of the input; a file that parses has tensors inside its data, readable.
func FuzzParse(f *testing.F) {
	f.Add(small(f))
	f.Add(raw(`{"a":{"dtype":"F16","shape":[1],"data_offsets":[0,2]},"b":{"dtype":"F32","shape":[],"data_offsets":[2,6]}}`, make([]byte, 6)))
	f.Add(raw(`{"__metadata__":{"format":"pt"}}`, nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		before := heapAllocs()
		file, err := Parse(b)
		if used, limit := heapAllocs()-before, 64*uint64(len(b))+1<<20; used > limit {
			t.Fatalf("%d input bytes allocated %d bytes", len(b), used)
		}
		if err != nil {
			return
		}
		var buf [4]float32
		for i := range file.Tensors {
			ts := &file.Tensors[i]
			if int64(len(ts.Data)) != ts.Elements()*int64(ts.DType.Size()) {
				t.Fatalf("tensor %q: %d bytes for %v", ts.Name, len(ts.Data), ts.Shape)
			}
			if ts.DType.Float() {
				n := min(ts.Elements(), 4)
				if err := ts.Float32s(buf[:n], 0); err != nil {
					t.Fatal(err)
				}
			}
		}
	})
}
