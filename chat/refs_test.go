package chat

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The reference test: every conversation of testdata/conversations.json rendered with every
// template of testdata/templates.json must equal, byte for byte, what
// testdata/make_refs.py recorded (hf_refs.json: Hugging Face transformers'
// render_jinja_template, as apply_chat_template(tokenize=False); jinja2_refs.json: the same
// Jinja environment rebuilt on jinja2 alone). A render the reference recorded as raising
// must fail here too, with the same message when it was the template's raise_exception.

type refTemplate struct {
	Name     string                     `json:"name"`
	File     string                     `json:"file"`
	BOSToken *string                    `json:"bos_token"`
	EOSToken *string                    `json:"eos_token"`
	Vars     map[string]json.RawMessage `json:"vars"`
}

type refConversation struct {
	Name                string                     `json:"name"`
	AddGenerationPrompt bool                       `json:"add_generation_prompt"`
	Tools               []json.RawMessage          `json:"tools"`
	Vars                map[string]json.RawMessage `json:"vars"`
	Messages            []refMessage               `json:"messages"`
}

type refMessage struct {
	Role             string `json:"role"`
	Content          string `json:"content"`
	Name             string `json:"name"`
	ToolCallID       string `json:"tool_call_id"`
	ReasoningContent string `json:"reasoning_content"`
	ToolCalls        []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string          `json:"name"`
			Arguments json.RawMessage `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

type refResult struct {
	Text      *string `json:"text"`
	Error     string  `json:"error"`
	ErrorType string  `json:"error_type"`
}

type refFile struct {
	Engine string               `json:"engine"`
	Refs   map[string]refResult `json:"refs"`
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}

func loadRefTemplates(t *testing.T) []refTemplate {
	var doc struct {
		Templates []refTemplate `json:"templates"`
	}
	readJSON(t, "testdata/templates.json", &doc)
	return doc.Templates
}

func loadConversations(t *testing.T) []refConversation {
	var doc struct {
		Conversations []refConversation `json:"conversations"`
	}
	readJSON(t, "testdata/conversations.json", &doc)
	return doc.Conversations
}

// messages converts a fixture conversation to the API's messages (arguments as JSON text,
// as an OpenAI request carries them).
func (c refConversation) messages() []Message {
	msgs := make([]Message, len(c.Messages))
	for i, m := range c.Messages {
		msgs[i] = Message{Role: m.Role, Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID, ReasoningContent: m.ReasoningContent}
		for _, tc := range m.ToolCalls {
			msgs[i].ToolCalls = append(msgs[i].ToolCalls, ToolCall{ID: tc.ID, Type: tc.Type, Name: tc.Function.Name, Arguments: string(tc.Function.Arguments)})
		}
	}
	return msgs
}

func (c refConversation) renderOptions(tv map[string]json.RawMessage) RenderOptions {
	vars := map[string]any{}
	for k, v := range tv {
		vars[k] = v
	}
	for k, v := range c.Vars {
		vars[k] = v
	}
	return RenderOptions{AddGenerationPrompt: c.AddGenerationPrompt, Tools: c.Tools, Vars: vars}
}

func newRefTemplate(t *testing.T, rt refTemplate) *Template {
	t.Helper()
	src, err := os.ReadFile(filepath.Join("testdata", rt.File))
	if err != nil {
		t.Fatal(err)
	}
	var opts Options
	if rt.BOSToken != nil {
		opts.BOS = *rt.BOSToken
	}
	if rt.EOSToken != nil {
		opts.EOS = *rt.EOSToken
	}
	tmpl, err := New(rt.Name, string(src), opts)
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

func TestHuggingFaceReferences(t *testing.T) {
	testReferences(t, "testdata/hf_refs.json")
}

func TestJinja2References(t *testing.T) {
	testReferences(t, "testdata/jinja2_refs.json")
}

func testReferences(t *testing.T, path string) {
	if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
		t.Skipf("%s is absent: run python3 chat/testdata/make_refs.py (needs transformers) to make it", path)
	}
	var refs refFile
	readJSON(t, path, &refs)
	t.Logf("references by %s", refs.Engine)
	convs := loadConversations(t)
	n := 0
	for _, rt := range loadRefTemplates(t) {
		tmpl := newRefTemplate(t, rt)
		for _, c := range convs {
			key := rt.Name + "/" + c.Name
			ref, ok := refs.Refs[key]
			if !ok {
				t.Errorf("%s: no reference in %s (regenerate it)", key, path)
				continue
			}
			n++
			got, err := tmpl.Render(c.messages(), c.renderOptions(rt.Vars))
			checkAgainstRef(t, key, ref, got, err)
		}
	}
	if n != len(refs.Refs) {
		t.Errorf("%s has %d references, the fixtures make %d (regenerate it)", path, len(refs.Refs), n)
	}
}

func checkAgainstRef(t *testing.T, key string, ref refResult, got string, err error) {
	t.Helper()
	switch {
	case ref.Text == nil && err == nil:
		t.Errorf("%s: rendered, the reference raised %s: %s; got\n%q", key, ref.ErrorType, ref.Error, got)
	case ref.Text == nil:
		var raised *RaiseError
		if ref.ErrorType == "TemplateError" && (!errors.As(err, &raised) || raised.Message != ref.Error) {
			t.Errorf("%s: error %v, want raise_exception(%q)", key, err, ref.Error)
		}
		if !strings.Contains(err.Error(), "chat template "+strings.Split(key, "/")[0]) {
			t.Errorf("%s: error %q does not name the template", key, err)
		}
	case err != nil:
		t.Errorf("%s: %v; want\n%q", key, err, *ref.Text)
	case got != *ref.Text:
		t.Errorf("%s: differs from the reference at byte %d\n got %q\nwant %q", key, firstDiff(got, *ref.Text), got, *ref.Text)
	}
}

func firstDiff(a, b string) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	return i
}
