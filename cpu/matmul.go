package cpu

import (
	"fmt"
	"sync/atomic"

	"github.com/gorun-dev/gorun/backend"
	"github.com/gorun-dev/gorun/cpu/kernels"
	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/quant"
)

// tileRows weight rows are claimed by a thread at a time, dequantized once into its tile
// (float32), and multiplied with every activation row.
const tileRows = 16

// mulMat computes out[m][r] = dot(w row r, x row m). Threads claim tiles of weight rows from a
// shared counter, so uneven progress (other load on the machine) balances itself. Every output
// element is one kernels.Dot-ordered sum, whichever tile kernel computes it, so the result does
// not depend on the number of activation rows or threads.
func (b *Backend) mulMat(idx int, n *graph.Tensor, ith, nth int) {
	w, x := n.Src[0], n.Src[1]
	ctr := &b.chunks[idx]
	if ik := b.intKernel(n); ik != nil {
		b.mulMatQuantized(n, ctr, ith, nth, ik)
		return
	}
	K, N := w.Ne[0], w.Ne[1]
	if mvr := kernels.MatVecRows(w.Type); mvr != nil && useFused(w.Type, x.NRows()) && K > 0 {
		b.mulMatFused(n, ctr, mvr, &b.scratch[ith], nth)
		return
	}
	deq := kernels.Dequantizer(w.Type)
	tile := b.scratch[ith].tile
	for {
		lo := int(ctr.Add(1)-1) * tileRows
		if lo >= N {
			return
		}
		hi := min(N, lo+tileRows)
		var wt []float32
		if w.Type == quant.F32 && w.Nb[1] == 4*K {
			wt = quant.AsF32(w.Buf.Host[w.Off+lo*w.Nb[1] : w.Off+hi*w.Nb[1]])
		} else {
			wt = tile[:(hi-lo)*K]
			for r := lo; r < hi; r++ {
				deq(wt[(r-lo)*K:(r-lo+1)*K], w.Row(r))
			}
		}
		mulTile(n, x, wt, K, lo, hi, &b.scratch[ith].o4)
	}
}

// fusedRows: with fewer activation rows than this, weights are dequantized inside the dot
// products (kernels.MatVecRows) instead of into a tile; from it on, the tile's reuse pays,
// unless the weight type has a fused multi-row kernel, which forms each weight once for all
// rows: then up to multiRowMax rows (the decode step of that many sessions, a short prompt)
// stay fused. Streaming 256 MiB of weights on one thread, the fused kernels beat the tile path
// through 16 rows (by 10-40% at 16, 2-3x at 4) and meet it at 32 (kernels.BenchmarkStreamRows, cpu/PERF.md);
// prompts, in batches of more, keep the tile path.
const (
	fusedRows   = 3
	multiRowMax = 16
)

// useFused reports whether a product of rows activation rows with weights of type t streams
// the weights through the fused kernels (generation) rather than the tile path (prompts).
func useFused(t quant.Type, rows int) bool {
	return rows < fusedRows || kernels.FuseAllRows() || (rows <= multiRowMax && kernels.MatVecRowsFused(t))
}

// mulMatFused streams the weight rows through the fused dequantize-and-dot kernel: generation's
// path, bound by memory bandwidth. Results are bit-identical to the tile path. Each group of
// four weight rows is multiplied with every activation row before the next group, up to
// kernels.MaxMatVecRows rows per call, so the weights come from memory once per step however
// many sessions it serves (a second call finds them in L1). Threads claim fusedClaim(N, nth)
// rows at a time: a claim is an atomic add on a cache line the threads share, which moves
// between the cores each time; one per 16 rows cost ~20% of a 124M Q4_K_M token
// (cpu/PERF.md).
func (b *Backend) mulMatFused(n *graph.Tensor, ctr *atomic.Int64, mvr kernels.MatVecRowsFunc, s *threadScratch, nth int) {
	w, x := n.Src[0], n.Src[1]
	K := w.Ne[0]
	row := s.tile[:K]
	deq := kernels.Dequantizer(w.Type)
	N, M := w.Ne[1], x.NRows()
	out := n.F32()
	ws := w.Nb[1]
	xr, xs, evenRows := f32Rows(x)
	evenRows = evenRows && xs >= K
	claim := fusedClaim(N, nth)
	for {
		lo := int(ctr.Add(1)-1) * claim
		if lo >= N {
			return
		}
		hi := min(N, lo+claim)
		r4 := lo + (hi-lo)&^3
		for r := lo; r < r4; r += 4 {
			wr := w.Buf.Host[w.Off+r*ws : w.Off+r*ws+3*ws+w.RowBytes()]
			if !evenRows {
				for m := 0; m < M; m++ {
					mvr(x.F32Row(m), K, 1, K, wr, ws, out[m*N+r:], N)
				}
				continue
			}
			for m := 0; m < M; m += kernels.MaxMatVecRows {
				// The kernel writes the results in place (reading them back from a scratch
				// array right after its scalar stores stalls on store forwarding).
				mvr(xr[m*xs:], xs, min(kernels.MaxMatVecRows, M-m), K, wr, ws, out[m*N+r:], N)
			}
		}
		for r := r4; r < hi; r++ {
			// The last rows of an odd-sized matrix: the tile path's single-row dot.
			deq(row, w.Row(r))
			for m := 0; m < M; m++ {
				out[m*N+r] = kernels.Dot(x.F32Row(m), row)
			}
		}
	}
}

