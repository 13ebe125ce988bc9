package llm

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"

	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/kvcache"
	"github.com/gorun-dev/gorun/models"
	"github.com/gorun-dev/gorun/quant"
	"github.com/gorun-dev/gorun/tokenizer"
)

// Session is one conversation with a model: the tokens of its context, their keys and values
// (the KV cache) and the graphs that fill it. Its single-token graph is built once, so
// generating a token allocates nothing. Sessions of one model that generate at the same time
// have their tokens computed together, one forward pass per step for all of them (see Model).
//
// A session holds one conversation, so it runs one call at a time, but every method may be
// called from any goroutine at any time, including from Generate's and Perplexity's callbacks:
//   - Calls that change the context (Generate, GenerateTokens, Stream, Eval, EvalContext,
//     EvalLogits, EvalAll, Logits, Perplexity, Rewind, Reset) return an error matching ErrBusy
//     while another of them is running; they never wait for it.
//   - Save, Pos, Tokens and LastStats wait for a step boundary of the running call (the next
//     callback of a Generate, or the call's end) and see a consistent state: a Save taken
//     during a generation restores exactly the tokens generated so far.
//   - Close stops the running call at its next step (the call returns an error matching
//     ErrClosed) and the memory is released when that call returns; Close itself waits only
//     for the step, prompt batch or Save in progress.
//
// The context may end with one token that is not in the cache yet: the last token Generate
// sampled. It counts in Pos and is evaluated by the next call that needs its logits, so
// generating in several calls gives the same text as one call, without a wasted evaluation.
type Session struct {
	m  *Model
	id uint64

	// mu guards the fields after closed: a call holds it while it works on the session and
	// lets go of it while a callback of its caller runs (a step boundary), so that Save, Pos,
	// Tokens and Close work from the callback and from other goroutines.
	mu sync.Mutex
	// busy is set for the whole of a call that changes the context, callbacks included.
	busy atomic.Bool
	// closed is set by Close before it takes mu, so that a running call sees it at its next
	// step (or prompt batch) and stops.
	closed atomic.Bool

	cache    *kvcache.Cache // a whole-context cache (backends without the paged ops), or
	seq      *kvcache.Seq   // the session's blocks of the model's pool
	table    []int32        // seq's block table padded to the pool's TableLen, for writing
	prefix   bool           // take cached blocks for a prompt's prefix (SetPrefixCache)
	tokens   []int32        // the context; tokens[:npast] have their keys and values in the cache
	npast    int
	logitsOK bool // logits follow tokens[npast-1], and npast == len(tokens)

	decode stepGraph // n = 1, built once
	batch  stepGraph // rebuilt per prompt batch size
	logits []float32 // last token's logits
	posBuf []int32   // positions input of a step

	lastWasBatch bool // which graph holds the latest logits
	last         Stats
	dec          *tokenizer.Decoder // generated text's decoder, kept between Generate calls
	step         stepRequest        // this session's request to the model's batcher
	// observe, when set, sees every node of the session's batch graphs (CollectImportance).
	observe func(*graph.Tensor)
}

// stepGraph is a built forward pass with its memory.
type stepGraph struct {
	ctx        *graph.Context
	g          *graph.Graph
	arena      *graph.Buffer
	step       models.Step
	n          int
	logitsFrom int
	hidden     bool // the graph's output is step.Hidden (embeddings), not step.Logits
}

var sessionIDs atomic.Uint64

// promptSlice is the most prompt tokens evaluated at once while other sessions are generating
// (evaluating a prompt in slices gives bit-identical results).
const promptSlice = 64

