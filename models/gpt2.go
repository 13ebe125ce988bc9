package models

import (
	"fmt"
	"math"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/kvcache"
	"github.com/gorun-dev/gorun/quant"
)

func init() { Register("gpt2", loadGPT2) }

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

func loadGPT2(f *gguf.File, be graph.Backend) (Model, error) {
	hp, err := gpt2Hparams(f)
	if err != nil {
		return nil, err
	}
	m := &gpt2{hp: hp}
	w := newWeights(f, be, 8+12*hp.NLayer)
	E, V, F := hp.NEmbd, hp.NVocab, hp.NFF
	w.load(&m.tokEmb, "token_embd.weight", E, V)
	w.load(&m.posEmb, "position_embd.weight", E, hp.NCtx)
	w.load(&m.outNormW, "output_norm.weight", E)
	w.load(&m.outNormB, "output_norm.bias", E)
	m.output = m.tokEmb
	if w.has("output.weight") {
		w.load(&m.output, "output.weight", E, V)
	}
	m.layers = make([]gpt2Layer, hp.NLayer)
	for i := range m.layers {
		l := &m.layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		w.load(&l.attnNormW, p+"attn_norm.weight", E)
		w.load(&l.attnNormB, p+"attn_norm.bias", E)
		w.load(&l.qkvW, p+"attn_qkv.weight", E, 3*E)
		w.load(&l.qkvB, p+"attn_qkv.bias", 3*E)
		w.load(&l.attnOutW, p+"attn_output.weight", E, E)
		w.load(&l.attnOutB, p+"attn_output.bias", E)
		w.load(&l.ffnNormW, p+"ffn_norm.weight", E)
		w.load(&l.ffnNormB, p+"ffn_norm.bias", E)
		w.load(&l.upW, p+"ffn_up.weight", E, F)
		w.load(&l.upB, p+"ffn_up.bias", F)
		w.load(&l.downW, p+"ffn_down.weight", F, E)
		w.load(&l.downB, p+"ffn_down.bias", E)
	}
	if w.err != nil {
		return nil, w.err
	}
	return m, nil
}

// gpt2Hparams reads GPT-2's shape: the shared keys, and a layer norm epsilon. GPT-2 has no
// grouped-query attention and no RoPE.
func gpt2Hparams(f *gguf.File) (Hparams, error) {
	hp, r := readHparams(f, "gpt2")
	hp.Norm = LayerNorm
	r.float(&hp.Eps, "attention.layer_norm_epsilon", 0, 1, math.NaN())
	if r.err == nil && (hp.NHeadKV != hp.NHead || hp.HeadDim*hp.NHead != hp.NEmbd) {
		r.err = fmt.Errorf("gpt2 has %d heads of %d values for embeddings of %d (%d key/value heads): GPT-2 needs n_head x head_dim = n_embd and no grouped-query attention",
			hp.NHead, hp.HeadDim, hp.NEmbd, hp.NHeadKV)
	}
	return hp, r.err
}

func (m *gpt2) Hparams() Hparams { return m.hp }

func (m *gpt2) MaxTensors() int { return 16 + 24*m.hp.NLayer }

func (m *gpt2) Build(ctx *graph.Context, cache *kvcache.Cache, n, logitsFrom int) (Step, error) {
	if !cache.Fits(m.hp.KVShape()) {
		return Step{}, fmt.Errorf("KV cache does not fit the model")
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

func (m *gpt2) BuildRows(ctx *graph.Context, caches []*kvcache.Cache) (Step, error) {
	n := len(caches)
	if n < 1 {
		return Step{}, fmt.Errorf("no rows")
	}
	for _, c := range caches {
		if !c.Fits(m.hp.KVShape()) {
			return Step{}, fmt.Errorf("KV cache does not fit the model")
		}
	}
	attend := rowsAttention(ctx, caches, m.hp.NLayer, m.hp.NHead, m.hp.NHeadKV)
	return m.forward(ctx, n, 0, attend)
}

func (m *gpt2) BuildPaged(ctx *graph.Context, pool *kvcache.Pool, n, logitsFrom, seqs int) (Step, error) {
	return buildPaged(ctx, m.hp, pool, n, logitsFrom, seqs, func(n, logitsFrom int, attend attendFunc) (Step, error) {
		return m.forward(ctx, n, logitsFrom, attend)
	})
}

// forward adds GPT-2's forward pass of n rows; attend stores a layer's keys and values and
// returns the attention output of the queries.
func (m *gpt2) forward(ctx *graph.Context, n, logitsFrom int, attend attendFunc) (Step, error) {
	hp := m.hp
	E := hp.NEmbd
	st := Step{
		Tokens:    ctx.NewInput("tokens", quant.I32, n),
		Positions: ctx.NewInput("positions", quant.I32, n),
	}
	x := ctx.Add(ctx.GetRows(m.tokEmb, st.Tokens), ctx.GetRows(m.posEmb, st.Positions))
	scale := float32(1 / math.Sqrt(float64(hp.HeadDim)))
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
	st.Hidden = x
	st.Logits = ctx.MulMat(m.output, x)
	st.Logits.Name = "logits"
	return st, ctx.Err()
}
