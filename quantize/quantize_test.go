package quantize

import (
	"bytes"
	"crypto/sha256"
	"fmt"
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

// llamaQuantizeKJV is the sha256 of llama-quantize's output (llama.cpp c392e509, `llama-quantize
// llama-kjv-f16.gguf OUT TYPE`, deterministic) for the Llama fixture, per recipe: the Llama
// mixes (attn_v and ffn_down of q4_K_M, the Q3_K recipes' attn_output, the tied embedding as
// the output matrix, ...), the metadata and the reference quantizers, byte for byte.
var llamaQuantizeKJV = map[string]string{
	"f32":    "8203fdf7186a496ffca7866385a8db0cbe635e19f5088341294177a4c7cec764",
	"f16":    "0fd1eec5e4408cdfb59f67919c9ab89eb590e017101e18bea5af36d096ceab47",
	"bf16":   "60c19d3e57cbcb1aaad4bd7dfa4bb7a7b778209a41e56ec5c32d4828bc583995",
	"q8_0":   "657e5b59167622b658e163a85146a171165d5b6b7072e1a1742b96c771e7dbcb",
	"q4_0":   "3768363f501727fe40a08de0dc52c6875aa1ac8d24f0a9048099c1cce1375c8e",
	"q4_1":   "eb23d16a8566d49b826239c7fd94996b2e4477b1dcdb660b42accd2c0d6432a6",
	"q5_0":   "bd86946d11f87904740c16ef8358a055f5bf417a546d84aab3b65bb20471b5d5",
	"q5_1":   "0f494cfc3970c19c88e02c35703ac283e7a210a6160bf1b8356456b515224faf",
	"q2_k":   "ca57846e21c3c6e4783766e0fa4cdfa9aa0e856052ea66b5087582be3844434a",
	"q3_k_s": "04d9996167611bc4b6f5950fdc224d73f697559cec7d0ddfdf3a14488d933860",
	"q3_k_m": "b87d9db27c846436bab633c205aa5689fe18723a70a89fcf35bbc978e79c0e5d",
	"q3_k_l": "58f548298bbc096babab73d181ed0bf72594ef64c177e22228db8cec5b9efbb8",
	"q4_k_s": "a09750ba4bb4339ddca34a0c734e4c98ccc2855aa59116444e8f87c541453859",
	"q4_k_m": "791440360e65ef875fa0f822b98b8064cc557d94844a9dcff248220baf774393",
	"q5_k_s": "cf9bf2f5fa5532151b1c3afdd1245261c37d5f89dc1ba0530e2f05f9545347a9",
	"q5_k_m": "9ef1d5d90f6951a827b73388e31a496246877da27f8ccbed1b89b160927b920d",
	"q6_k":   "5710c5bb73fc016872a6dac51916e1706a415457fc86f7ea92d8cfa4b30c3bc2",
	// iq4_nl and iq4_xs: llama_model_quantize with llama-quantize's default parameters (its
	// main without the argument parsing), libllama of llama.cpp c392e509 built on the CPU.
	"iq4_nl": "2d6c8738b99232e441cd3f37acec485aed9dcd7e49cb871cb41ce0542bcc2b52",
	"iq4_xs": "96fb4030dc5af40ff6bbe8467878f2de938ec92e899f50e0e4093078d1b2375f",
}

// With the reference quantizers, File writes exactly the Llama files llama-quantize wrote, for
// every recipe gorun makes.
func TestReferenceMatchesLlamaQuantizeLlama(t *testing.T) {
	src := fixtures.Path(t, "llama-kjv-f16.gguf")
	for _, recipe := range fileTypes {
		name := strings.ToLower(recipe.name)
		want, ok := llamaQuantizeKJV[name]
		if !ok {
			t.Errorf("%s: no llama-quantize hash pinned for this recipe", name)
			continue
		}
		out := filepath.Join(t.TempDir(), name+".gguf")
		if _, err := File(src, out, Options{FileType: recipe.ft, Reference: true, Threads: 2}); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if got := fileSHA256(t, out); got != want {
			t.Errorf("%s: sha256 %s, llama-quantize's file has %s", name, got, want)
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

// pinnedSearchFiles are the sha256 hashes (first 16 hex digits) of the files File writes from
// TestSearchKinds' random f32 model, per recipe and search, with -t 1 and -t 3 alike: a change
// to either search's bytes, or to the files' layout, has to be deliberate.
var pinnedSearchFiles = map[string]string{
	"Q4_0 grid": "d6647f6f66c7818a", "Q8_0 grid": "a5c22cf7309b6c19", "Q4_K_M grid": "15a6f2cca2301741",
	"Q4_0 full": "cf1732ebf3d805d2", "Q8_0 full": "c582b60bc3c147a9", "Q4_K_M full": "fe82c6b5d26b6b4c",
}

// Options.Search: the zero value is the grid search; the grid and full searches write the same
// layout (header, tensor types, offsets, size) with different quantized values; each writes
// the same bytes for any thread count, and those bytes are pinned. llm's TestQuantizeSearch
// compares the files' logits.
func TestSearchKinds(t *testing.T) {
	src := writeTiny(t, func(c *testmodel.Config) { c.Type = quant.F32 })
	dir := t.TempDir()
	for _, ft := range []FileType{FileQ4_0, FileQ8_0, FileQ4_K_M} {
		quantized := func(s quant.Search, threads int) []byte {
			out := filepath.Join(dir, fmt.Sprintf("%v-%v-%d.gguf", ft, s, threads))
			if _, err := File(src, out, Options{FileType: ft, Threads: threads, Search: s}); err != nil {
				t.Fatalf("%v %v: %v", ft, s, err)
			}
			b, _ := os.ReadFile(out)
			return b
		}
		var dflt quant.Search
		full, grid, zero := quantized(quant.SearchFull, 1), quantized(quant.SearchGrid, 1), quantized(dflt, 3)
		if !bytes.Equal(grid, zero) {
			t.Errorf("%v: Search's zero value with 3 threads does not give the grid search's bytes with 1", ft)
		}
		if !bytes.Equal(full, quantized(quant.SearchFull, 3)) {
			t.Errorf("%v: the full search's bytes depend on the thread count", ft)
		}
		for s, b := range map[quant.Search][]byte{quant.SearchGrid: grid, quant.SearchFull: full} {
			key := fmt.Sprintf("%v %v", ft, s)
			if got := fmt.Sprintf("%x", sha256.Sum256(b))[:16]; got != pinnedSearchFiles[key] {
				t.Errorf("%s: file sha256 %s, pinned %s", key, got, pinnedSearchFiles[key])
			}
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
