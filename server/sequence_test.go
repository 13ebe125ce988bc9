package server

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/gorun-dev/gorun/internal/testmodel"
	"github.com/gorun-dev/gorun/llm"
)

// seqRequest is one request of a FuzzServeSequence input.
type seqRequest struct {
	method, path string
	header       http.Header
	body         string
	concurrent   bool // runs alongside the requests after it
	gone         bool // its client is gone before the server reads it
	keyed        bool // sent to the server that requires an API key
}

// maxSeqRequests bounds the requests of one fuzz input.
const maxSeqRequests = 8

// parseSequence reads requests separated by "\x1e". Each is a head, a blank line, and a body.
// The head's first line is "[&!#]*METHOD PATH" (& concurrent, ! client gone, # keyed
// server); its other lines are headers "Name: value", an empty value removing a default
// (Host 127.0.0.1:8080, Content-Type application/json, and on the keyed server the key).
func parseSequence(script string) []seqRequest {
	var reqs []seqRequest
	for _, rec := range strings.SplitN(script, "\x1e", maxSeqRequests+1) {
		if len(reqs) == maxSeqRequests {
			break
		}
		head, body, _ := strings.Cut(rec, "\n\n")
		lines := strings.Split(head, "\n")
		r := seqRequest{header: http.Header{}, body: body}
		first := strings.TrimLeft(lines[0], "&!#")
		flags := lines[0][:len(lines[0])-len(first)]
		r.concurrent, r.gone, r.keyed = strings.Contains(flags, "&"), strings.Contains(flags, "!"), strings.Contains(flags, "#")
		r.method, r.path, _ = strings.Cut(first, " ")
		r.header.Set("Host", "127.0.0.1:8080")
		r.header.Set("Content-Type", "application/json")
		if r.keyed {
			r.header.Set("Authorization", "Bearer k")
		}
		for _, l := range lines[1:] {
			name, value, ok := strings.Cut(l, ":")
			if !ok {
				continue
			}
			if value = strings.TrimSpace(value); value == "" {
				r.header.Del(name)
			} else {
				r.header.Set(name, value)
			}
		}
		reqs = append(reqs, r)
	}
	return reqs
}

// checkResponse reports what no request may get: a 5xx other than 503 (busy), a status the
// server does not give, a body that is not the JSON or event stream it says (with t.Errorf:
// it runs in the requests' goroutines).
func checkResponse(t *testing.T, r seqRequest, w *httptest.ResponseRecorder) {
	switch w.Code {
	case 200, 400, 401, 403, 404, 405, 413, 415, 503:
	case 301, 307, 308:
		// net/http's mux sends a path that is not clean ("/a/../b", "//b") to its clean form.
		if w.Header().Get("Location") == "" {
			t.Errorf("%s %q: %d without a Location", r.method, r.path, w.Code)
		}
		return
	default:
		t.Errorf("%s %q: status %d: %.500s", r.method, r.path, w.Code, w.Body.String())
	}
	body := w.Body.Bytes()
	switch ct := w.Header().Get("Content-Type"); ct {
	case "application/json":
		if !json.Valid(body) {
			t.Errorf("%s %q: %d, invalid JSON %.500q", r.method, r.path, w.Code, body)
		}
		if w.Code != 200 && !bytes.HasPrefix(body, []byte(`{"error":{`)) {
			t.Errorf("%s %q: %d without an error object: %.500s", r.method, r.path, w.Code, body)
		}
	case "text/event-stream":
		sc := bufio.NewScanner(bytes.NewReader(body))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			if ev, ok := strings.CutPrefix(sc.Text(), "data: "); ok && ev != "[DONE]" && !json.Valid([]byte(ev)) {
				t.Errorf("%s %q: invalid event %.500q", r.method, r.path, ev)
			}
		}
	case "application/x-ndjson": // ollama's streams
		for _, line := range bytes.Split(bytes.TrimSpace(body), []byte("\n")) {
			if !json.Valid(line) {
				t.Errorf("%s %q: invalid NDJSON line %.500q", r.method, r.path, line)
			}
		}
	case "text/plain; charset=utf-8", "text/plain; version=0.0.4":
		// ollama's "Ollama is running" at /, Prometheus text at /metrics: nothing else.
		if p := strings.SplitN(strings.SplitN(r.path, "#", 2)[0], "?", 2)[0]; w.Code == 200 && p != "/" && p != "/metrics" {
			t.Errorf("%s %q: %d, plain text: %.500s", r.method, r.path, w.Code, body)
		}
	default:
		t.Errorf("%s %q: %d, Content-Type %q: %.500s", r.method, r.path, w.Code, ct, body)
	}
}

