package cpu

import (
	"fmt"
	"math"

	"github.com/gorun-dev/gorun/cpu/kernels"
	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/quant"
)

// attention computes causal softmax attention for every (query row, head) pair; threads claim
// pairs from a shared counter.
func (b *Backend) attention(idx int, n *graph.Tensor, ith int) {
	q, k, v, pos := n.Src[0], n.Src[1], n.Src[2], n.Src[3].I32()
	heads, group := attentionHeads(n)
	D := q.Ne[0] / heads
	scale := n.FParams[0]
	tasks := q.NRows() * heads
	s := &b.scratch[ith]
	ctr := &b.chunks[idx]
	for {
		task := int(ctr.Add(1) - 1)
		if task >= tasks {
			return
		}
		i, h := task/heads, task%heads
		p := int(pos[i])
		if p < 0 || p >= k.Ne[1] {
			b.fail(fmt.Errorf("attention: position %d outside the cache of %d", p, k.Ne[1]))
			continue
		}
		qh := q.F32Row(i)[h*D : (h+1)*D]
		out := n.F32Row(i)[h*D : (h+1)*D]
		scores := s.scores[:p+1]
		attendHead(out, qh, k, v, h/group*D, scores, scale, nil)
	}
}

// attentionHeads returns an attention node's query heads and how many of them share each
// key/value head (1 without grouped-query attention).
func attentionHeads(n *graph.Tensor) (heads, group int) {
	heads, kv := n.IParams[0], n.IParams[1]
	if kv == 0 {
		return heads, 1
	}
	return heads, heads / kv
}

// attendHead computes softmax(q·k_j * scale) over cache rows j < len(scores) and the weighted
// sum of the v rows, for the key/value head slice starting at element off. With a block table
// (a paged pool), logical row j is pool row table[j/KVBlockSize]*KVBlockSize + j%KVBlockSize;
// the scores are the same dot products and the weighted sum adds the same terms in the same
// order block after block, so the result is bit-identical to a contiguous cache's.
func attendHead(out, qh []float32, k, v *graph.Tensor, off int, scores []float32, scale float32, table []int32) {
	D := len(qh)
	n := len(scores)
	if k.Type == quant.F32 && v.Type == quant.F32 && scale > 0 {
		// The SIMD path: scores with Dot's order, float32 exponentials, and the weighted sum
		// of the value rows normalized once at the end.
		for j := 0; j < n; {
			row, rows := segment(n, table, j)
			kb, ks := cacheRows(k, row, off, rows, D)
			kernels.Scores(scores[j:j+rows], qh, kb, ks)
			j += rows
		}
		mx := scale * kernels.Max(scores)
		inv := 1 / kernels.ExpSum(scores, scale, mx)
		clear(out)
		for j := 0; j < n; {
			row, rows := segment(n, table, j)
			vb, vs := cacheRows(v, row, off, rows, D)
			kernels.WeightedSumAdd(out, scores[j:j+rows], vb, vs)
			j += rows
		}
		for i := range out {
			out[i] *= inv
		}
		return
	}
	mx := float32(math.Inf(-1))
	for j := range scores {
		sc := dotCache(qh, k, pagedRow(table, j), off) * scale
		scores[j] = sc
		mx = max(mx, sc)
	}
	var sum float64
	for j, sc := range scores {
		e := math.Exp(float64(sc - mx))
		scores[j] = float32(e)
		sum += e
	}
	inv := float32(1 / sum)
	clear(out)
	for j, p := range scores {
		axpyCache(out, p*inv, v, pagedRow(table, j), off, D)
	}
}

// segment returns the run of consecutive cache rows that holds logical rows j.. of 0..n-1: its
// first cache row and its length. Without a table that is all of them; with one, the rest of
// j's block and of the blocks that follow it in the pool (a sequence's blocks are often handed
// out in order), so that the kernels run over long stretches.
func segment(n int, table []int32, j int) (row, rows int) {
	if table == nil {
		return j, n - j
	}
	const B = graph.KVBlockSize
	b := j / B
	end := b + 1
	for end*B < n && table[end] == table[end-1]+1 {
		end++
	}
	return int(table[b])*B + j%B, min(end*B, n) - j
}

// pagedRow is the cache row of logical row j (itself without a table).
func pagedRow(table []int32, j int) int {
	if table == nil {
		return j
	}
	const B = graph.KVBlockSize
	return int(table[j/B])*B + j%B
}

// cacheRows views the elements off..off+d of rows first..first+n-1 of a float32 cache as one
// slice, with the row stride in elements.
func cacheRows(c *graph.Tensor, first, off, n, d int) ([]float32, int) {
	stride := c.Nb[1]
	start := c.Off + first*stride + 4*off
	return quant.AsF32(c.Buf.Host[start : start+(n-1)*stride+4*d]), stride / 4
}

func dotCache(qh []float32, k *graph.Tensor, j, off int) float32 {
	if k.Type == quant.F32 {
		return quant.DotF32(qh, k.F32Row(j)[off:off+len(qh)])
	}
	h := quant.AsU16(k.Row(j))[off : off+len(qh)]
	var s float32
	for i, x := range h {
		s += quant.F16ToF32(x) * qh[i]
	}
	return s
}

func axpyCache(out []float32, a float32, v *graph.Tensor, j, off, D int) {
	if v.Type == quant.F32 {
		vr := v.F32Row(j)[off : off+D]
		for i := range out {
			out[i] += a * vr[i]
		}
		return
	}
	h := quant.AsU16(v.Row(j))[off : off+D]
	for i := range out {
		out[i] += a * quant.F16ToF32(h[i])
	}
}

