package llm

import (
	"context"
	"fmt"

	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/quant"
)

// Importance holds, per weight matrix, the mean square of the activations that multiplied each
// of its input columns over a calibration text: the weight of each column's error in the
// matrix's output. (llama.cpp calls this an importance matrix.)
type Importance struct {
	Sums   map[string][]float64
	Counts map[string]int
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

// CollectImportance runs the model over tokens in chunks of the context length and accumulates
// the squares of every matrix multiplication's activations. The output matrix sees the final
// hidden states of every position (its logits are computed for all of them). Other sessions
// of the model may compute at the same time; their activations do not count.
func (m *Model) CollectImportance(ctx context.Context, tokens []int32, progress func(done, total int)) (*Importance, error) {
	if _, ok := m.be.(graph.Observable); !ok {
		return nil, fmt.Errorf("the %s backend cannot report activations", m.be.Name())
	}
	im := &Importance{Sums: map[string][]float64{}, Counts: map[string]int{}}
	s, err := m.NewSession()
	if err != nil {
		return nil, err
	}
	defer s.Close()
	// Only this session's computations are observed: other sessions of the model may run
	// meanwhile without adding to the statistics.
	s.observe = im.observe
	chunk := s.ContextLength()
	V := m.Hparams().NVocab
	logits := make([]float32, min(chunk, len(tokens))*V)
	for start := 0; start < len(tokens); start += chunk {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		toks := tokens[start:min(len(tokens), start+chunk)]
		s.Reset()
		if err := s.EvalLogits(toks, 0, logits[:len(toks)*V]); err != nil {
			return nil, err
		}
		if progress != nil {
			progress(start+len(toks), len(tokens))
		}
	}
	if len(im.Sums) == 0 {
		return nil, fmt.Errorf("no matrix multiplications observed")
	}
	return im, nil
}

func (im *Importance) observe(n *graph.Tensor) {
	if n.Op != graph.OpMulMat {
		return
	}
	w, x := n.Src[0], n.Src[1]
	if w.Flags&graph.FlagStatic == 0 || w.Name == "" || x.Type != quant.F32 {
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
}
