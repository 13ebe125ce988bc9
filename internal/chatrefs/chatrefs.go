// Package chatrefs reads the chat package's reference renders (chat/testdata: the
// conversations, and what Hugging Face's apply_chat_template made of them with each template)
// for the tests of the packages that use chat templates: the library, the server and the
// command.
package chatrefs

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/gorun-dev/gorun/chat"
)

// Conversation is one conversation of conversations.json, as chat's API takes it.
type Conversation struct {
	Name     string
	Messages []chat.Message
	Options  chat.RenderOptions
}

// Ref is what Hugging Face rendered: the text, or the error it raised.
type Ref struct {
	Text      *string `json:"text"`
	Error     string  `json:"error"`
	ErrorType string  `json:"error_type"`
}

type message struct {
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

type conversation struct {
	Name                string                     `json:"name"`
	AddGenerationPrompt bool                       `json:"add_generation_prompt"`
	Tools               []json.RawMessage          `json:"tools"`
	Vars                map[string]json.RawMessage `json:"vars"`
	Messages            []message                  `json:"messages"`
}

// Load reads dir's conversations.json and hf_refs.json (dir is chat/testdata). The refs are
// keyed "TEMPLATE/CONVERSATION".
func Load(dir string) ([]Conversation, map[string]Ref, error) {
	var convs struct {
		Conversations []conversation `json:"conversations"`
	}
	if err := readJSON(filepath.Join(dir, "conversations.json"), &convs); err != nil {
		return nil, nil, err
	}
	var refs struct {
		Refs map[string]Ref `json:"refs"`
	}
	if err := readJSON(filepath.Join(dir, "hf_refs.json"), &refs); err != nil {
		return nil, nil, err
	}
	out := make([]Conversation, len(convs.Conversations))
	for i, c := range convs.Conversations {
		out[i] = Conversation{Name: c.Name, Messages: messages(c.Messages),
			Options: chat.RenderOptions{AddGenerationPrompt: c.AddGenerationPrompt, Tools: c.Tools}}
		if len(c.Vars) > 0 {
			out[i].Options.Vars = map[string]any{}
			for k, v := range c.Vars {
				out[i].Options.Vars[k] = v
			}
		}
	}
	return out, refs.Refs, nil
}

func messages(ms []message) []chat.Message {
	out := make([]chat.Message, len(ms))
	for i, m := range ms {
		out[i] = chat.Message{Role: m.Role, Content: m.Content, Name: m.Name, ToolCallID: m.ToolCallID, ReasoningContent: m.ReasoningContent}
		for _, tc := range m.ToolCalls {
			out[i].ToolCalls = append(out[i].ToolCalls, chat.ToolCall{ID: tc.ID, Type: tc.Type, Name: tc.Function.Name, Arguments: string(tc.Function.Arguments)})
		}
	}
	return out
}

func readJSON(path string, v any) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
