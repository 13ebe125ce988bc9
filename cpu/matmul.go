package cpu

import (
	"fmt"
	"sync/atomic"

	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/quant"
)

const (
	// tileRows weight rows are dequantized together and reused across all activation rows.
	tileRows = 16
	// vecChunk is the number of weight rows a thread claims at a time for a single activation row.
	vecChunk = 32
)

// mulMat computes out[m][r] = dot(w row r, x row m). Threads claim chunks of weight rows from a
// shared counter, so uneven progress (other load on the machine) balances itself.
func (b *Backend) mulMat(idx int, n *graph.Tensor, ith, nth int) {
	w, x := n.Src[0], n.Src[1]
	N, M := w.Ne[1], x.NRows()
	out := n.F32()
	ctr := &b.chunks[idx]
	f := formatTable[w.Type]
	if b.quantAct && f.VecDot != nil {
		b.mulMatQuantized(n, ctr, ith, nth, f)
		return
	}
	if M <= 2 {
		// Few activation rows: stream the weights once, dequantizing inside the dot product.
		for {
			lo := int(ctr.Add(1)-1) * vecChunk
			if lo >= N {
				return
			}
			hi := min(N, lo+vecChunk)
			for m := 0; m < M; m++ {
				xr, o := x.F32Row(m), out[m*N:(m+1)*N]
				for r := lo; r < hi; r++ {
					o[r] = f.DotF32(w.Row(r), xr)
				}
			}
		}
	}
	K := w.Ne[0]
	tile := b.scratch[ith].tile
	for {
		lo := int(ctr.Add(1)-1) * tileRows
		if lo >= N {
			return
		}
		hi := min(N, lo+tileRows)
		for r := lo; r < hi; r++ {
			f.Dequantize(tile[(r-lo)*K:(r-lo+1)*K], w.Row(r))
		}
		for m := 0; m < M; m++ {
			xr, o := x.F32Row(m), out[m*N:(m+1)*N]
			for r := lo; r < hi; r++ {
				o[r] = quant.DotF32(tile[(r-lo)*K:(r-lo+1)*K], xr)
			}
		}
	}
}

// mulMatQuantized is ggml's integer path: the threads first quantize the activation rows to
// the weight type's dot-product partner type, wait for each other, then compute integer dots.
func (b *Backend) mulMatQuantized(n *graph.Tensor, ctr *atomic.Int64, ith, nth int, f *quant.Format) {
	w, x := n.Src[0], n.Src[1]
	K, N, M := w.Ne[0], w.Ne[1], x.NRows()
	rs := K / f.VecDotType.BlockSize() * f.VecDotType.TypeSize()
	xq := b.qact[:M*rs]
	vf := formatTable[f.VecDotType]
	lo, hi := split(M, ith, nth)
	for m := lo; m < hi; m++ {
		if err := vf.Quantize(xq[m*rs:(m+1)*rs], x.F32Row(m)); err != nil {
			b.fail(fmt.Errorf("mul_mat %q: activations: %w", w.Name, err))
		}
	}
	b.bar.wait()
	out := n.F32()
	for {
		lo := int(ctr.Add(1)-1) * vecChunk
		if lo >= N {
			return
		}
		hi := min(N, lo+vecChunk)
		for m := 0; m < M; m++ {
			xr, o := xq[m*rs:(m+1)*rs], out[m*N:(m+1)*N]
			for r := lo; r < hi; r++ {
				o[r] = f.VecDot(w.Row(r), xr)
			}
		}
	}
}
