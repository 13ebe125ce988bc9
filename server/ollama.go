package server

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/gorun-dev/gorun/grammar"
	"github.com/gorun-dev/gorun/llm"
)

// ollama's API (https://github.com/ollama/ollama/blob/main/docs/api.md) beside OpenAI's, so
// that programs written for ollama run against gorun unchanged: /api/version, /api/tags,
// /api/ps, /api/show, /api/generate, /api/chat (NDJSON streams by default, one object with
// "stream": false), /api/embed and the older /api/embeddings. Errors are ollama's
// {"error": "..."}. Requests ignore fields gorun does not know, as ollama does, but refuse
// what they ask for that gorun cannot do (images, suffix, templates, format, thinking) rather
// than ignore it.

// OllamaVersion is what /api/version reports: the ollama release whose API shapes these
// endpoints follow (clients check it before using newer fields).
const OllamaVersion = "0.17.4"

func (s *Server) ollamaRoutes(m *http.ServeMux) {
	m.HandleFunc("GET /{$}", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		fmt.Fprint(w, "Ollama is running (gorun)")
	})
	m.HandleFunc("GET /api/version", s.auth(func(w http.ResponseWriter, r *http.Request) {
		writeJSON(w, http.StatusOK, map[string]string{"version": OllamaVersion})
	}))
	m.HandleFunc("GET /api/tags", s.auth(s.ollamaTags))
	m.HandleFunc("GET /api/ps", s.auth(s.ollamaPS))
	m.HandleFunc("POST /api/show", s.auth(s.ollamaShow))
	m.HandleFunc("POST /api/generate", s.auth(s.ollamaGenerate))
	m.HandleFunc("POST /api/chat", s.auth(s.ollamaChat))
	m.HandleFunc("POST /api/embed", s.auth(s.ollamaEmbed))
	m.HandleFunc("POST /api/embeddings", s.auth(s.ollamaEmbeddings))
}

// ollamaPaths are the ollama endpoints that take POST (for the 405 answer).
var ollamaPaths = map[string]bool{"/api/show": true, "/api/generate": true, "/api/chat": true, "/api/embed": true, "/api/embeddings": true}

// ollamaError writes an error as ollama does: the status and {"error": message}.
func ollamaError(w http.ResponseWriter, e *apiError) {
	setRetryAfter(w, e)
	if e.Status == statusClientGone {
		return
	}
	writeJSON(w, e.Status, map[string]string{"error": clip(e.Message, maxMessage)})
}

// ollamaDecode reads a request body (unknown fields ignored) and checks its model name.
func (s *Server) ollamaDecode(w http.ResponseWriter, r *http.Request, v any, model *string) bool {
	if e := s.decodeJSON(w, r, v, false); e != nil {
		ollamaError(w, e)
		return false
	}
	if e := s.ollamaModel(*model); e != nil {
		ollamaError(w, e)
		return false
	}
	return true
}

// ollamaModel accepts the server's model name, with or without ollama's ":latest" tag.
func (s *Server) ollamaModel(name string) *apiError {
	switch {
	case name == "":
		return badRequest("model", "model is required")
	case name == s.name || name == s.name+":latest":
		return nil
	}
	return &apiError{Status: http.StatusNotFound, Message: fmt.Sprintf("model %s not found (this server has %q)", quote(name), s.name)}
}

type ollamaDetails struct {
	ParentModel       string   `json:"parent_model"`
	Format            string   `json:"format"`
	Family            string   `json:"family"`
	Families          []string `json:"families"`
	ParameterSize     string   `json:"parameter_size"`
	QuantizationLevel string   `json:"quantization_level"`
}

type ollamaModelInfo struct {
	Name          string        `json:"name"`
	Model         string        `json:"model"`
	ModifiedAt    *time.Time    `json:"modified_at,omitempty"`
	Size          int64         `json:"size"`
	Digest        string        `json:"digest"`
	Details       ollamaDetails `json:"details"`
	ExpiresAt     *time.Time    `json:"expires_at,omitempty"`
	SizeVRAM      *int64        `json:"size_vram,omitempty"`
	ContextLength int           `json:"context_length,omitempty"`
}

