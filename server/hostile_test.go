package server

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// Regression tests for issue 17: the server under hostile use.

// request sends a request with the given headers (Content-Type application/json unless one is
// given) and returns the status and the body.
func request(t testing.TB, method, url, body string, header ...string) (int, []byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	for i := 0; i+1 < len(header); i += 2 {
		if header[i] == "Host" {
			req.Host = header[i+1]
			continue
		}
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, url, err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

// Row 1: n times the number of prompts is checked without overflow (n = 2^62+1 with 4
// prompts wrapped to 4 choices, and the request looped over 2^62 of them).
func TestServeChoiceCountOverflow(t *testing.T) {
	m := randomModel(t)
	s, url, _ := start(t, m, Config{Parallel: 1})
	for _, body := range []string{
		`{"prompt":["a","b","c","d"],"n":4611686018427387905,"max_tokens":1}`,
		`{"prompt":["a","b"],"n":9223372036854775807,"max_tokens":1}`,
		`{"prompt":"a","n":9223372036854775807,"max_tokens":1}`,
	} {
		code, b := request(t, "POST", url+"/v1/completions", body)
		if code != 400 || !strings.Contains(string(b), `"param":"n"`) {
			t.Errorf("%s: %d %.200s", body, code, b)
		}
	}
	// More prompts than choices allowed are refused before they are tokenized.
	many := `{"prompt":[` + strings.Repeat(`"a",`, 100) + `"a"],"max_tokens":1}`
	if code, b := request(t, "POST", url+"/v1/completions", many); code != 400 || !strings.Contains(string(b), "prompts") {
		t.Errorf("101 prompts: %d %.200s", code, b)
	}
	waitIdle(t, s, 5*time.Second)
}

// smallBufferListener shrinks the send buffer of each accepted connection, so that a client
// that does not read blocks the server's writes after a few kilobytes.
type smallBufferListener struct{ net.Listener }

func (l smallBufferListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetWriteBuffer(8 << 10)
	}
	return c, err
}

// stallingClient sends a request on a connection with a small receive buffer and never
// reads its answer.
func stallingClient(t *testing.T, addr, path, body string) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c.(*net.TCPConn).SetReadBuffer(4 << 10)
	t.Cleanup(func() { c.Close() })
	fmt.Fprintf(c, "POST %s HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s", path, addr, len(body), body)
	return c
}

// stallServer serves a tiny model with one slot on connections of small send buffers, with
// writeTimeout set to timeout (before the server starts, so its goroutines see it). running
// counts the handlers running.
func stallServer(t *testing.T, timeout time.Duration) (s *Server, hs *httptest.Server, running *atomic.Int32) {
	m := randomModel(t)
	s, err := New(Config{Model: m, ModelName: "test-model", Parallel: 1})
	if err != nil {
		t.Fatal(err)
	}
	old := writeTimeout
	writeTimeout = timeout
	t.Cleanup(func() { writeTimeout = old })
	running = new(atomic.Int32)
	hs = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		running.Add(1)
		defer running.Add(-1)
		s.ServeHTTP(w, r)
	}))
	hs.Listener = smallBufferListener{hs.Listener}
	hs.Start()
	t.Cleanup(func() {
		hs.CloseClientConnections()
		hs.Close()
		s.Close()
	})
	return s, hs, running
}

// bigAnswer asks for about 2 choices x 60 tokens x 21 alternatives x 60 bytes: 150 KB, far
// over the buffers (and 2 s more of write deadline).
const bigAnswer = `{"messages":[{"role":"user","content":"x"}],"n":2,"max_tokens":60,"ignore_eos":true,"logprobs":true,"top_logprobs":20}`

// waitBusy waits for a request to hold the server's slot.
func waitBusy(t *testing.T, s *Server) {
	t.Helper()
	for start := time.Now(); ; time.Sleep(time.Millisecond) {
		if busy, _ := s.Stats(); busy == 1 {
			return
		}
		if time.Since(start) > 5*time.Second {
			t.Fatal("the request never started")
		}
	}
}

