package quantize

import (
	"fmt"
	"math"

	"github.com/gorun-dev/gorun/quant"
)

// GPTQ-style error compensation (Frantar et al., "GPTQ: Accurate Post-Training Quantization
// for Generative Pre-trained Transformers", 2022), for the block formats as they are.
//
// A matrix W (rows x cols) multiplies calibration inputs x (cols values each); with
// H = sum x x^T, the output error of a quantized Q is sum_rows (w-q) H (w-q)^T. Each row is
// quantized on its own, block after block from the first column: a block's scales and
// levels are chosen by gorun's search on the row's current values, and the error of each
// of its columns j, in order, is pushed onto the columns not yet quantized, w[k] -= e_j U[j,k]
// with e_j = (w_j - q_j)/U[j,j], U the upper Cholesky factor of H^-1 (H^-1 = U^T U): the
// least-squares compensation of that column's error by the columns after it. Within a block
// the values are fixed once the block is chosen; the compensation still accounts for each
// column's actual error (the block's later columns absorb their share, the rest flows on).

// Moments are the second moments of a matrix's calibration inputs: Sum = sum over the
// activation rows x that multiplied the matrix of x x^T (Cols x Cols, row-major; only its
// upper triangle, j >= i, is read), N the number of rows.
type Moments struct {
	Cols int
	N    int
	Sum  []float64
}

// gptqDamp is the fraction of H's mean diagonal added to its diagonal before inversion (GPTQ's
// percdamp): it keeps H invertible when the calibration inputs span fewer dimensions than the
// columns, and limits how far the compensation moves the weights.
const gptqDamp = 0.01

// gptqFactor returns U, the upper Cholesky factor of (H + damp)^-1 (row-major cols x cols),
// and the diagonal of H / N (the columns' mean squares: the importance for the block search).
// Columns never active (H_jj = 0) get H_jj = 1, as GPTQ does, so they are quantized plainly.
func gptqFactor(m *Moments) (u []float64, diag []float32, err error) {
	n := m.Cols
	if n <= 0 || len(m.Sum) != n*n || m.N <= 0 {
		return nil, nil, fmt.Errorf("second moments: %d values for %d columns from %d rows", len(m.Sum), n, m.N)
	}
	h := make([]float64, n*n)
	diag = make([]float32, n)
	var mean float64
	for i := 0; i < n; i++ {
		v := m.Sum[i*n+i]
		if !(v >= 0) || math.IsInf(v, 0) {
			return nil, nil, fmt.Errorf("second moments: diagonal value %v at column %d", v, i)
		}
		diag[i] = float32(v / float64(m.N))
		mean += v
	}
	mean /= float64(n)
	if mean == 0 {
		return nil, nil, fmt.Errorf("second moments: all zero")
	}
	for damp := gptqDamp; damp <= 1; damp *= 10 {
		for i := 0; i < n; i++ {
			for j := i; j < n; j++ {
				v := m.Sum[i*n+j]
				h[i*n+j], h[j*n+i] = v, v
			}
			if h[i*n+i] == 0 {
				h[i*n+i] = 1
			}
			h[i*n+i] += damp * mean
		}
		if u, ok := inverseCholeskyUpper(h, n); ok {
			return u, diag, nil
		}
	}
	return nil, nil, fmt.Errorf("second moments: not positive definite even with damping")
}

