package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/hub/hubtest"
	"github.com/gorun-dev/gorun/internal/fixtures"
)

// Issue 21 item 3: models by name. -hf ORG/NAME:QUANT pulls and runs (run, bench, serve, and
// ollama's "run NAME PROMPT"); list, show and rm work over the cache; /v1/models says what the
// server serves.
func TestModelsByName(t *testing.T) {
	q8 := fixtures.Path(t, "gpt2-tiny-q8_0.gguf")
	q8Bytes, err := os.ReadFile(q8)
	if err != nil {
		t.Fatal(err)
	}
	f16Bytes, err := os.ReadFile(fixtures.Path(t, "gpt2-tiny-f16.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	const commit = "0123456789abcdef0123456789abcdef01234567"
	s := hubtest.New(map[string]*hubtest.Repo{
		"test/tiny-GGUF": {Commit: commit, Files: map[string][]byte{"tiny.Q8_0.gguf": q8Bytes, "tiny.F16.gguf": f16Bytes}},
	})
	defer s.Close()
	t.Setenv("HF_HOME", t.TempDir())
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("HF_ENDPOINT", s.URL)
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_HUB_OFFLINE", "")
	if runtime.GOOS == "linux" {
		t.Setenv("XDG_CACHE_HOME", t.TempDir())
	}
	if code, out, errs := gorun("list"); code != 0 || strings.Count(out, "\n") != 1 || !strings.HasPrefix(out, "NAME") {
		t.Fatalf("list of an empty cache: exit %d, %q, %s", code, out, errs)
	}
	gen := []string{"-p", "In the beginning", "-n", "8", "--temp", "0", "--no-display-prompt", "-t", "2"}
	_, want, _ := gorun(append([]string{"-m", q8}, gen...)...)
	code, got, errs := gorun(append([]string{"-hf", "test/tiny-GGUF:Q8_0"}, gen...)...)
	if code != 0 || got != want {
		t.Fatalf("-hf: exit %d, %q (want %q): %s", code, got, want, errs)
	}
	if code, got, errs := gorun("run", "test/tiny-GGUF:q8_0", "In the beginning", "-n", "8", "--temp", "0", "--no-display-prompt", "-t", "2"); code != 0 || got != want {
		t.Errorf("run NAME PROMPT: exit %d, %q (want %q): %s", code, got, want, errs)
	}
	if code, _, errs := gorun("-hf", "test/tiny-GGUF", "-m", q8, "-p", "x"); code != 2 || !strings.Contains(errs, "-hf") {
		t.Errorf("-hf and -m: exit %d, %s", code, errs)
	}

	code, out, errs := gorun("list")
	if code != 0 || !strings.Contains(out, "test/tiny-GGUF:Q8_0") || !strings.Contains(out, "gpt2") || strings.Contains(out, "F16") {
		t.Errorf("list: exit %d, %q, %s", code, out, errs)
	}
	code, out, errs = gorun("show", "test/tiny-GGUF:Q8_0")
	for _, want := range []string{"architecture", "gpt2", "quantization", "Q8_0", "context length", "parameters", "size"} {
		if code != 0 || !strings.Contains(out, want) {
			t.Errorf("show: exit %d, %q lacks %q: %s", code, out, want, errs)
		}
	}
	if code, out, _ := gorun("show", q8); code != 0 || !strings.Contains(out, "Q8_0") {
		t.Errorf("show FILE: exit %d, %q", code, out)
	}
	if code, _, errs := gorun("show", "test/other"); code != 1 || !strings.Contains(errs, "not in the cache") {
		t.Errorf("show of what is not cached: exit %d, %s", code, errs)
	}
	if code, out, errs := gorun("bench", "-hf", "test/tiny-GGUF:Q8_0", "-p", "8", "-n", "4", "-r", "1", "-t", "2"); code != 0 || !strings.Contains(out, "tg4") {
		t.Errorf("bench -hf: exit %d, %q, %s", code, out, errs)
	}

	url, stop := serveFor(t, "-hf", "test/tiny-GGUF:Q8_0")
	resp, err := http.Get(url + "/v1/models")
	if err != nil {
		t.Fatal(err)
	}
	var models struct {
		Data []struct {
			ID   string         `json:"id"`
			Meta map[string]any `json:"meta"`
		} `json:"data"`
	}
	json.NewDecoder(resp.Body).Decode(&models)
	resp.Body.Close()
	stop()
	if len(models.Data) != 1 || models.Data[0].Meta["architecture"] != "gpt2" || models.Data[0].Meta["type"] != "q8_0" ||
		models.Data[0].Meta["n_params"].(float64) < 1000 || models.Data[0].Meta["size"].(float64) < 1000 {
		t.Errorf("/v1/models: %+v", models)
	}

	code, out, errs = gorun("rm", "test/tiny-GGUF:Q8_0")
	if code != 0 || !strings.Contains(out, "removed ") {
		t.Errorf("rm: exit %d, %q, %s", code, out, errs)
	}
	if _, out, _ := gorun("list"); strings.Contains(out, "tiny-GGUF") {
		t.Errorf("after rm, list: %q", out)
	}
	if code, _, errs := gorun("rm", "test/tiny-GGUF"); code != 1 || !strings.Contains(errs, "not in the Hub cache") {
		t.Errorf("rm of what is gone: exit %d, %s", code, errs)
	}
}

// Issue 21 item 5: the server logs one line per request (method, path, status, client, tokens
// in and out, time to first token, tokens per second), never the API key or, unless -v, the
// prompt; --log-file also writes it to a file.
func TestServeAccessLog(t *testing.T) {
	model := fixtures.Path(t, "gpt2-tiny-f16.gguf")
	const prompt, key = "In the beginning God created", "sekrit-key-123"
	for _, verbose := range []bool{false, true} {
		logFile := filepath.Join(t.TempDir(), "serve.log")
		args := []string{"-m", model, "--log-file", logFile, "--api-key", key}
		if verbose {
			args = append(args, "-v")
		}
		url, stop := serveFor(t, args...)
		post := func(body, auth string) int {
			req, _ := http.NewRequest("POST", url+"/v1/completions?api_key="+key, strings.NewReader(body))
			req.Header.Set("Authorization", "Bearer "+auth)
			req.Header.Set("Content-Type", "application/json")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			return resp.StatusCode
		}
		body := fmt.Sprintf(`{"prompt":%q,"max_tokens":5,"temperature":0,"ignore_eos":true}`, prompt)
		if c := post(body, key); c != 200 {
			t.Fatalf("completion: %d", c)
		}
		if c := post(strings.Replace(body, "}", `,"stream":true}`, 1), key); c != 200 {
			t.Fatalf("stream: %d", c)
		}
		if c := post(body, "wrong"); c != 401 {
			t.Fatalf("wrong key: %d", c)
		}
		stop()
		b, err := os.ReadFile(logFile)
		if err != nil {
			t.Fatal(err)
		}
		log := string(b)
		lines := regexp.MustCompile(`(?m)^\d{4}-\d\d-\d\dT[0-9:.]+Z POST "/v1/completions" 200 client=127\.0\.0\.1:\d+ in=5 out=5 ttft=[0-9.]+ms tps=[0-9.]+ time=[0-9.]+s`).FindAllString(log, -1)
		if len(lines) != 2 || !regexp.MustCompile(`(?m)POST "/v1/completions" 401 client=127\.0\.0\.1:\d+ time=`).MatchString(log) {
			t.Errorf("access log (verbose %v):\n%s", verbose, log)
		}
		if strings.Contains(log, key) {
			t.Errorf("the API key is in the log:\n%s", log)
		}
		if strings.Contains(log, prompt) != verbose {
			t.Errorf("prompt text in the log: %v, want %v (-v):\n%s", !verbose, verbose, log)
		}
	}
}

// Issue 21 item 11: pull with the Hub out of reach says so, naming HF_HUB_OFFLINE and
// HF_ENDPOINT, instead of a raw dial error; what the cache has is used without the Hub.
func TestPullUnreachable(t *testing.T) {
	q8Bytes, err := os.ReadFile(fixtures.Path(t, "gpt2-tiny-q8_0.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	const commit = "0123456789abcdef0123456789abcdef01234567"
	s := hubtest.New(map[string]*hubtest.Repo{"test/tiny-GGUF": {Commit: commit, Files: map[string][]byte{"tiny.Q8_0.gguf": q8Bytes}}})
	t.Setenv("HF_HOME", t.TempDir())
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("HF_ENDPOINT", s.URL)
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_HUB_OFFLINE", "")
	code, cached, errs := gorun("pull", "test/tiny-GGUF:Q8_0")
	if code != 0 {
		t.Fatalf("pull: exit %d: %s", code, errs)
	}
	s.Close() // the Hub is gone: connections are refused
	code, _, errs = gorun("pull", "test/other-GGUF")
	if code != 1 || !strings.Contains(errs, "cannot reach the Hugging Face Hub") || !strings.Contains(errs, "HF_HUB_OFFLINE=1") ||
		!strings.Contains(errs, "HF_ENDPOINT") || strings.Count(errs, "\n") != 1 {
		t.Errorf("unreachable: exit %d, stderr %q", code, errs)
	}
	if code, out, errs := gorun("pull", "test/tiny-GGUF:Q8_0"); code != 0 || out != cached || !strings.Contains(errs, "using the cached snapshot") {
		t.Errorf("unreachable, cached: exit %d, %q (want %q), stderr %q", code, out, cached, errs)
	}
}
