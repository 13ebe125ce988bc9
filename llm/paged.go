package llm

import (
	"fmt"

	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/kvcache"
)

// The paged KV pool. On a backend whose Supports accepts the paged ops (the CPU), a model's
// sessions share one kvcache.Pool of blocks of kvcache.BlockSize positions: a session takes
// blocks as its context grows and gives them back when it is rewound, reset or closed, and its
// graphs read and write keys and values through its block table (models.Model.BuildPaged).
// Other backends (CUDA today) keep a whole-context cache per session. Results are
// bit-identical either way.

// ErrKVFull: the model's KV pool has no free block for a session's next tokens (the other
// sessions hold them all). The session is left as it was before the call; it can go on once
// others give blocks back (Options.KVPool sizes the pool).
var ErrKVFull = kvcache.ErrPoolFull

// defaultPoolContexts is how many full contexts the pool holds when Options.KVPool is 0 (fewer
// when the memory check allows fewer, never less than one). On the CPU the pool's memory is
// committed by the system as blocks are first written, so positions never used cost nothing.
const defaultPoolContexts = 8

// checkPaged reports whether the device computes the paged graphs (one token, a prompt batch,
// the rows of two sessions), planned on a pool that allocates nothing.
func (m *Model) checkPaged(supports func(*graph.Tensor) error) error {
	pool, err := kvcache.NewPool(&sizer{}, m.arch.Hparams().KVShape(), 2*kvcache.BlocksFor(m.nctx), m.nctx, m.cacheType)
	if err != nil {
		return err
	}
	for _, c := range [][2]int{{1, 1}, {m.nbatch, 1}, {2, 2}} {
		ctx := graph.NewContext(m.arch.MaxTensors())
		step, err := m.arch.BuildPaged(ctx, pool, c[0], c[0]-c[1], c[1])
		if err != nil {
			return err
		}
		if err := checkNodes(supports, ctx, step); err != nil {
			return err
		}
	}
	return nil
}

// poolPositions is the size of the KV pool in positions: Options.KVPool or KVPoolBytes, or
// KVContexts (default defaultPoolContexts) contexts, fewer when the memory limit leaves room for
// fewer (spare is the memory left once the model and one session with a whole context are
// counted), never less than one context.
func (m *Model) poolPositions(opts Options, spare int64) int {
	if p := m.givenPool(opts); p > 0 {
		return p
	}
	contexts := defaultPoolContexts
	if opts.KVContexts > 0 {
		contexts = opts.KVContexts
	}
	n := contexts * m.nctx
	if per := int64(m.KVBytesPerPosition()); spare >= 0 && per > 0 {
		n = min(n, m.nctx+int(min(spare/per, int64(n))))
	}
	return n
}

// givenPool is the pool size the options give (KVPool, else KVPoolBytes), 0 if none.
func (m *Model) givenPool(opts Options) int {
	if opts.KVPool > 0 {
		return opts.KVPool
	}
	if per := int64(m.KVBytesPerPosition()); opts.KVPoolBytes > 0 && per > 0 {
		return int(max(min(opts.KVPoolBytes/per, 1<<30), 1))
	}
	return 0
}

// KVBytesPerPosition is the memory the keys and values of one position take (every layer).
func (m *Model) KVBytesPerPosition() int {
	shape := m.arch.Hparams().KVShape()
	row, err := m.cacheType.RowSize(int64(shape.Width))
	if err != nil {
		return 0
	}
	return 2 * shape.Layers * int(row)
}

// openPool allocates the pool of positions positions on the model's backend.
func (m *Model) openPool(positions int) error {
	if positions < 1 {
		return fmt.Errorf("%w: a KV pool of %d positions", ErrInvalidOption, positions)
	}
	pool, err := kvcache.NewPool(m.be, m.arch.Hparams().KVShape(), kvcache.BlocksFor(positions), m.nctx, m.cacheType)
	if err != nil {
		return err
	}
	m.pool = pool
	return nil
}

// KVStats describes the model's KV memory: the paged pool's blocks, or, without one (a backend
// that keeps a whole-context cache per session), Paged false and the other fields zero.
type KVStats struct {
	Paged     bool
	BlockSize int // positions per block
	Blocks    int // blocks in the pool
	Free      int // blocks free now
	Peak      int // most blocks in use at once since Load
	Sessions  int // sessions holding a block table (open, not closed)
	Denied    int // block requests refused because the pool was full
	Cached    int // free blocks keeping a prefix's keys and values for later sessions
	Hits      int // blocks sessions took from the cache instead of computing them
	Bytes     int64
}

