// Package server is gorun's HTTP server: OpenAI's completions, chat completions and
// embeddings APIs (streaming as server-sent events), ollama's API (ollama.go: NDJSON
// streams), model list and health, and llama-server's /tokenize,
// /detokenize and /completion, over one model shared by concurrent requests.
//
// Each request runs in a slot: one llm.Session of the model. Slots generate at the same time
// (the library computes their tokens together, one forward pass per step); a request that
// finds every slot busy waits in a bounded queue, and gets 503 when the queue is full. A
// slot keeps its context after a request, and the next request whose prompt begins the same
// way reuses the cached prefix. A client that disconnects cancels its generation, which stops
// before its next token and frees the slot; a slot is given back before the answer is
// written, and every answer is written under a deadline.
//
// Web pages cannot drive the server: the Host header must name it (Config.AllowedHosts),
// JSON bodies need Content-Type application/json, and without an API key a request from a
// page of another origin is refused.
package server

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/gorun-dev/gorun/chat"
	"github.com/gorun-dev/gorun/llm"
)

// PlainChatTemplate is the conversation format of a model without a chat template of its own
// (GPT-2), as Jinja: a system message as a first paragraph, then one line per turn
// ("User: ...", "Assistant: ..."), ending with "Assistant:" for the model to complete.
// Generation stops at DefaultChatStop (the model starting the user's next turn), and the
// answer's leading space (after "Assistant:") is dropped.
const PlainChatTemplate = `{%- for message in messages -%}
{%- if message['role'] == 'system' or message['role'] == 'developer' -%}
{{- message['content'] + '\n\n' -}}
{%- elif message['role'] == 'assistant' -%}
{{- 'Assistant: ' + message['content'] + '\n' -}}
{%- else -%}
{{- 'User: ' + message['content'] + '\n' -}}
{%- endif -%}
{%- endfor -%}
Assistant:`

// DefaultChatStop ends a chat answer where the model begins the user's next turn.
var DefaultChatStop = []string{"\nUser:"}

// Config configures a Server.
type Config struct {
	Model *llm.Model
	// ModelName is the id /v1/models lists and requests name (default "gorun").
	ModelName string
	// Parallel is the number of slots: requests generating at the same time (default 4).
	Parallel int
	// Queue is the most requests waiting for a slot; more get 503 (default 64; < 0: none).
	Queue int
	// APIKey, when set, is required as "Authorization: Bearer KEY" (except on /health).
	APIKey string
	// ChatStop are stop strings every chat request has (nil: DefaultChatStop with
	// PlainChatTemplate, none with the model's template; an empty non-nil slice: none). Chats
	// are rendered with the model's chat template (llm.Model.ChatTemplate: the file's
	// tokenizer.chat_template, or llm.Options.ChatTemplate), or PlainChatTemplate when the
	// model has none (Plain reports it).
	ChatStop []string
	// DefaultMaxTokens is what an absent max_tokens means (0: llm.DefaultMaxTokens; llm.NoLimit:
	// until end of text, a stop string or a full context).
	DefaultMaxTokens int
	// MaxBodyBytes limits request bodies (default 4 MiB); a larger one gets 413.
	MaxBodyBytes int64
	// MaxChoices bounds n times the number of prompts of one request (default 16).
	MaxChoices int
	// Pooling is how /v1/embeddings (and ollama's /api/embed) pool a text's hidden states
	// (llm.PoolingDefault: the model's pooling_type, else mean); they are normalized to unit
	// length.
	Pooling llm.Pooling
	// AllowedHosts are the host names, besides IP addresses and localhost, that requests may
	// name in their Host header, and whose pages may send requests (their Origin); "*" accepts
	// any. A web page that resolves its own name to this server (DNS rebinding) is refused.
	AllowedHosts []string
	// AccessLog, when set, gets one line per request: method, path, status, client address,
	// prompt and generated tokens, time to first token, tokens per second and time taken
	// (never a header or the query string). LogPrompts adds the prompt's text.
	AccessLog  io.Writer
	LogPrompts bool
}

// Server serves one model over HTTP. It is an http.Handler.
type Server struct {
	cfg     Config
	model   *llm.Model
	name    string
	chat    *chat.Template
	plain   bool // chat is PlainChatTemplate: the model has no template
	stops   []string
	pool    *pool
	metrics metrics
	mux     *http.ServeMux
	created int64
	hosts   map[string]bool // AllowedHosts, lower-case
	anyHost bool            // AllowedHosts has "*"
	logMu   sync.Mutex      // one access-log line at a time
}