// ollamaListing describes the server's model as /api/tags and /api/ps list it.
func (s *Server) ollamaListing() ollamaModelInfo {
	info := ollamaModelInfo{Name: s.name, Model: s.name, Digest: fmt.Sprintf("%016x", s.model.Fingerprint()), Details: s.ollamaDetails()}
	if st, err := os.Stat(s.model.Path()); err == nil {
		mt := st.ModTime()
		info.ModifiedAt, info.Size = &mt, st.Size()
	}
	return info
}

func (s *Server) ollamaDetails() ollamaDetails {
	f := s.model.File()
	arch := s.model.Hparams().Arch
	d := ollamaDetails{Format: "gguf", Family: arch, Families: []string{arch}, QuantizationLevel: fileTypeName(f.Uint("general.file_type"))}
	if label, err := f.String("general.size_label"); err == nil && label != "" {
		d.ParameterSize = label
	} else {
		var n float64
		for _, t := range f.Tensors {
			elems := 1.0
			for _, d := range t.Dims {
				elems *= float64(d)
			}
			n += elems
		}
		d.ParameterSize = humanCount(n)
	}
	return d
}

// fileTypeName is ollama's name of a general.file_type (llama_ftype), "" when unknown.
func fileTypeName(ft uint64, err error) string {
	if err != nil {
		return ""
	}
	names := map[uint64]string{0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1", 10: "Q2_K",
		11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M", 16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K", 32: "BF16"}
	return names[ft]
}

// humanCount writes a parameter count as ollama does: 124.44M, 1.2B.
func humanCount(n float64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1fB", n/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2fM", n/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.2fK", n/1e3)
	}
	return fmt.Sprintf("%.0f", n)
}

func (s *Server) ollamaTags(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, map[string]any{"models": []ollamaModelInfo{s.ollamaListing()}})
}

// ollamaPS lists the loaded model: gorun's one model, loaded for the server's lifetime.
func (s *Server) ollamaPS(w http.ResponseWriter, r *http.Request) {
	info := s.ollamaListing()
	info.ModifiedAt = nil
	never := time.Date(2318, 1, 1, 0, 0, 0, 0, time.UTC) // ollama's "kept loaded" (keep_alive < 0)
	vram := int64(0)
	if s.model.Backend().Name() != "cpu" {
		vram = info.Size
	}
	info.ExpiresAt, info.SizeVRAM, info.ContextLength = &never, &vram, s.model.ContextLength()
	writeJSON(w, http.StatusOK, map[string]any{"models": []ollamaModelInfo{info}})
}

type ollamaShowRequest struct {
	Model   string `json:"model"`
	Name    string `json:"name"` // ollama's older spelling of model
	Verbose bool   `json:"verbose"`
}

// ollamaShow describes the model: its details, its scalar GGUF metadata (model_info, as
// ollama's; arrays only with verbose), its chat template and its capabilities.
func (s *Server) ollamaShow(w http.ResponseWriter, r *http.Request) {
	var req ollamaShowRequest
	if e := s.decodeJSON(w, r, &req, false); e != nil {
		ollamaError(w, e)
		return
	}
	if req.Model == "" {
		req.Model = req.Name
	}
	if e := s.ollamaModel(req.Model); e != nil {
		ollamaError(w, e)
		return
	}
	info := map[string]any{}
	for _, kv := range s.model.File().KV {
		if kv.Value.Len() == 0 || req.Verbose { // a scalar (arrays such as the vocabulary only when verbose)
			info[kv.Key] = kv.Value.Interface()
		} else {
			info[kv.Key] = nil
		}
	}
	template := PlainChatTemplate
	if t, err := s.model.File().String("tokenizer.chat_template"); err == nil {
		template = t
	}
	resp := map[string]any{
		"modelfile":    "# gorun serves " + s.model.Path() + "\nFROM " + s.model.Path() + "\n",
		"parameters":   "",
		"template":     template,
		"details":      s.ollamaDetails(),
		"model_info":   info,
		"capabilities": []string{"completion"},
	}
	if l := s.ollamaListing(); l.ModifiedAt != nil {
		resp["modified_at"] = *l.ModifiedAt
	}
	writeJSON(w, http.StatusOK, resp)
}