// NewSession starts a session and builds its decode graph. On a paged model its keys and
// values take blocks of the model's pool as its context grows (Options.KVPool); otherwise it
// allocates a KV cache for the whole context. Its memory is about
// EstimateMemory(ContextLength()).Session() (a paged session's KV part only as it fills).
// Close gives its blocks back; a session dropped without Close gives them back when the
// garbage collector finds it.
func (m *Model) NewSession() (*Session, error) {
	if err := m.enter(); err != nil {
		return nil, err
	}
	defer m.exit()
	hp := m.arch.Hparams()
	s := &Session{m: m, id: sessionIDs.Add(1), logits: make([]float32, hp.NVocab)}
	if m.pool != nil {
		s.seq = m.pool.NewSeq()
		s.prefix = m.prefix
		s.table = make([]int32, m.pool.TableLen)
		runtime.AddCleanup(s, func(q *kvcache.Seq) { q.Release() }, s.seq)
	} else {
		cache, err := kvcache.New(m.be, hp.KVShape(), m.nctx, m.cacheType)
		if err != nil {
			return nil, err
		}
		s.cache = cache
	}
	s.tokens = make([]int32, 0, m.nctx)
	s.posBuf = make([]int32, m.nbatch)
	s.decode.ctx = graph.NewContext(m.arch.MaxTensors())
	s.batch.ctx = graph.NewContext(m.arch.MaxTensors())
	if err := s.build(&s.decode, 1, 0, false); err != nil {
		s.free()
		return nil, err
	}
	return s, nil
}

// build (re)builds a step graph for n tokens, growing its arena only when needed. Its output
// is the logits of rows logitsFrom..n-1, or with hidden their final hidden states (the output
// layer is then left out).
func (s *Session) build(sg *stepGraph, n, logitsFrom int, hidden bool) error {
	if sg.g != nil && sg.n == n && sg.logitsFrom == logitsFrom && sg.hidden == hidden {
		return nil
	}
	sg.ctx.Reset()
	var step models.Step
	var err error
	if s.seq != nil {
		step, err = s.m.arch.BuildPaged(sg.ctx, s.m.pool, n, logitsFrom, 1)
	} else {
		step, err = s.m.arch.Build(sg.ctx, s.cache, n, logitsFrom)
	}
	if err != nil {
		return err
	}
	if sg.g == nil {
		sg.g = graph.NewGraph(sg.ctx.Used())
	}
	out := step.Logits
	if hidden {
		out = step.Hidden
	}
	if err := sg.g.Build(out); err != nil {
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
	sg.step, sg.n, sg.logitsFrom, sg.hidden = step, n, logitsFrom, hidden
	return nil
}

// begin starts a call that changes the context: it fails with ErrBusy while another one runs,
// else it locks the session until end.
func (s *Session) begin() error {
	if !s.busy.CompareAndSwap(false, true) {
		return fmt.Errorf("%w: another call (Generate, Eval, Perplexity, Rewind...) is running on it", ErrBusy)
	}
	s.mu.Lock()
	return nil
}

// end finishes a call begun with begin, releasing the session's memory if Close came meanwhile.
func (s *Session) end() {
	if s.closed.Load() {
		s.free()
	}
	s.busy.Store(false)
	s.mu.Unlock()
}

// outside wraps a caller's callback so that it runs with the session unlocked: it is called at
// a step boundary, where the session's state is consistent, and may Save, read or Close the
// session (Close then stops the call at its next step).
func outside[T any](s *Session, callback func(T) error) func(T) error {
	return func(x T) error {
		s.mu.Unlock()
		defer s.mu.Lock()
		return callback(x)
	}
}

// Pos is the number of tokens in the session's context.
func (s *Session) Pos() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tokens)
}

// Tokens returns a copy of the tokens of the context.
func (s *Session) Tokens() []int32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]int32(nil), s.tokens...)
}

// ContextLength is the number of tokens the session can hold.
func (s *Session) ContextLength() int { return s.m.nctx }

// Model is the model the session runs.
func (s *Session) Model() *Model { return s.m }

// Reset empties the context. It fails only while another call runs (ErrBusy).
func (s *Session) Reset() error { return s.Rewind(0) }

// Rewind keeps the first n tokens of the context and drops the rest, so that generation can
// go on from there (say, to regenerate an answer). Nothing is recomputed: the cache rows of the
// dropped tokens are overwritten later (a paged session gives back the blocks past the kept
// tokens, and those Reserve took that hold none). n must be in [0, Pos()].
func (s *Session) Rewind(n int) error {
	if err := s.begin(); err != nil {
		return err
	}
	defer s.end()
	return s.rewind(n)
}