// fusedClaim is the number of weight rows a thread claims at a time in mulMatFused: about a
// sixteenth of each thread's share (so uneven progress still balances), a multiple of 16, at
// least 16 and at most 256.
func fusedClaim(N, nth int) int {
	return max(tileRows, min(256, N/(16*max(nth, 1)))&^(tileRows-1))
}

// mulTile multiplies the float32 weight rows lo..hi (wt, K values each) with every row of x.
// o4 is the thread's scratch for 1x4 results (a local would escape through the kernel
// variable and allocate).
func mulTile(n, x *graph.Tensor, wt []float32, K, lo, hi int, o4 *[4]float32) {
	M, N := x.NRows(), n.Ne[0]
	out := n.F32()
	rows := hi - lo
	r4 := rows &^ 3
	m := 0
	if xr, xs, ok := f32Rows(x); ok {
		// Six rows at a time, then four: the weight rows come from L2 once the tile outgrows
		// L1, and each vector loaded then serves six dot products instead of four.
		for ; m+6 <= M; m += 6 {
			xm := xr[m*xs:]
			o := out[m*N:]
			for r := 0; r < r4; r += 4 {
				kernels.Dot6x4(xm, xs, wt[r*K:], K, K, o[lo+r:], N)
			}
			for r := r4; r < rows; r++ {
				for i := 0; i < 6; i++ {
					o[i*N+lo+r] = kernels.Dot(xm[i*xs:i*xs+K], wt[r*K:(r+1)*K])
				}
			}
		}
		for ; m+4 <= M; m += 4 {
			xm := xr[m*xs:]
			o := out[m*N:]
			for r := 0; r < r4; r += 4 {
				kernels.Dot4x4(xm, xs, wt[r*K:], K, K, o[lo+r:], N)
			}
			for r := r4; r < rows; r++ {
				for i := 0; i < 4; i++ {
					o[i*N+lo+r] = kernels.Dot(xm[i*xs:i*xs+K], wt[r*K:(r+1)*K])
				}
			}
		}
	}
	for ; m < M; m++ {
		xm, o := x.F32Row(m), out[m*N:(m+1)*N]
		for r := 0; r < r4; r += 4 {
			kernels.Dot1x4(xm, wt[r*K:], K, o4)
			copy(o[lo+r:lo+r+4], o4[:])
		}
		for r := r4; r < rows; r++ {
			o[lo+r] = kernels.Dot(xm, wt[r*K:(r+1)*K])
		}
	}
}

// f32Rows views a 2-D float32 tensor whose rows are evenly spaced as one slice and its row
// stride in elements.
func f32Rows(t *graph.Tensor) ([]float32, int, bool) {
	if t.Type != quant.F32 || t.Ne[2] != 1 || t.Ne[3] != 1 || t.Nb[1]%4 != 0 {
		return nil, 0, false
	}
	end := t.Off + (t.Ne[1]-1)*t.Nb[1] + t.RowBytes()
	return quant.AsF32(t.Buf.Host[t.Off:end]), t.Nb[1] / 4, true
}

// intKernel returns the integer kernels for the matmul node n on the integer path, or nil for
// the float path. Never for the logits (see logitsNode), nor for weight types without integer
// kernels (K-quants, F16, ...). Otherwise b.quantAct decides: on takes every type with
// kernels; auto only the types in intByDefault, and only where the tier's kernels are SIMD
// (the generic tier's plain-Go reference is several times slower than the float path). The
// choice depends on the weight type and the tier, never on the number of rows, so a prompt
// evaluated in one batch gives the same bits as token by token.
func (b *Backend) intKernel(n *graph.Tensor) *kernels.IntKernel {
	if b.quantAct == backend.QuantActOff || n.Name == logitsNode {
		return nil
	}
	ik := kernels.IntKernelFor(n.Src[0].Type)
	if ik == nil || b.quantAct == backend.QuantActOn || intByDefault(n.Src[0].Type) && ik.SIMD() {
		return ik
	}
	return nil
}

// intByDefault reports whether weights of type t take the integer path by default (auto):
// those whose integer-path perplexity stayed within 0.2% of the float path's on every fixture.
// Q4_0 did (gpt2 -0.07%, kjv -0.04%); Q8_0 did not (gpt2 +0.22%): cpu/PERF.md, "Integer path,
// round 4".
func intByDefault(t quant.Type) bool { return t == quant.Q4_0 }

