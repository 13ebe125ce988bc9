package models

import (
	"fmt"
	"math"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/kvcache"
	"github.com/gorun-dev/gorun/quant"
)

func init() {
	Register("llama", func(f *gguf.File, be graph.Backend) (Model, error) { return loadLlama(f, be, "llama") })
	Register("qwen2", func(f *gguf.File, be graph.Backend) (Model, error) { return loadLlama(f, be, "qwen2") })
}

// llama is Meta's Llama (2, 3, 3.1, 3.2; TinyLlama, SmolLM, Mistral 7B) and Alibaba's Qwen2 as
// llama.cpp lays them out: RMSNorm before attention, the feed-forward and the output layer;
// separate Q, K, V projections (Qwen2: with biases) rotated by RoPE (llama: ggml's normal mode
// on the rows llama.cpp's converter permutes; Qwen2: NeoX), grouped-query attention, a SwiGLU
// feed-forward, and an output matrix of its own or tied to the token embeddings.
type llama struct {
	hp        Hparams
	tokEmb    *graph.Tensor
	outNorm   *graph.Tensor
	output    *graph.Tensor
	ropeFreqs *graph.Tensor // Llama 3.1's frequency factors, or nil
	layers    []llamaLayer
}

type llamaLayer struct {
	attnNorm       *graph.Tensor
	wq, wk, wv, wo *graph.Tensor
	bq, bk, bv, bo *graph.Tensor // nil where the file has none
	ffnNorm        *graph.Tensor
	gate, up, down *graph.Tensor
}

func loadLlama(f *gguf.File, be graph.Backend, arch string) (Model, error) {
	hp, err := llamaHparams(f, arch)
	if err != nil {
		return nil, err
	}
	m := &llama{hp: hp}
	w := newWeights(f, be, 4+16*hp.NLayer)
	E, V, F := hp.NEmbd, hp.NVocab, hp.NFF
	Q, KV := hp.NHead*hp.HeadDim, hp.NHeadKV*hp.HeadDim
	w.load(&m.tokEmb, "token_embd.weight", E, V)
	w.load(&m.outNorm, "output_norm.weight", E)
	m.output = m.tokEmb
	if w.has("output.weight") {
		w.load(&m.output, "output.weight", E, V)
	}
	if w.has("rope_freqs.weight") {
		w.load(&m.ropeFreqs, "rope_freqs.weight", hp.Rope.Dims/2)
	}
	// Qwen2 always has Q/K/V biases (llama.cpp requires them); a llama file may have them.
	biases := arch == "qwen2"
	m.layers = make([]llamaLayer, hp.NLayer)
	for i := range m.layers {
		l := &m.layers[i]
		p := fmt.Sprintf("blk.%d.", i)
		w.load(&l.attnNorm, p+"attn_norm.weight", E)
		w.load(&l.wq, p+"attn_q.weight", E, Q)
		w.load(&l.wk, p+"attn_k.weight", E, KV)
		w.load(&l.wv, p+"attn_v.weight", E, KV)
		w.load(&l.wo, p+"attn_output.weight", Q, E)
		w.bias(&l.bq, p+"attn_q.bias", biases, Q)
		w.bias(&l.bk, p+"attn_k.bias", biases, KV)
		w.bias(&l.bv, p+"attn_v.bias", biases, KV)
		w.bias(&l.bo, p+"attn_output.bias", false, E)
		w.load(&l.ffnNorm, p+"ffn_norm.weight", E)
		w.load(&l.gate, p+"ffn_gate.weight", E, F)
		w.load(&l.up, p+"ffn_up.weight", E, F)
		w.load(&l.down, p+"ffn_down.weight", F, E)
	}
	w.allUsed(arch)
	if w.err != nil {
		return nil, w.err
	}
	return m, nil
}

// llamaHparams reads the shape of a llama or qwen2 file: the shared keys, the RMS norm's
// epsilon and RoPE's parameters. RoPE scalings other than linear (YaRN, LongRoPE) and mixtures
// of experts are refused by name.
func llamaHparams(f *gguf.File, arch string) (Hparams, error) {
	hp, r := readHparams(f, arch)
	hp.Norm = RMSNorm
	r.float(&hp.Eps, "attention.layer_norm_rms_epsilon", 0, 1, math.NaN())
	if r.err != nil {
		return hp, r.err
	}
	if !r.equals("attention.value_length", hp.HeadDim) {
		return hp, fmt.Errorf("%w: %s.attention.value_length differs from the key length %d: gorun needs keys and values of one size", ErrUnsupportedArchitecture, arch, hp.HeadDim)
	}
	if !r.equals("expert_count", 0) {
		return hp, fmt.Errorf("%w: %s with %s.expert_count > 0 is a mixture of experts (Mixtral-style), which gorun does not run", ErrUnsupportedArchitecture, arch, arch)
	}
	hp.Rope.NeoX = arch == "qwen2" // llama.cpp: LLAMA_ROPE_TYPE_NEOX for qwen2, NORM for llama
	r.intOr(&hp.Rope.Dims, "rope.dimension_count", hp.HeadDim, hp.HeadDim)
	r.float(&hp.Rope.FreqBase, "rope.freq_base", 0, math.Inf(1), 10000)
	hp.Rope.FreqScale, r.err = ropeScale(f, arch, r.err)
	if r.err == nil && hp.Rope.Dims%2 != 0 {
		r.err = fmt.Errorf("%s.rope.dimension_count = %d is odd: RoPE rotates pairs", arch, hp.Rope.Dims)
	}
	return hp, r.err
}