func (s *Session) rewind(n int) error {
	if n < 0 || n > len(s.tokens) {
		return fmt.Errorf("%w: rewind to %d tokens of a %d-token context", ErrInvalidOption, n, len(s.tokens))
	}
	s.dec = nil
	if n < len(s.tokens) {
		s.tokens = s.tokens[:n]
		s.npast = min(s.npast, n)
		s.logitsOK = false
	}
	s.trim() // also the blocks Reserve took and nothing filled
	return nil
}

// Close releases the session's memory; using it afterwards returns ErrClosed. It is safe to
// call more than once, from any goroutine and from Generate's callback. A call running on the
// session stops at its next step with an error matching ErrClosed, and the memory is released
// when it returns.
func (s *Session) Close() error {
	s.closed.Store(true)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.busy.Load() {
		s.free()
	}
	return nil
}

// free drops the session's memory (the cache or its blocks, and the graphs' arenas).
func (s *Session) free() {
	s.cache = nil
	if s.seq != nil {
		s.seq.Release()
	}
	s.decode, s.batch = stepGraph{}, stepGraph{}
}

// usable reports ErrClosed for a closed session or model.
func (s *Session) usable() error {
	if s.closed.Load() {
		return fmt.Errorf("%w: the session was closed", ErrClosed)
	}
	return s.m.closedErr()
}

// Eval appends tokens to the context and returns the logits after the last one. The slice is
// the session's and stays valid until the next call. A single token runs the prebuilt decode
// graph (together with the other sessions' tokens of the same step); longer inputs run in
// batches. On error the context is left as it was.
func (s *Session) Eval(tokens []int32) ([]float32, error) {
	return s.EvalContext(context.Background(), tokens)
}

// EvalContext is Eval that stops between batches when ctx is done (the error then matches
// ErrCancelled and ctx.Err()).
func (s *Session) EvalContext(ctx context.Context, tokens []int32) ([]float32, error) {
	if len(tokens) == 0 {
		return nil, fmt.Errorf("%w: no tokens to evaluate", ErrInvalidOption)
	}
	if err := s.begin(); err != nil {
		return nil, err
	}
	defer s.end()
	if err := s.usable(); err != nil {
		return nil, err
	}
	if err := s.check(tokens); err != nil {
		return nil, err
	}
	s.dec = nil
	s.tokens = append(s.tokens, tokens...)
	return s.sync(ctx, len(s.tokens)-len(tokens))
}

// Logits evaluates what is pending (the last sampled token) and returns the logits after the
// context's last token. The slice stays valid until the next call.
func (s *Session) Logits(ctx context.Context) ([]float32, error) {
	if err := s.begin(); err != nil {
		return nil, err
	}
	defer s.end()
	if err := s.usable(); err != nil {
		return nil, err
	}
	if len(s.tokens) == 0 {
		return nil, fmt.Errorf("%w: the context is empty", ErrInvalidOption)
	}
	return s.sync(ctx, len(s.tokens))
}

// sync computes the cache rows of every pending token and the logits after the last one. On
// error it drops the tokens after keep (those appended by the failed call).
func (s *Session) sync(ctx context.Context, keep int) ([]float32, error) {
	if s.npast == len(s.tokens) && s.logitsOK {
		return s.logits, nil
	}
	if s.npast == len(s.tokens) {
		s.npast-- // the logits are gone (rewind, restore): recompute the last token
	}
	s.logitsOK = false
	for s.npast < len(s.tokens) {
		if err := ctx.Err(); err != nil {
			s.rollback(keep)
			return nil, cancelled(err)
		}
		if err := s.usable(); err != nil { // closed by another goroutine or a callback
			s.rollback(keep)
			return nil, err
		}
		s.adopt()
		n := min(len(s.tokens)-s.npast, s.m.nbatch)
		if n > promptSlice && s.m.batch.generating() {
			// Other sessions are generating: a long prompt goes in slices, so that their
			// steps run between them instead of waiting for the whole prompt.
			n = promptSlice
		}
		var err error
		if n == 1 {
			err = s.m.stepOne(s)
		} else {
			err = s.runBatch(n, n-1, false)
		}
		if err != nil {
			s.rollback(keep)
			return nil, err
		}
	}
	if s.lastWasBatch {
		if err := s.m.be.Read(s.batch.step.Logits, quant.F32Bytes(s.logits)); err != nil {
			return nil, err
		}
	}
	s.logitsOK = true
	return s.logits, nil
}

