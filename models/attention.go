package models

import (
	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/kvcache"
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
