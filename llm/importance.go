package llm

import (
	"context"
	"fmt"
	"strings"

	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/quant"
)

// Importance holds, per weight matrix, the statistics llama-imatrix accumulates over a
// calibration text: the sum of the squared activations that multiplied each input column,
// the number of activation rows summed, and the number of chunks (llama-imatrix's calls) in
// which the matrix was used. The mean square per column weighs each column's error in the
// matrix's output. (llama.cpp calls this an importance matrix; quantize.IMatrix is its file.)
type Importance struct {
	Sums   map[string][]float64
	Counts map[string]int // activation rows summed per column
	Calls  map[string]int // chunks that used the matrix (llama-imatrix's ncall)
	Chunks int            // chunks processed (llama-imatrix's last_call)
}

// ImportanceOptions choose llama-imatrix's protocol.
type ImportanceOptions struct {
	// Chunk is the number of tokens per independently evaluated chunk (llama-imatrix's -c);
	// 0 means the session's context length. Tokens past the last whole chunk are not used.
	Chunk int
	// MaxChunks limits the chunks processed (llama-imatrix's --chunks); 0: all.
	MaxChunks int
	// ProcessOutput also collects the output matrix's statistics over every position
	// (llama-imatrix's --process-output; here also a tied token_embd.weight serving as the
	// output matrix); otherwise only the blocks' matrices (names "blk.N....") are kept.
	ProcessOutput bool
	// Progress, when set, is called after each chunk.
	Progress func(done, total int)
}

// Weights returns the per-column mean squares, as quantizers take them.
func (im *Importance) Weights() map[string][]float32 {
	out := make(map[string][]float32, len(im.Sums))
	for name, s := range im.Sums {
		w := make([]float32, len(s))
		for i, v := range s {
			w[i] = float32(v / float64(im.Counts[name]))
		}
		out[name] = w
	}
	return out
}

// CollectImportance runs the model over tokens as llama-imatrix does: whole chunks of
// opts.Chunk tokens, each in a fresh context and beginning with BOS when the model wants one;
// it accumulates
// the squares of the activations of every matrix multiplication by a weight of the file. One
// chunk counts as one call of each matrix it used (llama-imatrix counts a call per
// micro-batch, one per chunk for chunks up to its 512-token batches). Other sessions of the
// model may compute at the same time; their activations do not count.
func (m *Model) CollectImportance(ctx context.Context, tokens []int32, opts ImportanceOptions) (*Importance, error) {
	if _, ok := m.be.(graph.Observable); !ok {
		return nil, fmt.Errorf("the %s backend cannot report activations", m.be.Name())
	}
	s, err := m.NewSession()
	if err != nil {
		return nil, err
	}
	defer s.Close()
	chunk := opts.Chunk
	if chunk == 0 {
		chunk = s.ContextLength()
	}
	if chunk < 1 || chunk > s.ContextLength() {
		return nil, fmt.Errorf("%w: chunk of %d tokens: must be 1..%d (the context length)", ErrInvalidOption, chunk, s.ContextLength())
	}
	n := len(tokens) / chunk
	if n == 0 {
		return nil, fmt.Errorf("%d tokens are fewer than one chunk of %d; use a longer text or a smaller chunk", len(tokens), chunk)
	}
	if opts.MaxChunks > 0 {
		n = min(n, opts.MaxChunks)
	}
	im := &Importance{Sums: map[string][]float64{}, Counts: map[string]int{}, Calls: map[string]int{}}
	used := map[string]bool{}
	// Only this session's computations are observed: other sessions of the model may run
	// meanwhile without adding to the statistics.
	s.observe = func(t *graph.Tensor) { im.observe(t, used, opts.ProcessOutput) }
	// Without the output matrix's statistics only the last position's logits are computed,
	// which skips most of the output matrix's work.
	from := chunk - 1
	if opts.ProcessOutput {
		from = 0
	}
	logits := make([]float32, (chunk-from)*m.Hparams().NVocab)
	toks := make([]int32, chunk)
	for c := 0; c < n; c++ {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		copy(toks, tokens[c*chunk:(c+1)*chunk])
		if sp := m.tok.Special(); sp.AddBOS && sp.BOS >= 0 {
			toks[0] = sp.BOS // as llama-imatrix and llama-perplexity
		}
		s.Reset()
		clear(used)
		if err := s.EvalLogits(toks, from, logits); err != nil {
			return nil, err
		}
		for name := range used {
			im.Calls[name]++
		}
		im.Chunks++
		if opts.Progress != nil {
			opts.Progress(c+1, n)
		}
	}
	if len(im.Sums) == 0 {
		return nil, fmt.Errorf("no matrix multiplications observed")
	}
	return im, nil
}

// observe adds a matrix multiplication's activations to the statistics of its weight: the
// blocks' matrices, and the output matrix when asked (llama-imatrix's filter).
func (im *Importance) observe(n *graph.Tensor, used map[string]bool, output bool) {
	if n.Op != graph.OpMulMat {
		return
	}
	w, x := n.Src[0], n.Src[1]
	if w.Flags&graph.FlagStatic == 0 || w.Name == "" || x.Type != quant.F32 {
		return
	}
	if !strings.HasPrefix(w.Name, "blk.") && !output {
		return
	}
	sums := im.Sums[w.Name]
	if sums == nil {
		sums = make([]float64, x.Ne[0])
		im.Sums[w.Name] = sums
	}
	for r := 0; r < x.NRows(); r++ {
		for j, v := range x.F32Row(r) {
			sums[j] += float64(v) * float64(v)
		}
	}
	im.Counts[w.Name] += x.NRows()
	used[w.Name] = true
}
