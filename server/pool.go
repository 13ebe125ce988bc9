package server

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/gorun-dev/gorun/llm"
)

// errBusy: every slot is busy and the queue is full.
var errBusy = errors.New("server busy: every slot is generating and the queue is full")

// slot is one session and what its context holds.
type slot struct {
	id     int
	sess   *llm.Session
	tokens []int32 // the session's context when it was released
	cached int     // prompt tokens the last generation found in the context (not evaluated again)
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
}

func newPool(m *llm.Model, n, maxQueue int) (*pool, error) {
	p := &pool{maxQueue: maxQueue, total: n}
	for i := range n {
		sess, err := m.NewSession()
		if err != nil {
			return nil, fmt.Errorf("server: slot %d: %w", i, err)
		}
		p.free = append(p.free, &slot{id: i, sess: sess})
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
	p.mu.Lock()
	if p.closed {
		p.mu.Unlock()
		s.sess.Close()
		return
	}
	if len(p.waiters) > 0 {
		ch := p.waiters[0]
		p.waiters = p.waiters[1:]
		p.mu.Unlock()
		ch <- s
		return
	}
	p.free = append(p.free, s)
	p.mu.Unlock()
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
