package models

import (
	"fmt"
	"math"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/quant"
)

// gpt2 is OpenAI's GPT-2: learned position embeddings, pre-norm blocks with fused QKV, GELU
// (tanh) MLP, final layer norm, and an LM head tied to the token embeddings (a separate
// output.weight when the file has one, as llama.cpp's converter writes).
type gpt2 struct {
	hp                 Hparams
	tokEmb, posEmb     *graph.Tensor
	outNormW, outNormB *graph.Tensor
	output             *graph.Tensor
	layers             []gpt2Layer
}

type gpt2Layer struct {
	attnNormW, attnNormB *graph.Tensor
	qkvW, qkvB           *graph.Tensor
	attnOutW, attnOutB   *graph.Tensor
	ffnNormW, ffnNormB   *graph.Tensor
	upW, upB             *graph.Tensor
	downW, downB         *graph.Tensor
}

func loadGPT2(f *gguf.File, be graph.Backend) (*gpt2, error) {
	hp, err := gpt2Hparams(f)
	if err != nil {
		return nil, err
	}
	m := &gpt2{hp: hp}
	w := &weights{f: f, be: be, ctx: graph.NewContext(8 + 12*hp.NLayer)}
	E, V, F := hp.NEmbd, hp.NVocab, hp.NFF
	load := func(dst **graph.Tensor, name string, dims ...int) {
		if err == nil {
			*dst, err = w.get(name, dims...)
		}
	}
	load(&m.tokEmb, "token_embd.weight", E, V)
	load(&m.posEmb, "position_embd.weight", E, hp.NCtx)
	load(&m.outNormW, "output_norm.weight", E)
	load(&m.outNormB, "output_norm.bias", E)
	if f.Tensor("output.weight") != nil {
		load(&m.output, "output.weight", E, V)
	} else {
		m.output = m.tokEmb
	}
	m.layers = make([]gpt2Layer, hp.NLayer)
	for i := range m.layers {
		l := &m.layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		load(&l.attnNormW, p+"attn_norm.weight", E)
		load(&l.attnNormB, p+"attn_norm.bias", E)
		load(&l.qkvW, p+"attn_qkv.weight", E, 3*E)
		load(&l.qkvB, p+"attn_qkv.bias", 3*E)
		load(&l.attnOutW, p+"attn_output.weight", E, E)
		load(&l.attnOutB, p+"attn_output.bias", E)
		load(&l.ffnNormW, p+"ffn_norm.weight", E)
		load(&l.ffnNormB, p+"ffn_norm.bias", E)
		load(&l.upW, p+"ffn_up.weight", E, F)
		load(&l.upB, p+"ffn_up.bias", F)
		load(&l.downW, p+"ffn_down.weight", F, E)
		load(&l.downB, p+"ffn_down.bias", E)
	}
	if err != nil {
		return nil, err
	}
	return m, nil
}

func gpt2Hparams(f *gguf.File) (Hparams, error) {
	hp := Hparams{Arch: "gpt2"}
	var err error
	get := func(dst *int, key string, limit int) {
		if err == nil {
			*dst, err = hparam(f, key, limit)
		}
	}
	get(&hp.NCtx, "gpt2.context_length", 1<<20)
	get(&hp.NEmbd, "gpt2.embedding_length", 1<<16)
	get(&hp.NHead, "gpt2.attention.head_count", 1<<10)
	get(&hp.NLayer, "gpt2.block_count", 1<<10)
	get(&hp.NFF, "gpt2.feed_forward_length", 1<<18)
	if err != nil {
		return hp, err
	}
	eps, err := f.Float("gpt2.attention.layer_norm_epsilon")
	if err != nil {
		return hp, err
	}
	if !(eps > 0 && eps < 1) {
		return hp, fmt.Errorf("gpt2.attention.layer_norm_epsilon = %v is out of range", eps)
	}
	hp.Eps = float32(eps)
	if hp.NEmbd%hp.NHead != 0 {
		return hp, fmt.Errorf("embedding length %d is not a multiple of the head count %d", hp.NEmbd, hp.NHead)
	}
	ti := f.Tensor("token_embd.weight")
	if ti == nil || len(ti.Dims) != 2 {
		return hp, fmt.Errorf("tensor \"token_embd.weight\" is missing or not a matrix")
	}
	if ti.Dims[1] < 1 || ti.Dims[1] > 1<<24 {
		return hp, fmt.Errorf("vocabulary of %d tokens is out of range", ti.Dims[1])
	}
	hp.NVocab = int(ti.Dims[1])
	return hp, nil
}

