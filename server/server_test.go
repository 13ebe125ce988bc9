package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	openai "github.com/sashabaranov/go-openai"

	"github.com/gorun-dev/gorun/internal/fixtures"
	"github.com/gorun-dev/gorun/internal/testmodel"
	"github.com/gorun-dev/gorun/llm"
)

// greedyTemp is how go-openai sends temperature 0 (it omits a zero field): the smallest
// positive float32, which the sampler turns into the most likely token.
const greedyTemp = math.SmallestNonzeroFloat32

// fixtureModel loads the trained tiny GPT-2 (skipping when the fixtures are absent).
func fixtureModel(t testing.TB) *llm.Model {
	t.Helper()
	m, err := llm.Load(fixtures.Path(t, "gpt2-tiny-q8_0.gguf"), llm.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// randomModel loads a small random-weight GPT-2 (always available).
func randomModel(t testing.TB) *llm.Model {
	t.Helper()
	c, err := testmodel.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	c.NCtx = 256
	path := filepath.Join(t.TempDir(), "random.gguf")
	if err := testmodel.Write(path, c); err != nil {
		t.Fatal(err)
	}
	m, err := llm.Load(path, llm.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// start serves m on a loopback port and returns the server, its URL and a go-openai client.
func start(t testing.TB, m *llm.Model, cfg Config) (*Server, string, *openai.Client) {
	t.Helper()
	cfg.Model = m
	if cfg.ModelName == "" {
		cfg.ModelName = "test-model"
	}
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		s.Close()
	})
	oc := openai.DefaultConfig(cfg.APIKey)
	oc.BaseURL = hs.URL + "/v1"
	return s, hs.URL, openai.NewClientWithConfig(oc)
}

// libraryGreedy is the library's own greedy generation for a prompt, on a fresh session.
func libraryGreedy(t testing.TB, m *llm.Model, prompt string, n int, stop []string) string {
	t.Helper()
	s, err := m.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var b strings.Builder
	if _, err := s.Generate(context.Background(), prompt, llm.GenerateOptions{MaxTokens: n, Stop: stop}, func(p string) error {
		b.WriteString(p)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func post(t testing.TB, url, body string, header ...string) (int, []byte) {
	t.Helper()
	req, err := http.NewRequest("POST", url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// The OpenAI client's completions and chat completions, streaming and not, give the library's
// greedy text for the same prompt, with usage counts; repeated prompts (the slot's cached
// prefix) give it again.
func TestServeOpenAIClientGreedy(t *testing.T) {
	m := fixtureModel(t)
	_, url, client := start(t, m, Config{Parallel: 2})
	ctx := context.Background()
	tok := m.Tokenizer()
	const ntok = 8
	var wantA string // the first prompt's greedy text
	// The first prompt twice (the second time from the slot's cache), then a prefix of it.
	for i, prompt := range []string{"In the beginning God created", "In the beginning God"} {
		want := libraryGreedy(t, m, prompt, ntok, nil)
		if i == 0 {
			wantA = want
		}
		for round := range 2 - i {
			resp, err := client.CreateCompletion(ctx, openai.CompletionRequest{Model: "test-model", Prompt: prompt, MaxTokens: ntok, Temperature: greedyTemp})
			if err != nil {
				t.Fatal(err)
			}
			if got := resp.Choices[0].Text; got != want {
				t.Errorf("completion %q (round %d):\n got %q\nwant %q", prompt, round, got, want)
			}
			if resp.Usage.PromptTokens != len(tok.Encode(prompt)) || resp.Usage.CompletionTokens != ntok || resp.Usage.TotalTokens != resp.Usage.PromptTokens+ntok {
				t.Errorf("usage %+v", resp.Usage)
			}
			if resp.Choices[0].FinishReason != "length" || resp.Object != "text_completion" || resp.Model != "test-model" {
				t.Errorf("choice %+v, object %q, model %q", resp.Choices[0], resp.Object, resp.Model)
			}
		}
		if i > 0 {
			continue
		}
		stream, err := client.CreateCompletionStream(ctx, openai.CompletionRequest{Model: "test-model", Prompt: prompt, MaxTokens: ntok, Temperature: greedyTemp, Stream: true,
			StreamOptions: &openai.StreamOptions{IncludeUsage: true}})
		if err != nil {
			t.Fatal(err)
		}
		var got strings.Builder
		var finish string
		chunks := 0
		var u *openai.Usage
		for {
			c, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if c.Usage != nil {
				u = c.Usage
			}
			for _, ch := range c.Choices {
				got.WriteString(ch.Text)
				if ch.FinishReason != "" {
					finish = ch.FinishReason
				}
				chunks++
			}
		}
		stream.Close()
		if got.String() != want || finish != "length" || chunks < 4 {
			t.Errorf("stream %q: %q finish %q in %d chunks, want %q", prompt, got.String(), finish, chunks, want)
		}
		if u == nil || u.CompletionTokens != ntok {
			t.Errorf("stream usage %+v", u)
		}
		// Temperature 0 itself (which go-openai cannot send) is greedy too.
		code, body := post(t, url+"/v1/completions", fmt.Sprintf(`{"prompt":%q,"max_tokens":%d,"temperature":0}`, prompt, ntok))
		var r completionResponse
		if code != 200 || json.Unmarshal(body, &r) != nil || r.Choices[0].Text != want {
			t.Errorf("temperature 0: %d %s", code, body)
		}
	}

	// A continued conversation reuses the slot's cached prefix (one slot: the same context).
	{
		_, _, c1 := start(t, m, Config{Parallel: 1})
		turn := []openai.ChatCompletionMessage{{Role: "user", Content: "What is a lamp?"}}
		r1, err := c1.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "test-model", Messages: turn, MaxTokens: 6, Temperature: greedyTemp})
		if err != nil {
			t.Fatal(err)
		}
		turn = append(turn, openai.ChatCompletionMessage{Role: "assistant", Content: r1.Choices[0].Message.Content},
			openai.ChatCompletionMessage{Role: "user", Content: "And a candle?"})
		r2, err := c1.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "test-model", Messages: turn, MaxTokens: 6, Temperature: greedyTemp})
		if err != nil {
			t.Fatal(err)
		}
		first := len(tok.Encode("User: What is a lamp?\nAssistant:"))
		if r1.Usage.PromptTokensDetails == nil || r1.Usage.PromptTokensDetails.CachedTokens != 0 ||
			r2.Usage.PromptTokensDetails == nil || r2.Usage.PromptTokensDetails.CachedTokens < first {
			t.Errorf("cached tokens: first turn %+v, second %+v (the first turn's prompt has %d tokens)", r1.Usage.PromptTokensDetails, r2.Usage.PromptTokensDetails, first)
		}
		prompt := "User: What is a lamp?\nAssistant: " + r1.Choices[0].Message.Content + "\nUser: And a candle?\nAssistant:"
		if want := strings.TrimPrefix(libraryGreedy(t, m, prompt, 6, []string{"\nUser:"}), " "); r2.Choices[0].Message.Content != want {
			t.Errorf("second turn from the cache: %q, want %q", r2.Choices[0].Message.Content, want)
		}
	}

	// Chat: the template's prompt, the library's greedy answer up to "\nUser:" without its
	// leading space.
	msgs := []openai.ChatCompletionMessage{
		{Role: "system", Content: "A dictionary."},
		{Role: "user", Content: "What is a lamp?"},
	}
	prompt := "A dictionary.\n\nUser: What is a lamp?\nAssistant:"
	want := strings.TrimPrefix(libraryGreedy(t, m, prompt, 8, []string{"\nUser:"}), " ")
	resp, err := client.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "test-model", Messages: msgs, MaxTokens: 8, Temperature: greedyTemp})
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != want || resp.Choices[0].Message.Role != "assistant" {
		t.Errorf("chat: %+v, want %q", resp.Choices[0].Message, want)
	}
	if resp.Usage.PromptTokens != len(tok.Encode(prompt)) || resp.Object != "chat.completion" {
		t.Errorf("chat usage %+v object %q", resp.Usage, resp.Object)
	}
	cs, err := client.CreateChatCompletionStream(ctx, openai.ChatCompletionRequest{Model: "test-model", Messages: msgs, MaxTokens: 8, Temperature: greedyTemp, Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	var got strings.Builder
	role, finish := "", ""
	for {
		c, err := cs.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range c.Choices {
			got.WriteString(ch.Delta.Content)
			if ch.Delta.Role != "" {
				role = ch.Delta.Role
			}
			if ch.FinishReason != "" {
				finish = string(ch.FinishReason)
			}
		}
	}
	cs.Close()
	if got.String() != want || role != "assistant" || finish != string(resp.Choices[0].FinishReason) {
		t.Errorf("chat stream: %q role %q finish %q, want %q", got.String(), role, finish, want)
	}

	// llama-server's /completion, with temperature 0.
	code, body := post(t, url+"/completion", fmt.Sprintf(`{"prompt":"In the beginning God created","n_predict":%d,"temperature":0}`, ntok))
	var lr llamaCompletionResponse
	if code != 200 || json.Unmarshal(body, &lr) != nil || lr.Content != wantA || lr.TokensPredicted != ntok || lr.StopType != "limit" {
		t.Errorf("/completion: %d %s", code, body)
	}
}

// The SSE stream is OpenAI's exact framing: "data: {json}\n\n" events ending with
// "data: [DONE]\n\n".
func TestServeStreamFormat(t *testing.T) {
	m := randomModel(t)
	_, url, _ := start(t, m, Config{Parallel: 1})
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(`{"messages":[{"role":"user","content":"hi"}],"max_tokens":5,"temperature":0,"stream":true,"ignore_eos":true}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type %q", ct)
	}
	b, _ := io.ReadAll(resp.Body)
	events := strings.Split(string(b), "\n\n")
	if events[len(events)-1] != "" || events[len(events)-2] != "data: [DONE]" {
		t.Fatalf("stream does not end with data: [DONE]: %q", b)
	}
	events = events[:len(events)-2]
	for i, e := range events {
		var c chatResponse
		if !strings.HasPrefix(e, "data: ") || json.Unmarshal([]byte(e[6:]), &c) != nil || c.Object != "chat.completion.chunk" || len(c.Choices) != 1 {
			t.Fatalf("event %d: %q", i, e)
		}
		ch := c.Choices[0]
		switch {
		case i == 0 && (ch.Delta.Role != "assistant" || ch.FinishReason != nil):
			t.Errorf("first event %q", e)
		case i == len(events)-1 && (ch.FinishReason == nil || *ch.FinishReason != "length"):
			t.Errorf("last event %q", e)
		case i > 0 && i < len(events)-1 && ch.FinishReason != nil:
			t.Errorf("event %d has a finish reason: %q", i, e)
		}
	}
}

// Bad requests get 4xx with an OpenAI error body, and the server keeps serving.
func TestServeMalformedRequests(t *testing.T) {
	m := randomModel(t)
	_, url, client := start(t, m, Config{Parallel: 2, MaxBodyBytes: 64 << 10, ModelName: "test-model"})
	long := strings.Repeat("a b c d ", 200)
	cases := []struct {
		path, body string
		status     int
		param      string
	}{
		{"/v1/completions", `{bad json`, 400, ""},
		{"/v1/completions", `{"prompt":"x"} {"prompt":"y"}`, 400, ""},
		{"/v1/completions", `{"prompt":"x"}}`, 400, ""},
		{"/v1/completions", `{"prompt":"` + strings.Repeat("x", 70<<10) + `"}`, 413, ""},
		{"/v1/completions", `{"prompt":"x","max_tokens":"ten"}`, 400, "max_tokens"},
		{"/v1/completions", `{"prompt":"x","max_tokens":1.5}`, 400, "max_tokens"},
		{"/v1/completions", `{"prompt":"x","temperature":"hot"}`, 400, "temperature"},
		{"/v1/completions", `{"prompt":"x","max_tokens":-1}`, 400, "max_tokens"},
		{"/v1/completions", `{"prompt":"x","frobnicate":true}`, 400, "frobnicate"},
		{"/v1/completions", `{"prompt":"x","model":"gpt-4"}`, 400, "model"},
		{"/v1/completions", `{"max_tokens":3}`, 400, "prompt"},
		{"/v1/completions", `{"prompt":{"a":1}}`, 400, "prompt"},
		{"/v1/completions", `{"prompt":[1,2,99999]}`, 400, "prompt"},
		{"/v1/completions", `{"prompt":"` + long + `"}`, 400, "prompt"},
		{"/v1/completions", `{"prompt":"x","temperature":2.5}`, 400, "temperature"},
		{"/v1/completions", `{"prompt":"x","temperature":-0.1}`, 400, "temperature"},
		{"/v1/completions", `{"prompt":"x","top_p":1.5}`, 400, "top_p"},
		{"/v1/completions", `{"prompt":"x","min_p":-1}`, 400, "min_p"},
		{"/v1/completions", `{"prompt":"x","top_k":-3}`, 400, "top_k"},
		{"/v1/completions", `{"prompt":"x","n":0}`, 400, "n"},
		{"/v1/completions", `{"prompt":"x","n":1000}`, 400, "n"},
		{"/v1/completions", `{"prompt":"x","seed":-5}`, 400, "seed"},
		{"/v1/completions", `{"prompt":"x","stop":""}`, 400, "stop"},
		{"/v1/completions", `{"prompt":"x","stop":[1,2]}`, 400, "stop"},
		{"/v1/completions", `{"prompt":"x","presence_penalty":-2.5}`, 400, "presence_penalty"},
		{"/v1/completions", `{"prompt":"x","frequency_penalty":3}`, 400, "frequency_penalty"},
		{"/v1/completions", `{"prompt":"x","logit_bias":{"99999":10}}`, 400, "logit_bias"},
		{"/v1/completions", `{"prompt":"x","logit_bias":{"five":10}}`, 400, "logit_bias"},
		{"/v1/completions", `{"prompt":"x","logit_bias":{"5":101}}`, 400, "logit_bias"},
		{"/v1/completions", `{"prompt":"x","logit_bias":[[5,1]]}`, 400, "logit_bias"},
		{"/v1/completions", `{"prompt":"x","logprobs":6}`, 400, "logprobs"},
		{"/v1/completions", `{"prompt":"x","suffix":"y"}`, 400, "suffix"},
		{"/v1/completions", `{"prompt":"x","stream_options":{"include_usage":true}}`, 400, "stream_options"},
		{"/v1/chat/completions", `{"messages":[]}`, 400, "messages"},
		{"/v1/chat/completions", `{"messages":[{"role":"tool","content":"x"}]}`, 400, "messages"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":[{"type":"image_url"}]}]}`, 400, "messages"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"tools":[]}`, 400, "tools"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"logprobs":true,"top_logprobs":21}`, 400, "top_logprobs"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"top_logprobs":2}`, 400, "top_logprobs"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"xml"}}`, 400, "response_format"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema"}}`, 400, "response_format"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema","json_schema":{"schema":{"type":"string","pattern":"a"}}}}`, 400, "response_format.json_schema.schema"},
		{"/v1/completions", `{"prompt":"x","grammar":"root ::= (\"a\""}`, 400, "grammar"},
		{"/v1/completions", `{"prompt":"x","grammar":"root ::= a"}`, 400, "grammar"},
		{"/v1/completions", `{"prompt":"x","json_schema":{"type":"thing"}}`, 400, "json_schema"},
		{"/completion", `{"prompt":"x","grammar":"root ::= \"a\"","json_schema":{}}`, 400, "grammar"},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"` + long + `"}]}`, 400, "messages"},
		{"/completion", `{"prompt":"x","n_predict":-2}`, 400, "n_predict"},
		{"/completion", `{"prompt":"x","n_probs":3}`, 400, "n_probs"},
		{"/detokenize", `{"tokens":[-1]}`, 400, "tokens"},
		{"/tokenize", `{}`, 400, "content"},
		{"/v1/nothing", `{}`, 404, ""},
	}
	for _, c := range cases {
		code, body := post(t, url+c.path, c.body)
		var e struct {
			Error struct {
				Message string  `json:"message"`
				Type    string  `json:"type"`
				Param   *string `json:"param"`
			} `json:"error"`
		}
		if err := json.Unmarshal(body, &e); err != nil || code != c.status || e.Error.Message == "" || e.Error.Type == "" {
			t.Errorf("%s %.60s: %d %s (want %d)", c.path, c.body, code, body, c.status)
			continue
		}
		if c.param != "" && (e.Error.Param == nil || *e.Error.Param != c.param) {
			t.Errorf("%s %.60s: param %v, want %q (%s)", c.path, c.body, e.Error.Param, c.param, body)
		}
	}
	if resp, err := http.Get(url + "/v1/completions"); err != nil || resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET /v1/completions: %v %v", resp, err)
	}
	// The client library surfaces the error as an APIError.
	_, err := client.CreateCompletion(context.Background(), openai.CompletionRequest{Model: "nope", Prompt: "x"})
	var ae *openai.APIError
	if !errors.As(err, &ae) || ae.HTTPStatusCode != 400 || ae.Type != "invalid_request_error" {
		t.Errorf("unknown model through the client: %v", err)
	}
	// Still serving.
	resp, err := client.CreateCompletion(context.Background(), openai.CompletionRequest{Model: "test-model", Prompt: "x", MaxTokens: 4})
	if err != nil || len(resp.Choices) != 1 {
		t.Fatalf("after the bad requests: %v", err)
	}
}

