package server

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gorun-dev/gorun/llm"
)

// errBusy: every slot is busy and the queue is full.
var errBusy = errors.New("server busy: every slot is generating and the queue is full")

// slot is one session and what its context holds.
type slot struct {
	id     int
	sess   *llm.Session
	tokens []int32 // the session's context when it was released
	fresh  bool    // the request holding the slot asked to evaluate its whole prompt (cache_prompt false)

	// For /slots and /metrics, read without the session's lock: the context's length as the
	// server last saw it, whether a request holds the slot and since when, requests served.
	npast     atomic.Int64
	busySince atomic.Int64 // unix seconds; 0: idle
	requests  atomic.Int64
	cached    atomic.Int64 // prompt tokens the last generation found in the context (not evaluated again)
	idleSince time.Time    // when it was last released (under pool.mu): the least recent is evicted first
}

// pool hands out slots: a free one holding the longest prefix of the prompt, else the first to
// be released, to requests waiting in order, at most maxQueue of them.
type pool struct {
	mu       sync.Mutex
	free     []*slot
	waiters  []chan *slot
	maxQueue int
	total    int
	closed   bool
	all      []*slot // every slot, by id (fixed after newPool)
	// freed is closed (and replaced) when KV blocks may have come back: a slot was released
	// or a waiting request let go of its blocks.
	freed chan struct{}
	// kvWaiting counts requests holding a slot and waiting for KV blocks; evictions, idle
	// slots' contexts dropped to free blocks.
	kvWaiting atomic.Int64
	evictions atomic.Int64
}

func newPool(m *llm.Model, n, maxQueue int) (*pool, error) {
	p := &pool{maxQueue: maxQueue, total: n}
	p.all = make([]*slot, 0, n)
	for i := range n {
		sess, err := m.NewSession()
		if err != nil {
			return nil, fmt.Errorf("server: slot %d: %w", i, err)
		}
		s := &slot{id: i, sess: sess}
		p.free = append(p.free, s)
		p.all = append(p.all, s)
	}
	return p, nil
}

func (p *pool) stats() (busy, queued int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.total - len(p.free), len(p.waiters)
}

// acquire returns a slot, waiting in the queue while ctx lasts.
func (p *pool) acquire(ctx context.Context, prompt []int32) (*slot, error) {
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		return nil, llm.ErrClosed
	}
	if len(p.free) > 0 {
		best, bestN := 0, -1
		for i, s := range p.free {
			if n := commonPrefix(s.tokens, prompt); n > bestN {
				best, bestN = i, n
			}
		}
		s := p.free[best]
		p.free = append(p.free[:best], p.free[best+1:]...)
		p.mu.Unlock()
		s.busySince.Store(time.Now().Unix())
		return s, nil
	}
	if len(p.waiters) >= p.maxQueue {
		p.mu.Unlock()
		return nil, errBusy
	}
	ch := make(chan *slot, 1)
	p.waiters = append(p.waiters, ch)
	p.mu.Unlock()
	select {
	case s := <-ch:
		s.busySince.Store(time.Now().Unix())
		return s, nil
	case <-ctx.Done():
		p.mu.Lock()
		for i, w := range p.waiters {
			if w == ch {
				p.waiters = append(p.waiters[:i], p.waiters[i+1:]...)
				p.mu.Unlock()
				return nil, ctx.Err()
			}
		}
		p.mu.Unlock()
		// A slot was handed over as ctx ended: pass it on.
		p.release(<-ch)
		return nil, ctx.Err()
	}
}

// release returns a slot: to the first waiting request, else to the free list.
func (p *pool) release(s *slot) {
	s.tokens = s.sess.Tokens()
	s.sess.Rewind(len(s.tokens)) // give back the KV blocks reserved and not filled
	s.npast.Store(int64(len(s.tokens)))
	s.busySince.Store(0)
	s.requests.Add(1)
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		s.sess.Close()
		return
	}
	if len(p.waiters) > 0 {
		ch := p.waiters[0]
		p.waiters = p.waiters[1:]
		p.signalFreed()
		p.mu.Unlock()
		ch <- s
		return
	}
	p.free = append(p.free, s)
	s.idleSince = time.Now()
	p.signalFreed()
	p.mu.Unlock()
}

// signalFreed wakes the requests waiting for KV blocks (under p.mu).
func (p *pool) signalFreed() {
	if p.freed != nil {
		close(p.freed)
		p.freed = nil
	}
}

// freedSignal is the channel closed at the next signalFreed.
func (p *pool) freedSignal() <-chan struct{} {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.freed == nil {
		p.freed = make(chan struct{})
	}
	return p.freed
}

// evictIdle drops the context of the idle slot released longest ago that holds one, giving its
// KV blocks back to the pool (its prompt can no longer be reused). It reports whether there
// was one.
func (p *pool) evictIdle() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	var victim *slot
	for _, s := range p.free {
		if len(s.tokens) > 0 && (victim == nil || s.idleSince.Before(victim.idleSince)) {
			victim = s
		}
	}
	if victim == nil || victim.sess.Reset() != nil {
		return false
	}
	victim.tokens = nil
	victim.npast.Store(0)
	p.evictions.Add(1)
	return true
}

// hold returns the function that gives a slot back, once however often it is called: a
// handler calls it as soon as its generations end, before writing its answer (a client slow
// to read it must not keep the slot from other requests), and defers it for early returns.
func (p *pool) hold(s *slot) (release func()) {
	done := false
	return func() {
		if !done {
			done = true
			p.release(s)
		}
	}
}

func (p *pool) close() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.closed = true
	for _, s := range p.free {
		s.sess.Close()
	}
}

func commonPrefix(a, b []int32) int {
	n := 0
	for n < len(a) && n < len(b) && a[n] == b[n] {
		n++
	}
	return n
}

// kvTokens is how many positions the slots' contexts hold, and how many the KV memory can
// hold: the paged pool's positions, or a whole context of nctx positions per slot.
func (p *pool) kvTokens(m *llm.Model) (used, capacity int) {
	for _, s := range p.all {
		used += int(s.npast.Load())
	}
	if kv := m.KVStats(); kv.Paged {
		return used, kv.Blocks * kv.BlockSize
	}
	return used, len(p.all) * m.ContextLength()
}

// describe reports every slot for /slots.
func (p *pool) describe(nctx int) []slotInfo {
	out := make([]slotInfo, 0, len(p.all))
	for _, s := range p.all {
		since := s.busySince.Load()
		out = append(out, slotInfo{ID: s.id, NCtx: nctx, IsProcessing: since != 0, NPast: int(s.npast.Load()),
			NCached: int(s.cached.Load()), Requests: s.requests.Load(), BusySince: since})
	}
	return out
}
