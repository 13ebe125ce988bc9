package cpu

import (
	"runtime"
	"sync"
	"sync/atomic"
	"time"
)

// job is work that every thread of the pool runs with its own index.
type job interface {
	run(ith, nth int)
}

// pool is a set of persistent worker goroutines. Run publishes a job; each worker spins on the
// job counter for a short while after finishing one (generation runs one graph per token, and
// the gap between two is short), and only then parks on its channel, so an idle pool costs
// nothing. Waking and waiting allocate nothing.
type pool struct {
	n       int
	workers []worker
	job     job
	gen     atomic.Uint64 // number of jobs published
	pending atomic.Int32  // workers still running the current job
	stop    atomic.Bool
	waiting atomic.Bool // Run sleeps on done for the last worker
	done    chan struct{}
}

type worker struct {
	parked atomic.Bool
	wake   chan struct{}
	_      [48]byte // keep workers' flags on separate cache lines
}

// spinFor is how long an idle worker polls for the next job before parking.
const spinFor = 200 * time.Microsecond

func newPool(n int) *pool {
	p := &pool{n: n, workers: make([]worker, n), done: make(chan struct{}, 1)}
	for i := 1; i < n; i++ {
		p.workers[i].wake = make(chan struct{}, 1)
		go p.worker(i)
	}
	return p
}

func (p *pool) worker(ith int) {
	w := &p.workers[ith]
	var seen uint64
	for {
		g := p.waitJob(w, seen)
		if p.stop.Load() {
			return
		}
		seen = g
		p.job.run(ith, p.n)
		if p.pending.Add(-1) == 0 && p.waiting.CompareAndSwap(true, false) {
			p.done <- struct{}{}
		}
	}
}

// waitJob returns the counter of a job newer than seen: it spins, then parks. A worker that
// parks re-checks the counter after announcing it, and Run wakes every worker that announced,
// so no job is missed.
func (p *pool) waitJob(w *worker, seen uint64) uint64 {
	start := time.Now()
	for spins := 0; ; spins++ {
		if g := p.gen.Load(); g != seen || p.stop.Load() {
			return g
		}
		if spins&255 == 255 {
			if time.Since(start) > spinFor {
				break
			}
			runtime.Gosched()
		}
	}
	for {
		w.parked.Store(true)
		if g := p.gen.Load(); g != seen || p.stop.Load() {
			if !w.parked.CompareAndSwap(true, false) {
				<-w.wake // Run saw us parked and sent a wake: consume it
			}
			return g
		}
		<-w.wake
	}
}

// Run executes j on all threads; the caller's goroutine is thread 0.
func (p *pool) Run(j job) {
	if p.n > 1 {
		p.job = j
		p.pending.Store(int32(p.n - 1))
		p.gen.Add(1)
		p.wakeParked()
	}
	j.run(0, p.n)
	p.waitWorkers()
	p.job = nil
}

// waitWorkers spins until the workers are done, then sleeps (a worker the OS descheduled may
// need this core).
func (p *pool) waitWorkers() {
	start := time.Now()
	for spins := 0; p.pending.Load() != 0; spins++ {
		if spins&63 == 63 && time.Since(start) > barrierSpin {
			p.waiting.Store(true)
			if p.pending.Load() == 0 {
				if !p.waiting.CompareAndSwap(true, false) {
					<-p.done // the last worker saw us waiting and sent
				}
				return
			}
			<-p.done
			return
		}
	}
}

func (p *pool) wakeParked() {
	for i := 1; i < p.n; i++ {
		w := &p.workers[i]
		if w.parked.Load() && w.parked.CompareAndSwap(true, false) {
			w.wake <- struct{}{}
		}
	}
}

// Close stops the workers (they exit at their next wait).
func (p *pool) Close() {
	p.stop.Store(true)
	p.gen.Add(1)
	p.wakeParked()
}

// barrier makes n threads wait for each other. Threads spin first (the wait between two ops is
// usually a few microseconds), then sleep on a condition variable, so that on a machine busier
// than its core count the thread everybody waits for can get a core back instead of losing it
// to a spinning one.
type barrier struct {
	n        int32
	count    atomic.Int32
	gen      atomic.Uint32
	sleepers atomic.Int32
	mu       sync.Mutex
	cond     sync.Cond
}

// barrierSpin is how long a thread spins at a barrier before it sleeps.
const barrierSpin = 50 * time.Microsecond

func (b *barrier) wait() {
	if b.n == 1 {
		return
	}
	g := b.gen.Load()
	if b.count.Add(1) == b.n {
		b.count.Store(0)
		b.gen.Add(1)
		if b.sleepers.Load() > 0 {
			b.mu.Lock()
			b.cond.Broadcast()
			b.mu.Unlock()
		}
		return
	}
	var start time.Time
	for spins := 0; b.gen.Load() == g; spins++ {
		if spins&63 != 63 {
			continue
		}
		if start.IsZero() {
			start = time.Now()
		} else if time.Since(start) > barrierSpin {
			b.sleep(g)
			return
		}
	}
}

// sleep waits for generation g to end. A sleeper announces itself before it checks the
// generation, and the last arriver checks for sleepers after ending it, so no wake is lost.
func (b *barrier) sleep(g uint32) {
	b.mu.Lock()
	b.sleepers.Add(1)
	for b.gen.Load() == g {
		b.cond.Wait()
	}
	b.sleepers.Add(-1)
	b.mu.Unlock()
}