// n choices, seeds, logprobs, echo, stop strings, token prompts, max_tokens 0.
func TestServeParameters(t *testing.T) {
	m := randomModel(t)
	_, url, client := start(t, m, Config{Parallel: 2})
	ctx := context.Background()
	seed := 7
	req := openai.CompletionRequest{Model: "test-model", Prompt: "a b", MaxTokens: 12, N: 3, Seed: &seed, Temperature: 1}
	r1, err := client.CreateCompletion(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	r2, err := client.CreateCompletion(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	if len(r1.Choices) != 3 || r1.Usage.CompletionTokens == 0 {
		t.Fatalf("n=3: %+v", r1)
	}
	for i := range r1.Choices {
		if r1.Choices[i].Index != i || r1.Choices[i].Text != r2.Choices[i].Text {
			t.Errorf("choice %d: %+v vs %+v (a seed reproduces the text)", i, r1.Choices[i], r2.Choices[i])
		}
	}
	// n streamed chat choices: each begins with the role and ends with a finish reason.
	cs, err := client.CreateChatCompletionStream(ctx, openai.ChatCompletionRequest{Model: "test-model", MaxTokens: 4, N: 2, Seed: &seed,
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "x"}}, Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	roles, finishes := map[int]int{}, map[int]int{}
	for {
		c, err := cs.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		for _, ch := range c.Choices {
			if ch.Delta.Role == "assistant" {
				roles[ch.Index]++
			}
			if ch.FinishReason != "" {
				finishes[ch.Index]++
			}
		}
	}
	cs.Close()
	if fmt.Sprint(roles) != "map[0:1 1:1]" || fmt.Sprint(finishes) != "map[0:1 1:1]" {
		t.Errorf("chat n=2 stream: roles %v finishes %v", roles, finishes)
	}
	// Logprobs: one per generated token, each <= 0, tokens spelling the text.
	code, body := post(t, url+"/v1/completions", `{"prompt":"a b","max_tokens":6,"temperature":0,"logprobs":0,"ignore_eos":true}`)
	var r completionResponse
	if code != 200 || json.Unmarshal(body, &r) != nil {
		t.Fatalf("%d %s", code, body)
	}
	lp := r.Choices[0].Logprobs
	if lp == nil || len(lp.TokenLogprobs) != 6 || strings.Join(lp.Tokens, "") != r.Choices[0].Text || lp.TextOffset[0] != 0 {
		t.Errorf("logprobs: %s", body)
	} else {
		for _, v := range lp.TokenLogprobs {
			if v == nil || *v > 0 || math.IsNaN(float64(*v)) {
				t.Errorf("logprob %v", v)
			}
		}
	}
	chat, err := client.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "test-model", MaxTokens: 5, LogProbs: true,
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "x"}}})
	if err != nil || chat.Choices[0].LogProbs == nil || len(chat.Choices[0].LogProbs.Content) != chat.Usage.CompletionTokens {
		t.Errorf("chat logprobs: %v %+v", err, chat)
	}
	// Top alternatives: the most likely first, the greedy choice among them with its own
	// log-probability.
	code, body = post(t, url+"/v1/completions", `{"prompt":"a b","max_tokens":4,"temperature":0,"logprobs":3,"ignore_eos":true}`)
	if code != 200 || json.Unmarshal(body, &r) != nil {
		t.Fatalf("%d %s", code, body)
	}
	lp = r.Choices[0].Logprobs
	if lp == nil || len(lp.TopLogprobs) != 4 || strings.Join(lp.Tokens, "") != libraryGreedy(t, m, "a b", 4, nil) {
		t.Fatalf("top logprobs: %s", body)
	}
	for i, alts := range lp.TopLogprobs {
		best := float32(math.Inf(-1))
		for _, v := range alts {
			best = max(best, v)
		}
		if len(alts) != 3 || alts[lp.Tokens[i]] != *lp.TokenLogprobs[i] || best != *lp.TokenLogprobs[i] {
			t.Errorf("step %d: alternatives %v, chosen %q %v", i, alts, lp.Tokens[i], *lp.TokenLogprobs[i])
		}
	}
	top := 2
	chat, err = client.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "test-model", MaxTokens: 3, LogProbs: true, TopLogProbs: top, Temperature: greedyTemp,
		Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "x"}}})
	if err != nil || chat.Choices[0].LogProbs == nil || len(chat.Choices[0].LogProbs.Content) == 0 {
		t.Fatalf("chat top logprobs: %v %+v", err, chat)
	}
	for _, c := range chat.Choices[0].LogProbs.Content {
		if len(c.TopLogProbs) != top || c.TopLogProbs[0].LogProb < c.TopLogProbs[1].LogProb || c.TopLogProbs[0].LogProb != c.LogProb {
			t.Errorf("chat alternatives %+v", c)
		}
	}
	// Echo with logprobs scores the prompt: each token's log-probability after the ones
	// before it (the first has none), as the library's logits give it, then the generated ones.
	prompt := m.Tokenizer().Encode("a b c d e f")
	sess, err := m.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	V := m.Tokenizer().VocabSize()
	rows := make([]float32, len(prompt)*V)
	if err := sess.EvalAll(prompt, rows); err != nil {
		t.Fatal(err)
	}
	sess.Close()
	for _, stream := range []bool{false, true} {
		code, body = post(t, url+"/v1/completions", fmt.Sprintf(`{"prompt":"a b c d e f","max_tokens":2,"echo":true,"logprobs":2,"temperature":0,"ignore_eos":true,"stream":%v}`, stream))
		if code != 200 {
			t.Fatalf("echo logprobs: %d %s", code, body)
		}
		var lp completionLogprobs
		if stream { // gather the chunks
			for _, ev := range strings.Split(string(body), "\n\n") {
				var c completionResponse
				if json.Unmarshal([]byte(strings.TrimPrefix(ev, "data: ")), &c) == nil && len(c.Choices) == 1 && c.Choices[0].Logprobs != nil {
					l := c.Choices[0].Logprobs
					lp.Tokens = append(lp.Tokens, l.Tokens...)
					lp.TokenLogprobs = append(lp.TokenLogprobs, l.TokenLogprobs...)
					lp.TopLogprobs = append(lp.TopLogprobs, l.TopLogprobs...)
				}
			}
		} else if r := (completionResponse{}); json.Unmarshal(body, &r) != nil || r.Choices[0].Logprobs == nil {
			t.Fatalf("echo logprobs: %s", body)
		} else {
			lp = *r.Choices[0].Logprobs
		}
		if len(lp.Tokens) != len(prompt)+2 || lp.TokenLogprobs[0] != nil || lp.TopLogprobs[0] != nil || len(lp.TopLogprobs) != len(prompt)+2 {
			t.Fatalf("echo logprobs (stream %v): %+v", stream, lp)
		}
		for i := 1; i < len(prompt); i++ {
			want := float64(llm.LogProb(rows[(i-1)*V:i*V], prompt[i]))
			if lp.TokenLogprobs[i] == nil || math.Abs(float64(*lp.TokenLogprobs[i])-want) > 1e-4 || len(lp.TopLogprobs[i]) != 2 {
				t.Errorf("stream %v prompt token %d: %v, want %v (alternatives %v)", stream, i, *lp.TokenLogprobs[i], want, lp.TopLogprobs[i])
			}
		}
	}
	// Echo puts the prompt first; max_tokens 0 generates nothing.
	code, body = post(t, url+"/v1/completions", `{"prompt":"a b","max_tokens":0,"echo":true}`)
	if code != 200 || json.Unmarshal(body, &r) != nil || r.Choices[0].Text != "a b" || r.Usage.CompletionTokens != 0 {
		t.Errorf("echo: %d %s", code, body)
	}
	// A stop string: the text ends before it (the greedy text's second half as the stop).
	full := libraryGreedy(t, m, "a b", 16, nil)
	if len(full) > 4 {
		stop := full[len(full)/2:]
		want := libraryGreedy(t, m, "a b", 16, []string{stop})
		code, body = post(t, url+"/v1/completions", fmt.Sprintf(`{"prompt":"a b","max_tokens":16,"temperature":0,"stop":%q}`, stop))
		if code != 200 || json.Unmarshal(body, &r) != nil || r.Choices[0].Text != want || *r.Choices[0].FinishReason != "stop" {
			t.Errorf("stop %q: %d %s, want %q", stop, code, body, want)
		}
	}
	// Token prompts and several prompts.
	ids := m.Tokenizer().Encode("a b")
	idsJSON, _ := json.Marshal(ids)
	code, body = post(t, url+"/v1/completions", fmt.Sprintf(`{"prompt":[%s,%s],"max_tokens":5,"temperature":0}`, idsJSON, idsJSON))
	if code != 200 || json.Unmarshal(body, &r) != nil || len(r.Choices) != 2 || r.Choices[0].Text != libraryGreedy(t, m, "a b", 5, nil) || r.Choices[1].Index != 1 {
		t.Errorf("token prompts: %d %s", code, body)
	}
	// Tokenize and detokenize round trip.
	code, body = post(t, url+"/tokenize", `{"content":"a b c","with_pieces":true}`)
	var tr struct {
		Tokens []struct {
			ID    int32  `json:"id"`
			Piece string `json:"piece"`
		} `json:"tokens"`
	}
	if code != 200 || json.Unmarshal(body, &tr) != nil || len(tr.Tokens) == 0 {
		t.Fatalf("tokenize: %d %s", code, body)
	}
	var idList []string
	for _, x := range tr.Tokens {
		idList = append(idList, strconv.Itoa(int(x.ID)))
	}
	code, body = post(t, url+"/detokenize", `{"tokens":[`+strings.Join(idList, ",")+`]}`)
	if code != 200 || string(body) != `{"content":"a b c"}`+"\n" {
		t.Errorf("detokenize: %d %s", code, body)
	}
	// Models and health.
	ml, err := client.ListModels(ctx)
	if err != nil || len(ml.Models) != 1 || ml.Models[0].ID != "test-model" {
		t.Errorf("models: %v %+v", err, ml)
	}
}

