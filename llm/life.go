package llm

import (
	"fmt"
	"sync"
	"sync/atomic"
)

// lifecycle makes Close safe while sessions work: computations register with enter and exit;
// Close refuses new ones, waits for those running, then releases the backend and the file.
type lifecycle struct {
	mu     sync.Mutex
	idle   sync.Cond // signalled when active drops to 0
	closed atomic.Bool
	active int
	once   sync.Once
	err    error
}

// enter registers a computation; it fails with ErrClosed once Close has begun.
func (m *Model) enter() error {
	l := &m.life
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.closed.Load() {
		return fmt.Errorf("%w", ErrClosed)
	}
	l.active++
	return nil
}

func (m *Model) exit() {
	l := &m.life
	l.mu.Lock()
	l.active--
	if l.active == 0 && l.idle.L != nil {
		l.idle.Broadcast()
	}
	l.mu.Unlock()
}

// closedErr is ErrClosed once Close has begun, else nil.
func (m *Model) closedErr() error {
	if m.life.closed.Load() {
		return ErrClosed
	}
	return nil
}

// Close stops the model: computations already running finish (a generation stops after its
// current step and returns an error matching ErrClosed), then the backend (if the model made
// it) is released and the file unmapped. Every later use of the model or its sessions returns
// ErrClosed. Close is safe to call more than once and from several goroutines; all calls
// return when the model is closed. Generate's and Stream's callbacks run outside computations,
// so calling Close from one is safe: that generation then ends with ErrClosed.
func (m *Model) Close() error {
	m.life.once.Do(func() {
		l := &m.life
		l.mu.Lock()
		l.closed.Store(true)
		l.idle.L = &l.mu
		for l.active > 0 {
			l.idle.Wait()
		}
		l.mu.Unlock()
		m.closeBackend()
		l.err = m.file.Close()
	})
	return m.life.err
}
