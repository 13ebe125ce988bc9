package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"time"

	"github.com/gorun-dev/gorun/chat"
	"github.com/gorun-dev/gorun/llm"
	"github.com/gorun-dev/gorun/tokenizer"
)

type streamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

type usage struct {
	PromptTokens        int                 `json:"prompt_tokens"`
	CompletionTokens    int                 `json:"completion_tokens"`
	TotalTokens         int                 `json:"total_tokens"`
	PromptTokensDetails promptTokensDetails `json:"prompt_tokens_details"`
}

// promptTokensDetails says how many prompt tokens a slot's context already held.
type promptTokensDetails struct {
	CachedTokens int `json:"cached_tokens"`
}

// completionRequest is OpenAI's POST /v1/completions body.
type completionRequest struct {
	Model         string          `json:"model"`
	Prompt        json.RawMessage `json:"prompt"`
	MaxTokens     *int            `json:"max_tokens"`
	N             *int            `json:"n"`
	BestOf        *int            `json:"best_of"`
	Stream        bool            `json:"stream"`
	StreamOptions *streamOptions  `json:"stream_options"`
	Logprobs      *int            `json:"logprobs"`
	Echo          bool            `json:"echo"`
	Suffix        *string         `json:"suffix"`
	User          string          `json:"user"`
	sampling
}

// completionLogprobs is a choice's logprobs in the completions API.
type completionLogprobs struct {
	Tokens        []string             `json:"tokens"`
	TokenLogprobs []*float32           `json:"token_logprobs"`
	TopLogprobs   []map[string]float32 `json:"top_logprobs"`
	TextOffset    []int                `json:"text_offset"`
}

type completionChoice struct {
	Text         string              `json:"text"`
	Index        int                 `json:"index"`
	Logprobs     *completionLogprobs `json:"logprobs"`
	FinishReason *string             `json:"finish_reason"`
}

type completionResponse struct {
	ID                string             `json:"id"`
	Object            string             `json:"object"`
	Created           int64              `json:"created"`
	Model             string             `json:"model"`
	SystemFingerprint string             `json:"system_fingerprint"`
	Choices           []completionChoice `json:"choices"`
	Usage             *usage             `json:"usage,omitempty"`
}

const fingerprint = "gorun"

