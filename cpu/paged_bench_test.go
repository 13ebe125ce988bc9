package cpu

import (
	"math/rand/v2"
	"testing"

	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/quant"
)

// BenchmarkAttentionPagedVsRows compares one decode step's attention of 32 sequences at depth
// 500 (GPT-2 124M's heads: 12 of 64) over per-sequence caches (attention_rows) and over a
// paged pool through block tables (attention_paged, blocks scattered).
//
//	go test ./cpu -run XXX -bench AttentionPagedVsRows
func BenchmarkAttentionPagedVsRows(b *testing.B) {
	const H, D, N, depth, C = 12, 64, 32, 500, 1024
	for _, mode := range []string{"rows", "paged"} {
		b.Run(mode, func(b *testing.B) {
			f := &fixture{t: &testing.T{}, ctx: graph.NewContext(256), rng: rand.New(rand.NewPCG(1, 2)), be: New(2)}
			defer f.be.Close()
			q, _ := f.weight(quant.F32, H*D, N)
			k, _ := f.weight(quant.F32, H*D, N)
			pos := f.ctx.NewInput("pos", quant.I32, N)
			positions := make([]int32, N)
			for i := range positions {
				positions[i] = depth
			}
			inputs := map[string][]int32{"pos": positions}
			var out *graph.Tensor
			if mode == "rows" {
				caches := make([]*graph.Tensor, N)
				for i := range caches {
					caches[i], _ = f.weight(quant.F32, H*D, C)
				}
				st := f.ctx.StoreKVRows(caches, k, pos)
				out = f.ctx.AttentionRows(q, st, st, pos, H, 0.125)
			} else {
				T := C / graph.KVBlockSize
				pool, _ := f.weight(quant.F32, H*D, N*T*graph.KVBlockSize)
				tables := f.ctx.NewInput("tables", quant.I32, T, N)
				tab := make([]int32, T*N)
				for i := range tab {
					tab[i] = int32((i * 7919) % (T * N)) // scattered, each block once
				}
				inputs["tables"] = tab
				st := f.ctx.StoreKVPaged(pool, k, pos, tables)
				out = f.ctx.AttentionPaged(q, st, st, pos, H, 0, 0.125)
			}
			g := graph.NewGraph(256)
			if err := g.Build(out); err != nil {
				b.Fatal(err)
			}
			size, _ := g.Plan()
			buf, _ := f.be.Alloc(size)
			g.Bind(buf)
			for _, l := range g.Leaves {
				if vals, ok := inputs[l.Name]; ok {
					copy(l.I32(), vals)
				}
			}
			b.ResetTimer()
			for range b.N {
				if err := f.be.Compute(g); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N), "us/step")
		})
	}
}