// ollamaCommon are the fields /api/generate and /api/chat share.
type ollamaCommon struct {
	Model       string                     `json:"model"`
	Stream      *bool                      `json:"stream"`
	Format      json.RawMessage            `json:"format"`
	KeepAlive   json.RawMessage            `json:"keep_alive"` // the model stays loaded anyway
	Options     map[string]json.RawMessage `json:"options"`
	Think       json.RawMessage            `json:"think"`
	Truncate    *bool                      `json:"truncate"` // gorun refuses a prompt that does not fit
	Shift       *bool                      `json:"shift"`    // gorun stops at a full context
	Logprobs    bool                       `json:"logprobs"`
	TopLogprobs int                        `json:"top_logprobs"`
}

type ollamaGenerateRequest struct {
	ollamaCommon
	Prompt   string   `json:"prompt"`
	Suffix   string   `json:"suffix"`
	System   string   `json:"system"`
	Template string   `json:"template"`
	Context  []int32  `json:"context"`
	Raw      bool     `json:"raw"`
	Images   []string `json:"images"`
}

type ollamaMessage struct {
	Role       string            `json:"role"`
	Content    string            `json:"content"`
	Thinking   string            `json:"thinking,omitempty"`
	Images     []string          `json:"images,omitempty"`
	ToolCalls  []json.RawMessage `json:"tool_calls,omitempty"`
	ToolName   string            `json:"tool_name,omitempty"`
	ToolCallID string            `json:"tool_call_id,omitempty"`
}

type ollamaChatRequest struct {
	ollamaCommon
	Messages []ollamaMessage   `json:"messages"`
	Tools    []json.RawMessage `json:"tools"`
}

// ollamaMetrics are ollama's timings, in nanoseconds.
type ollamaMetrics struct {
	TotalDuration      time.Duration `json:"total_duration,omitempty"`
	LoadDuration       time.Duration `json:"load_duration,omitempty"`
	PromptEvalCount    int           `json:"prompt_eval_count,omitempty"`
	PromptEvalDuration time.Duration `json:"prompt_eval_duration,omitempty"`
	EvalCount          int           `json:"eval_count,omitempty"`
	EvalDuration       time.Duration `json:"eval_duration,omitempty"`
}

type ollamaTokenLogprob struct {
	Token   string  `json:"token"`
	Logprob float64 `json:"logprob"`
	Bytes   []int   `json:"bytes,omitempty"`
}

type ollamaLogprob struct {
	ollamaTokenLogprob
	TopLogprobs []ollamaTokenLogprob `json:"top_logprobs,omitempty"`
}

type ollamaGenerateResponse struct {
	Model      string          `json:"model"`
	CreatedAt  time.Time       `json:"created_at"`
	Response   string          `json:"response"`
	Done       bool            `json:"done"`
	DoneReason string          `json:"done_reason,omitempty"`
	Context    []int32         `json:"context,omitempty"`
	Logprobs   []ollamaLogprob `json:"logprobs,omitempty"`
	*ollamaMetrics
}

type ollamaChatResponse struct {
	Model      string          `json:"model"`
	CreatedAt  time.Time       `json:"created_at"`
	Message    ollamaMessage   `json:"message"`
	Done       bool            `json:"done"`
	DoneReason string          `json:"done_reason,omitempty"`
	Logprobs   []ollamaLogprob `json:"logprobs,omitempty"`
	*ollamaMetrics
}

// check refuses what gorun cannot do: thinking, more top log-probabilities than ollama
// allows.
func (c *ollamaCommon) check() *apiError {
	if t := bytes.TrimSpace(c.Think); len(t) > 0 && string(t) != "null" && string(t) != "false" {
		return badRequest("think", "%s does not support thinking", "the model")
	}
	if c.TopLogprobs < 0 || c.TopLogprobs > 20 {
		return badRequest("top_logprobs", "top_logprobs = %d is outside [0, 20]", c.TopLogprobs)
	}
	return nil
}

// stream is ollama's default: true unless "stream": false.
func (c *ollamaCommon) stream() bool { return c.Stream == nil || *c.Stream }

