package server

import (
	"context"
	"encoding/json"
	"net/http"
	"slices"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"

	"github.com/gorun-dev/gorun/llm"
)

// OpenAI's Go client gets from /v1/embeddings what the library computes: the same vectors
// for strings and for their tokens, as floats and as base64, with OpenAI's shape and usage.
func TestServeEmbeddingsOpenAIClient(t *testing.T) {
	m := randomModel(t)
	_, _, client := start(t, m, Config{Pooling: llm.PoolingLast})
	texts := []string{"hello world", "the quick brown fox", "hello world"}
	opts := llm.DefaultEmbedOptions()
	opts.Pooling = llm.PoolingLast
	want, err := m.Embed(context.Background(), texts, opts)
	if err != nil {
		t.Fatal(err)
	}
	ntok := 0
	var tokens [][]int
	for _, text := range texts {
		ids := m.Tokenize(text, true)
		ntok += len(ids)
		row := make([]int, len(ids))
		for i, id := range ids {
			row[i] = int(id)
		}
		tokens = append(tokens, row)
	}
	ctx := context.Background()
	for name, req := range map[string]openai.EmbeddingRequestConverter{
		"strings": openai.EmbeddingRequestStrings{Input: texts, Model: "test-model"},
		"base64":  openai.EmbeddingRequestStrings{Input: texts, Model: "test-model", EncodingFormat: openai.EmbeddingEncodingFormatBase64},
		"tokens":  openai.EmbeddingRequestTokens{Input: tokens, Model: "test-model"},
	} {
		resp, err := client.CreateEmbeddings(ctx, req)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if resp.Object != "list" || resp.Model != "test-model" || len(resp.Data) != len(texts) ||
			resp.Usage.PromptTokens != ntok || resp.Usage.TotalTokens != ntok {
			t.Fatalf("%s: object %q model %q, %d items, usage %+v (want %d tokens)", name, resp.Object, resp.Model, len(resp.Data), resp.Usage, ntok)
		}
		for i, d := range resp.Data {
			if d.Object != "embedding" || d.Index != i || !slices.Equal(d.Embedding, want[i]) {
				t.Errorf("%s: item %d (%q, index %d) differs from the library's embedding", name, i, d.Object, d.Index)
			}
		}
	}
}

// The server's pooling is the one its Config (serve --pooling) names.
func TestServeEmbeddingsPooling(t *testing.T) {
	m := randomModel(t)
	_, url, _ := start(t, m, Config{Pooling: llm.PoolingCLS})
	code, body := post(t, url+"/v1/embeddings", `{"input":"one two three"}`)
	var resp struct {
		Data []struct {
			Embedding []float32 `json:"embedding"`
		} `json:"data"`
	}
	if code != 200 || json.Unmarshal(body, &resp) != nil || len(resp.Data) != 1 {
		t.Fatalf("%d %s", code, body)
	}
	want, _ := m.Embed(context.Background(), []string{"one two three"}, llm.EmbedOptions{Pooling: llm.PoolingCLS, Normalize: llm.NormalizeEuclidean})
	if !slices.Equal(resp.Data[0].Embedding, want[0]) {
		t.Errorf("not the cls pooling")
	}
}

// Bad requests get a 400 naming the problem (and the parameter), never a 500 or a hang.
func TestServeEmbeddingsBadRequests(t *testing.T) {
	m := randomModel(t) // a 256-token context
	_, url, _ := start(t, m, Config{})
	many := `{"input":["a"` + strings.Repeat(`,"a"`, maxEmbedInputs) + `]}`
	for _, c := range []struct{ body, want string }{
		{`{}`, "input is required"},
		{`{"input":null}`, "input is required"},
		{`{"input":""}`, "input[0] is empty"},
		{`{"input":["a",""]}`, "input[1] is empty"},
		{`{"input":[]}`, "must be a string"},
		{`{"input":[[]]}`, "input[0] is empty"},
		{`{"input":{"a":1}}`, "must be a string"},
		{`{"input":[1,"a"]}`, "must be a string"},
		{`{"input":[99999999]}`, "outside the vocabulary"},
		{`{"input":[-1]}`, "outside the vocabulary"},
		{`{"input":"` + strings.Repeat("a ", 300) + `"}`, "context holds 256"},
		{many, "2049 inputs"},
		{`{"input":"a","encoding_format":"int8"}`, "encoding_format"},
		{`{"input":"a","dimensions":3}`, "dimensions = 3"},
		{`{"input":"a","model":"other"}`, "does not exist"},
		{`{"input":"a","bogus":1}`, "unsupported parameter"},
		{`{"input":"a"`, "invalid JSON"},
	} {
		code, body := post(t, url+"/v1/embeddings", c.body)
		if code != http.StatusBadRequest || !strings.Contains(string(body), c.want) {
			t.Errorf("%.60s: %d %s (want 400 with %q)", c.body, code, body, c.want)
		}
	}
	if code, _ := request(t, "GET", url+"/v1/embeddings", ""); code != http.StatusMethodNotAllowed {
		t.Errorf("GET /v1/embeddings: %d", code)
	}
	if code, body := post(t, url+"/v1/embeddings", `{"input":"a","dimensions":`+itoa(m.Hparams().NEmbd)+`}`); code != 200 {
		t.Errorf("dimensions = n_embd: %d %s", code, body)
	}
}
