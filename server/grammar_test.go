package server

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"

	openai "github.com/sashabaranov/go-openai"
)

// answerSchema's language is finite (an enum and an integer of at most 16 digits, bounded
// whitespace), so every answer under it completes.
const answerSchema = `{"type":"object","properties":{"answer":{"enum":["yes","no"]},"confidence":{"type":"integer"}},"required":["answer","confidence"],"additionalProperties":false}`

type answer struct {
	Answer     string `json:"answer"`
	Confidence int64  `json:"confidence"`
}

// checkAnswer asserts that text is a JSON object as answerSchema describes.
func checkAnswer(t *testing.T, what, text string) {
	t.Helper()
	var a answer
	d := json.NewDecoder(strings.NewReader(text))
	d.DisallowUnknownFields()
	if err := d.Decode(&a); err != nil || (a.Answer != "yes" && a.Answer != "no") || !strings.Contains(text, `"confidence"`) {
		t.Fatalf("%s: %q does not match the schema (%v)", what, text, err)
	}
}

// response_format json_schema (through OpenAI's Go client, plain and streamed) and
// json_object, and llama-server's grammar and json_schema fields, constrain the answers.
func TestServeResponseFormat(t *testing.T) {
	m := fixtureModel(t)
	_, url, client := start(t, m, Config{Parallel: 2, ModelName: "test-model"})
	ctx := context.Background()
	format := &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONSchema,
		JSONSchema: &openai.ChatCompletionResponseFormatJSONSchema{Name: "answer", Schema: json.RawMessage(answerSchema), Strict: true}}
	for seed := 1; seed <= 5; seed++ {
		req := openai.ChatCompletionRequest{Model: "test-model", Temperature: 1, Seed: &seed, MaxTokens: 400, ResponseFormat: format,
			Messages: []openai.ChatCompletionMessage{{Role: "user", Content: "Is the lamp lit?"}}}
		resp, err := client.CreateChatCompletion(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		checkAnswer(t, "chat", resp.Choices[0].Message.Content)
		if fr := resp.Choices[0].FinishReason; fr != openai.FinishReasonStop {
			t.Fatalf("seed %d: finish reason %q", seed, fr)
		}
		if seed == 1 {
			t.Logf("chat: %q", resp.Choices[0].Message.Content)
		}

		stream, err := client.CreateChatCompletionStream(ctx, req)
		if err != nil {
			t.Fatal(err)
		}
		var text strings.Builder
		for {
			chunk, err := stream.Recv()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(chunk.Choices) > 0 {
				text.WriteString(chunk.Choices[0].Delta.Content)
			}
		}
		stream.Close()
		if text.String() != resp.Choices[0].Message.Content {
			t.Fatalf("seed %d: streamed %q, whole %q", seed, text.String(), resp.Choices[0].Message.Content)
		}
	}

	// json_object: any JSON object; a completed answer is valid JSON, a cut one a prefix.
	for seed := 1; seed <= 3; seed++ {
		resp, err := client.CreateChatCompletion(ctx, openai.ChatCompletionRequest{Model: "test-model", Temperature: 1, Seed: &seed, MaxTokens: 60,
			ResponseFormat: &openai.ChatCompletionResponseFormat{Type: openai.ChatCompletionResponseFormatTypeJSONObject},
			Messages:       []openai.ChatCompletionMessage{{Role: "user", Content: "Describe a lamp."}}})
		if err != nil {
			t.Fatal(err)
		}
		c := resp.Choices[0]
		if !strings.HasPrefix(strings.TrimSpace(c.Message.Content), "{") {
			t.Fatalf("json_object: %q is not an object", c.Message.Content)
		}
		if c.FinishReason == openai.FinishReasonStop && !json.Valid([]byte(c.Message.Content)) {
			t.Fatalf("json_object: finished but invalid: %q", c.Message.Content)
		}
	}

	// llama-server's fields.
	for _, c := range []struct{ path, body, field string }{
		{"/completion", `{"prompt":"Is the lamp lit? Answer:","n_predict":10,"temperature":1,"seed":4,"grammar":"root ::= \"yes\" | \"no\""}`, "content"},
		{"/v1/completions", `{"prompt":"Answer:","max_tokens":400,"temperature":1,"seed":4,"json_schema":` + answerSchema + `}`, "text"},
	} {
		code, body := post(t, url+c.path, c.body)
		if code != 200 {
			t.Fatalf("%s: %d %s", c.path, code, body)
		}
		var r struct {
			Content string `json:"content"`
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
		}
		if err := json.Unmarshal(body, &r); err != nil {
			t.Fatal(err)
		}
		if c.field == "content" {
			if r.Content != "yes" && r.Content != "no" {
				t.Fatalf("%s: %q", c.path, r.Content)
			}
			continue
		}
		checkAnswer(t, c.path, r.Choices[0].Text)
	}
}
