package llm

import (
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/gorun-dev/gorun/convert"
	"github.com/gorun-dev/gorun/internal/fixtures"
	"github.com/gorun-dev/gorun/quant"
)

// llama3Micro converts the llama3-micro checkpoint (bfloat16 LlamaForCausalLM with Llama 3's
// tokenizer) with gorun's converter to f16 and loads it.
func llama3Micro(t *testing.T) (*Model, []llama3Prompt, []float32) {
	t.Helper()
	dir := filepath.Dir(fixtures.Path(t, "hf/llama3-micro/model.safetensors"))
	b, err := os.ReadFile(filepath.Join(dir, "hf_refs.json"))
	if err != nil {
		t.Fatal(err)
	}
	var refs struct{ Prompts []llama3Prompt }
	if err := json.Unmarshal(b, &refs); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join(dir, "hf_logits.f32"))
	if err != nil {
		t.Fatal(err)
	}
	logits := slices.Clone(quant.AsF32(raw))
	out := filepath.Join(t.TempDir(), "llama3-micro-f16.gguf")
	if _, err := convert.Convert(dir, out, convert.Options{}); err != nil {
		t.Fatal(err)
	}
	m := loadPath(t, out, Options{Threads: 2})
	if V := m.Hparams().NVocab; len(refs.Prompts) != 5 || len(logits) != 5*V {
		t.Fatalf("references: %d prompts, %d logits for a vocabulary of %d", len(refs.Prompts), len(logits), V)
	}
	return m, refs.Prompts, logits
}

type llama3Prompt struct {
	Text      string  `json:"text"`
	IDs       []int32 `json:"ids"`
	GreedyIDs []int32 `json:"greedy_ids"`
}

// gorun's conversion of llama3-micro tokenizes each prompt as Hugging Face does, its
// last-position logits are within 1e-3 relative L2 of Hugging Face's (computed in float64:
// testdata/README.md says why not the fixture's hf_logits.f32, which is logged), and its greedy
// 32 tokens equal Hugging Face's.
func TestGreedyMatchesReferenceLlama3Micro(t *testing.T) {
	m, prompts, fixture := llama3Micro(t)
	V := m.Hparams().NVocab
	exact := hfFloat64Logits(t, fixture)
	for i, p := range prompts {
		if got := m.Tokenize(p.Text, true); !slices.Equal(got, p.IDs) {
			t.Errorf("prompt %d: tokens %v, want %v", i, got, p.IDs)
		}
		s, err := m.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		logits, err := s.Eval(p.IDs)
		if err != nil {
			t.Fatal(err)
		}
		e := relL2(logits, exact[i*V:(i+1)*V])
		if e > 1e-3 {
			t.Errorf("prompt %d: logits rel L2 %.3g from Hugging Face's float64 logits > 1e-3", i, e)
		}
		t.Logf("prompt %d: logits rel L2 %.3g from Hugging Face's float64 logits (%.3g from the fixture's hf_logits.f32)",
			i, e, relL2(logits, fixture[i*V:(i+1)*V]))
		var greedy []int32
		for len(greedy) < len(p.GreedyIDs) {
			next := argmax(logits)
			greedy = append(greedy, next)
			if logits, err = s.Eval([]int32{next}); err != nil {
				t.Fatal(err)
			}
		}
		if !slices.Equal(greedy, p.GreedyIDs) {
			t.Errorf("prompt %d: greedy %v, want %v", i, greedy, p.GreedyIDs)
		}
		s.Close()
	}
}

// hfFloat64Logits is Hugging Face's float64 logits: the fixture's logits plus testdata's
// differences (int16 steps of 1e-6; testdata/README.md).
func hfFloat64Logits(t *testing.T, fixture []float32) []float32 {
	t.Helper()
	f, err := os.Open("testdata/llama3_micro_hf_delta.i16.gz")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	z, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	raw, err := io.ReadAll(io.LimitReader(z, int64(2*len(fixture)+1)))
	if err != nil || len(raw) != 2*len(fixture) {
		t.Fatalf("testdata differences: %d bytes, %v; want %d", len(raw), err, 2*len(fixture))
	}
	exact := make([]float32, len(fixture))
	for i, v := range fixture {
		d := int16(binary.LittleEndian.Uint16(raw[2*i:]))
		exact[i] = float32(float64(v) + 1e-6*float64(d))
	}
	return exact
}
