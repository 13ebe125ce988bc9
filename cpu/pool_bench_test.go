package cpu

import "testing"

type nopJob struct{}

func (nopJob) run(ith, nth int) {}

// BenchmarkPoolHandoff measures one Run of an empty job on 2 threads: the cost of waking the
// workers and waiting for them, paid once per graph computation.
func BenchmarkPoolHandoff(b *testing.B) {
	p := newPool(2)
	defer p.Close()
	for b.Loop() {
		p.Run(nopJob{})
	}
}
