package quantize

import (
	"bytes"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/internal/fixtures"
	"github.com/gorun-dev/gorun/internal/testmodel"
	"github.com/gorun-dev/gorun/quant"
)

// With the reference quantizers, File writes exactly the files llama-quantize wrote.
func TestReferenceMatchesLlamaCpp(t *testing.T) {
	src := fixtures.Path(t, "gpt2-tiny-f16.gguf")
	for _, name := range []string{"q8_0", "q4_0", "q4_K_M"} {
		want, err := os.ReadFile(fixtures.Path(t, "gpt2-tiny-"+name+".gguf"))
		if err != nil {
			t.Fatal(err)
		}
		ft, _ := ParseFileType(name)
		out := filepath.Join(t.TempDir(), name+".gguf")
		if _, err := File(src, out, Options{FileType: ft, Reference: true, Threads: 2}); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(out)
		if !bytes.Equal(got, want) {
			t.Errorf("%s: our file (%d bytes) differs from llama.cpp's (%d bytes)", name, len(got), len(want))
		}
	}
}

// writeTiny writes a random-weight GPT-2 whose rows are long enough for K-quant blocks.
func writeTiny(t *testing.T, edit func(c *testmodel.Config)) string {
	c, _ := testmodel.Preset("tiny")
	c.NEmbd, c.NFF = 256, 512
	if edit != nil {
		edit(&c)
	}
	p := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := testmodel.Write(p, c); err != nil {
		t.Fatal(err)
	}
	return p
}

