package chat

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/ardanlabs/jinja"
)

// maxJSONDepth bounds the nesting of JSON given to a template (tools, tool-call arguments,
// variables): deeper input is refused instead of recursing without limit.
const maxJSONDepth = 256

// messagesValue is msgs as the template's list of message dicts.
func messagesValue(msgs []Message) (jinja.Value, error) {
	items := make([]jinja.Value, len(msgs))
	for i, m := range msgs {
		v, err := messageValue(m)
		if err != nil {
			return jinja.Value{}, fmt.Errorf("message %d: %w", i, err)
		}
		items[i] = v
	}
	return jinja.NewList(items), nil
}

// messageValue is one message as a dict; optional keys are present only when set, because
// templates branch on their presence.
func messageValue(m Message) (jinja.Value, error) {
	v := jinja.NewDict()
	d := v.AsDict()
	d.Set("role", jinja.NewString(m.Role))
	d.Set("content", jinja.NewString(m.Content))
	if m.Name != "" {
		d.Set("name", jinja.NewString(m.Name))
	}
	if m.ToolCallID != "" {
		d.Set("tool_call_id", jinja.NewString(m.ToolCallID))
	}
	if m.ReasoningContent != "" {
		d.Set("reasoning_content", jinja.NewString(m.ReasoningContent))
	}
	if len(m.ToolCalls) > 0 {
		calls := make([]jinja.Value, len(m.ToolCalls))
		for i, c := range m.ToolCalls {
			cv, err := toolCallValue(c)
			if err != nil {
				return jinja.Value{}, fmt.Errorf("tool call %d: %w", i, err)
			}
			calls[i] = cv
		}
		d.Set("tool_calls", jinja.NewList(calls))
	}
	return v, nil
}

// toolCallValue is {"id", "type", "function": {"name", "arguments"}} with the arguments
// decoded when they are JSON.
func toolCallValue(c ToolCall) (jinja.Value, error) {
	args := jinja.NewString(c.Arguments)
	if json.Valid([]byte(c.Arguments)) {
		var err error
		if args, err = decodeJSON([]byte(c.Arguments)); err != nil {
			return jinja.Value{}, fmt.Errorf("arguments: %w", err)
		}
	}
	fn := jinja.NewDict()
	fn.AsDict().Set("name", jinja.NewString(c.Name))
	fn.AsDict().Set("arguments", args)

	typ := c.Type
	if typ == "" {
		typ = "function"
	}
	v := jinja.NewDict()
	if c.ID != "" {
		v.AsDict().Set("id", jinja.NewString(c.ID))
	}
	v.AsDict().Set("type", jinja.NewString(typ))
	v.AsDict().Set("function", fn)
	return v, nil
}

// toolsValue is the tools list, or none when there are no tools.
func toolsValue(tools []json.RawMessage) (jinja.Value, error) {
	if len(tools) == 0 {
		return jinja.None(), nil
	}
	items := make([]jinja.Value, len(tools))
	for i, raw := range tools {
		v, err := decodeJSON(raw)
		if err != nil {
			return jinja.Value{}, fmt.Errorf("tool %d: %w", i, err)
		}
		if !v.IsDict() {
			return jinja.Value{}, fmt.Errorf("tool %d: a tool definition must be a JSON object", i)
		}
		items[i] = v
	}
	return jinja.NewList(items), nil
}

// goValue converts an extra template variable.
func goValue(v any) (jinja.Value, error) {
	switch x := v.(type) {
	case json.RawMessage:
		return decodeJSON(x)
	case jinja.Value:
		return x, nil
	}
	return jinja.FromGoValue(v), nil
}

// decodeJSON decodes one JSON value keeping object keys in their order (Python's json.loads
// does, and tojson prints them back in that order) and integers apart from floats.
func decodeJSON(b []byte) (jinja.Value, error) {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	v, err := decodeValue(dec, 0)
	if err != nil {
		return jinja.Value{}, fmt.Errorf("invalid JSON: %w", err)
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return jinja.Value{}, errors.New("invalid JSON: data after the value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder, depth int) (jinja.Value, error) {
	if depth > maxJSONDepth {
		return jinja.Value{}, fmt.Errorf("nested deeper than %d", maxJSONDepth)
	}
	tok, err := dec.Token()
	if err != nil {
		return jinja.Value{}, err
	}
	switch t := tok.(type) {
	case json.Delim:
		if t == '[' {
			return decodeArray(dec, depth)
		}
		return decodeObject(dec, depth)
	case string:
		return jinja.NewString(t), nil
	case json.Number:
		return numberValue(t), nil
	case bool:
		return jinja.NewBool(t), nil
	case nil:
		return jinja.None(), nil
	}
	return jinja.Value{}, fmt.Errorf("unexpected token %v", tok)
}

func decodeArray(dec *json.Decoder, depth int) (jinja.Value, error) {
	var items []jinja.Value
	for dec.More() {
		v, err := decodeValue(dec, depth+1)
		if err != nil {
			return jinja.Value{}, err
		}
		items = append(items, v)
	}
	if _, err := dec.Token(); err != nil { // ']'
		return jinja.Value{}, err
	}
	return jinja.NewList(items), nil
}

func decodeObject(dec *json.Decoder, depth int) (jinja.Value, error) {
	obj := jinja.NewDict()
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return jinja.Value{}, err
		}
		key, _ := tok.(string) // the decoder only gives strings as object keys
		v, err := decodeValue(dec, depth+1)
		if err != nil {
			return jinja.Value{}, err
		}
		obj.AsDict().Set(key, v) // a repeated key keeps its first place and its last value, as in Python
	}
	if _, err := dec.Token(); err != nil { // '}'
		return jinja.Value{}, err
	}
	return obj, nil
}

// numberValue keeps 3 an integer and 3.0 a float, as Python's json.loads does. An integer
// beyond int64 becomes a float (Python would keep it exact).
func numberValue(n json.Number) jinja.Value {
	if !strings.ContainsAny(string(n), ".eE") {
		if i, err := n.Int64(); err == nil {
			return jinja.NewInt(i)
		}
	}
	f, _ := n.Float64() // valid JSON number; out of range gives ±Inf, as Python's float()
	return jinja.NewFloat(f)
}