func TestServeAPIKey(t *testing.T) {
	m := randomModel(t)
	_, url, client := start(t, m, Config{Parallel: 1, APIKey: "sesame"})
	if _, err := client.CreateCompletion(context.Background(), openai.CompletionRequest{Model: "test-model", Prompt: "x", MaxTokens: 2}); err != nil {
		t.Errorf("with the key: %v", err)
	}
	code, body := post(t, url+"/v1/completions", `{"prompt":"x"}`)
	if code != 401 || !strings.Contains(string(body), "invalid_api_key") {
		t.Errorf("without the key: %d %s", code, body)
	}
	if code, _ := post(t, url+"/v1/completions", `{"prompt":"x"}`, "Authorization", "Bearer wrong"); code != 401 {
		t.Errorf("wrong key: %d", code)
	}
	if resp, err := http.Get(url + "/health"); err != nil || resp.StatusCode != 200 {
		t.Errorf("/health needs no key: %v %v", resp, err)
	}
}

// streamFirst starts a streaming completion and returns after its first event, with the
// function that disconnects the client.
func streamFirst(t testing.TB, url, body string) (cancel func(), rest func() string) {
	t.Helper()
	ctx, cancelCtx := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	return func() { cancelCtx(); resp.Body.Close() }, func() string {
		b, _ := io.ReadAll(br)
		resp.Body.Close()
		return string(b)
	}
}

