package quant_test

import (
	"bytes"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"testing"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/internal/fixtures"
	"github.com/gorun-dev/gorun/quant"
)

// The fixtures hold a trained GPT-2 in f16 and llama.cpp's quantizations of that file (made by
// llama-quantize without an importance matrix). See ../shared/fixtures/README.md.
var quantizedFixtures = []string{"q8_0", "q4_0", "q4_K_M"}

func openFixture(t *testing.T, name string) *gguf.File {
	t.Helper()
	path := fixtures.Path(t, "gpt2-tiny-"+name+".gguf")
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatalf("%s: %v", filepath.Base(path), err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

// f16Source returns the f16 file's tensor of the given name as float32, with its row length.
func f16Source(t *testing.T, src *gguf.File, name string) ([]float32, int) {
	t.Helper()
	ti := src.Tensor(name)
	if ti == nil {
		t.Fatalf("f16 fixture has no %s", name)
	}
	n := int(ti.Elements())
	x := make([]float32, n)
	if err := quant.DequantizeRow(ti.Type, x, src.Data(ti)); err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	return x, int(ti.Dims[0])
}

type key struct {
	fixture string
	typ     quant.Type
}

func sortedKeys[V any](m map[key]V) []key {
	keys := make([]key, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i].fixture != keys[j].fixture {
			return keys[i].fixture < keys[j].fixture
		}
		return keys[i].typ < keys[j].typ
	})
	return keys
}

// fixtureRMSE bounds rms(dequantized - f16) / rms(f16) over all tensors of a type in llama.cpp's
// files. Real weight matrices have heavier tails than Gaussian data, so a few outliers widen
// the blocks' scales. The bounds are the measured errors (q8_0 0.00625, q4_0 0.1004, q4_K
// 0.0789, q5_K 0.0375, q6_K 0.0197) with about 15% headroom.
var fixtureRMSE = map[quant.Type]float64{
	quant.Q8_0: 0.0072, quant.Q4_0: 0.115, quant.Q4_K: 0.091, quant.Q5_K: 0.043, quant.Q6_K: 0.0227,
}

// Dequantizing llama.cpp's quantized tensors gives back the f16 weights up to each format's
// quantization error.
func TestFixtureDequantize(t *testing.T) {
	src := openFixture(t, "f16")
	type acc struct{ se, ss float64 }
	stats := map[key]*acc{}
	for _, fx := range quantizedFixtures {
		f := openFixture(t, fx)
		for i := range f.Tensors {
			ti := &f.Tensors[i]
			if !ti.Type.Quantized() {
				continue
			}
			want, _ := f16Source(t, src, ti.Name)
			got := make([]float32, len(want))
			if err := quant.DequantizeRow(ti.Type, got, f.Data(ti)); err != nil {
				t.Fatalf("%s %s: %v", fx, ti.Name, err)
			}
			k := key{fx, ti.Type}
			if stats[k] == nil {
				stats[k] = &acc{}
			}
			a := stats[k]
			for j := range want {
				if math.IsNaN(float64(got[j])) || math.IsInf(float64(got[j]), 0) {
					t.Fatalf("%s %s: value %d is %v", fx, ti.Name, j, got[j])
				}
				d := float64(got[j]) - float64(want[j])
				a.se += d * d
				a.ss += float64(want[j]) * float64(want[j])
			}
		}
	}
	if len(stats) == 0 {
		t.Fatal("no quantized tensors found")
	}
	for _, k := range sortedKeys(stats) {
		e := math.Sqrt(stats[k].se / stats[k].ss)
		t.Logf("%-7s %-5v relative RMSE vs f16 %.5f", k.fixture, k.typ, e)
		if e > fixtureRMSE[k.typ] {
			t.Errorf("%s %v: relative RMSE %.5f above %.5f", k.fixture, k.typ, e, fixtureRMSE[k.typ])
		}
	}
}

// Our reference quantizers reproduce llama.cpp's files byte for byte: every row of every
// quantized tensor, quantized from the f16 weights to the type llama.cpp chose for it, is
// identical to the row in llama.cpp's file.
func TestFixtureQuantizeBytes(t *testing.T) {
	if testing.Short() {
		t.Skip("quantizes 3 models (a few seconds)")
	}
	src := openFixture(t, "f16")
	type acc struct{ rows, same int }
	stats := map[key]*acc{}
	for _, fx := range quantizedFixtures {
		f := openFixture(t, fx)
		for i := range f.Tensors {
			ti := &f.Tensors[i]
			if !ti.Type.Quantized() {
				continue
			}
			x, rowLen := f16Source(t, src, ti.Name)
			want := f.Data(ti)
			got := make([]byte, len(want))
			if err := quant.QuantizeRows(ti.Type, got, x, rowLen); err != nil {
				t.Fatalf("%s %s: %v", fx, ti.Name, err)
			}
			rs := len(want) / (len(x) / rowLen)
			k := key{fx, ti.Type}
			if stats[k] == nil {
				stats[k] = &acc{}
			}
			reported := 0
			for r := 0; r < len(x)/rowLen; r++ {
				stats[k].rows++
				if bytes.Equal(got[r*rs:(r+1)*rs], want[r*rs:(r+1)*rs]) {
					stats[k].same++
				} else if reported < 2 {
					reported++
					t.Logf("%s %s row %d differs: %s", fx, ti.Name, r, firstDiff(ti.Type, got[r*rs:(r+1)*rs], want[r*rs:(r+1)*rs]))
				}
			}
		}
	}
	for _, k := range sortedKeys(stats) {
		s := stats[k]
		t.Logf("%-7s %-5v %d of %d rows byte-identical (%.4f%%)", k.fixture, k.typ, s.same, s.rows, 100*float64(s.same)/float64(s.rows))
		if s.same != s.rows {
			t.Errorf("%s %v: %d rows differ from llama.cpp's", k.fixture, k.typ, s.rows-s.same)
		}
	}
}

func firstDiff(ty quant.Type, got, want []byte) string {
	ts := ty.TypeSize()
	for b := 0; b < len(want)/ts; b++ {
		g, w := got[b*ts:(b+1)*ts], want[b*ts:(b+1)*ts]
		if !bytes.Equal(g, w) {
			n := 0
			for i := range g {
				if g[i] != w[i] {
					n++
				}
			}
			return fmt.Sprintf("block %d, %d bytes differ\n got % x\nwant % x", b, n, g, w)
		}
	}
	return "no difference"
}
