// Package chat renders a model's chat template: the Jinja program in a GGUF's
// tokenizer.chat_template (or given with --chat-template) that turns a list of messages into
// the prompt the model was trained on.
//
// Rendering follows Hugging Face's apply_chat_template(tokenize=False), the reference every
// template is written against: the same variables (messages, tools, documents,
// add_generation_prompt, bos_token, eos_token), the same Jinja options (trim_blocks and
// lstrip_blocks) and the same helpers (raise_exception, strftime_now, and a tojson that is
// Python's json.dumps with ensure_ascii=False). The Jinja engine is github.com/ardanlabs/jinja;
// this package supplies what it lacks for byte-identical prompts (see tojson.go, globals.go).
//
//	t, err := chat.New("qwen2.5", source, chat.Options{EOS: "<|im_end|>"})
//	prompt, err := t.Render(msgs, chat.RenderOptions{AddGenerationPrompt: true})
//
// A template the engine cannot compile or render is an error naming the template; nothing
// falls back silently to another format.
//
// Known gaps of the engine (v1.8.0, the newest that builds with this project's Go), none of
// them used by the Llama 3, Llama 3.2, Qwen2.5, Qwen3 or Gemma 3 templates, which render
// byte-identically to Hugging Face (testdata/, refs_test.go):
//   - {{ x }} of a float prints Go's %g (-90 for -90.0), and of none prints nothing
//     ("None" in Jinja2); a template printing JSON-schema numbers itself (Nemotron 3's) differs;
//   - a "-" trim marker, and lstrip_blocks, reach past an expression to the text before it:
//     "R: {{ x }}{%- endif %}" loses the space after "R:" (GLM 5.2's template);
//   - '%s' % x formatting, str.splitlines, map('filtername'), the divisibleby test, tuple
//     and exponent literals, \u escapes in string literals and {%+ are missing or wrong.
package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/ardanlabs/jinja"
)

// Message is one turn of a conversation, as an OpenAI-style chat request carries it.
// Render gives the template a dict with the keys role and content, then name, tool_call_id,
// reasoning_content and tool_calls only when they are set, since templates test for their
// presence ('tool_calls' in message, message.reasoning_content is defined).
type Message struct {
	Role    string // system, user, assistant, tool, ...
	Content string
	// Name is the tool's name on a tool message (or a participant's name).
	Name string
	// ToolCallID is the id of the call a tool message answers.
	ToolCallID string
	// ReasoningContent is an assistant's thinking, kept apart from Content (Qwen3 and
	// DeepSeek templates place it themselves).
	ReasoningContent string
	ToolCalls        []ToolCall
}

// ToolCall is one function call an assistant message made. The template sees it as
// {"id": ..., "type": "function", "function": {"name": ..., "arguments": ...}}, id left out
// when empty.
type ToolCall struct {
	ID   string
	Type string // "function" when empty
	Name string
	// Arguments is the JSON text of the arguments, as OpenAI's API carries them. A JSON
	// object (or any JSON value) reaches the template decoded, keys in their order, as
	// Hugging Face's templates expect; text that is not JSON reaches it as a string.
	Arguments string
}

// Options are fixed for a template: what the model's tokenizer says.
type Options struct {
	// BOS and EOS are the texts of the beginning- and end-of-sequence tokens, given to the
	// template as bos_token and eos_token. Empty leaves the variable undefined, as
	// Hugging Face does for a tokenizer without that token.
	BOS, EOS string
	// Now is the clock strftime_now reads; nil means time.Now. Tests pin it.
	Now func() time.Time
}

// RenderOptions are per request.
type RenderOptions struct {
	// AddGenerationPrompt ends the prompt with the header of the assistant's next turn.
	AddGenerationPrompt bool
	// Tools are the function definitions offered to the model, each a JSON object (OpenAI's
	// {"type": "function", "function": {...}}), given to the template as the list tools with
	// their keys in order. None leaves tools none, as Hugging Face passes it.
	Tools []json.RawMessage
	// Vars are extra template variables (enable_thinking, date_string, ...). A
	// json.RawMessage value is decoded keeping key order; other Go values go through the
	// engine's conversion (maps with sorted keys). bos_token and eos_token here replace
	// Options'; messages, tools, documents, add_generation_prompt and the helpers are
	// Render's own (naming one is an error).
	Vars map[string]any
}

// Template is a compiled chat template. It is safe for concurrent use.
type Template struct {
	name   string
	source string
	tmpl   *jinja.Template
	opts   Options
}

// Error is a template that failed to compile or render.
type Error struct {
	Template string // the name given to New
	Op       string // "compile" or "render"
	Err      error
}

func (e *Error) Error() string {
	return fmt.Sprintf("chat template %s: %s: %v", e.Template, e.Op, e.Err)
}