func (s *Server) completions(w http.ResponseWriter, r *http.Request) {
	var req completionRequest
	if e := s.decode(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	if e := s.checkModel(req.Model); e != nil {
		writeError(w, e)
		return
	}
	prompts, texts, e := s.parsePrompt(req.Prompt, true)
	if e == nil {
		e = s.completionChecks(&req)
	}
	var n, maxTok int
	if e == nil {
		n, e = s.choiceCount(req.N, len(prompts))
	}
	if e == nil {
		maxTok, e = s.maxTokens("max_tokens", req.MaxTokens, false)
	}
	var opts llm.GenerateOptions
	if e == nil {
		opts, e = req.options(maxTok, s.model.Tokenizer().VocabSize())
	}
	if e != nil {
		writeError(w, e)
		return
	}
	wantLogprobs := req.Logprobs != nil
	tok := s.model.Tokenizer()
	if wantLogprobs {
		opts.LogProbs = true
		opts.TopLogprobs = *req.Logprobs // each step's alternatives, when logprobs > 0
	}
	resp := completionResponse{ID: newID("cmpl-"), Object: "text_completion", Created: time.Now().Unix(), Model: s.name, SystemFingerprint: fingerprint}
	sl, ae := s.acquire(r.Context(), prompts[0])
	if ae != nil {
		if ae.Status != statusClientGone {
			writeError(w, ae)
		}
		return
	}
	sl.fresh = !req.reusePrefix()
	release := s.pool.hold(sl)
	defer release()
	var u usage
	var stream *sse
	if req.Stream {
		stream = newSSE(w)
	}
	for pi, prompt := range prompts {
		u.PromptTokens += len(prompt)
		for j := range n {
			index := pi*n + j
			var text strings.Builder
			var lp *completionLogprobs
			if wantLogprobs {
				lp = &completionLogprobs{Tokens: []string{}, TokenLogprobs: []*float32{}, TextOffset: []int{}}
			}
			offset := 0
			var echoLP *completionLogprobs // the prompt's tokens and log-probabilities
			var onPrompt promptLogprobsFunc
			if req.Echo && wantLogprobs {
				onPrompt = func(lps []float32, alts [][]llm.TokenLogProb) {
					echoLP = &completionLogprobs{}
					for i, id := range prompt {
						piece := tok.Decode([]int32{id})
						echoLP.Tokens = append(echoLP.Tokens, piece)
						echoLP.TextOffset = append(echoLP.TextOffset, offset)
						offset += len(piece)
						if i == 0 {
							echoLP.TokenLogprobs = append(echoLP.TokenLogprobs, nil)
						} else {
							echoLP.TokenLogprobs = append(echoLP.TokenLogprobs, &lps[i])
						}
						if opts.TopLogprobs > 0 {
							echoLP.TopLogprobs = append(echoLP.TopLogprobs, altMap(tok, alts[i]))
						}
					}
					if stream != nil {
						stream.send(completionChunk(&resp, index, texts[pi], echoLP, nil))
					} else {
						lp.Tokens = append(lp.Tokens, echoLP.Tokens...)
						lp.TokenLogprobs = append(lp.TokenLogprobs, echoLP.TokenLogprobs...)
						lp.TextOffset = append(lp.TextOffset, echoLP.TextOffset...)
						lp.TopLogprobs = append(lp.TopLogprobs, echoLP.TopLogprobs...)
					}
				}
			} else if req.Echo {
				offset = len(texts[pi])
				if stream != nil {
					if err := stream.send(completionChunk(&resp, index, texts[pi], nil, nil)); err != nil {
						return
					}
				}
			}
			if req.Echo {
				text.WriteString(texts[pi])
			}
			st, _, ae := s.generate(r.Context(), sl, prompt, choiceSeed(opts, j), onPrompt, func(p llm.Piece) error {
				var plp *completionLogprobs
				if wantLogprobs && p.Token >= 0 {
					piece := tok.Decode([]int32{p.Token})
					lpv := p.LogProb
					plp = &completionLogprobs{Tokens: []string{piece}, TokenLogprobs: []*float32{&lpv}, TextOffset: []int{offset}}
					offset += len(piece)
					if opts.TopLogprobs > 0 {
						plp.TopLogprobs = []map[string]float32{altMap(tok, p.Top)}
					}
				}
				if stream != nil {
					if p.Text == "" && plp == nil {
						return nil
					}
					return stream.send(completionChunk(&resp, index, p.Text, plp, nil))
				}
				text.WriteString(p.Text)
				if plp != nil {
					lp.Tokens = append(lp.Tokens, plp.Tokens...)
					lp.TokenLogprobs = append(lp.TokenLogprobs, plp.TokenLogprobs...)
					lp.TextOffset = append(lp.TextOffset, plp.TextOffset...)
					if plp.TopLogprobs != nil {
						lp.TopLogprobs = append(lp.TopLogprobs, plp.TopLogprobs...)
					}
				}
				return nil
			})
			if ae != nil {
				if stream != nil {
					stream.fail(ae)
				} else if ae.Status != statusClientGone {
					writeError(w, ae)
				}
				return
			}
			u.CompletionTokens += st.Tokens
			if j == 0 {
				u.PromptTokensDetails.CachedTokens += int(sl.cached.Load())
			}
			fr := finishReason(st)
			if stream != nil {
				if err := stream.send(completionChunk(&resp, index, "", nil, &fr)); err != nil {
					return
				}
				continue
			}
			resp.Choices = append(resp.Choices, completionChoice{Text: text.String(), Index: index, Logprobs: lp, FinishReason: &fr})
		}
	}
	release() // generation is over: the slot is not held while the answer is written
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	if stream != nil {
		if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
			last := resp
			last.Choices = []completionChoice{}
			last.Usage = &u
			if stream.send(last) != nil {
				return
			}
		}
		stream.done()
		return
	}
	resp.Usage = &u
	writeJSON(w, http.StatusOK, resp)
}

