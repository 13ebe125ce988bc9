package server

import (
	"context"
	"fmt"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/gorun-dev/gorun/llm"
)

// The access log: one line per request, written when its response is done, with what the
// generation did. It holds no secret: no header (Authorization, API keys), no query string,
// and the prompt's text only with Config.LogPrompts.
//
//	2026-11-25T09:50:00.123Z POST /v1/completions 200 client=127.0.0.1:52144 in=5 out=12 ttft=23.1ms tps=45.10 time=0.301s

// requestLog gathers what a request's generations did; the handlers reach it via the
// request's context.
type requestLog struct {
	mu         sync.Mutex
	in, out    int // prompt and generated tokens, over all choices
	genTime    time.Duration
	firstToken time.Time // when the first token was generated (zero: none)
	prompt     string    // the first prompt's text (LogPrompts only)
}

type logKey struct{}

// noteGeneration adds one generation's counts to the request's log.
func noteGeneration(ctx context.Context, st llm.Stats, prompt func() string) {
	l, _ := ctx.Value(logKey{}).(*requestLog)
	if l == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.in += st.PromptTokens
	l.out += st.Tokens
	l.genTime += st.GenTime
	if l.prompt == "" && prompt != nil {
		l.prompt = prompt()
	}
}

// noteToken records when the request's first token came.
func noteToken(ctx context.Context) {
	l, _ := ctx.Value(logKey{}).(*requestLog)
	if l == nil {
		return
	}
	l.mu.Lock()
	if l.firstToken.IsZero() {
		l.firstToken = time.Now()
	}
	l.mu.Unlock()
}

// statusWriter remembers the status a handler wrote. Unwrap lets http.ResponseController
// reach the connection's Flush and deadlines.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.ResponseWriter.Write(b)
}

func (w *statusWriter) Flush() {
	if f, ok := w.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// logged serves a request through next and writes its access-log line.
func (s *Server) logged(w http.ResponseWriter, r *http.Request, next func(http.ResponseWriter, *http.Request)) {
	if s.cfg.AccessLog == nil {
		next(w, r)
		return
	}
	start := time.Now()
	rec := &requestLog{}
	sw := &statusWriter{ResponseWriter: w}
	defer func() {
		s.writeLogLine(start, r, sw.status, rec)
	}()
	next(sw, r.WithContext(context.WithValue(r.Context(), logKey{}, rec)))
}

func (s *Server) writeLogLine(start time.Time, r *http.Request, status int, l *requestLog) {
	if status == 0 {
		status = statusClientGone // nothing written: the client left first
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	b := make([]byte, 0, 160)
	b = start.UTC().AppendFormat(b, "2006-01-02T15:04:05.000Z")
	b = fmt.Appendf(b, " %s %s %d client=%s", r.Method, strconv.Quote(r.URL.Path), status, r.RemoteAddr)
	if l.in > 0 || l.out > 0 {
		b = fmt.Appendf(b, " in=%d out=%d", l.in, l.out)
		if !l.firstToken.IsZero() {
			b = fmt.Appendf(b, " ttft=%.1fms", float64(l.firstToken.Sub(start).Microseconds())/1000)
		}
		if l.out > 0 && l.genTime > 0 {
			b = fmt.Appendf(b, " tps=%.2f", float64(l.out)/l.genTime.Seconds())
		}
	}
	b = fmt.Appendf(b, " time=%.3fs", time.Since(start).Seconds())
	if s.cfg.LogPrompts && l.prompt != "" {
		b = fmt.Appendf(b, " prompt=%s", strconv.Quote(l.prompt))
	}
	b = append(b, '\n')
	s.logMu.Lock()
	defer s.logMu.Unlock()
	s.cfg.AccessLog.Write(b)
}