func (e *Error) Unwrap() error { return e.Err }

// RaiseError is the template refusing the conversation with raise_exception(message), as
// templates do for roles that do not alternate or an unsupported tool call. It reaches the
// caller wrapped in an *Error (errors.As finds it).
type RaiseError struct {
	Message string
}

func (e *RaiseError) Error() string { return e.Message }

// ErrNoTemplate is returned by ForModel when neither the model file nor the override has a
// template.
var ErrNoTemplate = errors.New("the model has no chat template (tokenizer.chat_template) and none was given with --chat-template")

// New compiles source, a Jinja chat template. name identifies it in errors (the model's name,
// a file name, "--chat-template").
func New(name, source string, opts Options) (t *Template, err error) {
	defer recoverEngine(name, "compile", &err)
	tmpl, err := jinja.Compile(renameToJSON(source))
	if err != nil {
		return nil, &Error{Template: name, Op: "compile", Err: err}
	}
	return &Template{name: name, source: source, tmpl: tmpl, opts: opts}, nil
}

// ForModel is the template a model chats with: override (the --chat-template text) when it
// is not empty, as in llama.cpp, otherwise fileTemplate (the GGUF's tokenizer.chat_template).
// bos and eos are the texts of the model's tokenizer.ggml.bos_token_id and eos_token_id
// tokens ("" where the model has none). model names the model in errors.
func ForModel(model, fileTemplate, override, bos, eos string) (*Template, error) {
	opts := Options{BOS: bos, EOS: eos}
	if override != "" {
		return New(model+" (--chat-template)", override, opts)
	}
	if fileTemplate == "" {
		return nil, fmt.Errorf("%s: %w", model, ErrNoTemplate)
	}
	return New(model+" (tokenizer.chat_template)", fileTemplate, opts)
}

// recoverEngine turns a panic inside the Jinja engine into the template's error: the template
// comes from a model file or the command line, and the engine has index bugs on some
// malformed ones (selectattr with too few arguments, found by FuzzRender).
func recoverEngine(name, op string, err *error) {
	if r := recover(); r != nil {
		*err = &Error{Template: name, Op: op, Err: fmt.Errorf("the Jinja engine failed: %v", r)}
	}
}

// Name is the name the template was created with.
func (t *Template) Name() string { return t.name }

// Source is the template's Jinja text.
func (t *Template) Source() string { return t.source }

// Render turns msgs into the prompt text.
func (t *Template) Render(msgs []Message, ro RenderOptions) (prompt string, err error) {
	defer recoverEngine(t.name, "render", &err)
	data, err := t.variables(msgs, ro)
	if err != nil {
		return "", &Error{Template: t.name, Op: "render", Err: err}
	}
	out, err := t.tmpl.RenderValues(data)
	if err != nil {
		return "", &Error{Template: t.name, Op: "render", Err: err}
	}
	return out, nil
}

// variables builds what Hugging Face's render_jinja_template passes: messages, tools,
// documents, add_generation_prompt and the tokenizer's special tokens, plus the helpers.
func (t *Template) variables(msgs []Message, ro RenderOptions) (map[string]jinja.Value, error) {
	data := make(map[string]jinja.Value, 8+len(ro.Vars))
	if t.opts.BOS != "" {
		data["bos_token"] = jinja.NewString(t.opts.BOS)
	}
	if t.opts.EOS != "" {
		data["eos_token"] = jinja.NewString(t.opts.EOS)
	}
	for k, v := range ro.Vars { // after the tokens: Hugging Face's keyword arguments replace them too
		if reservedVars[k] {
			return nil, fmt.Errorf("variable %s is set by Render itself", k)
		}
		val, err := goValue(v)
		if err != nil {
			return nil, fmt.Errorf("variable %s: %w", k, err)
		}
		data[k] = val
	}
	messages, err := messagesValue(msgs)
	if err != nil {
		return nil, err
	}
	data["messages"] = messages
	tools, err := toolsValue(ro.Tools)
	if err != nil {
		return nil, err
	}
	data["tools"] = tools
	data["documents"] = jinja.None()
	data["add_generation_prompt"] = jinja.NewBool(ro.AddGenerationPrompt)
	addHelpers(data, t.now)
	return data, nil
}

// reservedVars are the variables Render sets from its arguments; RenderOptions.Vars may not
// name them.
var reservedVars = map[string]bool{
	"messages": true, "tools": true, "documents": true, "add_generation_prompt": true,
	"raise_exception": true, "strftime_now": true, "range": true, tojsonName: true,
}

func (t *Template) now() time.Time {
	if t.opts.Now != nil {
		return t.opts.Now()
	}
	return time.Now()
}