// Row 2: a client that never reads its (large, non-streamed) answer frees its slot when the
// generation ends, long before the write deadline.
func TestServeNonReadingClientFreesSlot(t *testing.T) {
	s, hs, running := stallServer(t, time.Minute)
	stallingClient(t, strings.TrimPrefix(hs.URL, "http://"), "/v1/chat/completions", bigAnswer)
	waitBusy(t, s)
	waitIdle(t, s, 20*time.Second)
	code, b := request(t, "POST", hs.URL+"/v1/completions", `{"prompt":"a","max_tokens":2}`)
	if code != 200 {
		t.Errorf("the next request: %d %s", code, b)
	}
	if running.Load() != 1 {
		t.Errorf("%d handlers running (want the one writing to the client that does not read)", running.Load())
	}
}

// Row 2: the answer to a client that never reads is written under a deadline: its handler
// ends.
func TestServeNonReadingClientDeadline(t *testing.T) {
	s, hs, running := stallServer(t, 500*time.Millisecond)
	stallingClient(t, strings.TrimPrefix(hs.URL, "http://"), "/v1/chat/completions", bigAnswer)
	waitBusy(t, s)
	for start := time.Now(); running.Load() != 0; time.Sleep(5 * time.Millisecond) {
		if time.Since(start) > 20*time.Second {
			t.Fatal("the handler still writes to the client that does not read")
		}
	}
}

// Row 2, streamed: a streaming client that stops reading loses its stream at the write
// deadline, which frees its slot.
func TestServeNonReadingStreamFreesSlot(t *testing.T) {
	s, hs, _ := stallServer(t, 500*time.Millisecond)
	// 16 choices of 250 tokens with 20 alternatives each is megabytes of events, more than
	// the buffers hold.
	big := `{"messages":[{"role":"user","content":"x"}],"n":16,"max_tokens":250,"ignore_eos":true,"logprobs":true,"top_logprobs":20,"stream":true}`
	stallingClient(t, strings.TrimPrefix(hs.URL, "http://"), "/v1/chat/completions", big)
	waitBusy(t, s)
	waitIdle(t, s, 30*time.Second)
}

// Row 6: a web page cannot drive a local server: JSON endpoints take only application/json
// (text/plain and forms are what a page may send without asking), the Host must name this
// server, and a foreign Origin is refused when no API key is set.
func TestServeCrossOrigin(t *testing.T) {
	m := randomModel(t)
	_, url, _ := start(t, m, Config{Parallel: 1, AllowedHosts: []string{"gorun.lan"}})
	self := strings.TrimPrefix(url, "http://")
	_, port, _ := net.SplitHostPort(self)
	body := `{"prompt":"a","max_tokens":1}`
	for _, c := range []struct {
		name   string
		want   int
		header []string
	}{
		{"text/plain", 415, []string{"Content-Type", "text/plain"}},
		{"form", 415, []string{"Content-Type", "application/x-www-form-urlencoded"}},
		{"no type", 415, []string{"Content-Type", ""}},
		{"latin-1", 415, []string{"Content-Type", "application/json; charset=latin-1"}},
		{"json utf-8", 200, []string{"Content-Type", "application/json; charset=UTF-8"}},
		{"foreign host", 403, []string{"Host", "attacker.example:" + port}},
		{"foreign host, no port", 403, []string{"Host", "attacker.example"}},
		{"localhost", 200, []string{"Host", "localhost:" + port}},
		{"localhost subdomain", 200, []string{"Host", "app.localhost:" + port}},
		{"[::1]", 200, []string{"Host", "[::1]:" + port}},
		{"allowed host", 200, []string{"Host", "GORUN.lan:" + port}},
		{"foreign origin", 403, []string{"Origin", "http://attacker.example"}},
		{"null origin", 403, []string{"Origin", "null"}},
		{"other local port", 403, []string{"Origin", "http://127.0.0.1:1"}},
		{"same origin", 200, []string{"Origin", "http://" + self}},
		{"allowed origin", 200, []string{"Origin", "https://gorun.lan"}},
	} {
		code, b := request(t, "POST", url+"/v1/completions", body, c.header...)
		if code != c.want {
			t.Errorf("%s: %d %s (want %d)", c.name, code, b, c.want)
		}
	}
	if code, b := request(t, "GET", url+"/health", "", "Host", "attacker.example"); code != 403 {
		t.Errorf("/health, foreign host: %d %s", code, b)
	}
	// With an API key a page cannot know, a foreign Origin is not refused (the key is).
	_, url, _ = start(t, m, Config{Parallel: 1, APIKey: "k"})
	if code, b := request(t, "POST", url+"/v1/completions", body, "Origin", "http://app.example", "Authorization", "Bearer k"); code != 200 {
		t.Errorf("foreign origin with the key: %d %s", code, b)
	}
	if code, b := request(t, "POST", url+"/v1/completions", body, "Host", "attacker.example"); code != 403 {
		t.Errorf("foreign host with a key configured: %d %s", code, b)
	}
	// "*" accepts any host and origin.
	_, url, _ = start(t, m, Config{Parallel: 1, AllowedHosts: []string{"*"}})
	if code, b := request(t, "POST", url+"/v1/completions", body, "Host", "anything.example", "Origin", "http://else.example"); code != 200 {
		t.Errorf("allowed *: %d %s", code, b)
	}
}

