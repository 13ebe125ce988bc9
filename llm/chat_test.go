package llm

import (
	"errors"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/chat"
	"github.com/gorun-dev/gorun/internal/chatrefs"
	"github.com/gorun-dev/gorun/internal/testmodel"
)

const chatTestdata = "../chat/testdata"

// llama3Model is a tiny random GPT-2 with Llama 3 Instruct's control tokens, BOS rule and
// chat template (the file's, from chat/testdata) and a context long enough for the
// reference conversations.
func llama3Model(t *testing.T, opts Options) *Model {
	t.Helper()
	src, err := os.ReadFile(chatTestdata + "/templates/llama3.jinja")
	if err != nil {
		t.Fatal(err)
	}
	return tinyModel(t, func(c *testmodel.Config) {
		c.NCtx = 512
		c.Chat = testmodel.Llama3Chat(string(src))
	}, opts)
}

// The library renders every reference conversation as Hugging Face does with Llama 3's
// template, and its prompt gives the tokens of apply_chat_template(tokenize=True): one BOS,
// the tokenizer's, not a second from the template's {{ bos_token }}.
func TestChatTemplateMatchesHuggingFace(t *testing.T) {
	m := llama3Model(t, Options{})
	convs, refs, err := chatrefs.Load(chatTestdata)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := m.ChatTemplate()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tmpl.Name(), "tokenizer.chat_template") {
		t.Errorf("template name %q does not say it is the file's", tmpl.Name())
	}
	tok := m.Tokenizer()
	bos := tok.Special().BOS
	if tok.Token(bos) != "<|begin_of_text|>" || !tok.Special().AddBOS {
		t.Fatalf("test model: BOS %q, AddBOS %v", tok.Token(bos), tok.Special().AddBOS)
	}
	checked := 0
	for _, c := range convs {
		ref, ok := refs["llama3/"+c.Name]
		if !ok || ref.Text == nil {
			continue
		}
		checked++
		raw, err := tmpl.Render(c.Messages, c.Options)
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		if raw != *ref.Text {
			t.Errorf("%s: render\n%q\nwant (Hugging Face)\n%q", c.Name, raw, *ref.Text)
		}
		prompt, err := m.ApplyChatTemplate(c.Messages, c.Options)
		if err != nil {
			t.Errorf("%s: %v", c.Name, err)
			continue
		}
		if want := strings.TrimPrefix(*ref.Text, "<|begin_of_text|>"); prompt != want {
			t.Errorf("%s: prompt\n%q\nwant the render without its BOS text\n%q", c.Name, prompt, want)
		}
		// Hugging Face tokenizes the render with add_special_tokens=False.
		got, want := m.Tokenize(prompt, true), tok.Encode(*ref.Text)
		if !slices.Equal(got, want) {
			t.Errorf("%s: tokens %v, want %v", c.Name, got, want)
		}
		if n := countToken(got, bos); got[0] != bos || n != 1 {
			t.Errorf("%s: %d BOS tokens (first token %d)", c.Name, n, got[0])
		}
	}
	if checked < 10 {
		t.Fatalf("only %d reference renders checked", checked)
	}
}

func countToken(ids []int32, id int32) int {
	n := 0
	for _, x := range ids {
		if x == id {
			n++
		}
	}
	return n
}

// The built-in "llama3" (--chat-template llama3) renders as Meta's template, here for the
// conversations without tools; Options.ChatTemplate replaces the file's.
func TestChatTemplateBuiltinLlama3(t *testing.T) {
	m := llama3Model(t, Options{ChatTemplate: "llama3"})
	convs, refs, err := chatrefs.Load(chatTestdata)
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := m.ChatTemplate()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(tmpl.Name(), "--chat-template") {
		t.Errorf("template name %q does not say it is the override", tmpl.Name())
	}
	for _, c := range convs {
		ref, ok := refs["llama3/"+c.Name]
		if !ok || ref.Text == nil || len(c.Options.Tools) > 0 || !c.Options.AddGenerationPrompt {
			continue // Meta's template always ends with the generation prompt
		}
		hasCalls := false
		for _, msg := range c.Messages {
			hasCalls = hasCalls || len(msg.ToolCalls) > 0
		}
		if hasCalls {
			continue
		}
		got, err := tmpl.Render(c.Messages, c.Options)
		if err != nil || got != *ref.Text {
			t.Errorf("%s: %q, %v\nwant %q", c.Name, got, err, *ref.Text)
		}
	}
}

// A model without a template (GPT-2) says so, with chat.ErrNoTemplate; --chat-template chatml
// gives it one. A template that does not compile is an error naming it.
func TestChatTemplateAbsentAndOverride(t *testing.T) {
	msgs := []chat.Message{{Role: "system", Content: "Be brief."}, {Role: "user", Content: "Hi"}}
	gpt2 := tinyModel(t, nil, Options{})
	if gpt2.HasChatTemplate() {
		t.Error("GPT-2 reports a chat template")
	}
	if _, err := gpt2.ApplyChatTemplate(msgs, chat.RenderOptions{}); !errors.Is(err, chat.ErrNoTemplate) {
		t.Errorf("GPT-2 without a template: %v, want chat.ErrNoTemplate", err)
	}

	chatml := tinyModel(t, nil, Options{ChatTemplate: "chatml"})
	got, err := chatml.ApplyChatTemplate(msgs, chat.RenderOptions{AddGenerationPrompt: true})
	want := "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"
	if err != nil || got != want {
		t.Errorf("chatml: %q, %v\nwant %q", got, err, want)
	}

	bad := tinyModel(t, nil, Options{ChatTemplate: "{% if %}"})
	_, err = bad.ApplyChatTemplate(msgs, chat.RenderOptions{})
	var ce *chat.Error
	if !errors.As(err, &ce) || !strings.Contains(err.Error(), "--chat-template") || ce.Op != "compile" {
		t.Errorf("bad template: %v, want a compile *chat.Error naming --chat-template", err)
	}
}

// A template's raise_exception reaches the caller as a *chat.RaiseError with its message.
func TestChatTemplateRaise(t *testing.T) {
	m := llama3Model(t, Options{ChatTemplate: "{% if messages[0]['role'] != 'user' %}{{ raise_exception('the first message must be the user\\'s') }}{% endif %}ok"})
	_, err := m.ApplyChatTemplate([]chat.Message{{Role: "assistant", Content: "x"}}, chat.RenderOptions{})
	var re *chat.RaiseError
	if !errors.As(err, &re) || re.Message != "the first message must be the user's" {
		t.Errorf("got %v, want the template's raise_exception", err)
	}
}