func openFile(t *testing.T, path string) *gguf.File {
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// Every recipe, with the reference and the searching quantizers, writes the recipe's keys and
// the planned types (vectors and position embeddings untouched, output.weight Q6_K in the
// quantized recipes other than q8_0 and q6_k), and reports the file's size. llm's
// TestQuantizeRecipes checks that the files compute what the f32 model computes.
func TestRecipes(t *testing.T) {
	src := writeTiny(t, func(c *testmodel.Config) { c.Type = quant.F32 })
	for _, recipe := range fileTypes { // not FileTypeNames: its aliases repeat recipes
		ft, name := recipe.ft, recipe.name
		for _, ref := range []bool{true, false} {
			out := filepath.Join(t.TempDir(), name+".gguf")
			rep, err := File(src, out, Options{FileType: ft, Threads: 2, Reference: ref})
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			f := openFile(t, out)
			if got, _ := f.Uint("general.file_type"); FileType(got) != ft {
				t.Errorf("%s: general.file_type %d", name, got)
			}
			if v, _ := f.Uint("general.quantization_version"); v != 2 {
				t.Errorf("%s: general.quantization_version %d", name, v)
			}
			outW := f.Tensor("output.weight")
			if ft.DefaultType().Quantized() && ft != FileQ8_0 && ft != FileQ6_K && outW.Type != quant.Q6_K {
				t.Errorf("%s: output.weight is %v", name, outW.Type)
			}
			if f.Tensor("blk.0.attn_norm.weight").Type != quant.F32 || f.Tensor("position_embd.weight").Type != quant.F32 {
				t.Errorf("%s: vectors or position embeddings were quantized", name)
			}
			if st, _ := os.Stat(out); st.Size() != rep.FileBytes {
				t.Errorf("%s: report says %d bytes, file has %d", name, rep.FileBytes, st.Size())
			}
			if len(rep.Tensors) != len(f.Tensors) {
				t.Errorf("%s: report lists %d tensors, file has %d", name, len(rep.Tensors), len(f.Tensors))
			}
		}
	}
}

func TestRefusals(t *testing.T) {
	src := writeTiny(t, nil)
	dir := t.TempDir()
	if _, err := File(src, src, Options{FileType: FileQ4_0}); err == nil || !strings.Contains(err.Error(), "overwrite") {
		t.Errorf("overwriting the input: %v", err)
	}
	link := filepath.Join(dir, "link.gguf")
	os.Symlink(src, link)
	if _, err := File(src, link, Options{FileType: FileQ4_0}); err == nil {
		t.Error("overwriting the input through a link was allowed")
	}
	q := filepath.Join(dir, "q4.gguf")
	if _, err := File(src, q, Options{FileType: FileQ4_0}); err != nil {
		t.Fatal(err)
	}
	if _, err := File(q, filepath.Join(dir, "q8.gguf"), Options{FileType: FileQ8_0}); err == nil || !strings.Contains(err.Error(), "requantiz") {
		t.Errorf("requantizing without permission: %v", err)
	}
	if _, err := File(q, filepath.Join(dir, "q8.gguf"), Options{FileType: FileQ8_0, AllowRequantize: true}); err != nil {
		t.Errorf("requantizing with permission: %v", err)
	}
	if _, err := File(src, filepath.Join(dir, "x.gguf"), Options{FileType: FileQ8_0, Threads: 2000000}); err == nil || !strings.Contains(err.Error(), "2000000 threads: at most") {
		t.Errorf("2000000 threads: %v", err)
	}
	if _, err := File(src, filepath.Join(dir, "x.gguf"), Options{FileType: FileQ4_0, Search: quant.Search(7)}); err == nil || !strings.Contains(err.Error(), "search") {
		t.Errorf("unknown search: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "x.gguf")); err == nil {
		t.Error("a refused quantization wrote its output")
	}
}

// A NaN in a weight fails the quantization with the tensor's name, and leaves no output file
// (nor any temporary file) behind.
func TestNaNLeavesNothing(t *testing.T) {
	src := writeTiny(t, func(c *testmodel.Config) { c.Type = quant.F32 })
	bad := withNaN(t, src, "blk.1.ffn_up.weight")
	dir := t.TempDir()
	out := filepath.Join(dir, "out.gguf")
	_, err := File(bad, out, Options{FileType: FileQ4_0})
	if err == nil || !strings.Contains(err.Error(), "blk.1.ffn_up.weight") || !strings.Contains(err.Error(), "NaN") {
		t.Fatalf("NaN weight: %v", err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 0 {
		t.Errorf("left behind: %v", entries)
	}
}

// withNaN copies a model with one element of the named f32 tensor set to NaN.
func withNaN(t *testing.T, src, tensor string) string {
	f := openFile(t, src)
	w := gguf.NewWriter()
	for _, kv := range f.KV {
		w.Set(kv.Key, kv.Value)
	}
	for _, ti := range f.Tensors {
		w.AddTensor(ti.Name, ti.Type, ti.Dims)
	}
	out := filepath.Join(t.TempDir(), "nan.gguf")
	err := w.WriteFile(out, func(i int, ti *gguf.TensorInfo) ([]byte, error) {
		data := f.Data(&f.Tensors[i])
		if ti.Name != tensor {
			return data, nil
		}
		c := bytes.Clone(data)
		quant.AsF32(c)[100] = float32(math.NaN())
		return c, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// gorun's error-minimizing quantizers (the default path, with and without importance) write
// files laid out exactly as llama.cpp's: the same header, tensor types, offsets and size; only
// the quantized values differ.
func TestSearchMatchesLlamaCppLayout(t *testing.T) {
	if testing.Short() {
		t.Skip("quantizes the fixture model twice with the searching quantizers")
	}
	src := fixtures.Path(t, "gpt2-tiny-f16.gguf")
	for _, c := range []struct {
		name  string
		calib bool
	}{{"q4_0", false}, {"q4_K_M", true}} {
		want, err := os.ReadFile(fixtures.Path(t, "gpt2-tiny-"+c.name+".gguf"))
		if err != nil {
			t.Fatal(err)
		}
		ft, _ := ParseFileType(c.name)
		opts := Options{FileType: ft, Threads: 2}
		if c.calib {
			opts.Importance = randomImportance(t, src)
		}
		out := filepath.Join(t.TempDir(), c.name+".gguf")
		if _, err := File(src, out, opts); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(out)
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != len(want) {
			t.Fatalf("%s: %d bytes, llama.cpp's file has %d", c.name, len(got), len(want))
		}
		f, err := gguf.Parse(got)
		if err != nil {
			t.Fatal(err)
		}
		hdr := int(f.DataOffset)
		if !bytes.Equal(got[:hdr], want[:hdr]) {
			t.Errorf("%s: header (metadata, tensor types and offsets) differs from llama.cpp's", c.name)
		}
		if bytes.Equal(got[hdr:], want[hdr:]) {
			t.Errorf("%s: data identical to llama.cpp's: the searching quantizers did not run", c.name)
		}
	}
}

// randomImportance gives every matrix of the model a positive per-column importance.
func randomImportance(t *testing.T, path string) map[string][]float32 {
	f := openFile(t, path)
	r := rand.New(rand.NewPCG(1, 1))
	imp := map[string][]float32{}
	for _, ti := range f.Tensors {
		if len(ti.Dims) == 2 {
			w := make([]float32, ti.Dims[0])
			for i := range w {
				w[i] = float32(r.ExpFloat64())
			}
			imp[ti.Name] = w
		}
	}
	return imp
}

// Options.Search: the grid search writes the same layout as the full one (header, tensor
// types, offsets, size) with different quantized values, and the zero value is the full
// search (the default bytes). llm's TestQuantizeSearch compares the files' logits.
func TestSearchKinds(t *testing.T) {
	src := writeTiny(t, func(c *testmodel.Config) { c.Type = quant.F32 })
	dir := t.TempDir()
	for _, ft := range []FileType{FileQ4_0, FileQ8_0, FileQ4_K_M} {
		quantized := func(name string, s quant.Search) []byte {
			out := filepath.Join(dir, ft.String()+"-"+name+".gguf")
			if _, err := File(src, out, Options{FileType: ft, Threads: 2, Search: s}); err != nil {
				t.Fatalf("%v %v: %v", ft, name, err)
			}
			b, _ := os.ReadFile(out)
			return b
		}
		full, grid, dflt := quantized("full", quant.SearchFull), quantized("grid", quant.SearchGrid), quantized("default", 0)
		if !bytes.Equal(full, dflt) {
			t.Errorf("%v: Search's zero value does not give the full search's bytes", ft)
		}
		if len(full) != len(grid) {
			t.Fatalf("%v: grid file %d bytes, full %d", ft, len(grid), len(full))
		}
		f, err := gguf.Parse(full)
		if err != nil {
			t.Fatal(err)
		}
		hdr := int(f.DataOffset)
		if !bytes.Equal(full[:hdr], grid[:hdr]) {
			t.Errorf("%v: the grid search's header differs from the full search's", ft)
		}
		if bytes.Equal(full[hdr:], grid[hdr:]) {
			t.Errorf("%v: the grid search wrote the full search's bytes", ft)
		}
	}
}
