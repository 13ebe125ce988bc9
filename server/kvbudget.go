package server

import (
	"context"
	"errors"
	"fmt"

	"github.com/gorun-dev/gorun/llm"
)

// admit reserves the KV blocks of a generation in its slot before it evaluates anything, so
// that on a paged model (llm.Session.Reserve) a running generation never finds the pool empty:
// the context of prompt tokens plus maxTokens (a whole context when unlimited), at most the
// context length and the pool. While the pool is short it frees the blocks of idle slots'
// kept contexts (least recently used first); when none is left it lets go of its own kept
// prefix (two waiting requests each holding part of the pool would wait for each other
// forever) and waits, holding its slot, until a slot is released or ctx ends. It returns how
// many prompt tokens the slot's context still holds.
func (s *Server) admit(ctx context.Context, sl *slot, keep, promptLen, maxTokens int) (int, error) {
	kv := s.model.KVStats()
	if !kv.Paged {
		return keep, nil
	}
	nctx := s.model.ContextLength()
	need := nctx
	if maxTokens >= 0 {
		need = min(promptLen+maxTokens, nctx)
	}
	capacity := kv.Blocks * kv.BlockSize
	if promptLen+1 > capacity {
		return keep, fmt.Errorf("%w: the prompt's %d tokens and a generated one need more positions than the KV pool's %d (--kv-budget)",
			llm.ErrContextFull, promptLen, capacity)
	}
	need = min(need, capacity)
	waiting := false
	defer func() {
		if waiting {
			s.pool.kvWaiting.Add(-1)
		}
	}()
	for {
		freed := s.pool.freedSignal() // before trying: a release after the try wakes us
		err := sl.sess.Reserve(need)
		if !errors.Is(err, llm.ErrKVFull) {
			return keep, err
		}
		if s.pool.evictIdle() {
			continue
		}
		if keep > 0 {
			if err := sl.sess.Reset(); err != nil {
				return keep, err
			}
			keep = 0
			s.pool.mu.Lock()
			s.pool.signalFreed()
			s.pool.mu.Unlock()
			continue
		}
		if !waiting {
			waiting = true
			s.pool.kvWaiting.Add(1)
		}
		select {
		case <-freed:
		case <-ctx.Done():
			return keep, fmt.Errorf("waiting for %d positions of the KV pool: %w", need, ctx.Err())
		}
	}
}