// Sequences of requests, some concurrent, some from clients already gone, against the
// handler of a tiny random model: no response is a 500 (a panic is one) or malformed, and
// every slot is free at the end.
func FuzzServeSequence(f *testing.F) {
	for _, seed := range []string{
		"POST /v1/completions\n\n{\"prompt\":\"a b\",\"max_tokens\":3}",
		"&POST /v1/completions\n\n{\"prompt\":[\"a\",\"b\"],\"n\":1,\"max_tokens\":4,\"stream\":true}\x1e&POST /v1/chat/completions\n\n{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"n\":3,\"logprobs\":true,\"top_logprobs\":20,\"max_tokens\":5}\x1ePOST /completion\n\n{\"prompt\":\"x\",\"n_predict\":4,\"stream\":true}",
		"!POST /v1/completions\n\n{\"prompt\":\"a\",\"max_tokens\":50}\x1eGET /health\n\n",
		"POST /v1/completions\nContent-Type: text/plain\n\n{\"prompt\":\"a\"}\x1ePOST /v1/completions\nHost: evil.example\n\n{}\x1ePOST /v1/completions\nOrigin: http://evil.example\n\n{}",
		"#POST /v1/completions\n\n{\"prompt\":\"a\",\"max_tokens\":2}\x1e#POST /v1/completions\nAuthorization:\n\n{}\x1e#GET /v1/models\nOrigin: http://x.example\n\n",
		"POST /tokenize\n\n{\"content\":\"a b c\",\"with_pieces\":true}\x1ePOST /detokenize\n\n{\"tokens\":[1,2,511]}",
		"POST /v1/completions\n\n{\"prompt\":[\"a\",\"b\",\"c\",\"d\"],\"n\":4611686018427387905}\x1ePOST /v1/completions\n\n{\"prompt\":\"a\",\"logit_bias\":{\"+5\":1}}",
		"&POST /v1/completions\n\n{\"prompt\":\"a\",\"max_tokens\":20,\"echo\":true,\"logprobs\":5}\x1e&!POST /v1/chat/completions\n\n{\"messages\":[{\"role\":\"user\",\"content\":\"a\"}],\"stream\":true}\x1e&POST /completion\n\n{\"prompt\":[1,2,3]}\x1e&POST /v1/completions\n\n{\"prompt\":\"q\",\"n\":3}\x1ePUT /v1/completions\n\n",
	} {
		f.Add(seed)
	}
	// A short context and few choices bound the work of one input (a request may ask for
	// every token the context holds), so that a few seconds try many sequences.
	c, err := testmodel.Preset("tiny")
	if err != nil {
		f.Fatal(err)
	}
	path := filepath.Join(f.TempDir(), "random.gguf")
	if err := testmodel.Write(path, c); err != nil {
		f.Fatal(err)
	}
	m, err := llm.Load(path, llm.Options{Threads: 1, ContextLength: 40})
	if err != nil {
		f.Fatal(err)
	}
	f.Cleanup(func() { m.Close() })
	open := func(key string) *Server {
		s, err := New(Config{Model: m, Parallel: 2, Queue: 2, MaxChoices: 3, DefaultMaxTokens: 8, MaxBodyBytes: 1 << 16, APIKey: key})
		if err != nil {
			f.Fatal(err)
		}
		f.Cleanup(func() { s.Close() })
		return s
	}
	plain, keyed := open(""), open("k")
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	f.Fuzz(func(t *testing.T, script string) {
		var wg sync.WaitGroup
		for _, r := range parseSequence(script) {
			if !strings.HasPrefix(r.path, "/") {
				continue // no request line has another path (but "*", which no endpoint takes)
			}
			req, err := http.NewRequest(r.method, "http://127.0.0.1:8080"+r.path, strings.NewReader(r.body))
			if err != nil {
				continue
			}
			req.Header = r.header
			req.Host = r.header.Get("Host")
			if r.gone {
				req = req.WithContext(gone)
			}
			s := plain
			if r.keyed {
				s = keyed
			}
			run := func() {
				w := httptest.NewRecorder()
				s.ServeHTTP(w, req)
				if !r.gone {
					checkResponse(t, r, w)
				} else if w.Code >= 500 && w.Code != 503 {
					t.Errorf("%s %q (client gone): %d %.500s", r.method, r.path, w.Code, w.Body.String())
				}
			}
			if r.concurrent {
				wg.Go(run)
			} else {
				run()
			}
		}
		wg.Wait()
		for _, s := range []*Server{plain, keyed} {
			if busy, queued := s.Stats(); busy != 0 || queued != 0 {
				t.Errorf("after the sequence: %d slots busy, %d requests queued", busy, queued)
			}
		}
	})
}
