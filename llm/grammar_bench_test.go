package llm

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/gorun-dev/gorun/grammar"
	"github.com/gorun-dev/gorun/internal/fixtures"
	"github.com/gorun-dev/gorun/internal/testmodel"
)

// BenchmarkGrammarOverhead measures generation speed (tokens/s, sampling at temperature 1
// with llama.cpp's default filters) without a grammar and with the JSON grammar of
// response_format json_object, on the tiny fixture model and on a GPT-2 124M-shaped random
// model (written once to $GORUN_BENCH_124M, default a file in the temporary directory).
// $GORUN_BENCH_TINY replaces the tiny model's file (another quantization), $GORUN_BENCH_NGL
// sets Options.GPULayers and $GORUN_BENCH_THREADS the threads (default 2). The results are
// in grammar/NOTES.md.
//
//	go test ./llm -run '^$' -bench GrammarOverhead -benchtime 200x
func BenchmarkGrammarOverhead(b *testing.B) {
	json, err := grammar.Parse(grammar.JSONGrammar())
	if err != nil {
		b.Fatal(err)
	}
	tiny := os.Getenv("GORUN_BENCH_TINY")
	if tiny == "" {
		tiny = fixtures.Path(b, "gpt2-tiny-f16.gguf")
	}
	opts := Options{Threads: 2}
	if n, err := strconv.Atoi(os.Getenv("GORUN_BENCH_THREADS")); err == nil {
		opts.Threads = n
	}
	if n, err := strconv.Atoi(os.Getenv("GORUN_BENCH_NGL")); err == nil {
		opts.GPULayers = n
	}
	models := []struct{ name, path string }{{"tiny", tiny}, {"124M", random124M(b)}}
	for _, mc := range models {
		m, err := Load(mc.path, opts)
		if err != nil {
			b.Fatal(err)
		}
		m.grammarVocab() // built once per model, on first use: not part of the steps
		for _, gc := range []struct {
			name string
			g    *grammar.Grammar
		}{{"none", nil}, {"json", json}} {
			b.Run(mc.name+"/"+gc.name, func(b *testing.B) {
				benchGenerate(b, m, gc.g)
			})
		}
		m.Close()
	}
}

// benchGenerate generates up to 32 tokens per iteration in a fresh session (seed i), and
// reports the tokens per second of the generation (the prompt's time excluded).
func benchGenerate(b *testing.B, m *Model, g *grammar.Grammar) {
	var tokens int
	var gen time.Duration
	for i := 0; b.Loop(); i++ {
		s, err := m.NewSession()
		if err != nil {
			b.Fatal(err)
		}
		opts := GenerateOptions{MaxTokens: 32, Sample: SampleOptions{Temperature: 1, Seed: uint64(i + 1), Grammar: g}}
		st, err := s.Generate(context.Background(), "Data:", opts, func(string) error { return nil })
		if err != nil {
			b.Fatal(err)
		}
		tokens += st.Tokens
		gen += st.GenTime
		s.Close()
	}
	b.ReportMetric(float64(tokens)/gen.Seconds(), "tokens/s")
	b.ReportMetric(float64(tokens)/float64(b.N), "tokens/op")
}

// random124M writes (once) a GPT-2 124M-shaped model with random weights.
func random124M(b *testing.B) string {
	path := os.Getenv("GORUN_BENCH_124M")
	if path == "" {
		path = filepath.Join(os.TempDir(), "gorun-bench-124M.gguf")
	}
	if _, err := os.Stat(path); err == nil {
		return path
	}
	c, err := testmodel.Preset("124M")
	if err != nil {
		b.Fatal(err)
	}
	if err := testmodel.Write(path, c); err != nil {
		b.Fatal(err)
	}
	return path
}

// BenchmarkGrammarSampler isolates the grammar's cost per token from the model's: it records
// a JSON-grammar generation of 64 tokens (temperature 1, llama.cpp's default filters) and the
// logits of every step, then replays the sampling of those steps with the grammar (the same
// tokens come out: checked) and without it. The difference of the two ns/token is what the
// grammar adds to each generated token, whatever the device computing the logits.
func BenchmarkGrammarSampler(b *testing.B) {
	json, err := grammar.Parse(grammar.JSONGrammar())
	if err != nil {
		b.Fatal(err)
	}
	tiny := os.Getenv("GORUN_BENCH_TINY")
	if tiny == "" {
		tiny = fixtures.Path(b, "gpt2-tiny-f16.gguf")
	}
	for _, mc := range []struct{ name, path string }{{"tiny", tiny}, {"124M", random124M(b)}} {
		m, err := Load(mc.path, Options{Threads: 2})
		if err != nil {
			b.Fatal(err)
		}
		opts := SampleOptions{Temperature: 1, Seed: 1, Grammar: json}
		ctxTokens, logits := recordSteps(b, m, opts, 64)
		m.grammarVocab()
		V := m.Hparams().NVocab
		steps := len(logits) / V
		start := len(ctxTokens) - steps
		for _, withGrammar := range []bool{false, true} {
			name := mc.name + "/none"
			if withGrammar {
				name = mc.name + "/json"
			}
			b.Run(name, func(b *testing.B) {
				o := opts
				if !withGrammar {
					o.Grammar = nil
				}
				for b.Loop() {
					s := m.NewSampler(o)
					for k := range steps {
						p := start + k
						tok, err := s.SampleAt(logits[k*V:(k+1)*V], ctxTokens[:p], uint64(p))
						if err != nil {
							b.Fatal(err)
						}
						if withGrammar && tok != ctxTokens[p] {
							b.Fatalf("step %d: replay sampled %d, generation %d", k, tok, ctxTokens[p])
						}
					}
				}
				b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*steps), "ns/token")
			})
		}
		m.Close()
	}
}

// recordSteps generates up to n tokens under opts and returns the context's tokens and the
// logits each generated token was sampled from.
func recordSteps(b *testing.B, m *Model, opts SampleOptions, n int) ([]int32, []float32) {
	s, err := m.NewSession()
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	st, err := s.Generate(context.Background(), "Data:", GenerateOptions{MaxTokens: n, Sample: opts}, func(string) error { return nil })
	if err != nil {
		b.Fatal(err)
	}
	toks := s.Tokens()
	V := m.Hparams().NVocab
	all := make([]float32, len(toks)*V)
	e, err := m.NewSession()
	if err != nil {
		b.Fatal(err)
	}
	defer e.Close()
	if err := e.EvalAll(toks, all); err != nil {
		b.Fatal(err)
	}
	first := len(toks) - st.Tokens
	return toks, all[(first-1)*V : (len(toks)-1)*V]
}