// ollamaRun is what a generation needs besides its prompt.
type ollamaRun struct {
	opts     llm.GenerateOptions
	ctxLimit int  // num_ctx, at most the server's context
	logprobs bool // give each piece's log-probability (and TopLogprobs alternatives)
	trimLead bool // drop the answer's leading space (PlainChatTemplate's "Assistant: ")
}

func (s *Server) ollamaGenerate(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var req ollamaGenerateRequest
	if !s.ollamaDecode(w, r, &req, &req.Model) {
		return
	}
	run, e := s.ollamaPrepare(&req.ollamaCommon)
	if e == nil {
		switch {
		case req.Suffix != "":
			e = badRequest("suffix", "suffix (insertion) is not supported")
		case len(req.Images) > 0:
			e = badRequest("images", "the model does not take images")
		case req.Template != "":
			e = badRequest("template", "template (ollama's Go templates) is not supported: send raw: true with a formatted prompt")
		}
	}
	if e != nil {
		ollamaError(w, e)
		return
	}
	if req.Prompt == "" && req.Context == nil && req.System == "" {
		// ollama's way to load a model: nothing to generate.
		writeJSON(w, http.StatusOK, ollamaGenerateResponse{Model: req.Model, CreatedAt: time.Now().UTC(), Done: true, DoneReason: "load"})
		return
	}
	prompt, e := s.ollamaPrompt(&req, run.ctxLimit)
	if e != nil {
		ollamaError(w, e)
		return
	}
	var text strings.Builder
	var lps []ollamaLogprob
	stream := req.stream()
	s.ollamaStream(w, r, start, prompt, run, stream, func(piece string, lp []ollamaLogprob) any {
		if !stream {
			text.WriteString(piece)
			lps = append(lps, lp...)
			return nil
		}
		return ollamaGenerateResponse{Model: req.Model, CreatedAt: time.Now().UTC(), Response: piece, Logprobs: lp}
	}, func(reason string, ctxTokens []int32, m ollamaMetrics) any {
		return ollamaGenerateResponse{Model: req.Model, CreatedAt: time.Now().UTC(), Response: text.String(), Logprobs: lps,
			Done: true, DoneReason: reason, Context: ctxTokens, ollamaMetrics: &m}
	})
}

// ollamaPrompt is a generate request's tokens: its context (the tokens a previous answer
// returned) followed by the prompt, which is formatted with the chat template (as a user
// message after the system one) unless raw or the model has none (then the system text comes
// first, as its own paragraph). Prompt and answer must fit in limit tokens.
func (s *Server) ollamaPrompt(req *ollamaGenerateRequest, limit int) ([]int32, *apiError) {
	V := int32(s.model.Tokenizer().VocabSize())
	for _, id := range req.Context {
		if id < 0 || id >= V {
			return nil, badRequest("context", "context token %d is outside the vocabulary of %d", id, V)
		}
	}
	text := req.Prompt
	switch {
	case req.Raw:
	case s.plain:
		if req.System != "" {
			text = req.System + "\n\n" + text
		}
	default:
		cr := chatRequest{Messages: []chatMessage{{Role: "user", Content: jsonString(req.Prompt)}}}
		if req.System != "" {
			cr.Messages = append([]chatMessage{{Role: "system", Content: jsonString(req.System)}}, cr.Messages...)
		}
		var e *apiError
		if text, e = s.chatPrompt(&cr); e != nil {
			return nil, e
		}
	}
	prompt := append(append([]int32(nil), req.Context...), s.model.Tokenize(text, len(req.Context) == 0)...)
	if len(prompt) == 0 {
		prompt = []int32{s.model.StartToken()}
	}
	if len(prompt) >= limit {
		return nil, &apiError{Status: http.StatusBadRequest, Message: promptTooLong(len(prompt), limit)}
	}
	return prompt, nil
}

func jsonString(s string) json.RawMessage {
	b, _ := json.Marshal(s)
	return b
}