// Used is the number of blocks in use.
func (k KVStats) Used() int { return k.Blocks - k.Free }

// KVStats reports the use of the model's KV pool.
func (m *Model) KVStats() KVStats {
	if m.pool == nil {
		return KVStats{}
	}
	st := m.pool.Stats()
	return KVStats{Paged: true, BlockSize: kvcache.BlockSize, Blocks: st.Blocks, Free: st.Free, Peak: st.Peak,
		Sessions: st.Sequences, Denied: st.Denied, Cached: st.Cached, Hits: st.Hits, Bytes: int64(m.pool.Bytes())}
}

// reserve makes the session's block table cover positions 0..n-1 (paged sessions only).
func (s *Session) reserve(n int) error {
	if s.seq == nil {
		return nil
	}
	if err := s.seq.Grow(n); err != nil {
		return fmt.Errorf("%w (session at %d tokens, %d more)", err, s.npast, n-s.npast)
	}
	return nil
}

// prepare readies the next n positions to be written (paged sessions only): blocks for them,
// and none shared with another session (see kvcache.Seq.Prepare).
func (s *Session) prepare(n int) error {
	if s.seq == nil {
		return nil
	}
	if err := s.seq.Prepare(s.npast, s.npast+n); err != nil {
		return fmt.Errorf("%w (session at %d tokens, %d more)", err, s.npast, n)
	}
	return nil
}

// commit content-addresses the session's full evaluated blocks for other sessions to take.
func (s *Session) commit() {
	if s.seq != nil && s.m.prefix {
		s.seq.Commit(s.tokens, s.npast)
	}
}

// adopt takes the cached blocks that hold the keys and values of the next pending tokens (all
// but the last, whose logits are wanted), skipping their computation.
func (s *Session) adopt() {
	if s.seq != nil && s.prefix && s.m.prefix && len(s.tokens)-s.npast > kvcache.BlockSize {
		s.npast = s.seq.Adopt(s.tokens, s.npast, len(s.tokens)-1)
	}
}

// SetPrefixCache turns the taking of cached blocks on or off for this session's next calls
// (llama-server's cache_prompt false: evaluate the whole prompt); it is on unless the model was
// loaded with Options.NoPrefixCache, which also keeps it off. The session's own blocks are
// still offered to others.
func (s *Session) SetPrefixCache(on bool) {
	s.mu.Lock()
	s.prefix = on
	s.mu.Unlock()
}

// trim gives back the blocks past the session's evaluated positions.
func (s *Session) trim() {
	if s.seq != nil {
		s.seq.Truncate(s.npast)
	}
}

// writeTable writes the session's block table into a step's Tables input (paged steps).
func (s *Session) writeTable(step *graph.Tensor) error {
	if step == nil {
		return nil
	}
	s.seq.PadTable(s.table)
	return s.m.be.Write(step, i32Bytes(s.table))
}

// kvRows calls fn with the bytes of the cache rows of positions 0..n-1 of layer l's keys (v
// false) or values (v true), in order: one slice for a contiguous cache, one per block for a
// paged one. It fails when the memory is not on the host.
func (s *Session) kvRows(l int, v bool, n int, fn func([]byte) error) error {
	if s.seq != nil {
		return s.seq.HostRows(l, v, n, fn)
	}
	rows := s.cache.HostRows(l, v, n)
	if rows == nil {
		return fmt.Errorf("the %s backend keeps the KV cache outside host memory", s.m.be.Name())
	}
	return fn(rows)
}

// Reserve makes the session hold the KV blocks of a context of n tokens (at most the context
// length), so that evaluating and generating up to n tokens in all cannot fail with ErrKVFull:
// a server admits a request once its blocks are reserved. When the pool has too few free
// blocks it takes none and returns an error matching ErrKVFull. Rewind, Reset, a failed call
// and Close give back the blocks past the evaluated tokens. A session without a paged pool
// (Model.KVStats().Paged false) has its whole context already, and Reserve does nothing. It
// fails like Eval while another call runs (ErrBusy) or after Close (ErrClosed).
func (s *Session) Reserve(n int) error {
	if err := s.begin(); err != nil {
		return err
	}
	defer s.end()
	if err := s.usable(); err != nil {
		return err
	}
	return s.reserve(min(max(n, 0), s.m.nctx))
}