// Row 9: logit_bias keys are canonical token ids.
func TestServeLogitBiasKeys(t *testing.T) {
	m := randomModel(t)
	_, url, _ := start(t, m, Config{Parallel: 1})
	for _, k := range []string{"+5", " 5 ", "5 ", "05", "-0", "5.0", "0x5", "", "512", "99999999999999999999"} {
		code, b := request(t, "POST", url+"/v1/completions", `{"prompt":"a","max_tokens":1,"logit_bias":{"`+k+`":1}}`)
		if code != 400 || !strings.Contains(string(b), `"param":"logit_bias"`) {
			t.Errorf("key %q: %d %s", k, code, b)
		}
	}
	for _, k := range []string{"0", "5", "511"} {
		if code, b := request(t, "POST", url+"/v1/completions", `{"prompt":"a","max_tokens":1,"logit_bias":{"`+k+`":1}}`); code != 200 {
			t.Errorf("key %q: %d %s", k, code, b)
		}
	}
}

// Row 9: an error quotes at most about 100 bytes of what the client sent.
func TestServeErrorsQuoteLittle(t *testing.T) {
	m := randomModel(t)
	_, url, _ := start(t, m, Config{Parallel: 1})
	long := strings.Repeat("x", 3<<20)
	for _, c := range []struct{ path, body string }{
		{"/v1/completions", `{"model":"` + long + `","prompt":"a"}`},
		{"/v1/completions", `{"` + long + `":1,"prompt":"a"}`},
		{"/v1/completions", `{"prompt":"a","logit_bias":{"` + long + `":1}}`},
		{"/v1/completions", `{"prompt":"a","max_tokens":` + strings.Repeat("1", 3<<20) + `}`},
		{"/v1/chat/completions", `{"messages":[{"role":"` + long + `","content":"a"}]}`},
		{"/" + long, `{}`},
	} {
		code, b := request(t, "POST", url+c.path, c.body)
		if code/100 != 4 || len(b) > 600 {
			t.Errorf("%.40s %.40s: %d, %d bytes: %.300s", c.path, c.body, code, len(b), b)
		}
	}
}

// Row 9: /tokenize's answer is bounded: with pieces, a 3 MB text answered 25 MB.
func TestServeTokenizeResponseBound(t *testing.T) {
	m := randomModel(t)
	_, url, _ := start(t, m, Config{Parallel: 1})
	text := strings.Repeat("a b\\u0001", (3<<20)/9)
	for _, pieces := range []bool{true, false} {
		code, b := request(t, "POST", url+"/tokenize", fmt.Sprintf(`{"content":"%s","with_pieces":%v}`, text, pieces))
		if len(b) > 2*(4<<20) || code == 200 && !json.Valid(b) {
			t.Errorf("with_pieces %v: %d, %d bytes", pieces, code, len(b))
		}
		if code != 200 && !strings.Contains(string(b), "response_too_large") {
			t.Errorf("with_pieces %v: %d %.300s", pieces, code, b)
		}
	}
	// /detokenize: many ids of long tokens.
	var ids strings.Builder
	for i := range (3 << 20) / 4 {
		if i > 0 {
			ids.WriteByte(',')
		}
		ids.WriteString("511")
	}
	code, b := request(t, "POST", url+"/detokenize", `{"tokens":[`+ids.String()+`]}`)
	if len(b) > 2*(4<<20) || code != 200 && !strings.Contains(string(b), "response_too_large") {
		t.Errorf("detokenize: %d, %d bytes %.200s", code, len(b), b)
	}
	// An ordinary text still tokenizes, with pieces.
	if code, b := request(t, "POST", url+"/tokenize", `{"content":"a b c","with_pieces":true}`); code != 200 || !strings.Contains(string(b), `"piece"`) {
		t.Errorf("small text: %d %s", code, b)
	}
}