func (s *Server) ollamaChat(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var req ollamaChatRequest
	if !s.ollamaDecode(w, r, &req, &req.Model) {
		return
	}
	run, e := s.ollamaPrepare(&req.ollamaCommon)
	if e != nil {
		ollamaError(w, e)
		return
	}
	if len(req.Messages) == 0 {
		writeJSON(w, http.StatusOK, ollamaChatResponse{Model: req.Model, CreatedAt: time.Now().UTC(), Message: ollamaMessage{Role: "assistant"}, Done: true, DoneReason: "load"})
		return
	}
	cr := chatRequest{Tools: req.Tools}
	for i, m := range req.Messages { // roles are lower-cased, as ollama's client and server do
		if len(m.Images) > 0 {
			ollamaError(w, badRequest("messages", "messages[%d]: the model does not take images", i))
			return
		}
		cm := chatMessage{Role: strings.ToLower(m.Role), Content: jsonString(m.Content), Name: m.ToolName, ToolCallID: m.ToolCallID, ReasoningContent: m.Thinking}
		for j, tc := range m.ToolCalls {
			var call chatToolCall
			if json.Unmarshal(tc, &call) != nil {
				ollamaError(w, badRequest("messages", "messages[%d].tool_calls[%d] must be {\"function\": {\"name\": ..., \"arguments\": {...}}}", i, j))
				return
			}
			cm.ToolCalls = append(cm.ToolCalls, call)
		}
		cr.Messages = append(cr.Messages, cm)
	}
	text, e := s.chatPrompt(&cr)
	if e != nil {
		ollamaError(w, e)
		return
	}
	prompt := s.model.Tokenize(text, true)
	if len(prompt) >= run.ctxLimit {
		ollamaError(w, &apiError{Status: http.StatusBadRequest, Message: promptTooLong(len(prompt), run.ctxLimit)})
		return
	}
	run.opts.Stop = append(append([]string(nil), s.stops...), run.opts.Stop...)
	run.trimLead = s.plain
	var content strings.Builder
	var lps []ollamaLogprob
	stream := req.stream()
	s.ollamaStream(w, r, start, prompt, run, stream, func(piece string, lp []ollamaLogprob) any {
		if !stream {
			content.WriteString(piece)
			lps = append(lps, lp...)
			return nil
		}
		return ollamaChatResponse{Model: req.Model, CreatedAt: time.Now().UTC(), Message: ollamaMessage{Role: "assistant", Content: piece}, Logprobs: lp}
	}, func(reason string, _ []int32, m ollamaMetrics) any {
		return ollamaChatResponse{Model: req.Model, CreatedAt: time.Now().UTC(), Message: ollamaMessage{Role: "assistant", Content: content.String()},
			Logprobs: lps, Done: true, DoneReason: reason, ollamaMetrics: &m}
	})
}

// ollamaPrepare checks a request's common fields and reads its options.
func (s *Server) ollamaPrepare(c *ollamaCommon) (ollamaRun, *apiError) {
	if e := c.check(); e != nil {
		return ollamaRun{}, e
	}
	run, e := s.ollamaOptions(c.Options)
	if e != nil {
		return run, e
	}
	g, e := ollamaFormat(c.Format)
	if e != nil {
		return run, e
	}
	run.opts.Sample.Grammar = g
	run.logprobs = c.Logprobs
	run.opts.LogProbs = c.Logprobs
	if c.Logprobs {
		run.opts.TopLogprobs = c.TopLogprobs
	}
	return run, nil
}