// New makes a server and the sessions of its slots.
func New(cfg Config) (*Server, error) {
	if cfg.Model == nil {
		return nil, errors.New("server: no model")
	}
	if cfg.ModelName == "" {
		cfg.ModelName = "gorun"
	}
	if cfg.Parallel == 0 {
		cfg.Parallel = 4
	}
	if cfg.Parallel < 0 || cfg.Parallel > 1024 {
		return nil, fmt.Errorf("server: %d parallel slots (want 1 to 1024)", cfg.Parallel)
	}
	if cfg.Queue == 0 {
		cfg.Queue = 64
	}
	if cfg.Queue < 0 {
		cfg.Queue = 0
	}
	if cfg.MaxBodyBytes <= 0 {
		cfg.MaxBodyBytes = 4 << 20
	}
	if cfg.MaxChoices <= 0 {
		cfg.MaxChoices = 16
	}
	if cfg.DefaultMaxTokens == 0 {
		cfg.DefaultMaxTokens = llm.DefaultMaxTokens
	}
	if cfg.DefaultMaxTokens < 0 {
		cfg.DefaultMaxTokens = llm.NoLimit
	}
	s := &Server{cfg: cfg, model: cfg.Model, name: cfg.ModelName, created: time.Now().Unix(), hosts: map[string]bool{}}
	for _, h := range cfg.AllowedHosts {
		if h == "*" {
			s.anyHost = true
			continue
		}
		name := hostName(h)
		if name == "" || strings.ContainsAny(name, "/ ") {
			return nil, fmt.Errorf("server: allowed host %q is not a host name", h)
		}
		s.hosts[name] = true
	}
	var err error
	if err = s.chooseTemplate(); err != nil {
		return nil, fmt.Errorf("server: %w", err)
	}
	for _, st := range s.stops {
		if st == "" {
			return nil, errors.New("server: empty chat stop string")
		}
	}
	if s.pool, err = newPool(cfg.Model, cfg.Parallel, cfg.Queue); err != nil {
		return nil, err
	}
	s.routes()
	return s, nil
}

// chooseTemplate takes the model's chat template, or PlainChatTemplate when it has none, and
// checks that it renders a first user message: a template that cannot is an error naming it
// before the server starts, not a failure on every chat request.
func (s *Server) chooseTemplate() error {
	t, err := s.model.ChatTemplate()
	s.stops = s.cfg.ChatStop
	switch {
	case errors.Is(err, chat.ErrNoTemplate):
		if t, err = chat.New("plain User:/Assistant: lines (the model has no chat template)", PlainChatTemplate, chat.Options{}); err != nil {
			return err
		}
		s.plain = true
		if s.stops == nil {
			s.stops = DefaultChatStop
		}
	case err != nil:
		return err
	}
	s.chat = t
	_, err = t.Render([]chat.Message{{Role: "user", Content: "Hello"}}, chat.RenderOptions{AddGenerationPrompt: true})
	var re *chat.RaiseError
	if errors.As(err, &re) {
		return nil // the template refuses this conversation, which is its right
	}
	return err
}

// Plain reports whether chats use PlainChatTemplate because the model has no chat template.
func (s *Server) Plain() bool { return s.plain }

// Close releases the slots' sessions (not the model). Requests still running fail.
func (s *Server) Close() error {
	s.pool.close()
	return nil
}

// Stats reports the slots: how many are generating and how many requests wait.
func (s *Server) Stats() (busy, queued int) { return s.pool.stats() }

