package server

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/chat"
	"github.com/gorun-dev/gorun/internal/chatrefs"
	"github.com/gorun-dev/gorun/internal/testmodel"
	"github.com/gorun-dev/gorun/llm"
)

const chatTestdata = "../chat/testdata"

// llama3Model is a tiny random GPT-2 with Llama 3 Instruct's control tokens, BOS rule and
// chat template (chat/testdata's), loaded with opts.
func llama3Model(t *testing.T, opts llm.Options) *llm.Model {
	t.Helper()
	src, err := os.ReadFile(chatTestdata + "/templates/llama3.jinja")
	if err != nil {
		t.Fatal(err)
	}
	c, err := testmodel.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	c.NCtx = 2048 // Llama 3.2's template with tools makes prompts of ~1800 tokens here
	c.Chat = testmodel.Llama3Chat(string(src))
	path := filepath.Join(t.TempDir(), "llama3-chat.gguf")
	if err := testmodel.Write(path, c); err != nil {
		t.Fatal(err)
	}
	opts.Threads = 2
	m, err := llm.Load(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// openAIMessages writes messages as a chat request carries them (tool call arguments as a
// string of JSON).
func openAIMessages(msgs []chat.Message) []map[string]any {
	out := make([]map[string]any, len(msgs))
	for i, m := range msgs {
		o := map[string]any{"role": m.Role, "content": m.Content}
		if m.Name != "" {
			o["name"] = m.Name
		}
		if m.ToolCallID != "" {
			o["tool_call_id"] = m.ToolCallID
		}
		if m.ReasoningContent != "" {
			o["reasoning_content"] = m.ReasoningContent
		}
		for _, tc := range m.ToolCalls {
			call := map[string]any{"type": "function", "function": map[string]any{"name": tc.Name, "arguments": tc.Arguments}}
			if tc.ID != "" {
				call["id"] = tc.ID
			}
			calls, _ := o["tool_calls"].([]map[string]any)
			o["tool_calls"] = append(calls, call)
		}
		out[i] = o
	}
	return out
}

// chatBody is a greedy chat request for a reference conversation.
func chatBody(t *testing.T, c chatrefs.Conversation, maxTokens int) string {
	t.Helper()
	req := map[string]any{"messages": openAIMessages(c.Messages), "max_tokens": maxTokens, "temperature": 0}
	if c.Options.Tools != nil {
		req["tools"] = c.Options.Tools
	}
	if len(c.Options.Vars) > 0 {
		req["chat_template_kwargs"] = c.Options.Vars
	}
	b, err := json.Marshal(req)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

type chatAnswer struct {
	Choices []struct {
		Message struct {
			Content string `json:"content"`
		} `json:"message"`
	} `json:"choices"`
	Usage usage `json:"usage"`
}

// The chat endpoint renders the request (roles, tool calls, tools) with the model's Llama 3
// template as Hugging Face does: the prompt has the tokens of the reference render (one BOS),
// and the greedy answer is the library's for that render.
func TestServeChatTemplateMatchesHuggingFace(t *testing.T) {
	m := llama3Model(t, llm.Options{})
	_, url, _ := start(t, m, Config{Parallel: 1})
	convs, refs, err := chatrefs.Load(chatTestdata)
	if err != nil {
		t.Fatal(err)
	}
	tok := m.Tokenizer()
	checked := 0
	for _, c := range convs {
		ref, ok := refs["llama3/"+c.Name]
		if !ok || ref.Text == nil || !c.Options.AddGenerationPrompt {
			continue
		}
		checked++
		code, body := post(t, url+"/v1/chat/completions", chatBody(t, c, 4))
		var a chatAnswer
		if code != 200 || json.Unmarshal(body, &a) != nil || len(a.Choices) != 1 {
			t.Errorf("%s: %d %s", c.Name, code, body)
			continue
		}
		if want := len(tok.Encode(*ref.Text)); a.Usage.PromptTokens != want {
			t.Errorf("%s: prompt_tokens %d, want %d (the reference render's tokens)", c.Name, a.Usage.PromptTokens, want)
		}
		prompt := strings.TrimPrefix(*ref.Text, "<|begin_of_text|>") // the session adds BOS
		if want := libraryGreedy(t, m, prompt, 4, nil); a.Choices[0].Message.Content != want {
			t.Errorf("%s: answer %q, want the library's %q", c.Name, a.Choices[0].Message.Content, want)
		}
	}
	if checked < 5 {
		t.Fatalf("only %d conversations checked", checked)
	}
}

// A template's raise_exception is a 400 carrying its message; chat_template_kwargs reach the
// template (Llama 3.2's date_string), tools too.
func TestServeChatTemplateRaiseAndKwargs(t *testing.T) {
	src, err := os.ReadFile(chatTestdata + "/templates/llama3.2.jinja")
	if err != nil {
		t.Fatal(err)
	}
	m := llama3Model(t, llm.Options{ChatTemplate: string(src)})
	_, url, _ := start(t, m, Config{Parallel: 1})
	convs, refs, err := chatrefs.Load(chatTestdata)
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]chatrefs.Conversation{}
	for _, c := range convs {
		c.Options.Vars = map[string]any{"date_string": "26 Jul 2024"} // templates.json's vars for llama3.2
		byName[c.Name] = c
	}

	code, body := post(t, url+"/v1/chat/completions", chatBody(t, byName["two_tool_calls"], 1))
	want := refs["llama3.2/two_tool_calls"].Error
	if want == "" {
		t.Fatal("no reference error for llama3.2/two_tool_calls")
	}
	if code != 400 || !strings.Contains(string(body), want) || !strings.Contains(string(body), `"param":"messages"`) {
		t.Errorf("two tool calls: %d %s, want 400 with %q", code, body, want)
	}

	c := byName["tools_defined_gen"]
	ref := refs["llama3.2/tools_defined_gen"]
	code, body = post(t, url+"/v1/chat/completions", chatBody(t, c, 1))
	var a chatAnswer
	if code != 200 || json.Unmarshal(body, &a) != nil || ref.Text == nil {
		t.Fatalf("tools: %d %s", code, body)
	}
	if n := len(m.Tokenizer().Encode(*ref.Text)); a.Usage.PromptTokens != n {
		t.Errorf("tools and date_string: prompt_tokens %d, want %d", a.Usage.PromptTokens, n)
	}

	code, body = post(t, url+"/v1/chat/completions", `{"messages":[{"role":"user","content":"x"}],"chat_template_kwargs":{"messages":[]}}`)
	if code != 400 || !strings.Contains(string(body), "chat_template_kwargs") {
		t.Errorf("kwargs naming messages: %d %s, want 400", code, body)
	}
}

// A server whose template does not compile does not start, and says which template.
func TestServeBadChatTemplate(t *testing.T) {
	m := llama3Model(t, llm.Options{ChatTemplate: "{% for %}"})
	_, err := New(Config{Model: m, Parallel: 1})
	if err == nil || !strings.Contains(err.Error(), "--chat-template") {
		t.Errorf("got %v, want an error naming --chat-template", err)
	}
}

// GPT-2 keeps the plain format, announced by Plain; tools need a template.
func TestServePlainChatTemplate(t *testing.T) {
	m := randomModel(t)
	s, url, _ := start(t, m, Config{Parallel: 1})
	if !s.Plain() {
		t.Error("a model without a chat template does not report the plain format")
	}
	code, body := post(t, url+"/v1/chat/completions", `{"messages":[{"role":"system","content":"S"},{"role":"user","content":"U"},{"role":"assistant","content":"A"},{"role":"user","content":"V"}],"max_tokens":1}`)
	var a chatAnswer
	if code != 200 || json.Unmarshal(body, &a) != nil {
		t.Fatalf("%d %s", code, body)
	}
	if want := len(m.Tokenize("S\n\nUser: U\nAssistant: A\nUser: V\nAssistant:", true)); a.Usage.PromptTokens != want {
		t.Errorf("prompt_tokens %d, want %d", a.Usage.PromptTokens, want)
	}
}