// ollamaStream runs a generation in a slot and writes it: with stream, each piece as an NDJSON
// line made by piece (which, without stream, collects it and returns nil), then the object
// made by last (with the done reason, the context's tokens and the timings). A client that
// disconnects cancels the generation.
func (s *Server) ollamaStream(w http.ResponseWriter, r *http.Request, start time.Time, prompt []int32, run ollamaRun, stream bool,
	piece func(text string, lp []ollamaLogprob) any, last func(reason string, ctxTokens []int32, m ollamaMetrics) any) {
	if room := run.ctxLimit - len(prompt); run.ctxLimit < s.model.ContextLength() && (run.opts.MaxTokens == llm.NoLimit || run.opts.MaxTokens > room) {
		run.opts.MaxTokens = room // num_ctx is honoured: prompt and answer fit in it
	}
	sl, ae := s.acquire(r.Context(), prompt)
	if ae != nil {
		ollamaError(w, ae)
		return
	}
	release := s.pool.hold(sl)
	defer release()
	var nd *ndjson
	if stream {
		nd = &ndjson{w: w, rc: http.NewResponseController(w)}
	}
	tok := s.model.Tokenizer()
	begun := !run.trimLead
	st, promptTime, ae := s.generate(r.Context(), sl, prompt, run.opts, nil, func(p llm.Piece) error {
		t := p.Text
		if !begun && t != "" {
			t = strings.TrimPrefix(t, " ")
			begun = t != ""
		}
		var lp []ollamaLogprob
		if run.logprobs && p.Token >= 0 {
			lp = []ollamaLogprob{{ollamaTokenLogprob: ollamaTokenLog(tok.TokenBytes(p.Token), p.LogProb)}}
			for _, a := range p.Top {
				lp[0].TopLogprobs = append(lp[0].TopLogprobs, ollamaTokenLog(tok.TokenBytes(a.Token), a.LogProb))
			}
		}
		if t == "" && lp == nil {
			return nil
		}
		if v := piece(t, lp); v != nil {
			return nd.send(v)
		}
		return nil
	})
	if ae != nil {
		if nd != nil && nd.started {
			nd.fail(ae)
		} else {
			ollamaError(w, ae)
		}
		return
	}
	ctxTokens := sl.sess.Tokens()
	evaluated := max(len(prompt)-int(sl.cached.Load()), 1)
	release() // generation is over: the slot is not held while the answer is written
	m := ollamaMetrics{TotalDuration: time.Since(start), PromptEvalCount: evaluated, PromptEvalDuration: promptTime,
		EvalCount: st.Tokens, EvalDuration: st.GenTime}
	final := last(ollamaDoneReason(st), ctxTokens, m)
	if nd == nil {
		writeJSON(w, http.StatusOK, final)
		return
	}
	nd.send(final)
}

// ollamaDoneReason is ollama's done_reason: stop (end of text, a stop string) or length.
func ollamaDoneReason(st llm.Stats) string {
	if st.Stop == llm.StopEOS || st.Stop == llm.StopString {
		return "stop"
	}
	return "length"
}

func ollamaTokenLog(b []byte, lp float32) ollamaTokenLogprob {
	ints := make([]int, len(b))
	for i, c := range b {
		ints[i] = int(c)
	}
	return ollamaTokenLogprob{Token: string(b), Logprob: float64(lp), Bytes: ints}
}

// ndjson writes a stream of JSON objects, one a line, each flushed under a write deadline.
type ndjson struct {
	w       http.ResponseWriter
	rc      *http.ResponseController
	started bool
}

func (n *ndjson) send(v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if !n.started {
		n.started = true
		n.w.Header().Set("Content-Type", "application/x-ndjson")
		n.w.WriteHeader(http.StatusOK)
	}
	n.rc.SetWriteDeadline(time.Now().Add(writeTimeout))
	if _, err := n.w.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("%w: %w", errWrite, err)
	}
	if err := n.rc.Flush(); err != nil {
		return fmt.Errorf("%w: %w", errWrite, err)
	}
	return nil
}

// fail ends a stream with ollama's error line (nothing for a client that left).
func (n *ndjson) fail(e *apiError) {
	if e.Status != statusClientGone {
		n.send(map[string]string{"error": clip(e.Message, maxMessage)})
	}
}

// ollama's option defaults (its Modelfile PARAMETER defaults), which differ from llama.cpp's.
const (
	ollamaTopP          = 0.9
	ollamaRepeatPenalty = 1.1
)

// ollamaLoadOptions are options ollama applies when it loads a model; gorun's model is
// loaded with the server's settings, so they are accepted and ignored.
var ollamaLoadOptions = map[string]bool{"num_batch": true, "num_gpu": true, "main_gpu": true, "use_mmap": true, "use_mlock": true,
	"num_thread": true, "numa": true, "low_vram": true, "f16_kv": true, "vocab_only": true, "logits_all": true,
	"embedding_only": true, "num_keep": true, "penalize_newline": true, "mirostat_tau": true, "mirostat_eta": true}

