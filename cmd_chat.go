package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/gorun-dev/gorun/chat"
)

// Conversation mode with the model's chat template (the file's tokenizer.chat_template or
// --chat-template): each turn renders the whole conversation, as llama-cli does, and feeds
// the model only what its context lacks.
//
// llama-cli takes the difference between the conversation rendered without and with the new
// message (common_chat_format_single). gorun compares the rendering with the text its
// context holds (its tokens' text, generated answers included): the context ends where the
// model stopped, before the end-of-turn token and whatever the template writes after an
// answer (llama-cli patches only a trailing newline), and the template may write an answer
// otherwise than it was generated (trimmed, its thinking left out). The context is rewound to
// the last token the rendering agrees with, and the rest is fed. A context shift drops
// tokens the comparison still counts (generator.dropped); only a difference before the
// tokens still in the context falls back to llama-cli's difference.

// chatConversation is the conversation so far.
type chatConversation struct {
	tmpl   *chat.Template
	system []chat.Message // -sys: what /clear goes back to
	msgs   []chat.Message
}

// newChatConversation checks that the template renders a first exchange, so that a template
// the engine cannot render fails before the session starts, naming it.
func newChatConversation(tmpl *chat.Template, system string) (*chatConversation, error) {
	c := &chatConversation{tmpl: tmpl}
	if system != "" {
		c.system = []chat.Message{{Role: "system", Content: system}}
	}
	c.msgs = append([]chat.Message(nil), c.system...)
	if _, err := c.render(append(c.msgs, chat.Message{Role: "user", Content: "Hello"}), true); err != nil {
		var re *chat.RaiseError
		if !errors.As(err, &re) {
			return nil, err
		}
	}
	return c, nil
}

func (c *chatConversation) render(msgs []chat.Message, gen bool) (string, error) {
	return c.tmpl.Render(msgs, chat.RenderOptions{AddGenerationPrompt: gen})
}

func (c *chatConversation) clear() { c.msgs = append(c.msgs[:0], c.system...) }

// contextText is the text of the conversation's tokens, those a context shift dropped
// included, and each token's end in it.
func (s *interactive) contextText() (string, []int) {
	tok := s.g.m.Tokenizer()
	live := s.g.sess.Tokens()
	keep := min(s.g.keep, len(live))
	ids := append(append(append([]int32(nil), live[:keep]...), s.g.dropped...), live[keep:]...)
	var b strings.Builder
	ends := make([]int, len(ids))
	for i, id := range ids {
		b.Write(tok.TokenBytes(id))
		ends[i] = b.Len()
	}
	return b.String(), ends
}

// chatInput is the text to feed for the conversation rendered as full (its generation prompt
// included): it rewinds the context to the last token full agrees with and returns the rest
// of full. At the start of the context the BOS text is left out where the tokenizer adds BOS
// (llm.Model.StripAddedSpecial, llama.cpp's rule).
func (s *interactive) chatInput(full string) (string, error) {
	have, ends := s.contextText()
	n := commonPrefix(have, full)
	t := 0 // tokens whose text full repeats
	for t < len(ends) && ends[t] <= n {
		t++
	}
	if t == len(ends) {
		return s.atStart(full[len(have):]), nil
	}
	keep := min(s.g.keep, len(s.g.sess.Tokens()))
	if len(s.g.dropped) > 0 && t < keep+len(s.g.dropped) {
		// The difference is in text a context shift dropped: llama-cli's difference.
		past, err := s.conv.render(s.conv.msgs, false)
		if err != nil {
			return "", err
		}
		return full[commonPrefix(past, full):], nil
	}
	pos := t
	if len(s.g.dropped) > 0 {
		pos -= len(s.g.dropped)
	}
	if err := s.g.sess.Rewind(pos); err != nil {
		return "", err
	}
	start := 0
	if t > 0 {
		start = ends[t-1]
	}
	return s.atStart(full[start:]), nil
}

// atStart leaves out the BOS text the tokenizer adds itself when text begins the context.
func (s *interactive) atStart(text string) string {
	if s.g.sess.Pos() == 0 {
		return s.g.m.StripAddedSpecial(text)
	}
	return text
}

func commonPrefix(a, b string) int {
	n := min(len(a), len(b))
	for i := 0; i < n; i++ {
		if a[i] != b[i] {
			return i
		}
	}
	return n
}

// chatTurn sends the user's line as the conversation's next message and shows the answer,
// which joins the conversation as it was shown.
func (s *interactive) chatTurn(line string) error {
	msgs := append(append([]chat.Message(nil), s.conv.msgs...), chat.Message{Role: "user", Content: line})
	full, err := s.conv.render(msgs, true)
	if err != nil {
		fmt.Fprintf(s.stderr, "\ngorun: %v\n", err)
		return nil // the user may say something else
	}
	text, err := s.chatInput(full)
	if err != nil {
		return err
	}
	shown, accepted, err := s.answer(text)
	if err != nil || !accepted {
		return err
	}
	s.conv.msgs = append(msgs, chat.Message{Role: "assistant", Content: shown})
	return nil
}
