package quantize

import (
	"bytes"
	"encoding/binary"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/internal/fixtures"
)

// llamaIMatrix is llama-imatrix's file (llama.cpp c392e509: `llama-imatrix -m
// gpt2-tiny-f16.gguf -f eval_kjv.txt -o OUT --chunks 2 -c 512 -t 2`).
const llamaIMatrix = "testdata/gpt2-tiny-kjv-2chunks.imatrix.dat"

// llama-imatrix's file parses to its 32 matrices (the 8 layers' attn_qkv, attn_output,
// ffn_up, ffn_down: not output.weight without --process-output), 2 calls each, 2 chunks and
// the text's name; encoding it again gives its bytes exactly.
func TestIMatrixLlamaFile(t *testing.T) {
	b, err := os.ReadFile(llamaIMatrix)
	if err != nil {
		t.Fatal(err)
	}
	im, err := ParseIMatrix(b)
	if err != nil {
		t.Fatal(err)
	}
	if len(im.Entries) != 32 || im.Chunks != 2 || !strings.HasSuffix(im.Dataset, "eval_kjv.txt") {
		t.Fatalf("%d entries, %d chunks, dataset %q", len(im.Entries), im.Chunks, im.Dataset)
	}
	for _, e := range im.Entries {
		want := 256
		if strings.HasSuffix(e.Name, "ffn_down.weight") {
			want = 1024
		}
		if !strings.HasPrefix(e.Name, "blk.") || e.Calls != 2 || len(e.Values) != want {
			t.Errorf("entry %s: %d calls, %d values", e.Name, e.Calls, len(e.Values))
		}
	}
	again, err := im.Encode()
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(again, b) {
		t.Errorf("re-encoded: %d bytes, differ from llama-imatrix's %d", len(again), len(b))
	}
	w := im.Weights()
	e := im.Entries[0]
	if got := w[e.Name][0]; got != e.Values[0]/2 {
		t.Errorf("weight %v, want the stored value %v / 2 calls", got, e.Values[0])
	}
}

// The legacy files without the trailer (chunks, dataset) parse too.
func TestIMatrixNoTrailer(t *testing.T) {
	im := &IMatrix{Entries: []IMatrixEntry{{Name: "blk.0.ffn_up.weight", Calls: 3, Values: []float32{3, 6}}}}
	b, _ := im.Encode()
	got, err := ParseIMatrix(b[:len(b)-8])
	if err != nil || len(got.Entries) != 1 || got.Chunks != 0 || got.Weights()["blk.0.ffn_up.weight"][1] != 2 {
		t.Fatalf("%+v, %v", got, err)
	}
}

