package llm

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"

	"github.com/gorun-dev/gorun/chat"
)

// builtinChatTemplates are the templates Options.ChatTemplate (--chat-template) may name
// instead of giving Jinja text, as llama.cpp's built-in names: the formats themselves,
// written for this table.
var builtinChatTemplates = map[string]string{
	// ChatML (Qwen, many fine-tunes): each turn between <|im_start|>ROLE and <|im_end|>.
	"chatml": `{%- for message in messages -%}
{{- '<|im_start|>' + message['role'] + '\n' + message['content'] + '<|im_end|>\n' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|im_start|>assistant\n' -}}
{%- endif -%}`,
	// Llama 3 Instruct: BOS, then each turn as a header and its trimmed text ending with
	// <|eot_id|>.
	"llama3": `{{- bos_token -}}
{%- for message in messages -%}
{{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n' + message['content'] | trim + '<|eot_id|>' -}}
{%- endfor -%}
{%- if add_generation_prompt -%}
{{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
{%- endif -%}`,
}

// BuiltinChatTemplates are the names Options.ChatTemplate accepts besides Jinja text.
func BuiltinChatTemplates() []string {
	names := make([]string, 0, len(builtinChatTemplates))
	for n := range builtinChatTemplates {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ChatTemplate is the template the model chats with: Options.ChatTemplate when it was given
// (Jinja text, or a built-in name such as "chatml"), otherwise the file's
// tokenizer.chat_template, with the texts of the tokenizer's BOS and EOS tokens as
// bos_token and eos_token. It is compiled once. A model with neither is an error matching
// chat.ErrNoTemplate; a template that does not compile is a *chat.Error naming it. Nothing
// falls back to another format.
func (m *Model) ChatTemplate() (*chat.Template, error) {
	m.chatOnce.Do(func() { m.chat, m.chatErr = m.compileChatTemplate() })
	return m.chat, m.chatErr
}

func (m *Model) compileChatTemplate() (*chat.Template, error) {
	override := m.chatOverride
	if src, ok := builtinChatTemplates[override]; ok {
		override = src
	}
	if m.chatFileErr != nil && override == "" {
		return nil, m.chatFileErr
	}
	bos, eos := m.specialText()
	return chat.ForModel(m.name(), m.chatFile, override, bos, eos)
}

// readChatTemplate keeps the file's tokenizer.chat_template (a copy: the metadata may be
// mapped) for ChatTemplate to compile on first use; a value that is not text is its error.
func (m *Model) readChatTemplate(override string) {
	m.chatOverride = override
	if !m.file.Has("tokenizer.chat_template") {
		return
	}
	src, err := m.file.String("tokenizer.chat_template")
	if err != nil {
		m.chatFileErr = fmt.Errorf("%w: tokenizer.chat_template: %v", ErrBadFile, err)
		return
	}
	m.chatFile = strings.Clone(src)
}

// specialText are the texts of the BOS and EOS tokens ("" where the vocabulary has none), as
// Hugging Face gives them to templates (bos_token, eos_token).
func (m *Model) specialText() (bos, eos string) {
	sp := m.tok.Special()
	if sp.BOS >= 0 {
		bos = m.tok.Token(sp.BOS)
	}
	if sp.EOS >= 0 {
		eos = m.tok.Token(sp.EOS)
	}
	return bos, eos
}

// name identifies the model in messages: its file name, or general.name.
func (m *Model) name() string {
	if m.path != "" {
		return filepath.Base(m.path)
	}
	if n, err := m.file.String("general.name"); err == nil && n != "" {
		return n
	}
	return "the model"
}

// ApplyChatTemplate renders a conversation with the model's chat template (ChatTemplate) and
// returns the prompt to begin a context with: Session.Generate's prompt, or Tokenize(prompt,
// true).
//
// The prompt is Hugging Face's apply_chat_template(tokenize=False) except for llama.cpp's
// rule against a doubled BOS (common/chat.cpp): templates write {{ bos_token }} themselves,
// and when the tokenizer also adds BOS (tokenizer.ggml.add_bos_token), the rendered BOS text
// at the start is left out, as is the EOS text at the end when it adds EOS. So
// Tokenize(prompt, true) gives the tokens Hugging Face's apply_chat_template(tokenize=True)
// gives. The exact render is ChatTemplate's Render. A template that refuses the conversation
// (raise_exception) is a *chat.Error wrapping a *chat.RaiseError.
func (m *Model) ApplyChatTemplate(msgs []chat.Message, opts chat.RenderOptions) (string, error) {
	t, err := m.ChatTemplate()
	if err != nil {
		return "", err
	}
	text, err := t.Render(msgs, opts)
	if err != nil {
		return "", err
	}
	return m.StripAddedSpecial(text), nil
}

// StripAddedSpecial removes from a rendered chat the BOS text at its start and the EOS text at
// its end where Tokenize(text, true) adds those tokens itself (llama.cpp's rule; see
// ApplyChatTemplate).
func (m *Model) StripAddedSpecial(text string) string {
	sp := m.tok.Special()
	bos, eos := m.specialText()
	if sp.AddBOS && bos != "" {
		text = strings.TrimPrefix(text, bos)
	}
	if sp.AddEOS && eos != "" {
		text = strings.TrimSuffix(text, eos)
	}
	return text
}

// HasChatTemplate reports whether the model chats with a template (the file's or
// Options.ChatTemplate), even one that does not compile; false is chat.ErrNoTemplate.
func (m *Model) HasChatTemplate() bool {
	_, err := m.ChatTemplate()
	return !errors.Is(err, chat.ErrNoTemplate)
}
