package models

import (
	"fmt"

	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/kvcache"
	"github.com/gorun-dev/gorun/quant"
)

// attendFunc stores layer's keys k and values v at positions pos and returns the attention
// of the queries q over the cache: the part of a forward pass that differs between one
// sequence (Build) and the rows of several (BuildRows).
type attendFunc func(layer int, q, k, v, pos *graph.Tensor, scale float32) *graph.Tensor

// rowsAttention attends row r of a batched step over caches[r] alone, heads query heads over
// kvHeads key/value heads: every architecture's BuildRows uses it.
func rowsAttention(ctx *graph.Context, caches []*kvcache.Cache, layers, heads, kvHeads int) attendFunc {
	n := len(caches)
	// Per layer, the key and value caches of every row (one allocation per build).
	all := make([]*graph.Tensor, 2*layers*n)
	return func(i int, q, k, v, pos *graph.Tensor, scale float32) *graph.Tensor {
		kl, vl := all[2*i*n:(2*i+1)*n], all[(2*i+1)*n:(2*i+2)*n]
		for r, c := range caches {
			kl[r], vl[r] = c.K[i], c.V[i]
		}
		kc := ctx.StoreKVRows(kl, k, pos)
		vc := ctx.StoreKVRows(vl, v, pos)
		return ctx.AttentionRowsGQA(q, kc, vc, pos, heads, kvHeads, scale)
	}
}

// pagedAttention stores and attends through the block tables of a paged pool: every
// architecture's BuildPaged uses it.
func pagedAttention(ctx *graph.Context, pool *kvcache.Pool, tables *graph.Tensor, heads, kvHeads int) attendFunc {
	return func(i int, q, k, v, pos *graph.Tensor, scale float32) *graph.Tensor {
		kc := ctx.StoreKVPaged(pool.K[i], k, pos, tables)
		vc := ctx.StoreKVPaged(pool.V[i], v, pos, tables)
		return ctx.AttentionPaged(q, kc, vc, pos, heads, kvHeads, scale)
	}
}

// buildPaged checks a BuildPaged request, adds the step's block tables input and builds the
// forward pass with forward over the pool.
func buildPaged(ctx *graph.Context, hp Hparams, pool *kvcache.Pool, n, logitsFrom, seqs int,
	forward func(n, logitsFrom int, attend attendFunc) (Step, error)) (Step, error) {
	switch {
	case !pool.Fits(hp.KVShape()):
		return Step{}, fmt.Errorf("KV pool does not fit the model")
	case n < 1 || logitsFrom < 0 || logitsFrom >= n:
		return Step{}, fmt.Errorf("logits of rows [%d, %d) requested", logitsFrom, n)
	case seqs != 1 && (seqs != n || logitsFrom != 0):
		return Step{}, fmt.Errorf("%d sequences for %d rows (logits from %d): want 1, or one per row and every row's logits", seqs, n, logitsFrom)
	}
	tables := ctx.NewInput("block_tables", quant.I32, pool.TableLen, seqs)
	st, err := forward(n, logitsFrom, pagedAttention(ctx, pool, tables, hp.NHead, hp.NHeadKV))
	st.Tables = tables
	return st, err
}
