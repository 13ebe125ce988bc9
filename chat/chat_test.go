package chat

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// render compiles src and renders msgs; the test fails on any error.
func render(t *testing.T, src string, opts Options, msgs []Message, ro RenderOptions) string {
	t.Helper()
	tmpl, err := New("test", src, opts)
	if err != nil {
		t.Fatal(err)
	}
	out, err := tmpl.Render(msgs, ro)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

var threeTurns = []Message{
	{Role: "system", Content: "Be brief."},
	{Role: "user", Content: "Hi"},
	{Role: "assistant", Content: "Hello"},
	{Role: "user", Content: "Bye"},
}

func TestCompileErrorNamesTemplate(t *testing.T) {
	for _, src := range []string{"{% if true %}x", "{{ messages", "{% for m in messages %}", "{% endfor %}", "{{ 'unterminated }}"} {
		_, err := New("my-model.gguf", src, Options{})
		var e *Error
		if !errors.As(err, &e) || e.Op != "compile" || e.Template != "my-model.gguf" {
			t.Errorf("%q: error %v, want a compile *Error for my-model.gguf", src, err)
			continue
		}
		if !strings.Contains(err.Error(), "chat template my-model.gguf") {
			t.Errorf("%q: %q does not name the template", src, err)
		}
	}
}

func TestRaiseExceptionCarriesMessage(t *testing.T) {
	src := "{% for m in messages %}{% if m.role == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{{ m.content }}{% endfor %}"
	tmpl, err := New("gemma-like", src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if out, err := tmpl.Render(threeTurns[1:], RenderOptions{}); err != nil || out != "HiHelloBye" {
		t.Fatalf("without a system message: %q, %v", out, err)
	}
	_, err = tmpl.Render(threeTurns, RenderOptions{})
	var raised *RaiseError
	if !errors.As(err, &raised) || raised.Message != "System role not supported" {
		t.Fatalf("error %v, want raise_exception's message", err)
	}
	var e *Error
	if !errors.As(err, &e) || e.Op != "render" || e.Template != "gemma-like" {
		t.Fatalf("error %v is not a render *Error naming the template", err)
	}
}

func TestRenderErrorIsNotRaiseError(t *testing.T) {
	_, err := mustNew(t, "{{ messages[0].content.nosuchmethod() }}").Render(threeTurns, RenderOptions{})
	var raised *RaiseError
	if err == nil || errors.As(err, &raised) {
		t.Fatalf("error %v, want a template error that is not a RaiseError", err)
	}
}

func mustNew(t *testing.T, src string) *Template {
	t.Helper()
	tmpl, err := New("test", src, Options{})
	if err != nil {
		t.Fatal(err)
	}
	return tmpl
}

func TestSpecialTokens(t *testing.T) {
	src := "{{ bos_token }}|{{ eos_token }}|{{ bos_token is defined }}"
	if got := render(t, src, Options{BOS: "<s>", EOS: "</s>"}, nil, RenderOptions{}); got != "<s>|</s>|True" {
		t.Errorf("got %q", got)
	}
	// A tokenizer without the token leaves the variable undefined (Hugging Face).
	if got := render(t, src, Options{EOS: "<|im_end|>"}, nil, RenderOptions{}); got != "|<|im_end|>|False" {
		t.Errorf("no BOS: got %q", got)
	}
	// Like apply_chat_template's keyword arguments, Vars replace the tokens.
	ro := RenderOptions{Vars: map[string]any{"bos_token": "[B]"}}
	if got := render(t, src, Options{BOS: "<s>", EOS: "</s>"}, nil, ro); got != "[B]|</s>|True" {
		t.Errorf("Vars bos_token: got %q", got)
	}
}

func TestAddGenerationPrompt(t *testing.T) {
	src, err := os.ReadFile("testdata/templates/qwen2.5.jinja")
	if err != nil {
		t.Fatal(err)
	}
	msgs := []Message{{Role: "user", Content: "Hi"}}
	base := "<|im_start|>system\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
	for _, gen := range []bool{false, true} {
		want := base
		if gen {
			want += "<|im_start|>assistant\n"
		}
		if got := render(t, string(src), Options{EOS: "<|im_end|>"}, msgs, RenderOptions{AddGenerationPrompt: gen}); got != want {
			t.Errorf("add_generation_prompt=%v:\n got %q\nwant %q", gen, got, want)
		}
	}
}

func TestSlicingAndNamespace(t *testing.T) {
	for _, c := range []struct{ src, want string }{
		{"{% for m in messages[::-1] %}{{ m.role[0] }}{% endfor %}", "uaus"},
		{"{% for m in messages[1:] %}{{ m.content }},{% endfor %}", "Hi,Hello,Bye,"},
		{"{{ messages[-1].content }}{{ messages[:2] | length }}{{ messages[0].content[::-1] }}", "Bye2.feirb eB"},
		{"{% set ns = namespace(last=-1, n=0) %}{% for m in messages %}{% if m.role == 'user' %}{% set ns.last = loop.index0 %}{% set ns.n = ns.n + 1 %}{% endif %}{% endfor %}{{ ns.last }}/{{ ns.n }}", "3/2"},
		// Qwen3's search for the last real user turn walks messages backwards.
		{"{% set ns = namespace(idx=messages|length - 1, multi=true) %}{% for m in messages[::-1] %}{% set i = (messages|length - 1) - loop.index0 %}{% if ns.multi and m.role == 'user' %}{% set ns.multi = false %}{% set ns.idx = i %}{% endif %}{% endfor %}{{ ns.idx }}", "3"},
		{"{{ messages[0].content.strip('.').upper() }}|{{ 'a</think>b'.split('</think>')[-1] }}|{{ ' x '.lstrip() }}|{{ 'ab'.startswith('a') }}", "BE BRIEF|b|x |True"},
	} {
		if got := render(t, c.src, Options{}, threeTurns, RenderOptions{}); got != c.want {
			t.Errorf("%s\n got %q\nwant %q", c.src, got, c.want)
		}
	}
}

func TestToJSON(t *testing.T) {
	tool := json.RawMessage(`{"type":"function","function":{"name":"f","description":"a<b & c>d é \u2028","parameters":{"z":1.0,"a":[1,2.50,-0.0,1e21,1e-7,123456789.0],"m":null,"t":true}}}`)
	ro := RenderOptions{Tools: []json.RawMessage{tool}}
	for _, c := range []struct{ src, want string }{
		// Key order as given, Python's spacing and floats, no HTML escaping, no ASCII escaping.
		{"{{ tools[0] | tojson }}", `{"type": "function", "function": {"name": "f", "description": "a<b & c>d é ` + "\u2028" + `", "parameters": {"z": 1.0, "a": [1, 2.5, -0.0, 1e+21, 1e-07, 123456789.0], "m": null, "t": true}}}`},
		{"{{ tools[0].function.parameters | tojson(indent=2) }}", "{\n  \"z\": 1.0,\n  \"a\": [\n    1,\n    2.5,\n    -0.0,\n    1e+21,\n    1e-07,\n    123456789.0\n  ],\n  \"m\": null,\n  \"t\": true\n}"},
		{"{{ tools[0].function.parameters | tojson(sort_keys=true, separators=[',', ':']) }}", `{"a":[1,2.5,-0.0,1e+21,1e-07,123456789.0],"m":null,"t":true,"z":1.0}`},
		{"{{ tools[0].function.description | tojson(ensure_ascii=true) }}", `"a<b & c>d \u00e9 \u2028"`},
		{"{{ '😀\t\x01' | tojson(ensure_ascii=true) }}", `"\ud83d\ude00\t\u0001"`},
		{"{{ {} | tojson }}{{ [] | tojson(indent=4) }}{{ 'q\"\\\\' | tojson }}", `{}[]"q\"\\"`},
		// The filter is found inside macros, and "| tojson" in a string literal stays text.
		{"{% macro j(x) %}{{ x|tojson }}{% endmacro %}{{ j([1, 'a']) }} {{ '| tojson' }}", `[1, "a"] | tojson`},
	} {
		if got := render(t, c.src, Options{}, nil, ro); got != c.want {
			t.Errorf("%s\n got %q\nwant %q", c.src, got, c.want)
		}
	}
	if _, err := mustNew(t, "{{ nothing | tojson }}").Render(nil, RenderOptions{}); err == nil || !strings.Contains(err.Error(), "not JSON serializable") {
		t.Errorf("tojson of an undefined value: %v, want an error as json.dumps raises", err)
	}
}

func TestPythonFloat(t *testing.T) {
	for f, want := range map[float64]string{
		0: "0.0", 1: "1.0", -90: "-90.0", 0.1: "0.1", 2.5e-7: "2.5e-07", 1e-4: "0.0001", 1e-5: "1e-05",
		1e15: "1000000000000000.0", 1e16: "1e+16", 1.5e300: "1.5e+300", 123456.789: "123456.789",
		1.0 / 3: "0.3333333333333333",
	} {
		if got := pythonFloat(f); got != want {
			t.Errorf("pythonFloat(%v) = %q, want %q", f, got, want)
		}
	}
}

func TestRenameToJSON(t *testing.T) {
	for src, want := range map[string]string{
		"{{ x | tojson }}{{ x|tojson(indent=2) }}":            "{{ x | TOJSON }}{{ x|TOJSON(indent=2) }}",
		"{%- set s = x | tojson -%}":                          "{%- set s = x | TOJSON -%}",
		"{{ '| tojson' ~ \"|tojson\" }} | tojson text":        "{{ '| tojson' ~ \"|tojson\" }} | tojson text",
		"{# x | tojson #}{{ y | tojsonx }}{{ tojson }}":       "{# x | tojson #}{{ y | tojsonx }}{{ tojson }}",
		"{% raw %}{{ x | tojson }}{% endraw %}{{ x|tojson }}": "{% raw %}{{ x | tojson }}{% endraw %}{{ x|TOJSON }}",
		"{{ 'it\\'s | tojson' | tojson }}":                    "{{ 'it\\'s | tojson' | TOJSON }}",
		"{{ x | tojson":                                       "{{ x | TOJSON",
	} {
		if got := renameToJSON(src); got != want {
			t.Errorf("renameToJSON(%q) = %q, want %q", src, got, want)
		}
	}
}

func TestStrftimeNow(t *testing.T) {
	day := time.Date(2024, time.July, 5, 14, 3, 9, 0, time.UTC)
	opts := Options{Now: func() time.Time { return day }}
	src := `{{ strftime_now("%d %b %Y") }}|{{ strftime_now("%-d %B %y, %A %j %I:%M:%S %p %H %%") }}|{{ strftime_now("%F %T%z%Z %Q") }}`
	want := "05 Jul 2024|5 July 24, Friday 187 02:03:09 PM 14 %|2024-07-05 14:03:09 %Q"
	if got := render(t, src, opts, nil, RenderOptions{}); got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func TestToolCallArguments(t *testing.T) {
	src := "{% for c in messages[0].tool_calls %}{{ c.id }} {{ c.type }} {{ c.function.name }} {{ c.function.arguments is string }} {{ c.function.arguments | tojson }};{% endfor %}{{ 'tool_calls' in messages[1] }}"
	msgs := []Message{
		{Role: "assistant", ToolCalls: []ToolCall{
			{ID: "c1", Name: "f", Arguments: `{"b": 2, "a": "x"}`},
			{Name: "g", Type: "function", Arguments: `not json`},
		}},
		{Role: "user", Content: "ok"},
	}
	want := `c1 function f False {"b": 2, "a": "x"}; function g True "not json";False`
	if got := render(t, src, Options{}, msgs, RenderOptions{}); got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}

func TestBadInputIsAnError(t *testing.T) {
	tmpl := mustNew(t, "{{ tools }}")
	deep := strings.Repeat("[", 300) + strings.Repeat("]", 300)
	for name, ro := range map[string]RenderOptions{
		"tool not JSON":    {Tools: []json.RawMessage{json.RawMessage(`{"type": `)}},
		"tool not object":  {Tools: []json.RawMessage{json.RawMessage(`[1]`)}},
		"trailing data":    {Tools: []json.RawMessage{json.RawMessage(`{} {}`)}},
		"nested too deep":  {Vars: map[string]any{"x": json.RawMessage(deep)}},
		"reserved var":     {Vars: map[string]any{"messages": "x"}},
		"reserved helper":  {Vars: map[string]any{"raise_exception": "x"}},
		"bad var JSON":     {Vars: map[string]any{"x": json.RawMessage(`{`)}},
		"tojson arguments": {},
	} {
		t.Run(name, func(t *testing.T) {
			tm := tmpl
			if name == "tojson arguments" {
				tm = mustNew(t, "{{ 1 | tojson(wrong=1) }}")
			}
			_, err := tm.Render(nil, ro)
			var e *Error
			if !errors.As(err, &e) || e.Template != "test" {
				t.Fatalf("error %v, want a *Error naming the template", err)
			}
		})
	}
}

func TestForModel(t *testing.T) {
	file := "{{ bos_token }}file"
	tm, err := ForModel("m.gguf", file, "", "<s>", "</s>")
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := tm.Render(nil, RenderOptions{}); out != "<s>file" || !strings.Contains(tm.Name(), "m.gguf") {
		t.Errorf("file template: %q named %q", out, tm.Name())
	}
	tm, err = ForModel("m.gguf", file, "{{ eos_token }}override", "<s>", "</s>")
	if err != nil {
		t.Fatal(err)
	}
	if out, _ := tm.Render(nil, RenderOptions{}); out != "</s>override" || !strings.Contains(tm.Name(), "--chat-template") {
		t.Errorf("override: %q named %q", out, tm.Name())
	}
	if _, err := ForModel("m.gguf", "", "", "", ""); !errors.Is(err, ErrNoTemplate) {
		t.Errorf("no template: %v, want ErrNoTemplate", err)
	}
	if _, err := ForModel("m.gguf", "{% if %}", "", "", ""); err == nil || !strings.Contains(err.Error(), "m.gguf (tokenizer.chat_template)") {
		t.Errorf("broken file template: %v, want an error naming it", err)
	}
}

// The reference test passes the fixture's messages through Message; this checks that they
// reach the template with the keys, in the order, the fixture (and so make_refs.py) has.
func TestFixtureMessagesKeepTheirShape(t *testing.T) {
	var doc struct {
		Conversations []struct {
			Name     string            `json:"name"`
			Messages []json.RawMessage `json:"messages"`
		} `json:"conversations"`
	}
	readJSON(t, "testdata/conversations.json", &doc)
	convs := loadConversations(t)
	for i, c := range doc.Conversations {
		for j, rawMsg := range c.Messages {
			want, err := decodeJSON(rawMsg)
			if err != nil {
				t.Fatal(err)
			}
			got, err := messageValue(convs[i].messages()[j])
			if err != nil {
				t.Fatal(err)
			}
			var a, b strings.Builder
			opts := jsonOptions{itemSep: ", ", keySep: ": "}
			if err := encodeJSON(&a, got, opts, 0); err != nil {
				t.Fatal(err)
			}
			if err := encodeJSON(&b, want, opts, 0); err != nil {
				t.Fatal(err)
			}
			if a.String() != b.String() {
				t.Errorf("%s message %d reaches the template as\n%s\nthe fixture has\n%s", c.Name, j, a.String(), b.String())
			}
		}
	}
}

func TestConcurrentRender(t *testing.T) {
	src, err := os.ReadFile("testdata/templates/qwen3.jinja")
	if err != nil {
		t.Fatal(err)
	}
	tmpl, err := New("qwen3", string(src), Options{EOS: "<|im_end|>"})
	if err != nil {
		t.Fatal(err)
	}
	want, err := tmpl.Render(threeTurns, RenderOptions{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 20 {
				if got, err := tmpl.Render(threeTurns, RenderOptions{AddGenerationPrompt: true}); err != nil || got != want {
					errs <- fmt.Errorf("got %q, %v", got, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestRangeIsBounded(t *testing.T) {
	src := "{% for i in range(3) %}{{ i }}{% endfor %}|{{ range(5, 0, -2) | list }}|{{ range(2, 9, 3) | list }}|{{ range(0) | list }}"
	if got := render(t, src, Options{}, nil, RenderOptions{}); got != "012|[5, 3, 1]|[2, 5, 8]|[]" {
		t.Errorf("got %q", got)
	}
	for _, src := range []string{"{{ range(1000000000000) | length }}", "{{ range(-9223372036854775807, 9223372036854775807, 4611686018427387904) | list }}x{{ range(100001) }}"} {
		if _, err := mustNew(t, src).Render(nil, RenderOptions{}); err == nil || !strings.Contains(err.Error(), "range") {
			t.Errorf("%s: %v, want range's limit error", src, err)
		}
	}
}

// FuzzRender: any template source either fails to compile or renders (or fails) with an
// error; neither the engine nor the helpers panic or run without bound.
func FuzzRender(f *testing.F) {
	for _, name := range []string{"llama3", "llama3.2", "qwen2.5", "qwen3", "gemma3", "features"} {
		src, err := os.ReadFile("testdata/templates/" + name + ".jinja")
		if err != nil {
			f.Fatal(err)
		}
		f.Add(string(src))
	}
	f.Add("{{ x | tojson(indent=2) }}{% raw %}{{{% endraw %}")
	tool := json.RawMessage(`{"type":"function","function":{"name":"f","parameters":{"a":[1,2.5]}}}`)
	msgs := append(threeTurns[:len(threeTurns):len(threeTurns)], Message{Role: "assistant", ToolCalls: []ToolCall{{Name: "f", Arguments: `{"a":1}`}}})
	f.Fuzz(func(t *testing.T, src string) {
		tmpl, err := New("fuzz", src, Options{BOS: "<s>", EOS: "</s>"})
		if err != nil {
			return
		}
		_, _ = tmpl.Render(msgs, RenderOptions{AddGenerationPrompt: true, Tools: []json.RawMessage{tool}})
	})
}

func TestEnginePanicIsAnError(t *testing.T) {
	// ardanlabs/jinja v1.8.0's selectattr indexes past its arguments when given only an
	// attribute name (found by FuzzRender); Render must report it, not crash.
	_, err := mustNew(t, "{{ messages | selectattr('role') | list }}").Render(threeTurns, RenderOptions{})
	var e *Error
	if !errors.As(err, &e) || e.Template != "test" || !strings.Contains(err.Error(), "engine failed") {
		t.Fatalf("error %v, want a *Error naming the template and the engine's failure", err)
	}
}
