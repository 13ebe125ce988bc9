package llm

import (
	"errors"
	"fmt"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/internal/osutil"
	"github.com/gorun-dev/gorun/kvcache"
	"github.com/gorun-dev/gorun/models"
	"github.com/gorun-dev/gorun/quant"
)

// ErrOutOfMemory is wrapped when a model and its context need more memory than the limit.
var ErrOutOfMemory = errors.New("not enough memory")

// MaxThreads is the most threads Load accepts (osutil.MaxThreads: four per CPU the system
// reports, and never more than 512).
func MaxThreads() int { return osutil.MaxThreads() }

// checkFile refuses, before anything is built from the file, what would make the model fail
// later or cost memory out of proportion to it: weight types the backend cannot compute with,
// and a vocabulary whose size disagrees with the token embeddings.
func checkFile(f *gguf.File) error {
	for i := range f.Tensors {
		if err := checkTensorType(&f.Tensors[i]); err != nil {
			return err
		}
	}
	return checkVocabulary(f)
}

// checkTensorType requires what the graph ops do with a tensor: a matrix is multiplied or
// looked up by rows, so its format needs a dequantizer and a float32 dot product (Q8_1 and
// Q8_K, ggml's activation formats, have neither as weights); a vector (bias, norm) is added
// or scaled as float32.
func checkTensorType(ti *gguf.TensorInfo) error {
	fm, err := quant.FormatOf(ti.Type)
	if len(ti.Dims) == 1 && ti.Type != quant.F32 {
		return fmt.Errorf("%w: tensor %q is a vector of type %v; gorun computes with vectors (biases, norms) in f32 only", ErrUnsupportedType, ti.Name, ti.Type)
	}
	switch {
	case err != nil:
		return fmt.Errorf("%w: tensor %q: %w", ErrUnsupportedType, ti.Name, err)
	case fm.Dequantize == nil || fm.DotF32 == nil:
		return fmt.Errorf("%w: tensor %q has type %v, which gorun cannot use as a weight (%v is an activation format: no dot product with it); re-quantize the model from f16 or f32", ErrUnsupportedType, ti.Name, ti.Type, ti.Type)
	}
	return nil
}

// checkVocabulary compares the sizes of the vocabulary arrays with the rows of
// token_embd.weight before the tokenizer is built from them (the arrays cost only their bytes
// in the file until then; a tokenizer costs several times more per token).
func checkVocabulary(f *gguf.File) error {
	emb := f.Tensor("token_embd.weight")
	if emb == nil || len(emb.Dims) < 2 {
		return nil // the architecture names what is missing
	}
	rows := emb.Dims[1]
	for _, key := range []string{"tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.scores"} {
		v, ok := f.Get(key)
		if !ok {
			continue
		}
		if n := int64(v.Len()); v.Type() != gguf.TypeArray || n != rows {
			return fmt.Errorf("%s has %d entries but token_embd.weight has %d rows: the vocabulary does not fit the model", key, n, rows)
		}
	}
	return nil
}

// MemoryEstimate is the memory a model and one session of it need, in bytes.
type MemoryEstimate struct {
	Weights int64 // the tensor data (mapped from the file; resident once used)
	KVCache int64 // keys and values of every layer for the context
	Compute int64 // the arenas of the single-token graph and of the prompt-batch graph
	Scratch int64 // per-thread working memory, activations quantized for integer dot products, logits buffers
}

// Session is what one session adds to the model: the KV cache, the compute arenas and the
// scratch memory.
func (e MemoryEstimate) Session() int64 { return e.KVCache + e.Compute + e.Scratch }

// Total is the weights and one session.
func (e MemoryEstimate) Total() int64 { return e.Weights + e.Session() }

func (e MemoryEstimate) String() string {
	return fmt.Sprintf("weights %s + KV cache %s + compute %s + scratch %s = %s",
		FormatBytes(e.Weights), FormatBytes(e.KVCache), FormatBytes(e.Compute), FormatBytes(e.Scratch), FormatBytes(e.Total()))
}

// EstimateMemory computes what the model and one session with a context of nctx tokens need
// (0: the model's context length), without allocating any of it: the KV cache's size, and the
// compute arenas of the graphs a session builds (planned on a backend that allocates nothing).
// Load compares it with the memory the machine has (Options.MemoryLimit); an application can
// use it to choose a context length or the number of sessions (each adds Session()).
func (m *Model) EstimateMemory(nctx int) (MemoryEstimate, error) {
	if nctx <= 0 {
		nctx = m.nctx
	}
	return estimate(m.file, m.arch, nctx, min(m.nbatch, nctx), max(m.Threads(), 1), m.cacheType)
}

