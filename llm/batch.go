package llm

import (
	"fmt"
	"sync"
	"time"

	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/kvcache"
	"github.com/gorun-dev/gorun/models"
	"github.com/gorun-dev/gorun/quant"
)

// batcher computes the single-token steps of the model's sessions together (continuous
// batching): each step takes every session waiting for one and runs them as the rows of one
// forward pass, so every weight is read once per step for all of them, while attention runs
// per session over its own cache. Sessions join and leave between steps. There is no
// background goroutine: the first waiting session whose step is not running becomes the leader,
// runs the step for everyone queued, and wakes them.
type batcher struct {
	mu      sync.Mutex
	cond    sync.Cond // on mu: a step finished
	queue   []*Session
	spare   []*Session
	running bool
	// expect is the number of sessions in a generation loop: they will ask for a step soon,
	// so a leader waits (briefly) for them to make the batch full.
	expect   int
	wake     chan struct{}
	timer    *time.Timer
	lastStep time.Duration
	// Counters for tests and benchmarks: steps run, rows computed, the largest batch.
	steps, rows, maxRows int
	// alone makes every step compute one session (the sessions take turns), for benchmarks.
	alone bool
	// noRows: the backend cannot run the batch graph; sessions take turns.
	noRows bool

	// One graph per batch size, built on first use; a batch of other sessions rebinds its
	// rows' caches in place (see rebind), so sessions coming and going cost no rebuild.
	graphs map[int]*rowsGraph
	cur    *rowsGraph // the graph of the last batch
	builds int        // graphs built (for tests: membership changes must not rebuild)
	tok    []int32
	pos    []int32
	tables []int32 // block tables of a paged batch, one row per member
	logits []float32
}

// rowsGraph is the batch graph for some number of rows and the sessions whose caches its
// rows use now.
type rowsGraph struct {
	ctx     *graph.Context
	g       *graph.Graph
	arena   *graph.Buffer
	step    models.Step
	members []*Session
	// rows are the caches the graph's rows are bound to now: kept here, not read back from
	// members, whose caches go when they are closed (a closed member's row is rebound all the same).
	rows []*kvcache.Cache
}

// stepRequest is a session's place in the batcher's queue.
type stepRequest struct {
	done bool
	err  error
}

// join and leave count the sessions that will ask for steps.
func (b *batcher) join() {
	b.mu.Lock()
	b.expect++
	b.mu.Unlock()
}

func (b *batcher) leave() {
	b.mu.Lock()
	b.expect--
	b.signal()
	b.mu.Unlock()
}

// generating reports whether some session is in a generation loop.
func (b *batcher) generating() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.expect > 0
}

func (b *batcher) signal() {
	if b.wake == nil {
		b.wake = make(chan struct{}, 1)
	}
	select {
	case b.wake <- struct{}{}:
	default:
	}
}

// compute runs g on the backend, one computation at a time. observe, when set, sees g's nodes
// and no other computation's: the observer belongs to the backend, so it is set under
// computeMu.
func (m *Model) compute(g *graph.Graph, observe func(*graph.Tensor)) error {
	m.computeMu.Lock()
	defer m.computeMu.Unlock()
	if observe != nil {
		obs, ok := m.be.(graph.Observable)
		if !ok {
			return fmt.Errorf("the %s backend cannot report activations", m.be.Name())
		}
		obs.SetObserver(observe)
		defer obs.SetObserver(nil)
	}
	return m.be.Compute(g)
}

// stepOne evaluates the session's next pending token, batched with the other sessions' steps.
func (m *Model) stepOne(s *Session) error {
	if err := m.enter(); err != nil {
		return err
	}
	defer m.exit()
	if err := s.prepare(1); err != nil {
		return err
	}
	b := &m.batch
	b.mu.Lock()
	if b.cond.L == nil {
		b.cond.L = &b.mu
	}
	s.step = stepRequest{}
	b.queue = append(b.queue, s)
	b.signal()
	for !s.step.done {
		if b.running {
			b.cond.Wait()
			continue
		}
		b.running = true
		b.fill(m)
		batch := b.queue
		b.queue, b.spare = b.spare[:0], batch
		if b.alone && len(batch) > 1 {
			// Take the first in line; the rest stay queued for the next steps.
			b.queue = append(b.queue, batch[1:]...)
			batch = batch[:1]
		}
		b.mu.Unlock()
		start := time.Now()
		err := b.run(m, batch)
		b.lastStep = time.Since(start)
		b.mu.Lock()
		b.steps++
		b.rows += len(batch)
		b.maxRows = max(b.maxRows, len(batch))
		for _, r := range batch {
			r.step.err = err
			r.step.done = true
		}
		b.running = false
		b.cond.Broadcast()
	}
	err := s.step.err
	b.mu.Unlock()
	return err
}

