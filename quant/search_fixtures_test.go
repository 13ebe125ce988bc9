package quant_test

import (
	"bytes"
	"math"
	"runtime"
	"sync"
	"testing"

	"github.com/gorun-dev/gorun/quant"
)

// For every quantized tensor of llama.cpp's q8_0, q4_0 and q4_K_M files, quantizing the f16
// source to the same type with gorun's default quantizer (no importance) gives either the same
// bytes or a tensor whose plain RMSE against the f16 weights is lower than llama.cpp's.
func TestFixtureSearchBeatsLlamaCpp(t *testing.T) {
	if testing.Short() {
		t.Skip("quantizes 3 models with the searching quantizers (several seconds)")
	}
	src := openFixture(t, "f16")
	type acc struct {
		tensors, same, better int
		seOurs, seRef, ss     float64
		worst                 float64 // smallest improvement, %
	}
	stats := map[key]*acc{}
	type cacheKey struct {
		name string
		typ  quant.Type
	}
	cache := map[cacheKey][]byte{} // the q4_0 and q4_K_M files share their Q6_K output tensor
	for _, fx := range quantizedFixtures {
		f := openFixture(t, fx)
		for i := range f.Tensors {
			ti := &f.Tensors[i]
			if !ti.Type.Quantized() {
				continue
			}
			x, rowLen := f16Source(t, src, ti.Name)
			want := f.Data(ti)
			fm, err := quant.FormatOf(ti.Type)
			if err != nil || fm.QuantizeSearch == nil {
				t.Fatalf("%s %s: no searching quantizer for %v", fx, ti.Name, ti.Type)
			}
			ck := cacheKey{ti.Name, ti.Type}
			got, ok := cache[ck]
			if !ok {
				got = quantizeSearchRows(t, fm, quant.SearchFull, x, rowLen, len(want))
				cache[ck] = got
			}
			k := key{fx, ti.Type}
			if stats[k] == nil {
				stats[k] = &acc{worst: math.Inf(1)}
			}
			a := stats[k]
			a.tensors++
			if bytes.Equal(got, want) {
				a.same++
				continue
			}
			yOurs := make([]float32, len(x))
			yRef := make([]float32, len(x))
			fm.Dequantize(yOurs, got)
			fm.Dequantize(yRef, want)
			var seOurs, seRef, ss float64
			for j, v := range x {
				d := float64(yOurs[j]) - float64(v)
				seOurs += d * d
				d = float64(yRef[j]) - float64(v)
				seRef += d * d
				ss += float64(v) * float64(v)
			}
			a.seOurs += seOurs
			a.seRef += seRef
			a.ss += ss
			imp := 100 * (1 - math.Sqrt(seOurs/seRef))
			a.worst = min(a.worst, imp)
			if seOurs < seRef {
				a.better++
			} else {
				t.Errorf("%s %s (%v): our RMSE %.6g is not below llama.cpp's %.6g", fx, ti.Name, ti.Type,
					math.Sqrt(seOurs/float64(len(x))), math.Sqrt(seRef/float64(len(x))))
			}
		}
	}
	if len(stats) == 0 {
		t.Fatal("no quantized tensors found")
	}
	for _, k := range sortedKeys(stats) {
		a := stats[k]
		t.Logf("%-7s %-5v %3d tensors: %d lower RMSE, %d identical; relative RMSE ours %.5f llama.cpp %.5f (%.2f%% lower; least gain on one tensor %.2f%%)",
			k.fixture, k.typ, a.tensors, a.better, a.same, math.Sqrt(a.seOurs/a.ss), math.Sqrt(a.seRef/a.ss),
			100*(1-math.Sqrt(a.seOurs/a.seRef)), a.worst)
	}
}

// quantizeSearchRows quantizes the rows of x with fm.QuantizeSearch and the search s (no
// importance) on all cores.
func quantizeSearchRows(t *testing.T, fm *quant.Format, s quant.Search, x []float32, rowLen, size int) []byte {
	t.Helper()
	out := make([]byte, size)
	rows := len(x) / rowLen
	rs := size / rows
	workers := runtime.GOMAXPROCS(0)
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for r := w; r < rows; r += workers {
				if err := fm.QuantizeSearch(out[r*rs:(r+1)*rs], x[r*rowLen:(r+1)*rowLen], nil, s); err != nil {
					errs[w] = err
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}
