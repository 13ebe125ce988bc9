package cpu

import (
	"fmt"
	"math"

	"github.com/gorun-dev/gorun/cpu/kernels"
	"github.com/gorun-dev/gorun/graph"
)

// binary applies f to each row of the result with the matching row of Src0 and Src1 (or Src1's
// only row, broadcast).
func binary(n *graph.Tensor, ith, nth int, f func(dst, a, b []float32)) {
	a, bt := n.Src[0], n.Src[1]
	lo, hi := split(n.NRows(), ith, nth)
	for r := lo; r < hi; r++ {
		br := r
		if bt.NRows() == 1 {
			br = 0
		}
		f(n.F32Row(r), a.F32Row(r), bt.F32Row(br))
	}
}

func addRow(dst, a, b []float32) { kernels.Add(dst, a, b) }

func mulRow(dst, a, b []float32) {
	b = b[:len(dst)]
	a = a[:len(dst)]
	for i := range dst {
		dst[i] = a[i] * b[i]
	}
}

func unary(n *graph.Tensor, ith, nth int, f func(dst, x []float32)) {
	x := n.Src[0]
	lo, hi := split(n.NRows(), ith, nth)
	for r := lo; r < hi; r++ {
		f(n.F32Row(r), x.F32Row(r))
	}
}

func copyRow(dst, x []float32) { copy(dst, x) }

func scale(n *graph.Tensor, ith, nth int) {
	s := n.FParams[0]
	x := n.Src[0]
	lo, hi := split(n.NRows(), ith, nth)
	for r := lo; r < hi; r++ {
		dst, src := n.F32Row(r), x.F32Row(r)
		for i := range dst {
			dst[i] = src[i] * s
		}
	}
}

// layerNorm normalizes rows with mean and variance accumulated in float64.
func layerNorm(n *graph.Tensor, ith, nth int) {
	x, w, b := n.Src[0], n.Src[1], n.Src[2]
	eps := float64(n.FParams[0])
	var wr, br []float32
	if w != nil {
		wr = w.F32Row(0)
	}
	if b != nil {
		br = b.F32Row(0)
	}
	lo, hi := split(n.NRows(), ith, nth)
	if wr != nil && br != nil {
		for r := lo; r < hi; r++ {
			kernels.LayerNorm(n.F32Row(r), x.F32Row(r), wr, br, float32(eps))
		}
		return
	}
	for r := lo; r < hi; r++ {
		src, dst := x.F32Row(r), n.F32Row(r)
		var sum float64
		for _, v := range src {
			sum += float64(v)
		}
		mean := sum / float64(len(src))
		var sq float64
		for _, v := range src {
			d := float64(v) - mean
			sq += d * d
		}
		rstd := 1 / math.Sqrt(sq/float64(len(src))+eps)
		for i, v := range src {
			y := float32((float64(v) - mean) * rstd)
			if wr != nil {
				y *= wr[i]
			}
			if br != nil {
				y += br[i]
			}
			dst[i] = y
		}
	}
}

// getRows dequantizes the rows of a table named by int32 ids.
func (b *Backend) getRows(n *graph.Tensor, ith, nth int) {
	table, ids := n.Src[0], n.Src[1].I32()
	deq := kernels.Dequantizer(table.Type)
	lo, hi := split(len(ids), ith, nth)
	for i := lo; i < hi; i++ {
		id := int(ids[i])
		if id < 0 || id >= table.NRows() {
			b.fail(fmt.Errorf("get_rows: id %d outside %q of %d rows", id, table.Name, table.NRows()))
			continue
		}
		deq(n.F32Row(i), table.Row(id))
	}
}

// storeKV writes value rows into the cache rows named by the positions.
func (b *Backend) storeKV(n *graph.Tensor, ith, nth int) {
	cache, v, pos := n.Src[0], n.Src[1], n.Src[2].I32()
	lo, hi := split(len(pos), ith, nth)
	for i := lo; i < hi; i++ {
		p := int(pos[i])
		if p < 0 || p >= cache.NRows() {
			b.fail(fmt.Errorf("store_kv: position %d outside the cache of %d", p, cache.NRows()))
			continue
		}
		storeRow(cache, p, v.F32Row(i))
	}
}

// rmsNorm normalizes rows by their root mean square (kernels.RMSNorm).
func rmsNorm(n *graph.Tensor, ith, nth int) {
	x, w := n.Src[0], n.Src[1]
	var wr []float32
	if w != nil {
		wr = w.F32Row(0)
	}
	lo, hi := split(n.NRows(), ith, nth)
	for r := lo; r < hi; r++ {
		kernels.RMSNorm(n.F32Row(r), x.F32Row(r), wr, n.FParams[0])
	}
}

// rope rotates the heads of each row by the row's position. A thread computes the frequencies
// once per node and a row's angles once (into its scratch), and rotates every head with them.
func (b *Backend) rope(n *graph.Tensor, ith, nth int) {
	x, pos := n.Src[0], n.Src[1].I32()
	headDim, dims, mode := n.IParams[0], n.IParams[1], n.IParams[2]
	var factors []float32
	if n.Src[2] != nil {
		factors = n.Src[2].F32()
	}
	cs, freqs := b.scratch[ith].rope[:dims], b.scratch[ith].ropeFreqs[:dims/2]
	kernels.RopeFreqs(freqs, dims, n.FParams[0], n.FParams[1], factors)
	rotate := kernels.RopeNormal
	if mode == graph.RopeNeoX {
		rotate = kernels.RopeNeoX
	}
	lo, hi := split(n.NRows(), ith, nth)
	for r := lo; r < hi; r++ {
		kernels.RopeAngles(cs, int(pos[r]), freqs)
		src, dst := x.F32Row(r), n.F32Row(r)
		for h := 0; h < len(src); h += headDim {
			rotate(dst[h:h+headDim], src[h:h+headDim], cs)
		}
	}
}

// swiGLU is the gated activation silu(gate) * up (kernels.SwiGLU).
func swiGLU(n *graph.Tensor, ith, nth int) {
	g, u := n.Src[0], n.Src[1]
	lo, hi := split(n.NRows(), ith, nth)
	for r := lo; r < hi; r++ {
		kernels.SwiGLU(n.F32Row(r), g.F32Row(r), u.F32Row(r))
	}
}