// completionChecks refuses the completions parameters gorun does not implement.
func (s *Server) completionChecks(req *completionRequest) *apiError {
	switch {
	case req.Logprobs != nil && (*req.Logprobs < 0 || *req.Logprobs > 5):
		return badRequest("logprobs", "logprobs = %d is outside [0, 5]", *req.Logprobs)
	case req.BestOf != nil && (req.N == nil && *req.BestOf != 1 || req.N != nil && *req.BestOf != *req.N):
		return badRequest("best_of", "best_of is not supported (only best_of = n)")
	case req.Suffix != nil && *req.Suffix != "":
		return badRequest("suffix", "suffix (insertion) is not supported")
	case req.StreamOptions != nil && !req.Stream:
		return badRequest("stream_options", "stream_options is only allowed with stream: true")
	}
	return nil
}

// altMap is a step's alternatives as the completions API gives them: token text to
// log-probability (nil, null in JSON, for none).
func altMap(tok tokenizer.Tokenizer, alts []llm.TokenLogProb) map[string]float32 {
	if alts == nil {
		return nil
	}
	m := make(map[string]float32, len(alts))
	for _, a := range alts {
		m[tok.Decode([]int32{a.Token})] = a.LogProb
	}
	return m
}

func completionChunk(resp *completionResponse, index int, text string, lp *completionLogprobs, finish *string) completionResponse {
	c := *resp
	c.Choices = []completionChoice{{Text: text, Index: index, Logprobs: lp, FinishReason: finish}}
	return c
}

// chatRequest is OpenAI's POST /v1/chat/completions body.
type chatRequest struct {
	Model               string         `json:"model"`
	Messages            []chatMessage  `json:"messages"`
	MaxTokens           *int           `json:"max_tokens"`
	MaxCompletionTokens *int           `json:"max_completion_tokens"`
	N                   *int           `json:"n"`
	Stream              bool           `json:"stream"`
	StreamOptions       *streamOptions `json:"stream_options"`
	Logprobs            *bool          `json:"logprobs"`
	TopLogprobs         *int           `json:"top_logprobs"`
	User                string         `json:"user"`
	// Tools are function definitions the template shows the model (its tools variable).
	Tools []json.RawMessage `json:"tools"`
	// ChatTemplateKwargs are extra template variables (llama-server's chat_template_kwargs:
	// enable_thinking, date_string, ...).
	ChatTemplateKwargs map[string]json.RawMessage `json:"chat_template_kwargs"`
	sampling
}

type chatMessage struct {
	Role             string          `json:"role"`
	Content          json.RawMessage `json:"content"`
	Name             string          `json:"name"`
	ToolCalls        []chatToolCall  `json:"tool_calls"`
	ToolCallID       string          `json:"tool_call_id"`
	ReasoningContent string          `json:"reasoning_content"`
}

// chatToolCall is a function call of an assistant message, as OpenAI's API carries it.
type chatToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"`
	Function struct {
		Name      string          `json:"name"`
		Arguments json.RawMessage `json:"arguments"`
	} `json:"function"`
}

type chatLogprob struct {
	Token       string    `json:"token"`
	Logprob     float32   `json:"logprob"`
	Bytes       []int     `json:"bytes"`
	TopLogprobs []chatAlt `json:"top_logprobs"`
}

// chatAlt is an alternative token in chat logprobs.
type chatAlt struct {
	Token   string  `json:"token"`
	Logprob float32 `json:"logprob"`
	Bytes   []int   `json:"bytes"`
}

type chatLogprobs struct {
	Content []chatLogprob `json:"content"`
}

