package loadgen

import (
	"context"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/internal/testmodel"
	"github.com/gorun-dev/gorun/llm"
	"github.com/gorun-dev/gorun/server"
)

func serveRandom(t *testing.T, parallel int) string {
	t.Helper()
	c, err := testmodel.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	c.NCtx = 256
	path := filepath.Join(t.TempDir(), "m.gguf")
	if err := testmodel.Write(path, c); err != nil {
		t.Fatal(err)
	}
	m, err := llm.Load(path, llm.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	s, err := server.New(server.Config{Model: m, Parallel: parallel})
	if err != nil {
		t.Fatal(err)
	}
	hs := httptest.NewServer(s)
	t.Cleanup(func() { hs.Close(); s.Close() })
	return hs.URL
}

// Concurrent clients get every token they asked for, and the same text as the prompt alone.
func TestRunAgainstGorunServer(t *testing.T) {
	url := serveRandom(t, 4)
	cfg := Config{URL: url, Clients: 4, Requests: 12, PrefixWords: 40, SuffixWords: 8, MaxTokens: 12, Seed: 7, Distinct: 6}
	solo := cfg
	solo.Clients, solo.Requests = 1, 6
	ref, err := Run(context.Background(), solo)
	if err != nil {
		t.Fatal(err)
	}
	res, err := Run(context.Background(), cfg)
	if err != nil {
		t.Fatal(err)
	}
	s := res.Summarize(ref.Texts())
	if s.Failed != 0 || s.Requests != 12 || s.Mismatched != 0 {
		t.Fatalf("summary %+v", s)
	}
	for i, r := range res.Requests {
		// The random model's tokens each carry text, so every token is one chunk.
		if r.Tokens != 12 || r.TTFT <= 0 || r.TTFT > r.Total || len(r.Received) != 12 {
			t.Errorf("request %d: %d tokens, ttft %v, total %v", i, r.Tokens, r.TTFT, r.Total)
		}
	}
	if s.TokensPerSecond <= 0 || s.TTFTp50 > s.TTFTp99 || s.TTFTp99 > s.TTFTmax {
		t.Errorf("statistics %+v", s)
	}
	var b strings.Builder
	s.Report(&b, "test")
	if !strings.Contains(b.String(), "Output token throughput (tok/s):") {
		t.Errorf("report:\n%s", b.String())
	}
}

func TestPromptsShareTheirPrefix(t *testing.T) {
	p := Prompts(Config{Requests: 3, PrefixWords: 20, SuffixWords: 5, Seed: 1})
	if len(p) != 3 || p[0] == p[1] {
		t.Fatalf("prompts %q", p)
	}
	pre := p[0][:strings.Index(p[0], "\n\n")]
	for _, q := range p {
		if !strings.HasPrefix(q, pre+"\n\nRequest ") || len(strings.Fields(q)) != 20+2+5 {
			t.Errorf("prompt %q", q)
		}
	}
}

func TestConfigValidate(t *testing.T) {
	for _, c := range []Config{{}, {URL: "x", Clients: 0, Requests: 1, MaxTokens: 1}, {URL: "x", Clients: 2, Requests: 1, MaxTokens: 1},
		{URL: "x", Clients: 1, Requests: 1, MaxTokens: 0}, {URL: "x", Clients: 1, Requests: 1, MaxTokens: 1, PrefixWords: -1}} {
		if c.Validate() == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}