func (s *Session) rollback(keep int) {
	s.tokens = s.tokens[:keep]
	s.npast = min(s.npast, keep)
	s.logitsOK = false
	s.trim()
}

// EvalAll appends tokens to the context and writes the logits of every one of them into dst
// (len(tokens) rows of the vocabulary size).
func (s *Session) EvalAll(tokens []int32, dst []float32) error { return s.EvalLogits(tokens, 0, dst) }

// EvalLogits appends tokens to the context and writes the logits of tokens[from:] into dst
// (len(tokens)-from rows of the vocabulary size), as perplexity needs. The output layer runs
// only for those rows.
func (s *Session) EvalLogits(tokens []int32, from int, dst []float32) error {
	if err := s.begin(); err != nil {
		return err
	}
	defer s.end()
	return s.evalLogits(tokens, from, dst)
}

func (s *Session) evalLogits(tokens []int32, from int, dst []float32) error {
	V := s.m.arch.Hparams().NVocab
	if from < 0 || from >= len(tokens) || len(dst) != (len(tokens)-from)*V {
		return fmt.Errorf("%w: logits buffer of %d values for tokens %d..%d of a %d-token vocabulary", ErrInvalidOption, len(dst), from, len(tokens), V)
	}
	if err := s.usable(); err != nil {
		return err
	}
	if err := s.check(tokens); err != nil {
		return err
	}
	s.dec = nil
	keep := len(s.tokens)
	if s.npast < keep { // a pending token first
		if _, err := s.sync(context.Background(), keep); err != nil {
			return err
		}
	}
	s.tokens = append(s.tokens, tokens...)
	s.logitsOK = false
	for s.npast < len(s.tokens) {
		n := min(len(s.tokens)-s.npast, s.m.nbatch)
		// Logits of this batch start at the first wanted row in it, or its last row when
		// none is wanted (a graph always has an output).
		lf := min(max(from, 0), n-1)
		if err := s.usable(); err != nil { // closed meanwhile
			s.rollback(keep)
			return err
		}
		if err := s.runBatch(n, lf, false); err != nil {
			s.rollback(keep)
			return err
		}
		if from < n {
			rows := n - lf
			if err := s.m.be.Read(s.batch.step.Logits, quant.F32Bytes(dst[:rows*V])); err != nil {
				s.rollback(keep)
				return err
			}
			dst = dst[rows*V:]
		}
		from -= n
	}
	return nil
}

// check refuses tokens that do not fit the context or the vocabulary.
func (s *Session) check(tokens []int32) error {
	if len(s.tokens)+len(tokens) > s.m.nctx {
		return fmt.Errorf("%w: %d tokens in context + %d new > context length %d", ErrContextFull, len(s.tokens), len(tokens), s.m.nctx)
	}
	V := int32(s.m.arch.Hparams().NVocab)
	for _, t := range tokens {
		if t < 0 || t >= V {
			return fmt.Errorf("%w: token id %d is outside the vocabulary of %d", ErrInvalidOption, t, V)
		}
	}
	return nil
}

// runBatch computes the next n pending tokens with the session's batch graph, taking turns on
// the backend with the other sessions. Its output is the logits of rows logitsFrom..n-1, or
// with hidden their final hidden states.
func (s *Session) runBatch(n, logitsFrom int, hidden bool) error {
	if err := s.m.enter(); err != nil {
		return err
	}
	defer s.m.exit()
	if err := s.prepare(n); err != nil {
		return err
	}
	if err := s.build(&s.batch, n, logitsFrom, hidden); err != nil {
		return err
	}
	if err := s.writeTable(s.batch.step.Tables); err != nil {
		return err
	}
	pos := s.posBuf[:n]
	for i := range pos {
		pos[i] = int32(s.npast + i)
	}
	be := s.m.be
	if err := be.Write(s.batch.step.Tokens, i32Bytes(s.tokens[s.npast:s.npast+n])); err != nil {
		return err
	}
	if err := be.Write(s.batch.step.Positions, i32Bytes(pos)); err != nil {
		return err
	}
	err := s.m.compute(s.batch.g, s.observe)
	if err != nil {
		return err
	}
	s.npast += n
	s.commit()
	s.lastWasBatch = true
	return nil
}