func waitIdle(t testing.TB, s *Server, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		busy, queued := s.Stats()
		if busy == 0 && queued == 0 {
			return time.Since(start)
		}
		if time.Since(start) > within {
			t.Fatalf("still %d busy, %d queued after %v", busy, queued, within)
		}
		time.Sleep(time.Millisecond)
	}
}

// A client that disconnects frees its slot within about a token's time, and a full queue
// answers 503 while the server goes on serving.
func TestServeCancelAndQueue(t *testing.T) {
	m := fixtureModel(t)
	s, url, _ := start(t, m, Config{Parallel: 1, Queue: 1})
	long := `{"prompt":"In the beginning","max_tokens":400,"temperature":0,"ignore_eos":true,"stream":true}`
	// One token's time, alone.
	t0 := time.Now()
	post(t, url+"/v1/completions", `{"prompt":"In the beginning","max_tokens":8,"temperature":0,"ignore_eos":true}`)
	perToken := time.Since(t0) / 8

	// A disconnect alone: the slot is free again within about a token.
	cancel, _ := streamFirst(t, url+"/v1/completions", long)
	time.Sleep(3 * perToken)
	t1 := time.Now()
	cancel()
	freed := waitIdle(t, s, 5*time.Second)
	t.Logf("one token alone: %v; slot freed %v after the client disconnected", perToken, freed)
	if freed > 2*time.Second {
		t.Errorf("slot freed %v after the disconnect", freed)
	}

	cancel, _ = streamFirst(t, url+"/v1/completions", long)
	busy, _ := s.Stats()
	if busy != 1 {
		t.Fatalf("busy %d", busy)
	}
	// A second request waits in the queue; a third finds it full.
	done := make(chan int, 1)
	go func() {
		code, _ := post(t, url+"/v1/completions", `{"prompt":"x","max_tokens":3}`)
		done <- code
	}()
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		if _, q := s.Stats(); q == 1 {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatal("the second request never queued")
		}
	}
	code, body := post(t, url+"/v1/completions", `{"prompt":"x","max_tokens":3}`)
	if code != 503 || !strings.Contains(string(body), "server_error") {
		t.Errorf("full queue: %d %s", code, body)
	}
	code, body = post(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"stream":true}`)
	if code != 503 || !strings.Contains(string(body), "server_busy") {
		t.Errorf("full queue, streaming chat: %d %s", code, body)
	}
	// Disconnecting the first hands the slot to the queued one, which completes.
	t1 = time.Now()
	cancel()
	select {
	case code := <-done:
		if code != 200 {
			t.Errorf("queued request: %d", code)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the queued request did not run after the disconnect")
	}
	waitIdle(t, s, 5*time.Second)
	t.Logf("the queued 3-token request done %v after the disconnect", time.Since(t1))

	// A queued client that gives up leaves the queue.
	cancel, _ = streamFirst(t, url+"/v1/completions", long)
	ctx, giveUp := context.WithCancel(context.Background())
	go func() {
		req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/completions", strings.NewReader(`{"prompt":"x"}`))
		req.Header.Set("Content-Type", "application/json")
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		if _, q := s.Stats(); q == 1 {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatal("never queued")
		}
	}
	giveUp()
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		if _, q := s.Stats(); q == 0 {
			break
		}
		if time.Since(start) > 5*time.Second {
			t.Fatal("the cancelled waiter stayed queued")
		}
	}
	cancel()
	waitIdle(t, s, 5*time.Second)
}

// streamText streams a greedy completion through the OpenAI client and returns its text.
func streamText(ctx context.Context, client *openai.Client, prompt string, ntok int) (string, error) {
	st, err := client.CreateCompletionStream(ctx, openai.CompletionRequest{Model: "test-model", Prompt: prompt, MaxTokens: ntok, Temperature: greedyTemp, Stream: true})
	if err != nil {
		return "", err
	}
	defer st.Close()
	var b strings.Builder
	for {
		c, err := st.Recv()
		if errors.Is(err, io.EOF) {
			return b.String(), nil
		}
		if err != nil {
			return "", err
		}
		for _, ch := range c.Choices {
			b.WriteString(ch.Text)
		}
	}
}

// concurrentStreams runs clients streaming requests at once (prompts in turn) and checks each
// text against want; it returns how long they took.
func concurrentStreams(t testing.TB, client *openai.Client, clients, ntok int, prompts []string, want map[string]string) time.Duration {
	t0 := time.Now()
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p := prompts[i%len(prompts)]
			got, err := streamText(context.Background(), client, p, ntok)
			if err == nil && want != nil && got != want[p] {
				err = fmt.Errorf("%q: got %q, want %q", p, got, want[p])
			}
			if err != nil {
				errs <- err
			}
		}()
	}
	wg.Wait()
	d := time.Since(t0)
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	return d
}

// 32 concurrent streaming requests over 8 slots all complete with the library's greedy text.
func TestServeConcurrentStreams(t *testing.T) {
	m := randomModel(t)
	const clients, slots, ntok = 32, 8, 16
	s, _, client := start(t, m, Config{Parallel: slots, Queue: clients})
	prompts := []string{"a b", "c d e", "f", "g h i j"}
	want := map[string]string{}
	for _, p := range prompts {
		want[p] = libraryGreedy(t, m, p, ntok, nil)
	}
	concurrentStreams(t, client, clients, ntok, prompts, want)
	waitIdle(t, s, 5*time.Second)
}

// BenchmarkServeStreams measures generation through the server on the trained tiny GPT-2:
// tokens per second for one streaming request at a time, and aggregate for 8 and 32 at once
// over 8 slots (go test ./server -run '^$' -bench ServeStreams -benchtime 1x).
func BenchmarkServeStreams(b *testing.B) {
	m := fixtureModel(b)
	const ntok = 32
	_, _, client := start(b, m, Config{Parallel: 8, Queue: 64})
	prompts := []string{"In the beginning", "The word", "And God said", "A lamp is"}
	for _, clients := range []int{1, 8, 32} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			var d time.Duration
			for range b.N {
				d += concurrentStreams(b, client, clients, ntok, prompts, nil)
			}
			b.ReportMetric(float64(b.N*clients*ntok)/d.Seconds(), "tokens/s")
		})
	}
}

func rssBytes() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

func heapBytes() uint64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// 500 sequential requests (completions and chat, streaming and not) leave memory flat.
func TestServeSequentialMemory(t *testing.T) {
	m := randomModel(t)
	_, url, _ := start(t, m, Config{Parallel: 2})
	bodies := []struct{ path, body string }{
		{"/v1/completions", `{"prompt":"a b c %d","max_tokens":4,"temperature":0.7,"seed":%d}`},
		{"/v1/completions", `{"prompt":"a b c %d","max_tokens":4,"stream":true,"seed":%d}`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x %d"}],"max_tokens":4,"seed":%d}`},
		{"/v1/chat/completions", `{"messages":[{"role":"user","content":"x %d"}],"max_tokens":4,"stream":true,"seed":%d}`},
	}
	run := func(n int) {
		for i := range n {
			b := bodies[i%len(bodies)]
			if code, body := post(t, url+b.path, fmt.Sprintf(b.body, i, i)); code != 200 || !bytes.Contains(body, []byte("\"")) {
				t.Fatalf("request %d: %d %s", i, code, body)
			}
		}
	}
	run(50) // warm up: slots' graphs, connections, buffers
	heap0, rss0 := heapBytes(), rssBytes()
	t0 := time.Now()
	run(500)
	d := time.Since(t0)
	heap1, rss1 := heapBytes(), rssBytes()
	t.Logf("500 requests in %v: heap %d -> %d KiB, RSS %d -> %d KiB", d, heap0>>10, heap1>>10, rss0>>10, rss1>>10)
	if heap1 > heap0+4<<20 {
		t.Errorf("heap grew from %d to %d bytes over 500 requests", heap0, heap1)
	}
}