func (s *Server) routes() {
	m := http.NewServeMux()
	m.HandleFunc("GET /health", s.health)
	m.HandleFunc("GET /v1/health", s.health)
	m.HandleFunc("GET /v1/models", s.auth(s.models))
	m.HandleFunc("GET /models", s.auth(s.models))
	m.HandleFunc("POST /v1/completions", s.auth(s.completions))
	m.HandleFunc("POST /completions", s.auth(s.completions))
	m.HandleFunc("POST /v1/chat/completions", s.auth(s.chatCompletions))
	m.HandleFunc("POST /chat/completions", s.auth(s.chatCompletions))
	m.HandleFunc("POST /v1/embeddings", s.auth(s.embeddings))
	m.HandleFunc("POST /embeddings", s.auth(s.embeddings))
	m.HandleFunc("POST /completion", s.auth(s.llamaCompletion))
	m.HandleFunc("POST /tokenize", s.auth(s.tokenize))
	m.HandleFunc("GET /metrics", s.auth(s.metricsPage))
	m.HandleFunc("GET /slots", s.auth(s.slots))
	m.HandleFunc("POST /detokenize", s.auth(s.detokenize))
	s.ollamaRoutes(m)
	m.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		if strings.HasPrefix(r.URL.Path, "/api/") {
			if ollamaPaths[r.URL.Path] {
				w.Header().Set("Allow", "POST")
				ollamaError(w, &apiError{Status: http.StatusMethodNotAllowed, Message: fmt.Sprintf("%s takes POST, not %s", r.URL.Path, quote(r.Method))})
				return
			}
			ollamaError(w, &apiError{Status: http.StatusNotFound, Message: fmt.Sprintf("no endpoint %s %s", quote(r.Method), quote(r.URL.Path))})
			return
		}
		switch r.URL.Path {
		case "/v1/completions", "/completions", "/v1/chat/completions", "/chat/completions", "/completion", "/tokenize", "/detokenize",
			"/v1/embeddings", "/embeddings":
			w.Header().Set("Allow", "POST")
			writeError(w, &apiError{Status: http.StatusMethodNotAllowed, Message: fmt.Sprintf("%s takes POST, not %s", r.URL.Path, quote(r.Method)), Type: "invalid_request_error"})
			return
		}
		writeError(w, &apiError{Status: http.StatusNotFound, Message: fmt.Sprintf("no endpoint %s %s", quote(r.Method), quote(r.URL.Path)), Type: "not_found_error"})
	})
	s.mux = m
}

// ServeHTTP routes a request (and logs it, with Config.AccessLog).
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.logged(w, r, s.serve)
}

func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			writeError(w, &apiError{Status: 500, Message: fmt.Sprintf("internal error: %v", v), Type: "server_error"})
		}
	}()
	// No write deadline until the response is written: an earlier response on this connection
	// left its own, and a generation may take longer.
	http.NewResponseController(w).SetWriteDeadline(time.Time{})
	if e := s.checkOrigin(r); e != nil {
		writeError(w, e)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// checkOrigin refuses requests a web page made the browser send here: one naming another host
// (DNS rebinding: a page whose name resolves to this server reads its answers) and, without an
// API key, one from a page of another origin (it could not read the answer, but could make the
// server generate). Host: any IP address, localhost and *.localhost, the allowed hosts; a
// missing Host (HTTP/1.0, no browser) passes. Origin, when sent: this server itself (the same
// host and port as Host), or an allowed host.
func (s *Server) checkOrigin(r *http.Request) *apiError {
	if s.anyHost {
		return nil
	}
	if host := hostName(r.Host); host != "" && !s.knownHost(host) {
		return &apiError{Status: http.StatusForbidden, Message: fmt.Sprintf("the host %s is not this server's (allow it with --allowed-hosts)", quote(r.Host)), Type: "invalid_request_error", Code: "host_not_allowed"}
	}
	origin, sent := r.Header["Origin"]
	if !sent || s.cfg.APIKey != "" {
		return nil
	}
	if len(origin) == 1 {
		if u, err := url.Parse(origin[0]); err == nil && u.Host != "" && (strings.EqualFold(u.Host, r.Host) || s.hosts[hostName(u.Host)]) {
			return nil
		}
	}
	return &apiError{Status: http.StatusForbidden, Message: fmt.Sprintf("requests from the web page %s are refused (allow its host with --allowed-hosts, or set an API key)", quote(strings.Join(origin, ", "))), Type: "invalid_request_error", Code: "origin_not_allowed"}
}

// knownHost says whether a Host header's name (hostName's form) names this server. An IP
// address cannot be a rebinding attack: a page of that origin is served from that address.
func (s *Server) knownHost(name string) bool {
	if _, err := netip.ParseAddr(name); err == nil {
		return true
	}
	return name == "localhost" || strings.HasSuffix(name, ".localhost") || s.hosts[name]
}

// hostName is a Host header's (or an Origin's host's) name: without the port and the
// brackets of an IPv6 address, lower-case, without a final dot.
func hostName(hostport string) string {
	h := hostport
	if host, _, err := net.SplitHostPort(hostport); err == nil {
		h = host
	}
	h = strings.TrimSuffix(strings.TrimPrefix(h, "["), "]")
	return strings.TrimSuffix(strings.ToLower(h), ".")
}

func (s *Server) auth(h http.HandlerFunc) http.HandlerFunc {
	if s.cfg.APIKey == "" {
		return h
	}
	want := []byte("Bearer " + s.cfg.APIKey)
	return func(w http.ResponseWriter, r *http.Request) {
		got := []byte(r.Header.Get("Authorization"))
		if subtle.ConstantTimeCompare(got, want) != 1 {
			w.Header().Set("WWW-Authenticate", `Bearer realm="gorun"`)
			writeError(w, &apiError{Status: http.StatusUnauthorized, Message: "invalid or missing API key (send Authorization: Bearer KEY)", Type: "invalid_request_error", Code: "invalid_api_key"})
			return
		}
		h(w, r)
	}
}

func (s *Server) health(w http.ResponseWriter, r *http.Request) {
	busy, queued := s.pool.stats()
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "slots_busy": busy, "slots_total": s.cfg.Parallel, "queued": queued})
}

