package llm

import (
	"fmt"

	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/models"
	"github.com/gorun-dev/gorun/quant"
)

// Session is one conversation with a model: a KV cache and the graphs that fill it. Its
// single-token graph is built once, so generating a token allocates nothing. A Session is not
// safe for concurrent use; use one per goroutine.
type Session struct {
	m     *Model
	cache *models.KVCache
	pos   int // tokens in the cache

	decode stepGraph // n = 1, built once
	batch  stepGraph // rebuilt per prompt batch size
	logits []float32 // last token's logits
	posBuf []int32   // positions input of a step

	lastWasBatch bool // which graph holds the latest logits
}

// stepGraph is a built forward pass with its memory.
type stepGraph struct {
	ctx        *graph.Context
	g          *graph.Graph
	arena      *graph.Buffer
	step       models.Step
	n          int
	logitsFrom int
}

// NewSession allocates a KV cache for the model's context length and builds the decode graph.
func (m *Model) NewSession() (*Session, error) {
	hp := m.arch.Hparams()
	cache, err := models.NewKVCache(m.be, hp.NLayer, hp.NEmbd, m.nctx, quant.F32)
	if err != nil {
		return nil, err
	}
	s := &Session{m: m, cache: cache, logits: make([]float32, hp.NVocab)}
	s.posBuf = make([]int32, m.nbatch)
	s.decode.ctx = graph.NewContext(m.arch.MaxTensors())
	s.batch.ctx = graph.NewContext(m.arch.MaxTensors())
	if err := s.build(&s.decode, 1, 0); err != nil {
		return nil, err
	}
	return s, nil
}

// build (re)builds a step graph for n tokens, growing its arena only when needed.
func (s *Session) build(sg *stepGraph, n, logitsFrom int) error {
	if sg.g != nil && sg.n == n && sg.logitsFrom == logitsFrom {
		return nil
	}
	sg.ctx.Reset()
	step, err := s.m.arch.Build(sg.ctx, s.cache, n, logitsFrom)
	if err != nil {
		return err
	}
	if sg.g == nil {
		sg.g = graph.NewGraph(sg.ctx.Used())
	}
	if err := sg.g.Build(step.Logits); err != nil {
		return err
	}
	size, err := sg.g.Plan()
	if err != nil {
		return err
	}
	if sg.arena == nil || sg.arena.Size < size {
		if sg.arena, err = s.m.be.Alloc(size); err != nil {
			return fmt.Errorf("allocating %d bytes of compute memory: %w", size, err)
		}
	}
	if err := sg.g.Bind(sg.arena); err != nil {
		return err
	}
	sg.step, sg.n, sg.logitsFrom = step, n, logitsFrom
	return nil
}

// Pos is the number of tokens in the session's context.
func (s *Session) Pos() int { return s.pos }

// ContextLength is the number of tokens the session can hold.
func (s *Session) ContextLength() int { return s.cache.Size }

// Reset empties the context.
func (s *Session) Reset() { s.pos = 0 }

// Rewind drops the tokens after the first n (the cache keeps them, they are just overwritten).
func (s *Session) Rewind(n int) {
	if n >= 0 && n < s.pos {
		s.pos = n
	}
}

// Eval appends tokens to the context and returns the logits after the last one. The slice is
// the session's and stays valid until the next call. A single token runs the prebuilt decode
// graph; longer inputs run in batches.
func (s *Session) Eval(tokens []int32) ([]float32, error) {
	if len(tokens) == 0 {
		return nil, fmt.Errorf("no tokens to evaluate")
	}
	if err := s.check(tokens); err != nil {
		return nil, err
	}
	for len(tokens) > 0 {
		n := min(len(tokens), s.m.nbatch)
		sg := &s.decode
		if n > 1 {
			sg = &s.batch
			if err := s.build(sg, n, n-1); err != nil {
				return nil, err
			}
		}
		if err := s.run(sg, tokens[:n]); err != nil {
			return nil, err
		}
		tokens = tokens[n:]
	}
	if err := s.m.be.Read(s.lastLogits(), quant.F32Bytes(s.logits)); err != nil {
		return nil, err
	}
	return s.logits, nil
}

// lastLogits is the logits tensor of the graph run last.
func (s *Session) lastLogits() *graph.Tensor {
	if s.lastWasBatch {
		return s.batch.step.Logits
	}
	return s.decode.step.Logits
}

// EvalAll appends tokens to the context and writes the logits of every one of them into dst
// (len(tokens) rows of the vocabulary size).
func (s *Session) EvalAll(tokens []int32, dst []float32) error { return s.EvalLogits(tokens, 0, dst) }

// EvalLogits appends tokens to the context and writes the logits of tokens[from:] into dst
// (len(tokens)-from rows of the vocabulary size), as perplexity needs. The output layer runs
// only for those rows.
func (s *Session) EvalLogits(tokens []int32, from int, dst []float32) error {
	V := s.m.arch.Hparams().NVocab
	if from < 0 || from >= len(tokens) || len(dst) != (len(tokens)-from)*V {
		return fmt.Errorf("logits buffer of %d values for tokens %d..%d of a %d-token vocabulary", len(dst), from, len(tokens), V)
	}
	if err := s.check(tokens); err != nil {
		return err
	}
	for len(tokens) > 0 {
		n := min(len(tokens), s.m.nbatch)
		// Logits of this batch start at the first wanted row in it, or its last row when
		// none is wanted (a graph always has an output).
		lf := min(max(from, 0), n-1)
		if err := s.build(&s.batch, n, lf); err != nil {
			return err
		}
		if err := s.run(&s.batch, tokens[:n]); err != nil {
			return err
		}
		if from < n {
			rows := n - lf
			if err := s.m.be.Read(s.batch.step.Logits, quant.F32Bytes(dst[:rows*V])); err != nil {
				return err
			}
			dst = dst[rows*V:]
		}
		tokens = tokens[n:]
		from -= n
	}
	return nil
}

// check refuses tokens that do not fit the context or the vocabulary.
func (s *Session) check(tokens []int32) error {
	if s.pos+len(tokens) > s.cache.Size {
		return fmt.Errorf("%w: %d tokens in context + %d new > context length %d", ErrContextFull, s.pos, len(tokens), s.cache.Size)
	}
	V := int32(s.m.arch.Hparams().NVocab)
	for _, t := range tokens {
		if t < 0 || t >= V {
			return fmt.Errorf("token id %d is outside the vocabulary of %d", t, V)
		}
	}
	return nil
}

// run writes the inputs of one step and computes it.
func (s *Session) run(sg *stepGraph, tokens []int32) error {
	n := len(tokens)
	pos := s.posBuf[:n]
	for i := range pos {
		pos[i] = int32(s.pos + i)
	}
	be := s.m.be
	if err := be.Write(sg.step.Tokens, i32Bytes(tokens)); err != nil {
		return err
	}
	if err := be.Write(sg.step.Positions, i32Bytes(pos)); err != nil {
		return err
	}
	s.m.computeMu.Lock()
	err := be.Compute(sg.g)
	s.m.computeMu.Unlock()
	if err != nil {
		return err
	}
	s.pos += n
	s.lastWasBatch = sg == &s.batch
	return nil
}
