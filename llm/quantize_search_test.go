package llm

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/internal/testmodel"
	"github.com/gorun-dev/gorun/quant"
)

// QuantizeOptions.Search: the fast search writes the same layout as the full one (header,
// tensor types, offsets, size) with different quantized values, the file runs, and the
// zero value is the full search (the default bytes).
func TestQuantizeSearch(t *testing.T) {
	src := writeTiny(t, func(c *testmodel.Config) { c.Type = quant.F32 })
	base := batchLogits(t, loadFile(t, src), testTokens)
	dir := t.TempDir()
	for _, ft := range []quant.FileType{quant.FileQ4_0, quant.FileQ8_0, quant.FileQ4_K_M} {
		outs := map[quant.Search]string{}
		for _, s := range []quant.Search{quant.SearchFull, quant.SearchFast} {
			out := filepath.Join(dir, ft.String()+"-"+s.String()+".gguf")
			if _, err := Quantize(src, out, QuantizeOptions{FileType: ft, Threads: 2, Search: s}); err != nil {
				t.Fatalf("%v %v: %v", ft, s, err)
			}
			outs[s] = out
		}
		def := filepath.Join(dir, ft.String()+"-default.gguf")
		if _, err := Quantize(src, def, QuantizeOptions{FileType: ft, Threads: 2}); err != nil {
			t.Fatal(err)
		}
		full, _ := os.ReadFile(outs[quant.SearchFull])
		fast, _ := os.ReadFile(outs[quant.SearchFast])
		dflt, _ := os.ReadFile(def)
		if !bytes.Equal(full, dflt) {
			t.Errorf("%v: Search's zero value does not give the full search's bytes", ft)
		}
		if len(full) != len(fast) {
			t.Fatalf("%v: fast file %d bytes, full %d", ft, len(fast), len(full))
		}
		f, err := gguf.Parse(full)
		if err != nil {
			t.Fatal(err)
		}
		hdr := int(f.DataOffset)
		if !bytes.Equal(full[:hdr], fast[:hdr]) {
			t.Errorf("%v: the fast search's header differs from the full search's", ft)
		}
		if bytes.Equal(full[hdr:], fast[hdr:]) {
			t.Errorf("%v: the fast search wrote the full search's bytes", ft)
		}
		// Both files compute nearly the same logits as the f32 model.
		lFull := batchLogits(t, loadFile(t, outs[quant.SearchFull]), testTokens)
		lFast := batchLogits(t, loadFile(t, outs[quant.SearchFast]), testTokens)
		rFull, rFast := relL2(lFull, base), relL2(lFast, base)
		t.Logf("%v: logits vs f32, relative L2: full %.4g, fast %.4g", ft, rFull, rFast)
		if rFast > 1.25*rFull+1e-3 {
			t.Errorf("%v: fast search's logits error %.4g, full %.4g", ft, rFast, rFull)
		}
	}
	if _, err := Quantize(src, filepath.Join(dir, "x.gguf"), QuantizeOptions{FileType: quant.FileQ4_0, Search: quant.Search(7)}); err == nil || !strings.Contains(err.Error(), "search") {
		t.Errorf("unknown search: %v", err)
	}
}
