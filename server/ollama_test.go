package server

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/ollama/ollama/api"
	openai "github.com/sashabaranov/go-openai"

	"github.com/gorun-dev/gorun/internal/fixtures"
	"github.com/gorun-dev/gorun/llm"
)

// ollamaClient is ollama's own Go client pointed at a gorun server.
func ollamaClient(t *testing.T, base string) *api.Client {
	t.Helper()
	u, err := url.Parse(base)
	if err != nil {
		t.Fatal(err)
	}
	return api.NewClient(u, http.DefaultClient)
}

// trainedOrRandomModel is the trained tiny GPT-2 of the fixtures (its answers are words),
// or a random one where the fixtures are absent.
func trainedOrRandomModel(t *testing.T) *llm.Model {
	if _, err := fixtures.Find(); err == nil {
		return fixtureModel(t)
	}
	return randomModel(t)
}

// greedyOptions make ollama's sampling greedy and without its default repetition penalty, so
// that answers can be compared with the library's and the OpenAI endpoint's.
func greedyOptions(n int) map[string]any {
	return map[string]any{"temperature": 0, "repeat_penalty": 1, "num_predict": n, "seed": 42}
}

// ollama's Go client chats with gorun serve, streaming and not: the answer is the one the
// OpenAI endpoint gives for the same conversation, the stream's pieces add up to it, and the
// last object is done with ollama's done_reason, counts and durations.
func TestOllamaClientChat(t *testing.T) {
	m := trainedOrRandomModel(t)
	s, base, oc := start(t, m, Config{Parallel: 2})
	client := ollamaClient(t, base)
	ctx := context.Background()
	msgs := []api.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Name a colour."}}
	const n = 12
	no := false
	var whole api.ChatResponse
	calls := 0
	err := client.Chat(ctx, &api.ChatRequest{Model: "test-model", Messages: msgs, Stream: &no, Options: greedyOptions(n)}, func(r api.ChatResponse) error {
		whole, calls = r, calls+1
		return nil
	})
	if err != nil || calls != 1 {
		t.Fatalf("stream false: %d responses, %v", calls, err)
	}
	if !whole.Done || whole.Message.Role != "assistant" || whole.Model != "test-model" || whole.EvalCount < 1 || whole.EvalCount > n ||
		whole.PromptEvalCount < 1 || whole.TotalDuration <= 0 || whole.EvalDuration <= 0 || whole.CreatedAt.IsZero() {
		t.Errorf("stream false: %+v", whole)
	}
	if (whole.DoneReason == "length") != (whole.EvalCount == n) || whole.DoneReason != "length" && whole.DoneReason != "stop" {
		t.Errorf("done_reason %q after %d of %d tokens", whole.DoneReason, whole.EvalCount, n)
	}
	oa, err := oc.CreateChatCompletion(ctx, openaiChat(msgs, n))
	if err != nil {
		t.Fatal(err)
	}
	if got, want := whole.Message.Content, oa.Choices[0].Message.Content; got != want || got == "" {
		t.Errorf("ollama's answer %q, the OpenAI endpoint's %q", got, want)
	}
	var pieces strings.Builder
	var last api.ChatResponse
	chunks := 0
	err = client.Chat(ctx, &api.ChatRequest{Model: "test-model:latest", Messages: msgs, Options: greedyOptions(n)}, func(r api.ChatResponse) error {
		if last.Done {
			t.Error("a response after done")
		}
		pieces.WriteString(r.Message.Content)
		last, chunks = r, chunks+1
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if pieces.String() != whole.Message.Content || !last.Done || last.DoneReason != whole.DoneReason || last.EvalCount != whole.EvalCount || chunks < 2 {
		t.Errorf("streamed %q in %d chunks (last %+v), want %q", pieces.String(), chunks, last, whole.Message.Content)
	}
	waitIdle(t, s, 5*time.Second)
}

// /api/generate with raw: true continues a prompt as the library does; the returned context
// continues it exactly where it stopped.
func TestOllamaClientGenerate(t *testing.T) {
	m := randomModel(t)
	_, base, _ := start(t, m, Config{})
	client := ollamaClient(t, base)
	ctx := context.Background()
	prompt := "Once upon a time"
	want := libraryGreedy(t, m, prompt, 16, nil)
	var first api.GenerateResponse
	var text strings.Builder
	err := client.Generate(ctx, &api.GenerateRequest{Model: "test-model", Prompt: prompt, Raw: true, Options: greedyOptions(8)}, func(r api.GenerateResponse) error {
		text.WriteString(r.Response)
		first = r
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if first.EvalCount != 8 || first.DoneReason != "length" || len(first.Context) != len(m.Tokenize(prompt, true))+8 {
		t.Fatalf("first call: %d tokens, %q, context of %d", first.EvalCount, first.DoneReason, len(first.Context))
	}
	no := false
	var second api.GenerateResponse
	err = client.Generate(ctx, &api.GenerateRequest{Model: "test-model", Context: first.Context, Raw: true, Stream: &no, Options: greedyOptions(8)}, func(r api.GenerateResponse) error {
		second = r
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := text.String() + second.Response; got != want {
		t.Errorf("8 + 8 tokens through context: %q, the library's 16: %q", got, want)
	}
	// logprobs: each generated token with its log-probability and top_logprobs alternatives.
	var lps []api.Logprob
	err = client.Generate(ctx, &api.GenerateRequest{Model: "test-model", Prompt: prompt, Raw: true, Options: greedyOptions(4), Logprobs: true, TopLogprobs: 2}, func(r api.GenerateResponse) error {
		lps = append(lps, r.Logprobs...)
		return nil
	})
	if err != nil || len(lps) != 4 {
		t.Fatalf("logprobs: %d, %v", len(lps), err)
	}
	for i, lp := range lps {
		if len(lp.TopLogprobs) != 2 || lp.Logprob > 0 || lp.TopLogprobs[0].Logprob < lp.TopLogprobs[1].Logprob || lp.TopLogprobs[0].Token != lp.Token {
			t.Errorf("greedy token %d: %+v", i, lp)
		}
	}
	// An empty prompt loads the model, as in ollama.
	var load api.GenerateResponse
	if err := client.Generate(ctx, &api.GenerateRequest{Model: "test-model"}, func(r api.GenerateResponse) error { load = r; return nil }); err != nil || !load.Done || load.DoneReason != "load" {
		t.Errorf("empty prompt: %+v, %v", load, err)
	}
	// num_ctx bounds prompt and answer.
	var short api.GenerateResponse
	opts := greedyOptions(-1)
	opts["num_ctx"] = len(m.Tokenize(prompt, true)) + 3
	if err := client.Generate(ctx, &api.GenerateRequest{Model: "test-model", Prompt: prompt, Raw: true, Stream: &no, Options: opts}, func(r api.GenerateResponse) error { short = r; return nil }); err != nil || short.EvalCount > 3 {
		t.Errorf("num_ctx prompt+3: %d tokens, %v", short.EvalCount, err)
	}
}

// /api/tags, /api/ps, /api/show and /api/version answer what ollama's client expects.
func TestOllamaClientModels(t *testing.T) {
	m := randomModel(t)
	_, base, _ := start(t, m, Config{})
	client := ollamaClient(t, base)
	ctx := context.Background()
	list, err := client.List(ctx)
	if err != nil || len(list.Models) != 1 || list.Models[0].Name != "test-model" || list.Models[0].Details.Family != "gpt2" ||
		list.Models[0].Details.Format != "gguf" || list.Models[0].Size <= 0 || list.Models[0].Details.ParameterSize == "" {
		t.Errorf("tags: %+v, %v", list, err)
	}
	ps, err := client.ListRunning(ctx)
	if err != nil || len(ps.Models) != 1 || ps.Models[0].ContextLength != m.ContextLength() || ps.Models[0].ExpiresAt.Before(time.Now()) {
		t.Errorf("ps: %+v, %v", ps, err)
	}
	show, err := client.Show(ctx, &api.ShowRequest{Model: "test-model"})
	if err != nil || show.ModelInfo["general.architecture"] != "gpt2" || show.Template != PlainChatTemplate || show.Details.Family != "gpt2" {
		t.Errorf("show: %+v, %v", show, err)
	}
	if v, err := client.Version(ctx); err != nil || v != OllamaVersion {
		t.Errorf("version %q, %v", v, err)
	}
	if err := client.Heartbeat(ctx); err != nil {
		t.Errorf("heartbeat: %v", err)
	}
}

// /api/embed gives the library's unit-length embeddings (dimensions keeps the first values,
// normalized again); /api/embeddings the unnormalized one.
func TestOllamaClientEmbed(t *testing.T) {
	m := randomModel(t)
	_, base, _ := start(t, m, Config{})
	client := ollamaClient(t, base)
	ctx := context.Background()
	texts := []string{"why is the sky blue", "why is the grass green"}
	want, err := m.Embed(ctx, texts, llm.DefaultEmbedOptions())
	if err != nil {
		t.Fatal(err)
	}
	resp, err := client.Embed(ctx, &api.EmbedRequest{Model: "test-model", Input: texts})
	if err != nil || len(resp.Embeddings) != 2 || !slices.Equal(resp.Embeddings[0], want[0]) || !slices.Equal(resp.Embeddings[1], want[1]) || resp.PromptEvalCount < 2 {
		t.Fatalf("embed: %v, %d embeddings", err, len(resp.Embeddings))
	}
	short, err := client.Embed(ctx, &api.EmbedRequest{Model: "test-model", Input: texts[0], Dimensions: 8})
	if err != nil || len(short.Embeddings) != 1 || len(short.Embeddings[0]) != 8 {
		t.Fatalf("dimensions 8: %v", err)
	}
	var norm float64
	for i, x := range short.Embeddings[0] {
		norm += float64(x) * float64(x)
		if (x > 0) != (want[0][i] > 0) {
			t.Errorf("dimensions 8: element %d changed sign", i)
		}
	}
	if math.Abs(norm-1) > 1e-5 {
		t.Errorf("dimensions 8: squared norm %v", norm)
	}
	raw, _ := m.Embed(ctx, texts[:1], llm.EmbedOptions{Normalize: llm.NormalizeNone})
	old, err := client.Embeddings(ctx, &api.EmbeddingRequest{Model: "test-model", Prompt: texts[0]})
	if err != nil || len(old.Embedding) != len(raw[0]) || float32(old.Embedding[0]) != raw[0][0] {
		t.Errorf("embeddings: %v", err)
	}
	long := strings.Repeat("sky ", 2*m.ContextLength())
	if _, err := client.Embed(ctx, &api.EmbedRequest{Model: "test-model", Input: long}); err != nil {
		t.Errorf("a long input is truncated by default: %v", err)
	}
	no := false
	if _, err := client.Embed(ctx, &api.EmbedRequest{Model: "test-model", Input: long, Truncate: &no}); err == nil {
		t.Errorf("truncate: false accepted a long input")
	}
}

// ollama's format: a JSON schema (structured outputs) constrains the answer; "json" is any JSON.
func TestOllamaClientFormat(t *testing.T) {
	m := randomModel(t)
	_, base, _ := start(t, m, Config{})
	client := ollamaClient(t, base)
	msgs := []api.Message{{Role: "user", Content: "yes or no?"}}
	for seed := range 5 {
		var got strings.Builder
		req := &api.ChatRequest{Model: "test-model", Messages: msgs, Format: json.RawMessage(`{"type":"boolean"}`),
			Options: map[string]any{"seed": seed, "temperature": 1, "num_predict": 20}}
		if err := client.Chat(context.Background(), req, func(r api.ChatResponse) error {
			got.WriteString(r.Message.Content)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if s := strings.TrimSpace(got.String()); s != "true" && s != "false" {
			t.Errorf("seed %d: %q is not a JSON boolean", seed, got.String())
		}
	}
	var got strings.Builder
	stream := false
	req := &api.ChatRequest{Model: "test-model", Messages: msgs, Format: json.RawMessage(`"json"`), Stream: &stream,
		Options: map[string]any{"seed": 1, "temperature": 0.5, "num_predict": 12}}
	if err := client.Chat(context.Background(), req, func(r api.ChatResponse) error {
		got.WriteString(r.Message.Content)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if s := strings.TrimSpace(got.String()); s == "" || !strings.ContainsAny(s[:1], `{["-0123456789tfn`) {
		t.Errorf("format json: %q does not start a JSON value", got.String())
	}
}

// Requests gorun cannot serve are refused in ollama's error format, naming the problem; the
// client sees a StatusError with that message.
func TestOllamaClientErrors(t *testing.T) {
	m := randomModel(t)
	_, base, _ := start(t, m, Config{})
	client := ollamaClient(t, base)
	ctx := context.Background()
	msgs := []api.Message{{Role: "user", Content: "hi"}}
	for _, c := range []struct {
		req    *api.ChatRequest
		status int
		want   string
	}{
		{&api.ChatRequest{Model: "llama3", Messages: msgs}, 404, "not found"},
		{&api.ChatRequest{Model: "test-model", Messages: msgs, Format: json.RawMessage(`"xml"`)}, 400, "format"},
		{&api.ChatRequest{Model: "test-model", Messages: msgs, Format: json.RawMessage(`{"type":"object","properties":{"a":{"type":"string","pattern":"x+"}}}`)}, 400, "pattern"},
		{&api.ChatRequest{Model: "test-model", Messages: msgs, Options: map[string]any{"bogus": 1}}, 400, `unknown option "bogus"`},
		{&api.ChatRequest{Model: "test-model", Messages: msgs, Options: map[string]any{"temperature": "hot"}}, 400, "options.temperature must be a number"},
		{&api.ChatRequest{Model: "test-model", Messages: msgs, Options: map[string]any{"mirostat": 2}}, 400, "mirostat"},
		{&api.ChatRequest{Model: "test-model", Messages: msgs, Options: map[string]any{"top_p": 3}}, 400, "top_p"},
		{&api.ChatRequest{Model: "test-model", Messages: []api.Message{{Role: "user", Content: "x", Images: []api.ImageData{{1}}}}}, 400, "images"},
		{&api.ChatRequest{Model: "test-model", Messages: []api.Message{{Role: "wizard", Content: "x"}}}, 400, "role"},
	} {
		err := client.Chat(ctx, c.req, func(api.ChatResponse) error { return nil })
		var se api.StatusError
		if !errors.As(err, &se) || se.StatusCode != c.status || !strings.Contains(se.ErrorMessage, c.want) {
			t.Errorf("%+v: %v (want %d with %q)", c.req, err, c.status, c.want)
		}
	}
	for _, c := range []struct{ method, path, body, want string }{
		{"POST", "/api/chat", `{"model":"test-model","messages":[`, "invalid JSON"},
		{"POST", "/api/chat", `{"model":"test-model","messages":"hi"}`, "messages must be an array"},
		{"POST", "/api/generate", `{"model":"test-model","prompt":"a","suffix":"b"}`, "suffix"},
		{"POST", "/api/generate", `{"model":"test-model","prompt":"a","context":[-1]}`, "outside the vocabulary"},
		{"POST", "/api/generate", `{"model":"test-model","prompt":"a","think":true}`, "thinking"},
		{"POST", "/api/embed", `{"model":"test-model","input":""}`, "is empty"},
		{"GET", "/api/chat", ``, "takes POST"},
		{"GET", "/api/pull", ``, "no endpoint"},
	} {
		code, body := request(t, c.method, base+c.path, c.body)
		var e struct {
			Error string `json:"error"`
		}
		if code < 400 || json.Unmarshal(body, &e) != nil || !strings.Contains(e.Error, c.want) {
			t.Errorf("%s %s %s: %d %s (want an error with %q)", c.method, c.path, c.body, code, body, c.want)
		}
	}
}

// A client that disconnects from an NDJSON stream frees its slot.
func TestOllamaStreamCancel(t *testing.T) {
	m := randomModel(t)
	s, base, _ := start(t, m, Config{Parallel: 1})
	cancel, _ := streamFirst(t, base+"/api/generate", `{"model":"test-model","prompt":"a","raw":true,"options":{"num_predict":-1,"temperature":1}}`)
	cancel()
	waitIdle(t, s, 5*time.Second)
}

// openaiChat is msgs as a greedy OpenAI chat request of n tokens.
func openaiChat(msgs []api.Message, n int) openai.ChatCompletionRequest {
	req := openai.ChatCompletionRequest{Model: "test-model", MaxTokens: n, Temperature: greedyTemp}
	for _, m := range msgs {
		req.Messages = append(req.Messages, openai.ChatCompletionMessage{Role: m.Role, Content: m.Content})
	}
	return req
}

// Any body sent to the ollama endpoints and /v1/embeddings gets an answer below 500, as JSON
// or as NDJSON lines of JSON, never a panic or a hang.
func FuzzServeOllama(f *testing.F) {
	paths := []string{"/api/generate", "/api/chat", "/api/embed", "/api/embeddings", "/api/show", "/v1/embeddings"}
	for _, seed := range []string{
		`{"model":"m","prompt":"a b","options":{"num_predict":3}}`, `{"model":"m","prompt":"a","raw":true,"stream":false,"context":[1,2],"options":{"num_ctx":8}}`,
		`{"model":"m","messages":[{"role":"user","content":"hi"}],"options":{"num_predict":2,"stop":["x"],"seed":-1},"logprobs":true,"top_logprobs":2}`,
		`{"model":"m","input":["a","b"],"dimensions":4}`, `{"model":"m","input":[[1,2],[3]]}`, `{"model":"m","prompt":"x"}`,
		`{"input":"x","encoding_format":"base64"}`, `{"model":"m","options":{"temperature":null,"top_k":-5}}`, `null`, `[]`, `{"model":"m","input":""}`,
	} {
		for _, p := range paths {
			f.Add(p, seed)
		}
	}
	m := randomModel(f)
	s, err := New(Config{Model: m, ModelName: "m", Parallel: 2, MaxBodyBytes: 1 << 16})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, path, body string) {
		if !slices.Contains(paths, path) {
			return
		}
		w := httptest.NewRecorder()
		req := httptest.NewRequest("POST", path, strings.NewReader(body))
		req.Host = "127.0.0.1:8080"
		req.Header.Set("Content-Type", "application/json")
		s.ServeHTTP(w, req)
		ct := w.Header().Get("Content-Type")
		if w.Code >= 500 || (ct != "application/json" && ct != "application/x-ndjson") {
			t.Fatalf("%s %q: %d %s %s", path, body, w.Code, ct, w.Body.String())
		}
		for _, line := range strings.Split(strings.TrimSuffix(w.Body.String(), "\n"), "\n") {
			if !json.Valid([]byte(line)) {
				t.Fatalf("%s %q: invalid JSON line %s", path, body, line)
			}
		}
	})
}