// fill waits, unlocked, until every session in a generation loop has queued its step, or for a
// fraction of a step's time when one is late (its caller busy with the text), so a slow reader
// delays the others a little, never much.
func (b *batcher) fill(m *Model) {
	if len(b.queue) >= b.expect {
		return
	}
	wait := min(max(b.lastStep/2, time.Millisecond), 50*time.Millisecond)
	deadline := time.Now().Add(wait)
	if b.timer == nil {
		b.timer = time.NewTimer(wait)
	}
	for len(b.queue) < b.expect {
		left := time.Until(deadline)
		if left <= 0 {
			return
		}
		b.timer.Reset(left)
		b.mu.Unlock()
		select {
		case <-b.wake:
		case <-b.timer.C:
		}
		b.timer.Stop()
		b.mu.Lock()
	}
}

// run computes one step for the sessions of batch: a lone session runs its own decode graph;
// several run as the rows of the batch graph.
func (b *batcher) run(m *Model, batch []*Session) error {
	// Order by session so that the same sessions give the same graph.
	for i := 1; i < len(batch); i++ {
		for j := i; j > 0 && batch[j].id < batch[j-1].id; j-- {
			batch[j], batch[j-1] = batch[j-1], batch[j]
		}
	}
	if len(batch) == 1 || b.noRows {
		for _, s := range batch {
			if err := b.runAlone(m, s); err != nil {
				return err
			}
		}
		return nil
	}
	if err := b.runRows(m, batch); err != nil {
		// A backend without the rows ops (a GPU backend may lack them) fails before
		// computing anything; run the steps one by one, and if that works, from now on.
		for _, s := range batch {
			if err := b.runAlone(m, s); err != nil {
				return err
			}
		}
		b.noRows = true
	}
	return nil
}

// runAlone computes one session's step with its own decode graph.
func (b *batcher) runAlone(m *Model, s *Session) error {
	be := m.be
	sg := &s.decode
	b.tok = append(b.tok[:0], s.tokens[s.npast])
	b.pos = append(b.pos[:0], int32(s.npast))
	if err := be.Write(sg.step.Tokens, i32Bytes(b.tok)); err != nil {
		return err
	}
	if err := be.Write(sg.step.Positions, i32Bytes(b.pos)); err != nil {
		return err
	}
	if err := s.writeTable(sg.step.Tables); err != nil {
		return err
	}
	err := m.compute(sg.g, nil)
	if err != nil {
		return err
	}
	if err := be.Read(sg.step.Logits, quant.F32Bytes(s.logits)); err != nil {
		return err
	}
	s.npast++
	s.commit()
	s.lastWasBatch = false
	return nil
}

// runRows computes the sessions' steps as the rows of one batch graph.
func (b *batcher) runRows(m *Model, batch []*Session) error {
	be := m.be
	if err := b.build(m, batch); err != nil {
		return err
	}
	b.tok, b.pos = b.tok[:0], b.pos[:0]
	for _, s := range batch {
		b.tok = append(b.tok, s.tokens[s.npast])
		b.pos = append(b.pos, int32(s.npast))
	}
	rg := b.cur
	if err := be.Write(rg.step.Tokens, i32Bytes(b.tok)); err != nil {
		return err
	}
	if err := be.Write(rg.step.Positions, i32Bytes(b.pos)); err != nil {
		return err
	}
	if rg.step.Tables != nil {
		// Paged: row i reads and writes through row i of the tables, so the batch's members
		// are this step's tables (no rebinding).
		T := m.pool.TableLen
		if need := len(batch) * T; len(b.tables) < need {
			b.tables = make([]int32, need)
		}
		for i, s := range batch {
			s.seq.PadTable(b.tables[i*T : (i+1)*T])
		}
		if err := be.Write(rg.step.Tables, i32Bytes(b.tables[:len(batch)*T])); err != nil {
			return err
		}
	}
	err := m.compute(rg.g, nil)
	if err != nil {
		return err
	}
	V := m.arch.Hparams().NVocab
	if err := be.Read(rg.step.Logits, quant.F32Bytes(b.logits[:len(batch)*V])); err != nil {
		return err
	}
	for i, s := range batch {
		copy(s.logits, b.logits[i*V:(i+1)*V])
		s.npast++
		s.commit()
		s.lastWasBatch = false
	}
	return nil
}

