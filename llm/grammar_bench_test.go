package llm

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/gorun-dev/gorun/grammar"
	"github.com/gorun-dev/gorun/internal/fixtures"
	"github.com/gorun-dev/gorun/internal/testmodel"
)

// BenchmarkGrammarOverhead measures generation speed (tokens/s, sampling at temperature 1
// with llama.cpp's default filters) without a grammar and with the JSON grammar of
// response_format json_object, on the tiny fixture model and on a GPT-2 124M-shaped random
// model (written once to $GORUN_BENCH_124M, default a file in the temporary directory). The
// results are in grammar/NOTES.md.
//
//	go test ./llm -run '^$' -bench GrammarOverhead -benchtime 200x
func BenchmarkGrammarOverhead(b *testing.B) {
	json, err := grammar.Parse(grammar.JSONGrammar())
	if err != nil {
		b.Fatal(err)
	}
	models := []struct{ name, path string }{{"tiny", fixtures.Path(b, "gpt2-tiny-f16.gguf")}, {"124M", random124M(b)}}
	for _, mc := range models {
		m, err := Load(mc.path, Options{Threads: 2})
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
