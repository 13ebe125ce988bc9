package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gorun-dev/gorun/internal/fixtures"
	"github.com/gorun-dev/gorun/internal/testmodel"
)

func TestServeUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"serve"},
		{"serve", "-m", "x.gguf", "--port", "70000"},
		{"serve", "-m", "x.gguf", "--parallel", "0"},
		{"serve", "-m", "x.gguf", "--queue", "-1"},
		{"serve", "-m", "x.gguf", "-n", "-2"},
		{"serve", "-m", "x.gguf", "-n", "0"},
		{"serve", "-m", "x.gguf", "extra"},
	} {
		if code, _, errs := gorun(args...); code != exitUsage || !strings.Contains(errs, "gorun serve") {
			t.Errorf("%q: exit %d, stderr %q", args, code, errs)
		}
	}
	if code, _, errs := gorun("serve", "-m", filepath.Join(t.TempDir(), "missing.gguf")); code != exitError {
		t.Errorf("missing model: exit %d %q", code, errs)
	}
	// Slots that do not fit the memory limit are refused before the server starts.
	c, _ := testmodel.Preset("tiny")
	model := filepath.Join(t.TempDir(), "m.gguf")
	if err := testmodel.Write(model, c); err != nil {
		t.Fatal(err)
	}
	code, _, errs := gorun("serve", "-m", model, "--parallel", "1000", "--mem-limit", "64M", "--port", "0")
	if code != exitError || !strings.Contains(errs, "1000 slots") || !strings.Contains(errs, "lower --parallel") {
		t.Errorf("1000 slots in 64 MiB: exit %d %q", code, errs)
	}
}

// serveFor runs `gorun serve` in-process until the returned stop is called; stop returns
// serve's error.
func serveFor(t *testing.T, args ...string) (url string, stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	addr := make(chan string, 1)
	errc := make(chan error, 1)
	var stderr strings.Builder
	go func() {
		errc <- serve(ctx, append([]string{"--port", "0", "-t", "2"}, args...), &stderr, func(a string) { addr <- a })
	}()
	select {
	case a := <-addr:
		url = "http://" + a
	case err := <-errc:
		cancel()
		t.Fatalf("serve: %v\n%s", err, stderr.String())
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not start")
	}
	return url, func() error {
		cancel()
		select {
		case err := <-errc:
			return err
		case <-time.After(30 * time.Second):
			t.Fatal("serve did not stop")
			return nil
		}
	}
}