// storeKVRows writes row i of the values into its own cache n.Caches[i] at row positions[i],
// converting exactly as storeKV does.
func (b *Backend) storeKVRows(n *graph.Tensor, ith, nth int) {
	v, pos := n.Src[0], n.Src[1].I32()
	lo, hi := split(len(pos), ith, nth)
	for i := lo; i < hi; i++ {
		cache := n.Caches[i]
		p := int(pos[i])
		if p < 0 || p >= cache.NRows() {
			b.fail(fmt.Errorf("store_kv_rows: position %d outside the cache of %d", p, cache.NRows()))
			continue
		}
		storeRow(cache, p, v.F32Row(i))
	}
}

// storeRow writes src into row p of a float32 or float16 cache.
func storeRow(cache *graph.Tensor, p int, src []float32) {
	if cache.Type == quant.F32 {
		copy(cache.F32Row(p), src)
		return
	}
	dst := quant.AsU16(cache.Row(p))
	for j, x := range src {
		dst[j] = quant.F32ToF16(x)
	}
}

// attentionRows is attention for rows of several sequences: row i attends over its own caches
// with the same kernel (attendHead) as a lone sequence, so each row's result is bit-identical
// to attention over that sequence alone.
func (b *Backend) attentionRows(idx int, n *graph.Tensor, ith int) {
	q, ks, vs, pos := n.Src[0], n.Src[1].Caches, n.Src[2].Caches, n.Src[3].I32()
	heads, group := attentionHeads(n)
	D := q.Ne[0] / heads
	scale := n.FParams[0]
	tasks := q.NRows() * heads
	s := &b.scratch[ith]
	ctr := &b.chunks[idx]
	for {
		task := int(ctr.Add(1) - 1)
		if task >= tasks {
			return
		}
		i, h := task/heads, task%heads
		p := int(pos[i])
		if p < 0 || p >= ks[i].Ne[1] {
			b.fail(fmt.Errorf("attention_rows: position %d outside the cache of %d", p, ks[i].Ne[1]))
			continue
		}
		qh := q.F32Row(i)[h*D : (h+1)*D]
		out := n.F32Row(i)[h*D : (h+1)*D]
		attendHead(out, qh, ks[i], vs[i], h/group*D, s.scores[:p+1], scale, nil)
	}
}

// attentionRowsScores is the scratch an attention_rows node needs per thread.
func attentionRowsScores(n *graph.Tensor) int {
	m := 0
	for _, k := range n.Src[1].Caches {
		m = max(m, k.Ne[1])
	}
	return m
}

// pagedTable returns the block table of row i of a paged op (tables I32 [T, R]: R = 1, one
// sequence for every row, or one table per row) and checks that the blocks holding logical
// positions 0..p are inside the pool of poolRows rows.
func pagedTable(tables *graph.Tensor, i, p, poolRows int) ([]int32, error) {
	T := tables.Ne[0]
	r := 0
	if tables.Ne[1] > 1 {
		r = i
	}
	table := tables.I32()[r*T : (r+1)*T]
	const B = graph.KVBlockSize
	if p < 0 || p/B >= T {
		return nil, fmt.Errorf("position %d outside a block table of %d blocks of %d", p, T, B)
	}
	for b, blk := range table[:p/B+1] {
		if blk < 0 || int(blk) >= poolRows/B {
			return nil, fmt.Errorf("block %d of the table (position %d) is %d, outside the pool of %d blocks", b, p, blk, poolRows/B)
		}
	}
	return table, nil
}

// storeKVPaged writes row i of the values at its logical position through its block table
// (OpStoreKVPaged), converting as storeKV does.
func (b *Backend) storeKVPaged(n *graph.Tensor, ith, nth int) {
	pool, v, pos, tables := n.Src[0], n.Src[1], n.Src[2].I32(), n.Src[3]
	lo, hi := split(len(pos), ith, nth)
	for i := lo; i < hi; i++ {
		p := int(pos[i])
		table, err := pagedTable(tables, i, p, pool.NRows())
		if err != nil {
			b.fail(fmt.Errorf("store_kv_paged: %w", err))
			continue
		}
		storeRow(pool, pagedRow(table, p), v.F32Row(i))
	}
}

// attentionPaged is attention over a paged pool: row i attends to its sequence's logical
// positions 0..positions[i] through its block table, with attendHead, so each row's result is
// bit-identical to attention over a contiguous cache holding the same rows.
func (b *Backend) attentionPaged(idx int, n *graph.Tensor, ith int) {
	q, k, v, pos := n.Src[0], n.Src[1], n.Src[2], n.Src[3].I32()
	tables := k.Src[3]
	heads, group := attentionHeads(n)
	D := q.Ne[0] / heads
	scale := n.FParams[0]
	tasks := q.NRows() * heads
	s := &b.scratch[ith]
	ctr := &b.chunks[idx]
	for {
		task := int(ctr.Add(1) - 1)
		if task >= tasks {
			return
		}
		i, h := task/heads, task%heads
		p := int(pos[i])
		table, err := pagedTable(tables, i, p, k.NRows())
		if err != nil {
			b.fail(fmt.Errorf("attention_paged: %w", err))
			continue
		}
		qh := q.F32Row(i)[h*D : (h+1)*D]
		out := n.F32Row(i)[h*D : (h+1)*D]
		attendHead(out, qh, k, v, h/group*D, s.scores[:p+1], scale, table)
	}
}

// attentionPagedScores is the scratch an attention_paged node needs per thread: the longest
// sequence its tables can hold.
func attentionPagedScores(n *graph.Tensor) int {
	return n.Src[1].Src[3].Ne[0] * graph.KVBlockSize
}