// ollamaOptions reads a request's options with ollama's names and defaults (temperature 0.8,
// top_k 40, top_p 0.9, min_p 0, repeat_penalty 1.1, repeat_last_n 64, num_predict -1: until
// the end) into the library's. num_ctx above the server's context is clamped to it, as ollama
// clamps it to the model's; a smaller one bounds prompt and answer. Samplers gorun lacks
// (typical_p, mirostat, tfs_z) are refused unless off; an unknown option is refused by name.
func (s *Server) ollamaOptions(raw map[string]json.RawMessage) (ollamaRun, *apiError) {
	topP, minP, penalty := ollamaTopP, 0.0, ollamaRepeatPenalty
	p := sampling{TopP: &topP, MinP: &minP, RepeatPenalty: &penalty}
	numPredict, numCtx := -1, 0
	off := map[string]float64{"typical_p": 1, "tfs_z": 1, "mirostat": 0}
	for k, v := range raw {
		if bytes.Equal(bytes.TrimSpace(v), []byte("null")) || ollamaLoadOptions[k] {
			continue
		}
		var dst any
		switch k {
		case "temperature":
			dst = &p.Temperature
		case "top_p":
			dst = &p.TopP
		case "min_p":
			dst = &p.MinP
		case "repeat_penalty":
			dst = &p.RepeatPenalty
		case "presence_penalty":
			dst = &p.PresencePenalty
		case "frequency_penalty":
			dst = &p.FrequencyPenalty
		case "top_k":
			dst = &p.TopK
		case "repeat_last_n":
			dst = &p.RepeatLastN
		case "seed":
			dst = &p.Seed
		case "num_predict":
			dst = &numPredict
		case "num_ctx":
			dst = &numCtx
		case "stop":
			var stops []string
			if json.Unmarshal(v, &stops) != nil {
				return ollamaRun{}, badRequest("options.stop", "options.stop must be an array of strings")
			}
			p.Stop = v
			continue
		case "typical_p", "tfs_z", "mirostat":
			var x float64
			if json.Unmarshal(v, &x) != nil || x != off[k] {
				return ollamaRun{}, badRequest("options."+k, "options.%s is not supported (only %v, off)", k, off[k])
			}
			continue
		default:
			return ollamaRun{}, badRequest("options."+k, "unknown option %s", quote(k))
		}
		if err := json.Unmarshal(v, dst); err != nil {
			return ollamaRun{}, badRequest("options."+k, "options.%s must be a number, not %s", k, clip(string(v), maxQuote))
		}
	}
	if numPredict < -2 {
		return ollamaRun{}, badRequest("options.num_predict", "options.num_predict = %d (want -1 or -2 for no limit, or a count)", numPredict)
	}
	if numCtx < 0 {
		return ollamaRun{}, badRequest("options.num_ctx", "options.num_ctx = %d is negative", numCtx)
	}
	maxTok := numPredict
	if maxTok < 0 {
		maxTok = -1
	}
	o, e := p.libOptions(maxTok)
	if e != nil {
		e.Param = "options." + e.Param
		e.Message = "options." + e.Message
		return ollamaRun{}, e
	}
	if p.PresencePenalty != nil { // counted over the last repeat_last_n tokens, as llama.cpp's
		o.Sample.PresencePenalty = float32(*p.PresencePenalty)
	}
	if p.FrequencyPenalty != nil {
		o.Sample.FrequencyPenalty = float32(*p.FrequencyPenalty)
	}
	limit := s.model.ContextLength()
	if numCtx > 0 {
		limit = min(numCtx, limit)
	}
	return ollamaRun{opts: o, ctxLimit: limit}, nil
}

type ollamaEmbedRequest struct {
	Model      string          `json:"model"`
	Input      json.RawMessage `json:"input"`
	Truncate   *bool           `json:"truncate"`
	Dimensions int             `json:"dimensions"`
	KeepAlive  json.RawMessage `json:"keep_alive"`
}

type ollamaEmbedResponse struct {
	Model           string        `json:"model"`
	Embeddings      [][]float32   `json:"embeddings"`
	TotalDuration   time.Duration `json:"total_duration,omitempty"`
	LoadDuration    time.Duration `json:"load_duration,omitempty"`
	PromptEvalCount int           `json:"prompt_eval_count,omitempty"`
}