// build readies the batch graph for these sessions: the graph of their number, built on first
// use, with its rows' caches rebound to theirs.
func (b *batcher) build(m *Model, batch []*Session) error {
	rg := b.graphs[len(batch)]
	if rg == nil {
		var err error
		if rg, err = b.newRowsGraph(m, batch); err != nil {
			return err
		}
		if b.graphs == nil {
			b.graphs = map[int]*rowsGraph{}
		}
		b.graphs[len(batch)] = rg
		b.builds++
	} else {
		rg.rebind(batch)
	}
	b.cur = rg
	if n := len(batch) * m.arch.Hparams().NVocab; len(b.logits) < n {
		b.logits = make([]float32, n)
	}
	return nil
}

// newRowsGraph builds, plans and binds the batch graph for the sessions of batch.
func (b *batcher) newRowsGraph(m *Model, batch []*Session) (*rowsGraph, error) {
	rg := &rowsGraph{ctx: graph.NewContext(m.arch.MaxTensors()), members: append([]*Session(nil), batch...)}
	var step models.Step
	var err error
	if m.pool != nil {
		step, err = m.arch.BuildPaged(rg.ctx, m.pool, len(batch), 0, len(batch))
	} else {
		caches := make([]*kvcache.Cache, len(batch))
		for i, s := range batch {
			caches[i] = s.cache
		}
		step, err = m.arch.BuildRows(rg.ctx, caches)
	}
	if err != nil {
		return nil, err
	}
	g := graph.NewGraph(rg.ctx.Used())
	if err := g.Build(step.Logits); err != nil {
		return nil, err
	}
	size, err := g.Plan()
	if err != nil {
		return nil, err
	}
	if rg.arena, err = m.be.Alloc(size); err != nil {
		return nil, fmt.Errorf("allocating %d bytes of compute memory: %w", size, err)
	}
	if err := g.Bind(rg.arena); err != nil {
		return nil, err
	}
	rg.g, rg.step = g, step
	for _, s := range batch {
		rg.rows = append(rg.rows, s.cache)
	}
	return rg, nil
}

// rebind points the graph's rows at the caches of batch's sessions: in every node that
// reads or writes per-row caches (graph.Tensor.Caches, which backends read at each
// computation), row i's tensor of its old session becomes the same layer's tensor of
// batch[i]'s session. Every session's cache has the model's shape, so nothing else changes.
func (rg *rowsGraph) rebind(batch []*Session) {
	same := true
	for i := range batch {
		same = same && rg.rows[i] == batch[i].cache
	}
	if same || rg.step.Tables != nil { // a paged graph's rows follow the tables written per step
		copy(rg.members, batch)
		return
	}
	swap := make([]map[*graph.Tensor]*graph.Tensor, len(batch))
	for i, s := range batch {
		old := rg.rows[i]
		if old == s.cache {
			continue
		}
		rg.rows[i] = s.cache
		swap[i] = make(map[*graph.Tensor]*graph.Tensor, 2*len(old.K))
		for l := range old.K {
			swap[i][old.K[l]] = s.cache.K[l]
			swap[i][old.V[l]] = s.cache.V[l]
		}
	}
	for _, n := range rg.g.Nodes {
		for i, c := range n.Caches {
			if r, ok := swap[i][c]; ok {
				n.Caches[i] = r
			}
		}
	}
	copy(rg.members, batch)
}

// DecodeStats counts the model's single-token steps since it was loaded: how many steps ran
// and how many session rows they computed in all (Rows/Steps is the mean batch size, the
// server's llamacpp:n_busy_slots_per_decode).
type DecodeStats struct {
	Steps, Rows, MaxRows int
}

// DecodeStats reports the batcher's counters.
func (m *Model) DecodeStats() DecodeStats {
	b := &m.batch
	b.mu.Lock()
	defer b.mu.Unlock()
	return DecodeStats{Steps: b.steps, Rows: b.rows, MaxRows: b.maxRows}
}