// completionText posts a /v1/completions request and returns its one choice's text.
func completionText(t *testing.T, url, body string) string {
	t.Helper()
	resp, err := http.Post(url+"/v1/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var r struct {
		Choices []struct {
			Text string `json:"text"`
		} `json:"choices"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&r); err != nil || resp.StatusCode != 200 || len(r.Choices) != 1 {
		t.Fatalf("/v1/completions %s: %d %v %+v", body, resp.StatusCode, err, r)
	}
	return r.Choices[0].Text
}

func startStream(t *testing.T, url, body string) *bufio.Reader {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode != 200 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	br := bufio.NewReader(resp.Body)
	if _, err := br.ReadString('\n'); err != nil {
		t.Fatal(err)
	}
	return br
}

// `gorun serve` answers on loopback, and on shutdown lets an in-flight stream finish.
func TestServeCommandGracefulShutdown(t *testing.T) {
	c, _ := testmodel.Preset("tiny")
	c.NCtx = 512
	model := filepath.Join(t.TempDir(), "m.gguf")
	if err := testmodel.Write(model, c); err != nil {
		t.Fatal(err)
	}
	url, stop := serveFor(t, "-m", model, "--alias", "tiny", "--api-key", "k")
	req, _ := http.NewRequest("GET", url+"/v1/models", nil)
	req.Header.Set("Authorization", "Bearer k")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), `"id":"tiny"`) {
		t.Fatalf("/v1/models: %d %s", resp.StatusCode, b)
	}
	req, _ = http.NewRequest("POST", url+"/v1/completions", strings.NewReader(`{"prompt":"a","max_tokens":400,"ignore_eos":true,"stream":true}`))
	req.Header.Set("Authorization", "Bearer k")
	req.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("stream: %v %v", err, resp)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	br.ReadString('\n')
	if err := stop(); err != nil {
		t.Errorf("serve returned %v", err)
	}
	rest, _ := io.ReadAll(br)
	if !strings.HasSuffix(string(rest), "data: [DONE]\n\n") || !strings.Contains(string(rest), `"finish_reason":"length"`) {
		t.Errorf("the in-flight stream did not finish: ...%q", rest[max(0, len(rest)-300):])
	}
}

// Past the grace period, running streams end with an error event saying the server stops.
func TestServeCommandShutdownGraceOver(t *testing.T) {
	model := fixtures.Path(t, "gpt2-tiny-q8_0.gguf")
	url, stop := serveFor(t, "-m", model, "--shutdown-grace", "100ms")
	br := startStream(t, url+"/v1/completions", `{"prompt":"In the beginning","max_tokens":500,"ignore_eos":true,"stream":true}`)
	start := time.Now()
	if err := stop(); err != nil {
		t.Errorf("serve returned %v", err)
	}
	rest, _ := io.ReadAll(br)
	if !strings.Contains(string(rest), "shutting down") || time.Since(start) > 5*time.Second {
		t.Errorf("after %v: ...%q", time.Since(start), rest[max(0, len(rest)-300):])
	}
}

// The server's greedy completion is what `gorun -m M -p P -n 10 --temp 0` prints.
func TestServeGreedyEqualsCLI(t *testing.T) {
	model := fixtures.Path(t, "gpt2-tiny-q8_0.gguf")
	const prompt = "And God said"
	code, want, errs := gorun("-m", model, "-p", prompt, "-n", "10", "--temp", "0", "--no-display-prompt", "-t", "2")
	if code != 0 {
		t.Fatalf("gorun: %d %s", code, errs)
	}
	url, stop := serveFor(t, "-m", model)
	defer stop()
	got := completionText(t, url, `{"prompt":"`+prompt+`","max_tokens":10,"temperature":0}`)
	if got != want {
		t.Errorf("server %q, gorun %q", got, want)
	}
}

// A request without max_tokens generates as llama-server's does by default (n_predict -1):
// until the end of text or a full context; `gorun serve -n N` sets another default.
func TestServeDefaultMaxTokens(t *testing.T) {
	c, _ := testmodel.Preset("tiny") // a context of 64 tokens
	model := filepath.Join(t.TempDir(), "m.gguf")
	if err := testmodel.Write(model, c); err != nil {
		t.Fatal(err)
	}
	const body = `{"prompt":"a","temperature":0,"ignore_eos":true}`
	for _, tc := range []struct {
		args   []string
		tokens int
	}{
		{nil, c.NCtx - 1}, // the context is full
		{[]string{"-n", "5"}, 5},
		{[]string{"--n-predict", "7"}, 7},
	} {
		url, stop := serveFor(t, append([]string{"-m", model}, tc.args...)...)
		for _, path := range []string{"/v1/completions", "/completion"} {
			resp, err := http.Post(url+path, "application/json", strings.NewReader(body))
			if err != nil {
				t.Fatal(err)
			}
			var r struct {
				Usage struct {
					CompletionTokens int `json:"completion_tokens"`
				} `json:"usage"`
				TokensPredicted int `json:"tokens_predicted"`
			}
			err = json.NewDecoder(resp.Body).Decode(&r)
			resp.Body.Close()
			if got := r.Usage.CompletionTokens + r.TokensPredicted; err != nil || got != tc.tokens {
				t.Errorf("serve %q, %s without max_tokens: %d tokens (%v), want %d", tc.args, path, got, err, tc.tokens)
			}
		}
		stop()
	}
}

// --allowed-hosts adds host names to IP addresses and localhost (issue 17 row 6): the Host
// header must name one of them, and --host's name counts.
func TestServeCommandAllowedHosts(t *testing.T) {
	c, _ := testmodel.Preset("tiny")
	model := filepath.Join(t.TempDir(), "m.gguf")
	if err := testmodel.Write(model, c); err != nil {
		t.Fatal(err)
	}
	url, stop := serveFor(t, "-m", model, "--host", "localhost", "--allowed-hosts", "a.lan, b.lan", "--allowed-hosts", "c.lan")
	defer stop()
	for host, want := range map[string]int{"a.lan": 200, "b.lan:1234": 200, "C.LAN": 200, "localhost": 200, "127.0.0.1": 200, "d.lan": 403, "lan": 403} {
		req, _ := http.NewRequest("GET", url+"/health", nil)
		req.Host = host
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("Host %s: %d (want %d)", host, resp.StatusCode, want)
		}
	}
	if got := allowedHosts("0.0.0.0", nil); got != nil {
		t.Errorf("--host 0.0.0.0 adds %q", got)
	}
	if got := allowedHosts("my.box", []string{"x,,y"}); strings.Join(got, " ") != "x y my.box" {
		t.Errorf("allowedHosts: %q", got)
	}
}