// Hostile files: every truncation, absurd counts and lengths, values that are no mean squares,
// duplicates and trailing bytes are errors naming the problem; nothing panics or allocates
// more than the file.
func TestIMatrixHostile(t *testing.T) {
	good, err := os.ReadFile(llamaIMatrix)
	if err != nil {
		t.Fatal(err)
	}
	for n := 0; n < len(good); n += 1 + n/64 {
		if _, err := ParseIMatrix(good[:n]); err == nil {
			t.Fatalf("truncated to %d of %d bytes: no error", n, len(good))
		}
	}
	le := binary.LittleEndian
	edit := func(f func(b []byte)) []byte {
		b := bytes.Clone(good)
		f(b)
		return b
	}
	nameLen := int(le.Uint32(good[4:]))
	callsAt := 8 + nameLen
	valuesAt := callsAt + 8
	for _, c := range []struct {
		name string
		b    []byte
		want string
	}{
		{"no entries", edit(func(b []byte) { le.PutUint32(b, 0) }), "entry count 0"},
		{"huge entry count", edit(func(b []byte) { le.PutUint32(b, math.MaxInt32) }), "entry count"},
		{"negative name length", edit(func(b []byte) { le.PutUint32(b[4:], 0xffffffff) }), "name of -1 bytes"},
		{"huge name length", edit(func(b []byte) { le.PutUint32(b[4:], 1<<30) }), "name of"},
		{"negative calls", edit(func(b []byte) { le.PutUint32(b[callsAt:], 0xfffffffe) }), "call count -2"},
		{"huge value count", edit(func(b []byte) { le.PutUint32(b[callsAt+4:], math.MaxInt32) }), "values, but"},
		{"zero values", edit(func(b []byte) { le.PutUint32(b[callsAt+4:], 0) }), "0 values"},
		{"NaN value", edit(func(b []byte) { le.PutUint32(b[valuesAt:], 0x7fc00000) }), "NaN"},
		{"negative value", edit(func(b []byte) { le.PutUint32(b[valuesAt:], math.Float32bits(-1)) }), "non-negative"},
		{"infinite value", edit(func(b []byte) { le.PutUint32(b[valuesAt:], 0x7f800000) }), "+Inf"},
		{"trailing bytes", append(bytes.Clone(good), 1, 2, 3), "after the end"},
		{"huge dataset length", edit(func(b []byte) { le.PutUint32(b[len(b)-len("/work/shared/fixtures/eval_kjv.txt")-4:], 1<<30) }), "dataset name of"},
		{"negative chunks", edit(func(b []byte) { le.PutUint32(b[len(b)-len("/work/shared/fixtures/eval_kjv.txt")-8:], 0xffffffff) }), "chunk count -1"},
	} {
		_, err := ParseIMatrix(c.b)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
	}
	dup := &IMatrix{Entries: []IMatrixEntry{{Name: "a", Calls: 1, Values: []float32{1}}, {Name: "a", Calls: 1, Values: []float32{1}}}}
	b, _ := dup.Encode()
	if _, err := ParseIMatrix(b); err == nil || !strings.Contains(err.Error(), "twice") {
		t.Errorf("duplicate entry: %v", err)
	}
	dir := t.TempDir()
	if _, err := ReadIMatrix(dir); err == nil || !strings.Contains(err.Error(), "not a regular file") {
		t.Errorf("a directory: %v", err)
	}
}

// An importance matrix for another model (a name the model lacks, or another column count)
// is refused before any work; llama-imatrix's file for the fixture is accepted.
func TestQuantizeWithIMatrix(t *testing.T) {
	im, err := ReadIMatrix(llamaIMatrix)
	if err != nil {
		t.Fatal(err)
	}
	src := fixtures.Path(t, "gpt2-tiny-f16.gguf")
	dir := t.TempDir()
	wrongName := im.Weights()
	wrongName["blk.99.ffn_up.weight"] = make([]float32, 256)
	wrongSize := im.Weights()
	wrongSize["blk.0.ffn_up.weight"] = make([]float32, 100)
	for name, imp := range map[string]map[string][]float32{"wrong name": wrongName, "wrong size": wrongSize} {
		_, err := File(src, filepath.Join(dir, "x.gguf"), Options{FileType: FileQ4_0, Threads: 2, Importance: imp})
		if err == nil || !strings.Contains(err.Error(), "another model") {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := File(src, filepath.Join(dir, "im.gguf"), Options{FileType: FileQ4_0, Threads: 2, Pure: true, Importance: im.Weights()}); err != nil {
		t.Fatal(err)
	}
}

// FuzzParseIMatrix: any bytes parse or fail without a panic; what parses encodes again to a
// file that parses to the same contents.
func FuzzParseIMatrix(f *testing.F) {
	if b, err := os.ReadFile(llamaIMatrix); err == nil {
		f.Add(b)
		f.Add(b[:200])
	}
	small := &IMatrix{Entries: []IMatrixEntry{{Name: "blk.0.attn_qkv.weight", Calls: 1, Values: []float32{0.5, 2}}}, Chunks: 1, Dataset: "t.txt"}
	b, _ := small.Encode()
	f.Add(b)
	f.Fuzz(func(t *testing.T, b []byte) {
		im, err := ParseIMatrix(b)
		if err != nil {
			return
		}
		again, err := im.Encode()
		if err != nil {
			t.Fatalf("parsed but does not encode: %v", err)
		}
		im2, err := ParseIMatrix(again)
		if err != nil || len(im2.Entries) != len(im.Entries) || im2.Chunks != im.Chunks || im2.Dataset != im.Dataset {
			t.Fatalf("round trip: %v", err)
		}
	})
}