// ollamaEmbed is /api/embed: unit-length embeddings of a string or an array of strings.
// Inputs longer than the context are cut to it unless truncate is false (then refused);
// dimensions keeps the first values and normalizes them again, as ollama does.
func (s *Server) ollamaEmbed(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	var req ollamaEmbedRequest
	if !s.ollamaDecode(w, r, &req, &req.Model) {
		return
	}
	E := s.model.Hparams().NEmbd
	if req.Dimensions < 0 || req.Dimensions > E {
		ollamaError(w, badRequest("dimensions", "dimensions = %d is outside [1, %d]", req.Dimensions, E))
		return
	}
	if req.Truncate == nil || *req.Truncate {
		req.Input = s.truncateInputs(req.Input)
	}
	seqs, e := s.embeddingInputs(req.Input, "input")
	if e != nil {
		ollamaError(w, e)
		return
	}
	vecs, ntok, e := s.embed(r.Context(), seqs, llm.NormalizeEuclidean)
	if e != nil {
		ollamaError(w, e)
		return
	}
	if d := req.Dimensions; d > 0 && d < E {
		for i, v := range vecs {
			vecs[i] = unitLength(v[:d])
		}
	}
	writeJSON(w, http.StatusOK, ollamaEmbedResponse{Model: req.Model, Embeddings: vecs, TotalDuration: time.Since(start), PromptEvalCount: ntok})
}

// truncateInputs cuts text inputs whose tokens do not fit the context to the tokens that do
// (as token arrays); anything else is left for embeddingInputs to judge.
func (s *Server) truncateInputs(raw json.RawMessage) json.RawMessage {
	var texts []string
	var one string
	switch {
	case json.Unmarshal(raw, &one) == nil:
		texts = []string{one}
	case json.Unmarshal(raw, &texts) == nil:
	default:
		return raw
	}
	n := s.model.ContextLength()
	seqs := make([][]int32, len(texts))
	cut := false
	for i, t := range texts {
		seqs[i] = s.model.Tokenize(t, true)
		if len(seqs[i]) > n {
			seqs[i], cut = seqs[i][:n], true
		}
		if len(seqs[i]) == 0 {
			return raw // refused by embeddingInputs, naming it
		}
	}
	if !cut {
		return raw
	}
	b, _ := json.Marshal(seqs)
	return b
}

func unitLength(v []float32) []float32 {
	var sum float64
	for _, x := range v {
		sum += float64(x) * float64(x)
	}
	if sum > 0 {
		k := float32(1 / math.Sqrt(sum))
		for i := range v {
			v[i] *= k
		}
	}
	return v
}

type ollamaEmbeddingsRequest struct {
	Model     string          `json:"model"`
	Prompt    string          `json:"prompt"`
	KeepAlive json.RawMessage `json:"keep_alive"`
}

// ollamaEmbeddings is the older /api/embeddings: one prompt, its embedding not normalized
// (as ollama's).
func (s *Server) ollamaEmbeddings(w http.ResponseWriter, r *http.Request) {
	var req ollamaEmbeddingsRequest
	if !s.ollamaDecode(w, r, &req, &req.Model) {
		return
	}
	seqs, e := s.embeddingInputs(jsonString(req.Prompt), "prompt")
	if e != nil {
		ollamaError(w, e)
		return
	}
	vecs, _, e := s.embed(r.Context(), seqs, llm.NormalizeNone)
	if e != nil {
		ollamaError(w, e)
		return
	}
	writeJSON(w, http.StatusOK, map[string][]float32{"embedding": vecs[0]})
}

// ollamaFormat reads ollama's format: "json" (any JSON value, as ollama's JSON mode) or a JSON
// schema (structured outputs), as a grammar; absent, null or "": none.
func ollamaFormat(raw json.RawMessage) (*grammar.Grammar, *apiError) {
	raw = bytes.TrimSpace(raw)
	switch {
	case isNull(raw) || string(raw) == `""`:
		return nil, nil
	case string(raw) == `"json"`:
		g, err := jsonObjectGrammar()
		if err != nil {
			return nil, &apiError{Status: http.StatusInternalServerError, Message: err.Error(), Type: "server_error"}
		}
		return g, nil
	case raw[0] == '{':
		return compileSchema("format", raw)
	}
	return nil, badRequest("format", "format must be \"json\" or a JSON schema object, not %s", clip(string(raw), maxQuote))
}