// inverseCholeskyUpper returns the upper Cholesky factor U of A^-1 (A^-1 = U^T U) for a
// symmetric positive definite A (n x n, row-major; overwritten), or false when A is not
// positive definite. With A = L L^T: A^-1 = L^-T L^-1; its Cholesky factor is computed
// directly from the inverse.
func inverseCholeskyUpper(a []float64, n int) ([]float64, bool) {
	// A = L L^T, L lower, in place (the lower triangle of a).
	for j := 0; j < n; j++ {
		rj := a[j*n : j*n+j]
		s := a[j*n+j]
		for _, v := range rj {
			s -= v * v
		}
		if !(s > 0) {
			return nil, false
		}
		d := math.Sqrt(s)
		a[j*n+j] = d
		for i := j + 1; i < n; i++ {
			ri := a[i*n : i*n+j]
			t := a[i*n+j]
			for k, v := range ri {
				t -= v * rj[k]
			}
			a[i*n+j] = t / d
		}
	}
	// Li = L^-1, lower triangular, by forward substitution column by column.
	li := make([]float64, n*n)
	for j := 0; j < n; j++ {
		li[j*n+j] = 1 / a[j*n+j]
		for i := j + 1; i < n; i++ {
			var t float64
			for k := j; k < i; k++ {
				t += a[i*n+k] * li[k*n+j]
			}
			li[i*n+j] = -t / a[i*n+i]
		}
	}
	// A^-1 = Li^T Li (upper triangle).
	inv := make([]float64, n*n)
	for i := 0; i < n; i++ {
		for j := i; j < n; j++ {
			var t float64
			for k := j; k < n; k++ { // Li[k][i] and Li[k][j] are zero for k < max(i, j) = j
				t += li[k*n+i] * li[k*n+j]
			}
			inv[i*n+j], inv[j*n+i] = t, t
		}
	}
	// Upper Cholesky of A^-1: A^-1 = U^T U, row by row.
	u := li[:n*n]
	clear(u)
	for i := 0; i < n; i++ {
		s := inv[i*n+i]
		for k := 0; k < i; k++ {
			s -= u[k*n+i] * u[k*n+i]
		}
		if !(s > 0) {
			return nil, false
		}
		d := math.Sqrt(s)
		u[i*n+i] = d
		for j := i + 1; j < n; j++ {
			t := inv[i*n+j]
			for k := 0; k < i; k++ {
				t -= u[k*n+i] * u[k*n+j]
			}
			u[i*n+j] = t / d
		}
	}
	return u, true
}

// gptqRow quantizes the row x (modified: it holds the compensated values afterwards) into dst
// with the format's search, block by block, pushing each column's error onto the later
// columns through u (gptqFactor). imp weights each block's search (the columns' mean
// squares). Where the type's grid is known (quant.Grid: every type but the IQ4 ones), each
// column of a block is rounded to the block's grid in turn, after the errors of the columns
// before it were pushed onto it; otherwise the block's values stay as the search chose them.
// sc is scratch.
func gptqRow(to *quant.Format, dst []byte, x []float32, u []float64, imp []float32, s quant.Search, sc *gptqScratch) error {
	n := len(x)
	// Each call of the search gets one block (a K-quant's is a super-block of 256 values, the
	// unit its scales are chosen for).
	bs, size := to.Type.BlockSize(), to.Type.TypeSize()
	y, levels, g := sc.y[:bs], sc.levels[:bs], &sc.grid
	for b0, o := 0, 0; b0 < n; b0, o = b0+bs, o+size {
		db := dst[o : o+size]
		if err := to.QuantizeSearch(db, x[b0:b0+bs], imp[b0:b0+bs], s); err != nil {
			return err
		}
		regrid := g.Load(to.Type, db)
		if !regrid {
			to.Dequantize(y, db)
		}
		for j := b0; j < b0+bs; j++ {
			q := y[j-b0]
			if regrid {
				levels[j-b0], q = g.Round(j-b0, x[j])
			}
			ur := u[j*n : (j+1)*n]
			e := (float64(x[j]) - float64(q)) / ur[j]
			if e == 0 {
				continue
			}
			rest := x[j+1:]
			for k, c := range ur[j+1:] {
				rest[k] -= float32(e * c)
			}
		}
		if regrid {
			g.Store(db, levels)
		}
	}
	return nil
}

// gptqScratch is one goroutine's scratch space for gptqRow.
type gptqScratch struct {
	y      [maxBlock]float32
	levels [maxBlock]int32
	grid   quant.Grid
}
