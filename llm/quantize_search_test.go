package llm

import (
	"path/filepath"
	"testing"

	"github.com/gorun-dev/gorun/internal/testmodel"
	"github.com/gorun-dev/gorun/quant"
	"github.com/gorun-dev/gorun/quantize"
)

// Files written with either quantize search run and compute nearly the logits of the f32
// model, the grid search's nearly as close as the full search's (the files' layout is
// quantize's TestSearchKinds).
func TestQuantizeSearch(t *testing.T) {
	src := writeTiny(t, func(c *testmodel.Config) { c.Type = quant.F32 })
	base := batchLogits(t, loadFile(t, src), testTokens)
	dir := t.TempDir()
	for _, ft := range []quantize.FileType{quantize.FileQ4_0, quantize.FileQ8_0, quantize.FileQ4_K_M} {
		rel := map[quant.Search]float64{}
		for _, s := range []quant.Search{quant.SearchFull, quant.SearchGrid} {
			out := filepath.Join(dir, ft.String()+"-"+s.String()+".gguf")
			if _, err := quantize.File(src, out, quantize.Options{FileType: ft, Threads: 2, Search: s}); err != nil {
				t.Fatalf("%v %v: %v", ft, s, err)
			}
			rel[s] = relL2(batchLogits(t, loadFile(t, out), testTokens), base)
		}
		rFull, rGrid := rel[quant.SearchFull], rel[quant.SearchGrid]
		t.Logf("%v: logits vs f32, relative L2: full %.4g, grid %.4g", ft, rFull, rGrid)
		if rGrid > 1.25*rFull+1e-3 {
			t.Errorf("%v: grid search's logits error %.4g, full %.4g", ft, rGrid, rFull)
		}
	}
}
