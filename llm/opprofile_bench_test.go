package llm

import (
	"fmt"
	"os"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/gorun-dev/gorun/graph"
)

// BenchmarkOpProfile measures where a prompt of 128 tokens and 64 generated tokens spend their
// wall time, by op (matrix products by weight name, without the layer number), through the
// session's observer: each node's time is the time since the previous node ended, so it
// includes the barrier after the node. Printed to stderr once per run; the observer's second
// barrier per node adds ~1-3 µs per node to the totals.
func BenchmarkOpProfile(b *testing.B) {
	m := benchModel(b)
	s, err := m.NewSession()
	if err != nil {
		b.Fatal(err)
	}
	prompt := make([]int32, 128)
	for i := range prompt {
		prompt[i] = int32(i * 37 % 50000)
	}
	obs, ok := m.be.(graph.Observable)
	if !ok {
		b.Skip("the backend cannot report nodes")
	}
	defer obs.SetObserver(nil)
	for _, phase := range []string{"pp128", "tg64"} {
		times := map[string]time.Duration{}
		var last time.Time
		timeNode := func(n *graph.Tensor) {
			now := time.Now()
			times[opKey(n)] += now.Sub(last)
			last = now
		}
		var total time.Duration
		for i := 0; i < b.N; i++ {
			s.Reset()
			if phase == "pp128" {
				obs.SetObserver(timeNode)
				last = time.Now()
				start := last
				if _, err := s.Eval(prompt); err != nil {
					b.Fatal(err)
				}
				total += time.Since(start)
				continue
			}
			obs.SetObserver(nil)
			if _, err := s.Eval(prompt[:16]); err != nil {
				b.Fatal(err)
			}
			// Decoding runs with the backend's observer as set here (the session passes none).
			obs.SetObserver(timeNode)
			start := time.Now()
			for j := 0; j < 64; j++ {
				last = time.Now()
				if _, err := s.Eval([]int32{464}); err != nil {
					b.Fatal(err)
				}
			}
			total += time.Since(start)
		}
		printProfile(phase, times, total, b.N)
	}
}

// opKey names a node for the profile: matrix products and row gathers by their weight's name
// without the layer, other nodes by op.
func opKey(n *graph.Tensor) string {
	if (n.Op == graph.OpMulMat || n.Op == graph.OpGetRows) && n.Src[0] != nil {
		name := n.Src[0].Name
		if strings.HasPrefix(name, "blk.") {
			if i := strings.Index(name[4:], "."); i >= 0 {
				name = name[4+i+1:]
			}
		}
		return fmt.Sprintf("%v %s (%v)", n.Op, strings.TrimSuffix(name, ".weight"), n.Src[0].Type)
	}
	return n.Op.String()
}

func printProfile(phase string, times map[string]time.Duration, total time.Duration, runs int) {
	keys := make([]string, 0, len(times))
	var sum time.Duration
	for k, d := range times {
		keys = append(keys, k)
		sum += d
	}
	sort.Slice(keys, func(i, j int) bool { return times[keys[i]] > times[keys[j]] })
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 / float64(runs) }
	fmt.Fprintf(os.Stderr, "%s: %.1f ms per run (%d runs), nodes %.1f ms\n",
		phase, ms(total), runs, ms(sum))
	for _, k := range keys {
		share := 100 * float64(times[k]) / float64(sum)
		fmt.Fprintf(os.Stderr, "  %-40s %9.3f ms %5.1f%%\n", k, ms(times[k]), share)
	}
}
