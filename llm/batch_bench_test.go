package llm

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"
)

// BenchmarkConcurrentDecode measures the aggregate generation speed of 1, 2, 4 and 8 sessions
// generating at the same time (greedy, each from its own 16-token prompt), batched into one
// forward pass per step, and the same sessions taking turns (one forward pass per token). An
// op is one token for every session; tokens/s counts all sessions' tokens.
//
//	go test ./llm -run XXX -bench ConcurrentDecode -benchtime 32x -args -threads 2 -shape 124M
func BenchmarkConcurrentDecode(b *testing.B) {
	m := benchModel(b)
	for _, mode := range []string{"batched", "turns"} {
		for _, n := range []int{1, 2, 4, 8} {
			if mode == "turns" && n == 1 {
				continue
			}
			b.Run(fmt.Sprintf("%s/sessions=%d", mode, n), func(b *testing.B) {
				m.batch.mu.Lock()
				m.batch.alone = mode == "turns"
				m.batch.steps, m.batch.rows, m.batch.maxRows = 0, 0, 0
				m.batch.mu.Unlock()
				defer func() { m.batch.alone = false }()
				sessions := make([]*Session, n)
				for i := range sessions {
					s, err := m.NewSession()
					if err != nil {
						b.Fatal(err)
					}
					prompt := make([]int32, 16)
					for j := range prompt {
						prompt[j] = int32((i*977 + j*131) % 50000)
					}
					if _, err := s.Eval(prompt); err != nil {
						b.Fatal(err)
					}
					sessions[i] = s
				}
				if b.N > m.ContextLength()-16 {
					b.Fatalf("%d tokens do not fit the context", b.N)
				}
				b.ResetTimer()
				start := time.Now()
				var wg sync.WaitGroup
				errs := make([]error, n)
				for i, s := range sessions {
					wg.Add(1)
					go func() {
						defer wg.Done()
						_, errs[i] = s.Generate(context.Background(), "", GenerateOptions{MaxTokens: b.N, IgnoreEOS: true}, func(string) error { return nil })
					}()
				}
				wg.Wait()
				elapsed := time.Since(start)
				b.StopTimer()
				for _, err := range errs {
					if err != nil {
						b.Fatal(err)
					}
				}
				b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "tokens/s")
				m.batch.mu.Lock()
				if m.batch.steps > 0 {
					b.ReportMetric(float64(m.batch.rows)/float64(m.batch.steps), "rows/step")
				}
				m.batch.mu.Unlock()
			})
		}
	}
}