// llamaTokens runs /completion and returns the generated token ids.
func llamaTokens(t *testing.T, url, body string) []int32 {
	t.Helper()
	code, b := post(t, url+"/completion", body)
	var r llamaCompletionResponse
	if code != 200 || json.Unmarshal(b, &r) != nil {
		t.Fatalf("%s: %d %s", body, code, b)
	}
	return r.Tokens
}

// Presence and frequency penalties and logit bias (which the library's sampler lacks) change
// the logits as OpenAI defines them; a bias of 0 changes nothing, stop strings included.
func TestServePenaltiesAndBias(t *testing.T) {
	m := randomModel(t)
	_, url, client := start(t, m, Config{Parallel: 2})
	const n = 12
	plain := llamaTokens(t, url, `{"prompt":"a b","n_predict":12,"temperature":0,"ignore_eos":true}`)
	if len(plain) != n {
		t.Fatalf("%d tokens", len(plain))
	}
	// The adjusting loop with nothing to adjust is the library's greedy generation.
	same := llamaTokens(t, url, `{"prompt":"a b","n_predict":12,"temperature":0,"ignore_eos":true,"logit_bias":{"5":0}}`)
	if fmt.Sprint(same) != fmt.Sprint(plain) {
		t.Errorf("bias 0: %v, want %v", same, plain)
	}
	full := libraryGreedy(t, m, "a b", 16, nil)
	if len(full) > 4 {
		stop := full[len(full)/2:]
		want := libraryGreedy(t, m, "a b", 16, []string{stop})
		code, body := post(t, url+"/v1/completions", fmt.Sprintf(`{"prompt":"a b","max_tokens":16,"temperature":0,"stop":%q,"logit_bias":{"5":0}}`, stop))
		var r completionResponse
		if code != 200 || json.Unmarshal(body, &r) != nil || r.Choices[0].Text != want || *r.Choices[0].FinishReason != "stop" {
			t.Errorf("bias 0 with stop %q: %d %s, want %q", stop, code, body, want)
		}
	}
	// +100 makes a token the only choice; -100 bans one.
	x := (plain[0] + 7) % int32(m.Tokenizer().VocabSize())
	for _, id := range llamaTokens(t, url, fmt.Sprintf(`{"prompt":"a b","n_predict":6,"temperature":0.9,"seed":3,"ignore_eos":true,"logit_bias":{"%d":100}}`, x)) {
		if id != x {
			t.Errorf("bias +100 on %d: got %d", x, id)
		}
	}
	for _, id := range llamaTokens(t, url, fmt.Sprintf(`{"prompt":"a b","n_predict":12,"temperature":0,"ignore_eos":true,"logit_bias":{"%d":-100}}`, plain[0])) {
		if id == plain[0] {
			t.Errorf("bias -100 on %d: generated it", id)
		}
	}
	// Penalties: the greedy choice over logits - frequency*count - presence*[count > 0], counting
	// the generated tokens, computed here step by step on a session of the same model.
	differ := 0
	for _, pen := range []struct{ presence, frequency float32 }{{0, 1.5}, {1.5, 0}, {0.7, 0.4}} {
		sess, err := m.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		logits, err := sess.EvalContext(context.Background(), m.Tokenizer().Encode("a b"))
		if err != nil {
			t.Fatal(err)
		}
		counts := map[int32]int{}
		var want []int32
		for range n {
			best, bestV := int32(0), float32(math.Inf(-1))
			for i, l := range logits {
				v := l
				if c := counts[int32(i)]; c > 0 {
					v -= pen.frequency*float32(c) + pen.presence
				}
				if v > bestV {
					best, bestV = int32(i), v
				}
			}
			want = append(want, best)
			counts[best]++
			if logits, err = sess.EvalContext(context.Background(), []int32{best}); err != nil {
				t.Fatal(err)
			}
		}
		sess.Close()
		got := llamaTokens(t, url, fmt.Sprintf(`{"prompt":"a b","n_predict":12,"temperature":0,"ignore_eos":true,"presence_penalty":%v,"frequency_penalty":%v}`, pen.presence, pen.frequency))
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("presence %v frequency %v: %v, want %v", pen.presence, pen.frequency, got, want)
		}
		if fmt.Sprint(want) != fmt.Sprint(plain) {
			differ++
		}
	}
	if differ == 0 {
		t.Errorf("no penalty changed the greedy text %v: the test shows nothing", plain)
	}
	// Through the OpenAI client, streaming chat with penalties.
	st, err := client.CreateChatCompletionStream(context.Background(), openai.ChatCompletionRequest{Model: "test-model", MaxTokens: 8, PresencePenalty: 1, FrequencyPenalty: 0.5,
		LogitBias: map[string]int{"3": -100}, Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "x"}}, Stream: true})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for {
		_, err := st.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

// Whatever the body, an endpoint answers with JSON (or an event stream) and never a 5xx.
func FuzzServeRequest(f *testing.F) {
	for _, seed := range []string{
		`{"prompt":"a b","max_tokens":3}`, `{"prompt":[1,2],"n":2,"max_tokens":2,"logprobs":2,"echo":true}`,
		`{"prompt":[[1],[2]],"max_tokens":1}`, `{"prompt":"x","stop":["a","b"],"top_k":100000,"seed":9223372036854775807}`,
		`{"messages":[{"role":"user","content":[{"type":"text","text":"hi"}]}],"max_tokens":2,"logprobs":true,"top_logprobs":3}`,
		`{"prompt":"x","logit_bias":{"1":-100,"2":100},"presence_penalty":2,"frequency_penalty":-2,"max_tokens":2}`,
		`{"content":"a b c","with_pieces":true}`, `{"tokens":[1,2,3]}`, `{"prompt":"x","n_predict":2,"stream":true}`,
		`{"prompt":[]}`, `{"prompt":[[]]}`, `null`, `[]`, `{"prompt":"x","max_tokens":null}`, `{"prompt":"x","n":-1}`,
	} {
		for _, path := range []string{"/v1/completions", "/v1/chat/completions", "/completion", "/tokenize", "/detokenize"} {
			f.Add(path, seed)
		}
	}
	m := randomModel(f)
	s, err := New(Config{Model: m, Parallel: 2, MaxBodyBytes: 1 << 16})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, path, body string) {
		switch path {
		case "/v1/completions", "/v1/chat/completions", "/completion", "/tokenize", "/detokenize":
		default:
			return
		}
		w := httptest.NewRecorder()
		req := httptest.NewRequest("POST", path, strings.NewReader(body))
		req.Host = "127.0.0.1:8080"
		req.Header.Set("Content-Type", "application/json")
		s.ServeHTTP(w, req)
		ct := w.Header().Get("Content-Type")
		if w.Code >= 500 || (ct != "application/json" && ct != "text/event-stream") {
			t.Fatalf("%s %q: %d %s %s", path, body, w.Code, ct, w.Body.String())
		}
		if ct == "application/json" && !json.Valid(w.Body.Bytes()) {
			t.Fatalf("%s %q: invalid JSON %s", path, body, w.Body.String())
		}
	})
}