type chatOut struct {
	Role    string  `json:"role,omitempty"`
	Content *string `json:"content,omitempty"`
}

type chatChoice struct {
	Index        int           `json:"index"`
	Message      *chatOut      `json:"message,omitempty"`
	Delta        *chatOut      `json:"delta,omitempty"`
	Logprobs     *chatLogprobs `json:"logprobs"`
	FinishReason *string       `json:"finish_reason"`
}

type chatResponse struct {
	ID                string       `json:"id"`
	Object            string       `json:"object"`
	Created           int64        `json:"created"`
	Model             string       `json:"model"`
	SystemFingerprint string       `json:"system_fingerprint"`
	Choices           []chatChoice `json:"choices"`
	Usage             *usage       `json:"usage,omitempty"`
}

// chatPrompt validates the request's messages, tools and template variables and renders them
// with the chat template: the prompt to tokenize at the start of a context.
func (s *Server) chatPrompt(req *chatRequest) (string, *apiError) {
	msgs, e := s.chatMessages(req.Messages)
	if e != nil {
		return "", e
	}
	ro := chat.RenderOptions{AddGenerationPrompt: true}
	if req.Tools != nil || req.ChatTemplateKwargs != nil {
		if s.plain {
			param := "tools"
			if req.Tools == nil {
				param = "chat_template_kwargs"
			}
			return "", badRequest(param, "%s needs a chat template, and the model has none (give one with --chat-template)", param)
		}
		ro.Tools = req.Tools
		for i, t := range req.Tools {
			if b := bytes.TrimSpace(t); len(b) == 0 || b[0] != '{' {
				return "", badRequest("tools", "tools[%d] must be an object", i)
			}
		}
		if len(req.ChatTemplateKwargs) > 0 {
			ro.Vars = make(map[string]any, len(req.ChatTemplateKwargs))
			for k, v := range req.ChatTemplateKwargs {
				ro.Vars[k] = v
			}
		}
	}
	text, err := s.chat.Render(msgs, ro)
	if err != nil {
		return "", templateError(err)
	}
	if s.plain {
		return text, nil
	}
	return s.model.StripAddedSpecial(text), nil
}

// templateError is a failed render as the client sees it: the template refusing the
// conversation (raise_exception) is the request's fault, with the template's message;
// anything else the server's, naming the template.
func templateError(err error) *apiError {
	var re *chat.RaiseError
	if errors.As(err, &re) {
		return badRequest("messages", "the chat template refuses the conversation: %s", re.Message)
	}
	// chat reports a variable it cannot pass ("variable NAME: ...", "variable NAME is set by
	// Render itself"): only chat_template_kwargs gives variables.
	var ce *chat.Error
	if errors.As(err, &ce) && strings.HasPrefix(ce.Err.Error(), "variable ") {
		return badRequest("chat_template_kwargs", "%v", ce.Err)
	}
	return &apiError{Status: http.StatusInternalServerError, Message: err.Error(), Type: "server_error"}
}