func (m *gpt2) Hparams() Hparams { return m.hp }

func (m *gpt2) MaxTensors() int { return 16 + 24*m.hp.NLayer }

func (m *gpt2) Build(ctx *graph.Context, cache *KVCache, n, logitsFrom int) (Step, error) {
	if err := m.checkCache(cache); err != nil {
		return Step{}, err
	}
	if n < 1 || logitsFrom < 0 || logitsFrom >= n {
		return Step{}, fmt.Errorf("logits of rows [%d, %d) requested", logitsFrom, n)
	}
	return m.forward(ctx, n, logitsFrom, func(i int, q, k, v, pos *graph.Tensor, scale float32) *graph.Tensor {
		kc := ctx.StoreKV(cache.K[i], k, pos)
		vc := ctx.StoreKV(cache.V[i], v, pos)
		return ctx.Attention(q, kc, vc, pos, m.hp.NHead, scale)
	})
}

func (m *gpt2) BuildRows(ctx *graph.Context, caches []*KVCache) (Step, error) {
	n := len(caches)
	if n < 1 {
		return Step{}, fmt.Errorf("no rows")
	}
	L := m.hp.NLayer
	for _, c := range caches {
		if err := m.checkCache(c); err != nil {
			return Step{}, err
		}
	}
	// Per layer, the key and value caches of every row (one allocation per build).
	all := make([]*graph.Tensor, 2*L*n)
	return m.forward(ctx, n, 0, func(i int, q, k, v, pos *graph.Tensor, scale float32) *graph.Tensor {
		kl, vl := all[2*i*n:(2*i+1)*n], all[(2*i+1)*n:(2*i+2)*n]
		for r, c := range caches {
			kl[r], vl[r] = c.K[i], c.V[i]
		}
		kc := ctx.StoreKVRows(kl, k, pos)
		vc := ctx.StoreKVRows(vl, v, pos)
		return ctx.AttentionRows(q, kc, vc, pos, m.hp.NHead, scale)
	})
}

func (m *gpt2) checkCache(c *KVCache) error {
	if c == nil || len(c.K) != m.hp.NLayer || c.K[0].Ne[0] != m.hp.NEmbd {
		return fmt.Errorf("KV cache does not fit the model")
	}
	return nil
}

// forward adds GPT-2's forward pass of n rows; attend stores a layer's keys and values and
// returns the attention output of the queries.
func (m *gpt2) forward(ctx *graph.Context, n, logitsFrom int, attend func(layer int, q, k, v, pos *graph.Tensor, scale float32) *graph.Tensor) (Step, error) {
	hp := m.hp
	E := hp.NEmbd
	st := Step{
		Tokens:    ctx.NewInput("tokens", quant.I32, n),
		Positions: ctx.NewInput("positions", quant.I32, n),
	}
	x := ctx.Add(ctx.GetRows(m.tokEmb, st.Tokens), ctx.GetRows(m.posEmb, st.Positions))
	scale := float32(1 / math.Sqrt(float64(E/hp.NHead)))
	for i := range m.layers {
		l := &m.layers[i]
		h := ctx.LayerNorm(x, l.attnNormW, l.attnNormB, hp.Eps)
		qkv := ctx.Add(ctx.MulMat(l.qkvW, h), l.qkvB)
		q := ctx.View2D(qkv, E, n, qkv.Nb[1], 0)
		k := ctx.View2D(qkv, E, n, qkv.Nb[1], 4*E)
		v := ctx.View2D(qkv, E, n, qkv.Nb[1], 8*E)
		a := attend(i, q, k, v, st.Positions, scale)
		x = ctx.Add(x, ctx.Add(ctx.MulMat(l.attnOutW, a), l.attnOutB))
		h = ctx.LayerNorm(x, l.ffnNormW, l.ffnNormB, hp.Eps)
		h = ctx.GELU(ctx.Add(ctx.MulMat(l.upW, h), l.upB))
		x = ctx.Add(x, ctx.Add(ctx.MulMat(l.downW, h), l.downB))
	}
	if logitsFrom > 0 {
		x = ctx.Rows(x, logitsFrom, n-logitsFrom) // the other rows' logits are not wanted
	}
	x = ctx.LayerNorm(x, m.outNormW, m.outNormB, hp.Eps)
	st.Logits = ctx.MulMat(m.output, x)
	st.Logits.Name = "logits"
	return st, ctx.Err()
}
