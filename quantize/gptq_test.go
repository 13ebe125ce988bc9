package quantize

import (
	"math"
	"math/rand/v2"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/internal/fixtures"
	"github.com/gorun-dev/gorun/quant"
)

// correlatedInputs returns rows activation vectors of n values with the structure of real
// ones: a few shared directions (correlated columns) and columns of very different scales.
func correlatedInputs(r *rand.Rand, rows, n int) [][]float64 {
	const k = 8
	dirs := make([][]float64, k)
	for i := range dirs {
		dirs[i] = make([]float64, n)
		for j := range dirs[i] {
			dirs[i][j] = r.NormFloat64()
		}
	}
	scale := make([]float64, n)
	for j := range scale {
		scale[j] = math.Exp(0.8 * r.NormFloat64())
	}
	xs := make([][]float64, rows)
	for i := range xs {
		x := make([]float64, n)
		for _, d := range dirs {
			c := r.NormFloat64()
			for j := range x {
				x[j] += c * d[j]
			}
		}
		for j := range x {
			x[j] = (x[j]*0.5 + r.NormFloat64()) * scale[j]
		}
		xs[i] = x
	}
	return xs
}

func momentsOf(xs [][]float64) *Moments {
	n := len(xs[0])
	m := &Moments{Cols: n, N: len(xs), Sum: make([]float64, n*n)}
	for _, x := range xs {
		for i, a := range x {
			for j := i; j < n; j++ {
				m.Sum[i*n+j] += a * x[j]
			}
		}
	}
	return m
}

// outputError is sum over the inputs of (x.(w - q))^2: what the matrix's output loses.
func outputError(xs [][]float64, w, q []float32) float64 {
	var e float64
	for _, x := range xs {
		var d float64
		for j, v := range x {
			d += v * float64(w[j]-q[j])
		}
		e += d * d
	}
	return e
}

// U (gptqFactor's factor) satisfies U^T U = (H + damp)^-1: (U^T U) (H + damp) = I.
func TestInverseCholeskyUpper(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	const n = 24
	xs := correlatedInputs(r, 40, n)
	m := momentsOf(xs)
	a := make([]float64, n*n)
	for i := 0; i < n; i++ {
		for j := i; j < n; j++ {
			a[i*n+j], a[j*n+i] = m.Sum[i*n+j], m.Sum[i*n+j]
		}
		a[i*n+i] += 0.1
	}
	orig := append([]float64(nil), a...)
	u, ok := inverseCholeskyUpper(a, n)
	if !ok {
		t.Fatal("not positive definite")
	}
	for i := 0; i < n; i++ {
		for j := 0; j < i; j++ {
			if u[i*n+j] != 0 {
				t.Fatalf("U[%d][%d] = %v below the diagonal", i, j, u[i*n+j])
			}
		}
	}
	for i := 0; i < n; i++ {
		for j := 0; j < n; j++ {
			var s float64
			for k := 0; k < n; k++ {
				var inv float64 // (U^T U)[i][k]
				for l := 0; l < n; l++ {
					inv += u[l*n+i] * u[l*n+k]
				}
				s += inv * orig[k*n+j]
			}
			want := 0.0
			if i == j {
				want = 1
			}
			if math.Abs(s-want) > 1e-8 {
				t.Fatalf("(U^T U A)[%d][%d] = %v, want %v", i, j, s, want)
			}
		}
	}
	if _, ok := inverseCholeskyUpper([]float64{1, 2, 2, 1}, 2); ok {
		t.Error("an indefinite matrix factored")
	}
}

// GPTQ lowers the output error of the matrix on its calibration inputs well below that of the
// same search weighted by the inputs' mean squares alone (what --imatrix gives), for a legacy
// type and a K-quant.
func TestGPTQLowersOutputError(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	const n, rows = 512, 8
	xs := correlatedInputs(r, 1500, n)
	m := momentsOf(xs)
	u, diag, err := gptqFactor(m)
	if err != nil {
		t.Fatal(err)
	}
	for _, ty := range []quant.Type{quant.Q4_0, quant.Q4_K, quant.Q3_K, quant.IQ4_NL} {
		f, _ := quant.FormatOf(ty)
		rs, _ := ty.RowSize(n)
		var ePlain, eGPTQ float64
		for range rows {
			w := make([]float32, n)
			for j := range w {
				w[j] = float32(0.02 * r.NormFloat64())
			}
			q := make([]byte, rs)
			y := make([]float32, n)
			if err := f.QuantizeSearch(q, w, diag, quant.SearchGrid); err != nil {
				t.Fatal(err)
			}
			f.Dequantize(y, q)
			ePlain += outputError(xs, w, y)
			x := append([]float32(nil), w...)
			if err := gptqRow(f, q, x, u, diag, quant.SearchGrid, &gptqScratch{}); err != nil {
				t.Fatal(err)
			}
			f.Dequantize(y, q)
			eGPTQ += outputError(xs, w, y)
		}
		t.Logf("%v: output error GPTQ / importance-weighted search = %.3f", ty, eGPTQ/ePlain)
		if eGPTQ > 0.8*ePlain {
			t.Errorf("%v: GPTQ's output error %.4g is not 20%% below the plain search's %.4g", ty, eGPTQ, ePlain)
		}
	}
}

