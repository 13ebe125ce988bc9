package quant_test

import (
	"math"
	"runtime"
	"sync"
	"testing"

	"github.com/gorun-dev/gorun/quant"
)

// The fast search keeps the full search's must-show (TestFixtureBetterBeatsLlamaCpp): for
// every quantized tensor of llama.cpp's q8_0, q4_0 and q4_K_M files, quantizing the f16 source
// to the same type with QuantizeFast (no importance) gives a plain RMSE against the f16
// weights below llama.cpp's. (Fast against full on these tensors: SPEED.md, 0.0-0.3% higher.)
func TestFixtureFastBeatsLlamaCpp(t *testing.T) {
	if testing.Short() {
		t.Skip("quantizes 3 models with the fast search")
	}
	src := openFixture(t, "f16")
	type acc struct{ seFast, seRef float64 }
	stats := map[key]*acc{}
	done := map[string]bool{} // the q4_0 and q4_K_M files share their Q6_K output tensor
	for _, fx := range quantizedFixtures {
		f := openFixture(t, fx)
		for i := range f.Tensors {
			ti := &f.Tensors[i]
			if !ti.Type.Quantized() || done[ti.Name+ti.Type.String()] {
				continue
			}
			done[ti.Name+ti.Type.String()] = true
			x, rowLen := f16Source(t, src, ti.Name)
			want := f.Data(ti)
			fm, _ := quant.FormatOf(ti.Type)
			fast := quantizeRowsWith(t, fm.QuantizeFast, x, rowLen, len(want))
			k := key{fx, ti.Type}
			if stats[k] == nil {
				stats[k] = &acc{}
			}
			a := stats[k]
			se := func(q []byte) float64 {
				y := make([]float32, len(x))
				fm.Dequantize(y, q)
				var s float64
				for j, v := range x {
					d := float64(y[j]) - float64(v)
					s += d * d
				}
				return s
			}
			sFast, sRef := se(fast), se(want)
			a.seFast += sFast
			a.seRef += sRef
			if sFast >= sRef {
				t.Errorf("%s %s (%v): fast RMSE %.6g not below llama.cpp's %.6g", fx, ti.Name, ti.Type,
					math.Sqrt(sFast/float64(len(x))), math.Sqrt(sRef/float64(len(x))))
			}
		}
	}
	for _, k := range sortedKeys(stats) {
		a := stats[k]
		t.Logf("%-7s %-5v fast search's RMSE vs llama.cpp's %+.2f%%", k.fixture, k.typ, 100*(math.Sqrt(a.seFast/a.seRef)-1))
	}
}

func quantizeRowsWith(t *testing.T, fn func(dst []byte, src, imp []float32) error, x []float32, rowLen, size int) []byte {
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
				if err := fn(out[r*rs:(r+1)*rs], x[r*rowLen:(r+1)*rowLen], nil); err != nil {
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