// chatMessages checks the messages and converts them to the template's. PlainChatTemplate
// has no place for tool messages or calls.
func (s *Server) chatMessages(msgs []chatMessage) ([]chat.Message, *apiError) {
	if len(msgs) == 0 {
		return nil, badRequest("messages", "messages must be a non-empty array")
	}
	out := make([]chat.Message, len(msgs))
	for i, m := range msgs {
		switch m.Role {
		case "system", "developer", "user", "assistant":
		case "tool":
			if !s.plain {
				break
			}
			fallthrough
		default:
			want := "system, developer, user, assistant or tool"
			if s.plain {
				want = "system, developer, user or assistant: the model has no chat template for tools"
			}
			return nil, badRequest("messages", "messages[%d].role = %s (want %s)", i, quote(m.Role), want)
		}
		text, ok := messageText(m.Content)
		if !ok {
			return nil, badRequest("messages", "messages[%d].content must be a string or an array of text parts", i)
		}
		out[i] = chat.Message{Role: m.Role, Content: text, Name: m.Name, ToolCallID: m.ToolCallID, ReasoningContent: m.ReasoningContent}
		if len(m.ToolCalls) > 0 && (s.plain || m.Role != "assistant") {
			return nil, badRequest("messages", "messages[%d].tool_calls: only an assistant message of a model with a chat template has tool calls", i)
		}
		for j, tc := range m.ToolCalls {
			args, e := toolArguments(tc.Function.Arguments)
			if e != nil || tc.Function.Name == "" || (tc.Type != "" && tc.Type != "function") {
				return nil, badRequest("messages", "messages[%d].tool_calls[%d] must be {\"type\": \"function\", \"function\": {\"name\": ..., \"arguments\": ...}}", i, j)
			}
			out[i].ToolCalls = append(out[i].ToolCalls, chat.ToolCall{ID: tc.ID, Type: tc.Type, Name: tc.Function.Name, Arguments: args})
		}
	}
	return out, nil
}

// toolArguments is a call's arguments as JSON text: OpenAI sends them as a string holding
// JSON; an object is taken as it is.
func toolArguments(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "{}", nil
	}
	if raw[0] == '"' {
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	}
	return string(raw), nil
}

