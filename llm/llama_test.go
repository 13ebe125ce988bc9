package llm

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/internal/fixtures"
	"github.com/gorun-dev/gorun/quant"
)

// The llama-kjv fixture (fixtures README): a trained Llama (RMSNorm, RoPE, SwiGLU, 4 query
// heads over 2 key/value heads, tied output) with GPT-2's vocabulary, and Hugging Face's
// float32 references for it.
const kjvModel = "llama-kjv-f16.gguf"

// kjvRefs is the part of llama_kjv_refs.json these tests use.
type kjvRefs struct {
	Prompts []struct {
		Text       string  `json:"text"`
		IDs        []int32 `json:"ids"`
		Greedy48   []int32 `json:"greedy48"`
		GreedyText string  `json:"greedy_text"`
		Top5       []int32 `json:"top5"`
	} `json:"prompts"`
	Perplexity map[string]struct {
		LlamaCpp float64 `json:"llama_cpp_protocol"`
		ScoreAll float64 `json:"score_all"`
	} `json:"perplexity_exact"`
}

// loadKjvRefs reads the references and the last-position logits of each prompt.
func loadKjvRefs(t *testing.T) (kjvRefs, []float32) {
	var r kjvRefs
	b, err := os.ReadFile(fixtures.Path(t, "llama_kjv_refs.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(fixtures.Path(t, "llama_kjv_logits.f32"))
	if err != nil {
		t.Fatal(err)
	}
	logits := slices.Clone(quant.AsF32(raw))
	if len(r.Prompts) != 5 || len(logits) != 5*50257 {
		t.Fatalf("llama-kjv references: %d prompts and %d logits, want 5 and 5 x 50257", len(r.Prompts), len(logits))
	}
	return r, logits
}

// The last prompt position's logits of the trained Llama match Hugging Face's float32
// reference: relative L2 error below 1e-3, the same top 5.
func TestLogitsMatchReferenceLlama(t *testing.T) {
	r, ref := loadKjvRefs(t)
	m := loadFixtureModel(t, kjvModel, Options{Threads: 2})
	V := m.Hparams().NVocab
	for i, p := range r.Prompts {
		if got := m.Tokenizer().Encode(p.Text); !slices.Equal(got, p.IDs) {
			t.Fatalf("%q tokenizes to %v, want %v", p.Text, got, p.IDs)
		}
		s, err := m.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		got, err := s.Eval(p.IDs)
		if err != nil {
			t.Fatal(err)
		}
		want := ref[i*V : (i+1)*V]
		rel := relL2(got, want)
		t.Logf("%-40q relative L2 error %.2e", p.Text, rel)
		if rel >= 1e-3 {
			t.Errorf("%q: relative L2 error %.3g >= 1e-3", p.Text, rel)
		}
		if top := largest(got, 5); !slices.Equal(top, p.Top5) {
			t.Errorf("%q: top 5 %v, reference %v", p.Text, top, p.Top5)
		}
	}
}

// largest returns the ids of the k largest logits, largest first.
func largest(logits []float32, k int) []int32 {
	ids := make([]int32, len(logits))
	for i := range ids {
		ids[i] = int32(i)
	}
	slices.SortStableFunc(ids, func(a, b int32) int {
		switch {
		case logits[a] > logits[b]:
			return -1
		case logits[a] < logits[b]:
			return 1
		}
		return 0
	})
	return ids[:k]
}

// Greedy generation with the trained Llama reproduces Hugging Face's 48-token continuations,
// token for token and as text.
func TestGreedyMatchesReferenceLlama(t *testing.T) {
	r, _ := loadKjvRefs(t)
	m := loadFixtureModel(t, kjvModel, Options{Threads: 2})
	for _, p := range r.Prompts {
		s, err := m.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		var text strings.Builder
		st, err := s.Generate(context.Background(), p.Text, GenerateOptions{MaxTokens: 48, Sample: SampleOptions{Temperature: 0, RepeatPenalty: 1}},
			func(piece string) error { text.WriteString(piece); return nil })
		if err != nil {
			t.Fatal(err)
		}
		if st.Tokens != 48 || st.Stop != StopLength {
			t.Errorf("%q: %d tokens, stop %q", p.Text, st.Tokens, st.Stop)
		}
		if got := s.Tokens()[len(p.IDs):]; !slices.Equal(got, p.Greedy48) {
			t.Errorf("%q: tokens\n got %v\nwant %v", p.Text, got, p.Greedy48)
		}
		if text.String() != p.GreedyText {
			t.Errorf("%q:\n got %q\nwant %q", p.Text, text.String(), p.GreedyText)
		}
	}
}

// Perplexity of the trained Llama's f16 file over eval_kjv.txt equals the exact values (an
// independent float32 forward pass over the same weights) in both protocols.
func TestPerplexityFixturesLlama(t *testing.T) {
	if testing.Short() {
		t.Skip("perplexity over 4096 tokens takes a while")
	}
	r, _ := loadKjvRefs(t)
	text, err := os.ReadFile(fixtures.Path(t, "eval_kjv.txt"))
	if err != nil {
		t.Fatal(err)
	}
	exact, ok := r.Perplexity[kjvModel]
	if !ok || exact.LlamaCpp == 0 || exact.ScoreAll == 0 {
		t.Fatalf("llama_kjv_refs.json has no exact perplexity of %s", kjvModel)
	}
	m := loadFixtureModel(t, kjvModel, Options{Threads: 2, ContextLength: 512})
	tokens := m.Tokenizer().Encode(string(text))
	if len(tokens) != 4096 {
		t.Fatalf("eval text is %d tokens, want 4096", len(tokens))
	}
	for _, c := range []struct {
		scoreAll bool
		want     float64
		scored   int
	}{{false, exact.LlamaCpp, 8 * 255}, {true, exact.ScoreAll, 8 * 511}} {
		s, err := m.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		res, err := s.Perplexity(context.Background(), tokens, PerplexityOptions{Chunk: 512, ScoreAll: c.scoreAll})
		if err != nil {
			t.Fatal(err)
		}
		t.Logf("%s score-all=%v: PPL %.4f +/- %.4f over %d tokens (exact: %.4f)", kjvModel, c.scoreAll, res.PPL, res.StdErr, res.Scored, c.want)
		if math.Abs(res.PPL-c.want) > 0.02 || res.Scored != c.scored {
			t.Errorf("%s score-all=%v: PPL %.4f over %d tokens, want %.4f over %d", kjvModel, c.scoreAll, res.PPL, res.Scored, c.want, c.scored)
		}
	}
}