// logitsNode is the name the models give the matmul that computes the logits. It keeps float32
// activations on the integer path: the error of 8-bit activations there goes straight into
// the log-probabilities (a tenth of the integer path's KL divergence from the float path on
// the q8_0 fixture, cpu/PERF.md), and it costs the integer path little, since prompts compute
// the logits of their last row alone and generation's one row gains nothing from it.
const logitsNode = "logits"

// mulMatQuantized is ggml's integer path: the activation rows are quantized to Q8_0 (by all
// threads, then a barrier; or for generation's few rows, by each thread for itself), then
// multiplied by the integer kernels (mulMatInt).
func (b *Backend) mulMatQuantized(n *graph.Tensor, ctr *atomic.Int64, ith, nth int, ik *kernels.IntKernel) {
	w, x := n.Src[0], n.Src[1]
	K, M := w.Ne[0], x.NRows()
	s := &b.scratch[ith]
	if M < intTileMin {
		// Generation: each thread quantizes the few rows itself, into its own memory, which
		// costs less than waiting for the others at a barrier.
		s.iact = s.iactOwn.View(M, K)
		for m := range M {
			if err := kernels.QuantizeAct(&s.iact, m, x.F32Row(m), ik.Off); err != nil {
				b.fail(fmt.Errorf("mul_mat %q: activations: %w", w.Name, err))
				return
			}
		}
		b.mulMatInt(n, ctr, s, ik, nth)
		return
	}
	s.iact = b.iact.View(M, K)
	lo, hi := split(M, ith, nth)
	for m := lo; m < hi; m++ {
		if err := kernels.QuantizeAct(&s.iact, m, x.F32Row(m), ik.Off); err != nil {
			b.fail(fmt.Errorf("mul_mat %q: activations: %w", w.Name, err))
		}
	}
	b.bar.wait()
	b.mulMatInt(n, ctr, s, ik, nth)
}

// intTileMin: from this many activation rows on, the integer path repacks each claim of
// weight rows once into the tile kernel's layout; below, the rows stream through
// IntKernel.Rows. Both compute the same bits (kernels/intdot.go).
const intTileMin = 4

// mulMatInt multiplies with the integer kernels, the activations already in s.iact.
func (b *Backend) mulMatInt(n *graph.Tensor, ctr *atomic.Int64, s *threadScratch, ik *kernels.IntKernel, nth int) {
	w := n.Src[0]
	K, N, M := w.Ne[0], w.Ne[1], n.Src[1].NRows()
	out := n.F32()
	ws := w.Nb[1]
	rows := func(lo, hi int) []byte { return w.Buf.Host[w.Off+lo*ws : w.Off+(hi-1)*ws+w.RowBytes()] }
	if ik.Tile == nil || M < intTileMin {
		claim := fusedClaim(N, nth)
		for {
			lo := int(ctr.Add(1)-1) * claim
			if lo >= N {
				return
			}
			hi := min(N, lo+claim)
			// Sixteen rows at a time for every activation row, so a second row reads them
			// from the cache; two activation rows at once where the tier has a pair kernel,
			// which reads and unpacks each weight block once for both.
			for r := lo; r < hi; r += tileRows {
				rh := min(hi, r+tileRows)
				m := 0
				for ; ik.Rows2 != nil && m+2 <= M; m += 2 {
					ik.Rows2(&s.iact, m, rows(r, rh), ws, rh-r, out[m*N+r:], N)
				}
				for ; m < M; m++ {
					ik.Rows(&s.iact, m, rows(r, rh), ws, out[m*N+r:m*N+rh])
				}
			}
		}
	}
	t := &s.itile
	t.Size(K)
	for {
		lo := int(ctr.Add(1)-1) * kernels.IntTileRows
		if lo >= N {
			return
		}
		hi := min(N, lo+kernels.IntTileRows)
		wr := rows(lo, hi)
		ik.Repack(t, wr, ws, hi-lo)
		m := 0
		for ; m+8 <= M; m += 8 {
			intTile(ik.Tile8, 8, t, s, m, out, N, lo, hi)
		}
		for ; m+4 <= M; m += 4 {
			intTile(ik.Tile, 4, t, s, m, out, N, lo, hi)
		}
		for ; m < M; m++ {
			ik.Rows(&s.iact, m, wr, ws, out[m*N+lo:m*N+hi])
		}
	}
}

// intTile runs a tile kernel of rows activation rows from m on the weight rows lo..hi
// repacked in t, through the thread's scratch when the tile is partial.
func intTile(tile func(*kernels.IntTile, *kernels.IntAct, int, []float32, int), rows int, t *kernels.IntTile, s *threadScratch, m int, out []float32, N, lo, hi int) {
	if hi-lo == kernels.IntTileRows {
		tile(t, &s.iact, m, out[m*N+lo:], N)
		return
	}
	tile(t, &s.iact, m, s.o128[:], kernels.IntTileRows)
	for i := range rows {
		copy(out[(m+i)*N+lo:(m+i)*N+hi], s.o128[i*kernels.IntTileRows:])
	}
}