func (s *Server) models(w http.ResponseWriter, r *http.Request) {
	hp := s.model.Hparams()
	meta := map[string]any{"n_vocab": hp.NVocab, "n_ctx_train": hp.NCtx, "n_embd": hp.NEmbd, "n_ctx": s.model.ContextLength(),
		"architecture": hp.Arch, "n_layer": hp.NLayer, "slots": s.cfg.Parallel}
	// llama-server's n_params and size (of the tensors), and the weights' main type.
	if f := s.model.File(); f != nil {
		var params, size uint64
		bytesOf := map[string]uint64{}
		for _, ti := range f.Tensors {
			n := uint64(1)
			for _, d := range ti.Dims {
				n *= uint64(d)
			}
			params += n
			size += uint64(ti.Size)
			if len(ti.Dims) == 2 {
				bytesOf[ti.Type.String()] += uint64(ti.Size)
			}
		}
		meta["n_params"], meta["size"] = params, size
		main := ""
		for t, b := range bytesOf {
			if main == "" || b > bytesOf[main] || b == bytesOf[main] && t < main {
				main = t
			}
		}
		meta["type"] = main
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"object": "list",
		"data": []map[string]any{{
			"id": s.name, "object": "model", "created": s.created, "owned_by": "gorun", "meta": meta,
		}},
	})
}

// checkModel accepts the server's model name, or none.
func (s *Server) checkModel(name string) *apiError {
	if name == "" || name == s.name {
		return nil
	}
	return &apiError{Status: http.StatusBadRequest, Message: fmt.Sprintf("the model %s does not exist (this server has %q)", quote(name), s.name), Type: "invalid_request_error", Param: "model", Code: "model_not_found"}
}

// apiError is an error response in OpenAI's format.
type apiError struct {
	Status  int
	Message string
	Type    string
	Param   string
	Code    string
	// RetryAfter, when positive, is sent as the Retry-After header (seconds): the server is
	// busy, not broken.
	RetryAfter int
}

func (e *apiError) Error() string { return e.Message }

func (e *apiError) body() map[string]any {
	inner := map[string]any{"message": e.Message, "type": e.Type, "param": nil, "code": nil}
	if e.Param != "" {
		inner["param"] = e.Param
	}
	if e.Code != "" {
		inner["code"] = e.Code
	}
	return map[string]any{"error": inner}
}

// badRequest is a 400 invalid_request_error about a parameter.
func badRequest(param, format string, a ...any) *apiError {
	return &apiError{Status: http.StatusBadRequest, Message: fmt.Sprintf(format, a...), Type: "invalid_request_error", Param: param}
}

func writeError(w http.ResponseWriter, e *apiError) {
	setRetryAfter(w, e)
	if e.Type == "" {
		e.Type = "invalid_request_error"
	}
	// Messages quote client input clipped (quote); this bounds any that would not.
	e.Message = clip(e.Message, maxMessage)
	writeJSON(w, e.Status, e.body())
}

// setRetryAfter sets the Retry-After header of an error that asks for one.
func setRetryAfter(w http.ResponseWriter, e *apiError) {
	if e.RetryAfter > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(e.RetryAfter))
	}
}

// maxQuote bounds the bytes of client input an error message quotes; maxMessage bounds a
// message.
const (
	maxQuote   = 100
	maxMessage = 1024
)

// quote is s quoted, at most its first maxQuote bytes (an error must not echo a 3 MB field).
func quote(s string) string {
	if len(s) <= maxQuote {
		return strconv.Quote(s)
	}
	return strconv.Quote(clip(s, maxQuote)) + fmt.Sprintf(" (%d bytes)", len(s))
}

