package llm

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"
)

// BenchmarkConcurrentDecode measures the aggregate generation speed of 1, 2, 4 and 8 sessions
// generating at the same time (greedy, each from its own 16-token prompt), batched into one
// forward pass per step, and the same sessions taking turns (one forward pass per token). An
// op is one token for every session; tokens/s counts all sessions' tokens. Session i's text
// must be the same in every run of the same length, batched with any number of others or
// alone (sessions=1, and the turns, whose steps each compute one session by itself).
//
//	go test ./llm -run XXX -bench ConcurrentDecode -benchtime 32x -args -threads 2 -shape 124M
func BenchmarkConcurrentDecode(b *testing.B) {
	m := benchModel(b)
	texts := map[[2]int]string{} // (session, tokens) -> the text the first run gave
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
				cpu0 := procCPUTime()
				var wg sync.WaitGroup
				errs := make([]error, n)
				got := make([]strings.Builder, n)
				for i, s := range sessions {
					wg.Add(1)
					go func() {
						defer wg.Done()
						_, errs[i] = s.Generate(context.Background(), "", GenerateOptions{MaxTokens: b.N, IgnoreEOS: true}, func(t string) error {
							got[i].WriteString(t)
							return nil
						})
					}()
				}
				wg.Wait()
				elapsed := time.Since(start)
				cpu := procCPUTime() - cpu0
				b.StopTimer()
				for _, err := range errs {
					if err != nil {
						b.Fatal(err)
					}
				}
				for i := range got {
					key := [2]int{i, b.N}
					if want, ok := texts[key]; !ok {
						texts[key] = got[i].String()
					} else if got[i].String() != want {
						b.Fatalf("session %d, %d tokens, %s with %d sessions: text %q, earlier run %q", i, b.N, mode, n, got[i].String(), want)
					}
				}
				b.ReportMetric(float64(n*b.N)/elapsed.Seconds(), "tokens/s")
				if cpu > 0 {
					b.ReportMetric(float64(n*b.N)/cpu.Seconds(), "tokens/cpu-s")
				}
				m.batch.mu.Lock()
				if m.batch.steps > 0 {
					b.ReportMetric(float64(m.batch.rows)/float64(m.batch.steps), "rows/step")
				}
				m.batch.mu.Unlock()
			})
		}
	}
}

// BenchmarkBatchStep measures one batched decode step of n sessions (the forward pass alone,
// without sampling or goroutines): an op is one token for each of the n sessions.
func BenchmarkBatchStep(b *testing.B) {
	m := benchModel(b)
	for _, n := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("rows=%d", n), func(b *testing.B) {
			sessions := make([]*Session, n)
			for i := range sessions {
				s, err := m.NewSession()
				if err != nil {
					b.Fatal(err)
				}
				if _, err := s.Eval(make([]int32, 16)); err != nil {
					b.Fatal(err)
				}
				sessions[i] = s
			}
			batch := make([]*Session, n)
			b.ResetTimer()
			cpu0 := procCPUTime()
			for i := 0; i < b.N; i++ {
				for _, s := range sessions {
					if len(s.tokens) >= 512 {
						s.tokens, s.npast = s.tokens[:16], 16
						s.trim() // paged sessions give the blocks past 16 back
					}
					s.tokens = append(s.tokens, 464)
					if err := s.prepare(1); err != nil { // as stepOne does: blocks for the new position
						b.Fatal(err)
					}
				}
				copy(batch, sessions)
				if err := m.batch.run(m, batch); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(n*b.N)/b.Elapsed().Seconds(), "tokens/s")
			if cpu := procCPUTime() - cpu0; cpu > 0 {
				// Tokens per second of CPU time of all threads: what the step costs, whatever
				// else the machine runs.
				b.ReportMetric(float64(n*b.N)/cpu.Seconds(), "tokens/cpu-s")
			}
		})
	}
}