// Moments that cannot be factored or do not fit the tensor are errors naming the problem.
func TestGPTQBadMoments(t *testing.T) {
	for _, c := range []struct {
		m    *Moments
		want string
	}{
		{&Moments{Cols: 2, N: 1, Sum: []float64{1, 0, 0}}, "3 values for 2 columns"},
		{&Moments{Cols: 2, N: 0, Sum: []float64{1, 0, 0, 1}}, "from 0 rows"},
		{&Moments{Cols: 2, N: 1, Sum: []float64{-1, 0, 0, 1}}, "diagonal value -1"},
		{&Moments{Cols: 2, N: 1, Sum: []float64{math.NaN(), 0, 0, 1}}, "diagonal value NaN"},
		{&Moments{Cols: 2, N: 1, Sum: []float64{0, 0, 0, 0}}, "all zero"},
		{&Moments{Cols: 2, N: 1, Sum: []float64{1, 100, 0, 1}}, "not positive definite"},
	} {
		_, _, err := gptqFactor(c.m)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%+v: error %v, want one containing %q", c.m, err, c.want)
		}
	}
}

// File takes second moments per tensor: ones for a tensor the model lacks, or of another size,
// are refused before any work; with fitting ones the tensor's output error on the inputs they
// came from is lower than without (the rest of the file is unchanged).
func TestQuantizeWithMoments(t *testing.T) {
	src := fixtures.Path(t, "gpt2-tiny-f16.gguf")
	dir := t.TempDir()
	const name = "blk.0.ffn_up.weight" // 256 columns
	xs := correlatedInputs(rand.New(rand.NewPCG(7, 8)), 600, 256)
	good := momentsOf(xs)
	for what, mom := range map[string]map[string]*Moments{
		"wrong name": {"blk.99.ffn_up.weight": good},
		"wrong size": {name: momentsOf(correlatedInputs(rand.New(rand.NewPCG(1, 1)), 10, 100))},
	} {
		_, err := File(src, filepath.Join(dir, "x.gguf"), Options{FileType: FileQ4_0, Threads: 2, Moments: mom})
		if err == nil || !strings.Contains(err.Error(), "second moments") {
			t.Errorf("%s: %v", what, err)
		}
	}
	plain, gptq := filepath.Join(dir, "plain.gguf"), filepath.Join(dir, "gptq.gguf")
	for _, c := range []struct {
		out string
		mom map[string]*Moments
	}{{plain, nil}, {gptq, map[string]*Moments{name: good}}} {
		if _, err := File(src, c.out, Options{FileType: FileQ4_0, Threads: 2, Pure: true, Moments: c.mom}); err != nil {
			t.Fatal(err)
		}
	}
	w := tensorF32(t, src, name)
	var errs [2]float64
	for i, out := range []string{plain, gptq} {
		q := tensorF32(t, out, name)
		rows := len(w) / 256
		for r := 0; r < rows; r++ {
			errs[i] += outputError(xs, w[r*256:(r+1)*256], q[r*256:(r+1)*256])
		}
	}
	t.Logf("%s: output error with moments / without = %.3f", name, errs[1]/errs[0])
	if errs[1] > 0.8*errs[0] {
		t.Errorf("output error with moments %.4g, without %.4g: not 20%% lower", errs[1], errs[0])
	}
}

// tensorF32 reads a tensor of a GGUF file, dequantized.
func tensorF32(t *testing.T, path, name string) []float32 {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	ti := f.Tensor(name)
	if ti == nil {
		t.Fatalf("%s: no %s", path, name)
	}
	fm, err := quant.FormatOf(ti.Type)
	if err != nil {
		t.Fatalf("%s: %v", name, err)
	}
	y := make([]float32, ti.Elements())
	fm.Dequantize(y, f.Data(ti))
	return y
}