// ropeScale is the factor RoPE multiplies positions by: 1 without scaling, 1/factor for
// linear scaling (rope.scaling.type = linear, or the older rope.scale_linear). Other
// scalings change the angles in ways gorun does not compute, and are refused.
func ropeScale(f *gguf.File, arch string, err error) (float32, error) {
	if err != nil {
		return 1, err
	}
	typ := "none"
	if k := arch + ".rope.scaling.type"; f.Has(k) {
		if typ, err = f.String(k); err != nil {
			return 1, err
		}
	}
	factorKey := arch + ".rope.scaling.factor"
	switch typ {
	case "none":
		if k := arch + ".rope.scale_linear"; f.Has(k) {
			factorKey = k
			break
		}
		return 1, nil
	case "linear":
	default:
		return 1, fmt.Errorf("%w: %s.rope.scaling.type = %q: gorun runs RoPE without scaling or with linear scaling only", ErrUnsupportedArchitecture, arch, typ)
	}
	if !f.Has(factorKey) {
		return 1, nil
	}
	factor, err := f.Float(factorKey)
	switch {
	case err != nil:
		return 1, err
	case factor == 0 || factor == 1: // llama.cpp: 0 means no scaling
		return 1, nil
	case !(factor > 0 && factor < 1e6):
		return 1, fmt.Errorf("%s = %v is out of range", factorKey, factor)
	}
	return float32(1 / factor), nil
}

func (m *llama) Hparams() Hparams { return m.hp }

func (m *llama) MaxTensors() int { return 16 + 24*m.hp.NLayer }

func (m *llama) Build(ctx *graph.Context, cache *kvcache.Cache, n, logitsFrom int) (Step, error) {
	if !cache.Fits(m.hp.KVShape()) {
		return Step{}, fmt.Errorf("KV cache does not fit the model")
	}
	if n < 1 || logitsFrom < 0 || logitsFrom >= n {
		return Step{}, fmt.Errorf("logits of rows [%d, %d) requested", logitsFrom, n)
	}
	return m.forward(ctx, n, logitsFrom, func(i int, q, k, v, pos *graph.Tensor, scale float32) *graph.Tensor {
		kc := ctx.StoreKV(cache.K[i], k, pos)
		vc := ctx.StoreKV(cache.V[i], v, pos)
		return ctx.AttentionGQA(q, kc, vc, pos, m.hp.NHead, m.hp.NHeadKV, scale)
	})
}

func (m *llama) BuildRows(ctx *graph.Context, caches []*kvcache.Cache) (Step, error) {
	if len(caches) < 1 {
		return Step{}, fmt.Errorf("no rows")
	}
	for _, c := range caches {
		if !c.Fits(m.hp.KVShape()) {
			return Step{}, fmt.Errorf("KV cache does not fit the model")
		}
	}
	attend := rowsAttention(ctx, caches, m.hp.NLayer, m.hp.NHead, m.hp.NHeadKV)
	return m.forward(ctx, len(caches), 0, attend)
}

func (m *llama) BuildPaged(ctx *graph.Context, pool *kvcache.Pool, n, logitsFrom, seqs int) (Step, error) {
	return buildPaged(ctx, m.hp, pool, n, logitsFrom, seqs, func(n, logitsFrom int, attend attendFunc) (Step, error) {
		return m.forward(ctx, n, logitsFrom, attend)
	})
}

// forward adds the forward pass of n rows; attend stores a layer's keys and values and returns
// the attention output of the queries.
func (m *llama) forward(ctx *graph.Context, n, logitsFrom int, attend attendFunc) (Step, error) {
	hp := m.hp
	st := Step{
		Tokens:    ctx.NewInput("tokens", quant.I32, n),
		Positions: ctx.NewInput("positions", quant.I32, n),
	}
	rope := graph.Rope{HeadDim: hp.HeadDim, Dims: hp.Rope.Dims, Mode: graph.RopeNormal,
		FreqBase: hp.Rope.FreqBase, FreqScale: hp.Rope.FreqScale, Factors: m.ropeFreqs}
	if hp.Rope.NeoX {
		rope.Mode = graph.RopeNeoX
	}
	scale := float32(1 / math.Sqrt(float64(hp.HeadDim)))
	x := ctx.GetRows(m.tokEmb, st.Tokens)
	for i := range m.layers {
		l := &m.layers[i]
		h := ctx.RMSNorm(x, l.attnNorm, hp.Eps)
		q := ctx.RoPE(linear(ctx, l.wq, l.bq, h), st.Positions, rope)
		k := ctx.RoPE(linear(ctx, l.wk, l.bk, h), st.Positions, rope)
		v := linear(ctx, l.wv, l.bv, h)
		a := attend(i, q, k, v, st.Positions, scale)
		x = ctx.Add(x, linear(ctx, l.wo, l.bo, a))
		h = ctx.RMSNorm(x, l.ffnNorm, hp.Eps)
		h = ctx.SwiGLU(ctx.MulMat(l.gate, h), ctx.MulMat(l.up, h))
		x = ctx.Add(x, ctx.MulMat(l.down, h))
	}
	if logitsFrom > 0 {
		x = ctx.Rows(x, logitsFrom, n-logitsFrom) // the other rows' logits are not wanted
	}
	x = ctx.RMSNorm(x, m.outNorm, hp.Eps)
	st.Hidden = x
	st.Logits = ctx.MulMat(m.output, x)
	st.Logits.Name = "logits"
	return st, ctx.Err()
}

// linear is w·x, plus b when the model has that bias.
func linear(ctx *graph.Context, w, b, x *graph.Tensor) *graph.Tensor {
	y := ctx.MulMat(w, x)
	if b != nil {
		y = ctx.Add(y, b)
	}
	return y
}
