package llm

import (
	"bytes"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/internal/fixtures"
	"github.com/gorun-dev/gorun/quant"
)

// gorun's error-minimizing quantizers (the default path, with and without importance) write
// files laid out exactly as llama.cpp's: the same header, tensor types, offsets and size; only
// the quantized values differ.
func TestBetterQuantizeMatchesLlamaCppLayout(t *testing.T) {
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
		ft, _ := quant.ParseFileType(c.name)
		opts := QuantizeOptions{FileType: ft, Threads: 2}
		if c.calib {
			opts.Importance = randomImportance(t, src)
		}
		out := filepath.Join(t.TempDir(), c.name+".gguf")
		if _, err := Quantize(src, out, opts); err != nil {
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
			t.Errorf("%s: data identical to llama.cpp's: the better quantizers did not run", c.name)
		}
	}
}

// randomImportance gives every matrix of the model a positive per-column importance.
func randomImportance(t *testing.T, path string) map[string][]float32 {
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
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
