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

// refs is the part of fixtures/refs.json these tests use.
type refs struct {
	Prompts []struct {
		Text         string  `json:"text"`
		IDs          []int32 `json:"ids"`
		LogitsOffset int     `json:"logits_offset"`
		LogitsShape  [2]int  `json:"logits_shape"`
		Greedy48     []int32 `json:"greedy48"`
		Greedy48Text string  `json:"greedy48_text"`
	} `json:"prompts"`
}

func loadRefs(t *testing.T) (refs, []float32) {
	var r refs
	b, err := os.ReadFile(fixtures.Path(t, "refs.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(fixtures.Path(t, "tiny_logits.f32"))
	if err != nil {
		t.Fatal(err)
	}
	return r, slices.Clone(quant.AsF32(raw))
}

func loadFixtureModel(t *testing.T, name string, opts Options) *Model {
	m, err := Load(fixtures.Path(t, name), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// The logits of every prompt position match Hugging Face's float32 reference: relative L2
// error below 1e-3 and the same argmax everywhere.
func TestLogitsMatchReference(t *testing.T) {
	r, ref := loadRefs(t)
	m := loadFixtureModel(t, "gpt2-tiny-f16.gguf", Options{Threads: 2})
	V := m.Hparams().NVocab
	for _, p := range r.Prompts {
		if got := m.Tokenizer().Encode(p.Text); !slices.Equal(got, p.IDs) {
			t.Fatalf("%q tokenizes to %v, want %v", p.Text, got, p.IDs)
		}
		s, err := m.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		n := len(p.IDs)
		got := make([]float32, n*V)
		if err := s.EvalAll(p.IDs, got); err != nil {
			t.Fatal(err)
		}
		want := ref[p.LogitsOffset : p.LogitsOffset+n*V]
		var num, den float64
		for i := range got {
			d := float64(got[i]) - float64(want[i])
			num += d * d
			den += float64(want[i]) * float64(want[i])
		}
		rel := math.Sqrt(num / den)
		t.Logf("%-40q relative L2 error %.2e", p.Text, rel)
		if rel >= 1e-3 {
			t.Errorf("%q: relative L2 error %.3g >= 1e-3", p.Text, rel)
		}
		for i := 0; i < n; i++ {
			if a, b := argmax(got[i*V:(i+1)*V]), argmax(want[i*V:(i+1)*V]); a != b {
				t.Errorf("%q position %d: argmax %d, reference %d", p.Text, i, a, b)
			}
		}
	}
}

// Greedy generation reproduces the reference continuations token for token and as text.
func TestGreedyMatchesReference(t *testing.T) {
	r, _ := loadRefs(t)
	m := loadFixtureModel(t, "gpt2-tiny-f16.gguf", Options{Threads: 2})
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
		if text.String() != p.Greedy48Text {
			t.Errorf("%q:\n got %q\nwant %q", p.Text, text.String(), p.Greedy48Text)
		}
	}
}