// clip is at most the first n bytes of s, cut at a character boundary, marked "..." if cut.
func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status = 500
		b = []byte(`{"error":{"message":"encoding the response failed","type":"server_error","param":null,"code":null}}`)
	}
	writeBody(w, status, append(b, '\n'))
}

// writeBody writes a JSON response under a write deadline: writeTimeout, and a second more
// per 64 KiB, so that a client that stops reading ends its request instead of holding its
// connection and goroutine (and, before, its slot) forever. The deadline stays for the
// server's final flush; the next request on the connection clears it (ServeHTTP).
func writeBody(w http.ResponseWriter, status int, b []byte) {
	http.NewResponseController(w).SetWriteDeadline(time.Now().Add(writeTimeout + time.Duration(len(b)>>16)*time.Second))
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}

// bodyTimeout bounds the reading of a request body.
const bodyTimeout = time.Minute

// decode reads a JSON request body into v, refusing another Content-Type than
// application/json (a web page can send text/plain or a form to any server without asking
// it; JSON needs the server's consent, which gorun never gives), unknown fields, trailing
// data and bodies over the limit.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any) *apiError {
	return s.decodeJSON(w, r, v, true)
}

// decodeJSON is decode; without strict, fields v does not have are ignored (as ollama's
// server ignores them: its clients send fields of newer versions).
func (s *Server) decodeJSON(w http.ResponseWriter, r *http.Request, v any, strict bool) *apiError {
	if e := checkJSONType(r.Header.Get("Content-Type")); e != nil {
		return e
	}
	// A slow client gets a minute to send its body (no server-wide ReadTimeout: its deadline
	// would outlive the body and cancel long generations).
	rc := http.NewResponseController(w)
	if rc.SetReadDeadline(time.Now().Add(bodyTimeout)) == nil {
		defer rc.SetReadDeadline(time.Time{})
	}
	body := http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes)
	dec := json.NewDecoder(body)
	if strict {
		dec.DisallowUnknownFields()
	}
	err := dec.Decode(v)
	if err == nil {
		var extra json.RawMessage
		if e := dec.Decode(&extra); e != io.EOF {
			err = errors.New("data after the JSON object")
			if errors.As(e, new(*http.MaxBytesError)) {
				err = e
			}
		}
	}
	if err == nil {
		return nil
	}
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) {
		return &apiError{Status: http.StatusRequestEntityTooLarge, Message: fmt.Sprintf("request body over %d bytes", mbe.Limit), Type: "invalid_request_error"}
	}
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) && te.Field != "" {
		field := strings.TrimPrefix(te.Field, "sampling.")
		return badRequest(clip(field, maxQuote), "invalid JSON: %s must be %s, not %s", clip(field, maxQuote), jsonType(te.Type.Kind().String()), clip(te.Value, maxQuote))
	}
	if strings.HasPrefix(err.Error(), "json: unknown field") {
		field := strings.Trim(strings.TrimPrefix(err.Error(), "json: unknown field "), `"`)
		return badRequest(clip(field, maxQuote), "unsupported parameter %s", quote(field))
	}
	if errors.Is(err, context.Canceled) {
		return &apiError{Status: http.StatusBadRequest, Message: "request cancelled", Type: "invalid_request_error"}
	}
	return badRequest("", "invalid JSON body: %s", clip(err.Error(), 2*maxQuote))
}

// checkJSONType accepts a Content-Type of application/json, with a charset only of UTF-8.
func checkJSONType(ct string) *apiError {
	mt, params, err := mime.ParseMediaType(ct)
	if err == nil && mt == "application/json" && (params["charset"] == "" || strings.EqualFold(params["charset"], "utf-8")) {
		return nil
	}
	if ct == "" {
		ct = "none"
	} else {
		ct = quote(ct)
	}
	return &apiError{Status: http.StatusUnsupportedMediaType, Message: fmt.Sprintf("the body must be JSON, sent with Content-Type: application/json (not %s)", ct), Type: "invalid_request_error"}
}

func jsonType(kind string) string {
	switch {
	case strings.HasPrefix(kind, "int"), strings.HasPrefix(kind, "uint"):
		return "an integer"
	case strings.HasPrefix(kind, "float"):
		return "a number"
	case kind == "string":
		return "a string"
	case kind == "bool":
		return "a boolean"
	case kind == "slice":
		return "an array"
	case kind == "map", kind == "struct":
		return "an object"
	}
	return "another type"
}

func newID(prefix string) string {
	var b [12]byte
	rand.Read(b[:])
	return prefix + hex.EncodeToString(b[:])
}