func estimate(f *gguf.File, arch models.Model, nctx, nbatch, threads int, cacheType quant.Type) (MemoryEstimate, error) {
	var e MemoryEstimate
	for i := range f.Tensors {
		e.Weights += f.Tensors[i].Size
	}
	hp := arch.Hparams()
	var sz sizer
	cache, err := kvcache.New(&sz, hp.KVShape(), nctx, cacheType)
	if err != nil {
		return e, err
	}
	e.KVCache = int64(cache.Bytes())
	// The single-token graph, and a full batch with the logits of every row (the most a
	// batch graph needs: perplexity and calibration ask for many rows' logits).
	for _, n := range []int{1, nbatch} {
		ctx := graph.NewContext(arch.MaxTensors())
		step, err := arch.Build(ctx, cache, n, 0)
		if err != nil {
			return e, err
		}
		g := graph.NewGraph(ctx.Used())
		if err := g.Build(step.Logits); err != nil {
			return e, err
		}
		size, err := g.Plan()
		if err != nil {
			return e, err
		}
		e.Compute += int64(size)
	}
	// The CPU backend's per-thread tiles of dequantized weight rows (16 rows of the widest
	// matrix) and attention scores; activations quantized to 8 bits (at most ~1.1 bytes per
	// value of the widest input); the session's logits and a caller's logits for a batch.
	width := int64(max(hp.NEmbd, hp.NFF))
	V, B := int64(hp.NVocab), int64(nbatch)
	e.Scratch = int64(threads)*4*(16*width+int64(nctx)) + B*width*9/8 + 4*V + 4*B*V
	return e, nil
}

// sizer is a backend that allocates nothing: it sizes the buffers a session would get.
type sizer struct{}

func (*sizer) Name() string                            { return "sizer" }
func (*sizer) Alloc(size int) (*graph.Buffer, error)   { return &graph.Buffer{Size: size}, nil }
func (*sizer) Weights(b []byte) (*graph.Buffer, error) { return &graph.Buffer{Size: len(b)}, nil }
func (*sizer) Supports(*graph.Tensor) error            { return nil }
func (*sizer) Compute(*graph.Graph) error              { return fmt.Errorf("sizer: cannot compute") }
func (*sizer) Write(*graph.Tensor, []byte) error       { return fmt.Errorf("sizer: cannot write") }
func (*sizer) Read(*graph.Tensor, []byte) error        { return fmt.Errorf("sizer: cannot read") }
func (*sizer) Close() error                            { return nil }

// memAvailable is the machine's available memory (a variable for tests).
var memAvailable = osutil.MemAvailable

// checkMemory refuses a model and context that need more memory than the limit: limit bytes
// when positive, none when negative, the machine's available memory when zero (no check where
// that is unknown). A paged model's KV memory is its pool, of pool positions when given (at
// least a context's worth is counted). It returns the memory left over (-1: unchecked), from
// which the default pool is sized.
func (m *Model) checkMemory(limit int64, threads, pool int) (int64, error) {
	what := "the limit set (--mem-limit)"
	if limit == 0 {
		avail, ok := memAvailable()
		if !ok {
			return -1, nil
		}
		limit, what = avail, "available on this machine"
	}
	if limit < 0 {
		return -1, nil
	}
	e, err := estimate(m.file, m.arch, m.nctx, m.nbatch, threads, m.cacheType)
	if err != nil {
		return 0, err
	}
	if m.paged && pool > 0 {
		e.KVCache = max(e.KVCache, int64(kvcache.BlocksFor(pool)*kvcache.BlockSize)*int64(m.KVBytesPerPosition()))
	}
	if e.Total() <= limit {
		return limit - e.Total(), nil
	}
	if m.paged && pool > 0 {
		return 0, fmt.Errorf("%w: a KV pool of %d positions and a context of %d tokens need %s, but %s is %s; use a smaller pool (--kv-budget), context (-c) or batch (-b), or change the limit (--mem-limit)",
			ErrOutOfMemory, pool, m.nctx, e, what, FormatBytes(limit))
	}
	return 0, fmt.Errorf("%w: a context of %d tokens needs %s, but %s is %s; use a smaller context (-c) or batch (-b), or change the limit (--mem-limit)",
		ErrOutOfMemory, m.nctx, e, what, FormatBytes(limit))
}

// FormatBytes writes a size in binary units (KiB, MiB, GiB, TiB).
func FormatBytes(n int64) string {
	const units = "KMGTPE"
	if n < 1024 {
		return fmt.Sprintf("%d B", n)
	}
	v, u := float64(n)/1024, 0
	for v >= 1024 && u < len(units)-1 {
		v /= 1024
		u++
	}
	return fmt.Sprintf("%.1f %ciB", v, units[u])
}