// messageText reads content: a string, null, or an array of {"type":"text","text":...}.
func messageText(raw json.RawMessage) (string, bool) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", true
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return "", false
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type != "text" {
			return "", false
		}
		b.WriteString(p.Text)
	}
	return b.String(), true
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	var req chatRequest
	if e := s.decode(w, r, &req); e != nil {
		writeError(w, e)
		return
	}
	if e := s.checkModel(req.Model); e != nil {
		writeError(w, e)
		return
	}
	text, e := s.chatPrompt(&req)
	if e == nil {
		e = chatChecks(&req)
	}
	var n, maxTok int
	if e == nil {
		n, e = s.choiceCount(req.N, 1)
	}
	if e == nil {
		mt := req.MaxCompletionTokens
		if mt == nil {
			mt = req.MaxTokens
		}
		maxTok, e = s.maxTokens("max_tokens", mt, false)
	}
	var opts llm.GenerateOptions
	if e == nil {
		opts, e = req.options(maxTok, s.model.Tokenizer().VocabSize())
	}
	if e != nil {
		writeError(w, e)
		return
	}
	opts.Stop = append(append([]string(nil), s.stops...), opts.Stop...)
	tok := s.model.Tokenizer()
	prompt := s.model.Tokenize(text, true)
	if len(prompt) >= s.model.ContextLength() {
		writeError(w, &apiError{Status: http.StatusBadRequest, Type: "invalid_request_error", Param: "messages", Code: "context_length_exceeded", Message: promptTooLong(len(prompt), s.model.ContextLength())})
		return
	}
	wantLogprobs := req.Logprobs != nil && *req.Logprobs
	opts.LogProbs = wantLogprobs
	if wantLogprobs && req.TopLogprobs != nil {
		opts.TopLogprobs = *req.TopLogprobs // each step's alternatives, when top_logprobs > 0
	}
	resp := chatResponse{ID: newID("chatcmpl-"), Object: "chat.completion", Created: time.Now().Unix(), Model: s.name, SystemFingerprint: fingerprint}
	var stream *sse
	if req.Stream {
		resp.Object = "chat.completion.chunk"
		stream = newSSE(w)
	}
	sl, ae := s.acquire(r.Context(), prompt)
	if ae != nil {
		if ae.Status != statusClientGone {
			writeError(w, ae)
		}
		return
	}
	sl.fresh = !req.reusePrefix()
	release := s.pool.hold(sl)
	defer release()
	u := usage{PromptTokens: len(prompt)}
	for j := range n {
		var content strings.Builder
		var lp *chatLogprobs
		if wantLogprobs {
			lp = &chatLogprobs{Content: []chatLogprob{}}
		}
		if stream != nil {
			empty := ""
			if err := stream.send(chatChunk(&resp, j, &chatOut{Role: "assistant", Content: &empty}, nil, nil)); err != nil {
				return
			}
		}
		begun := !s.plain // the answer's first text began (with PlainChatTemplate its leading space, after "Assistant:", is dropped)
		st, _, ae := s.generate(r.Context(), sl, prompt, choiceSeed(opts, j), nil, func(p llm.Piece) error {
			t := p.Text
			if !begun && t != "" {
				t = strings.TrimPrefix(t, " ")
				begun = t != ""
			}
			var plp *chatLogprobs
			if wantLogprobs && p.Token >= 0 {
				c := chatTokenLogprob(tok.TokenBytes(p.Token), p.LogProb)
				c.TopLogprobs = []chatAlt{}
				if opts.TopLogprobs > 0 {
					for _, a := range p.Top {
						alt := chatTokenLogprob(tok.TokenBytes(a.Token), a.LogProb)
						c.TopLogprobs = append(c.TopLogprobs, chatAlt{Token: alt.Token, Logprob: alt.Logprob, Bytes: alt.Bytes})
					}
				}
				plp = &chatLogprobs{Content: []chatLogprob{c}}
			}
			if stream != nil {
				if t == "" && plp == nil {
					return nil
				}
				return stream.send(chatChunk(&resp, j, &chatOut{Content: &t}, plp, nil))
			}
			content.WriteString(t)
			if plp != nil {
				lp.Content = append(lp.Content, plp.Content...)
			}
			return nil
		})
		if ae != nil {
			if stream != nil {
				stream.fail(ae)
			} else if ae.Status != statusClientGone {
				writeError(w, ae)
			}
			return
		}
		u.CompletionTokens += st.Tokens
		if j == 0 {
			u.PromptTokensDetails.CachedTokens = int(sl.cached.Load())
		}
		fr := finishReason(st)
		if stream != nil {
			if err := stream.send(chatChunk(&resp, j, &chatOut{}, nil, &fr)); err != nil {
				return
			}
			continue
		}
		c := content.String()
		resp.Choices = append(resp.Choices, chatChoice{Index: j, Message: &chatOut{Role: "assistant", Content: &c}, Logprobs: lp, FinishReason: &fr})
	}
	release() // generation is over: the slot is not held while the answer is written
	u.TotalTokens = u.PromptTokens + u.CompletionTokens
	if stream != nil {
		if req.StreamOptions != nil && req.StreamOptions.IncludeUsage {
			last := resp
			last.Choices = []chatChoice{}
			last.Usage = &u
			if stream.send(last) != nil {
				return
			}
		}
		stream.done()
		return
	}
	resp.Usage = &u
	writeJSON(w, http.StatusOK, resp)
}

func chatChecks(req *chatRequest) *apiError {
	switch {
	case req.TopLogprobs != nil && (*req.TopLogprobs < 0 || *req.TopLogprobs > 20):
		return badRequest("top_logprobs", "top_logprobs = %d is outside [0, 20]", *req.TopLogprobs)
	case req.TopLogprobs != nil && (req.Logprobs == nil || !*req.Logprobs):
		return badRequest("top_logprobs", "top_logprobs needs logprobs: true")
	case req.StreamOptions != nil && !req.Stream:
		return badRequest("stream_options", "stream_options is only allowed with stream: true")
	}
	return nil
}

func chatTokenLogprob(b []byte, lp float32) chatLogprob {
	ints := make([]int, len(b))
	for i, c := range b {
		ints[i] = int(c)
	}
	return chatLogprob{Token: string(b), Logprob: lp, Bytes: ints}
}

func chatChunk(resp *chatResponse, index int, delta *chatOut, lp *chatLogprobs, finish *string) chatResponse {
	c := *resp
	c.Choices = []chatChoice{{Index: index, Delta: delta, Logprobs: lp, FinishReason: finish}}
	return c
}
