package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
)

// job is work that every thread of the pool runs with its own index.
type job interface {
	run(ith, nth int)
}

// pool is a set of persistent worker goroutines. Run wakes them for one job and waits until
// all are done; between jobs they sleep on their channel, so an idle pool costs nothing. Waking
// and waiting allocate nothing.
type pool struct {
	n    int
	wake []chan job
	wg   sync.WaitGroup
	stop chan struct{}
}

func newPool(n int) *pool {
	p := &pool{n: n, wake: make([]chan job, n), stop: make(chan struct{})}
	for i := 1; i < n; i++ {
		p.wake[i] = make(chan job, 1)
		go p.worker(i)
	}
	return p
}

func (p *pool) worker(ith int) {
	for {
		select {
		case j := <-p.wake[ith]:
			j.run(ith, p.n)
			p.wg.Done()
		case <-p.stop:
			return
		}
	}
}

// Run executes j on all threads; the caller's goroutine is thread 0.
func (p *pool) Run(j job) {
	p.wg.Add(p.n - 1)
	for i := 1; i < p.n; i++ {
		p.wake[i] <- j
	}
	j.run(0, p.n)
	p.wg.Wait()
}

func (p *pool) Close() { close(p.stop) }

// barrier makes n threads wait for each other. Threads spin briefly (the wait between two ops is
// usually short) and then yield, so oversubscribed machines still make progress.
type barrier struct {
	n     int32
	count atomic.Int32
	gen   atomic.Uint32
}

func (b *barrier) wait() {
	if b.n == 1 {
		return
	}
	g := b.gen.Load()
	if b.count.Add(1) == b.n {
		b.count.Store(0)
		b.gen.Add(1)
		return
	}
	for spins := 0; b.gen.Load() == g; spins++ {
		if spins > 64 {
			runtime.Gosched()
		}
	}
}
