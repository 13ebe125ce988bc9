package llm

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"
)

// The prompts of testdata/embeddings (llama-embedding's -p split at --embd-separator).
var embedRefPrompts = []string{"In the beginning God created the heaven and the earth.", "And the earth was without form, and void", "Hello"}

// Tolerances against llama-embedding. llama.cpp keeps keys and values in float16 in its KV
// cache (its log says "K (f16)") where gorun keeps float32, and prints 7 decimals; float16
// rounding (2^-11 = 4.9e-4 relative) of every key and value moves the hidden states by up to
// about that much, far more than float32 summation-order differences (~1e-6). Measured: cosine
// >= 0.99999973, elements within 8.2e-4 of the vector's largest magnitude. Allowed: cosine >
// 0.99999 and 2e-3 (about four float16 roundings). The test checks that another prompt's
// reference fails these bounds, so they do tell embeddings apart.
const (
	embedMinCosine = 0.99999
	embedMaxDiff   = 2e-3
)

// gorun's embeddings of the fixture models equal llama-embedding's (llama.cpp c392e509) for
// pooling mean, last and cls, normalized (2) and not (-1). testdata/embeddings/README.md has
// the commands that made the references.
func TestEmbedMatchesLlamaCpp(t *testing.T) {
	for _, model := range []string{"gpt2-tiny-f16", "llama-kjv-f16"} {
		m := loadFixtureModel(t, model+".gguf", Options{Threads: 2, ContextLength: 512})
		for _, pooling := range []string{"mean", "last", "cls"} {
			for _, norm := range []int{2, -1} {
				name := fmt.Sprintf("%s.%s.norm%d", model, pooling, norm)
				t.Run(name, func(t *testing.T) {
					want := readEmbedRef(t, filepath.Join("testdata", "embeddings", name+".json"))
					p, _ := ParsePooling(pooling)
					got, err := m.Embed(context.Background(), embedRefPrompts, EmbedOptions{Pooling: p, Normalize: norm})
					if err != nil {
						t.Fatal(err)
					}
					if len(got) != len(want) {
						t.Fatalf("%d embeddings, want %d", len(got), len(want))
					}
					for i := range want {
						cos, diff := compareEmbedding(got[i], want[i])
						if cos < embedMinCosine || diff > embedMaxDiff {
							t.Errorf("prompt %d: cosine %.8f, largest difference %.3g of the largest magnitude (want > %v, <= %v)", i, cos, diff, embedMinCosine, embedMaxDiff)
						}
						other := want[(i+1)%len(want)]
						if cos, diff := compareEmbedding(got[i], other); cos > embedMinCosine && diff <= embedMaxDiff {
							t.Errorf("prompt %d passes against another prompt's reference (cosine %.8f): the bounds do not discriminate", i, cos)
						}
					}
				})
			}
		}
	}
}

func readEmbedRef(t *testing.T, path string) [][]float64 {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var ref struct {
		Data []struct {
			Index     int       `json:"index"`
			Embedding []float64 `json:"embedding"`
		} `json:"data"`
	}
	if err := json.Unmarshal(b, &ref); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	out := make([][]float64, len(ref.Data))
	for i, d := range ref.Data {
		if d.Index != i {
			t.Fatalf("%s: data[%d] has index %d", path, i, d.Index)
		}
		out[i] = d.Embedding
	}
	return out
}

// compareEmbedding is the cosine similarity of got and want and their largest element
// difference relative to want's largest magnitude (1 when the lengths differ).
func compareEmbedding(got []float32, want []float64) (cos, diff float64) {
	if len(got) != len(want) {
		return 0, 1
	}
	var dot, gg, ww, scale float64
	for i, w := range want {
		g := float64(got[i])
		dot += g * w
		gg += g * g
		ww += w * w
		scale = max(scale, math.Abs(w))
	}
	for i, w := range want {
		diff = max(diff, math.Abs(float64(got[i])-w)/scale)
	}
	return dot / math.Sqrt(gg*ww), diff
}
