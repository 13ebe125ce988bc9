package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gorun-dev/gorun/internal/loadgen"
)

const benchServeHelp = `gorun bench-serve --url http://127.0.0.1:8080 [--clients 8,32] [-n 64] [--check]: load-test a server

Sends concurrent streamed /v1/completions requests to a running server (gorun serve,
llama-server, or any OpenAI-compatible one) and reports output tokens/s, time to first token and
time per output token (p50/p99), as vLLM's benchmark_serving. Each prompt is a shared prefix
(about --prefix-words tokens, like a system prompt) plus a unique suffix; requests are greedy and
generate exactly -n tokens (ignore_eos). --check first runs every prompt alone and then counts the
loaded requests whose text differs from it.`

func cmdBenchServe(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench-serve", benchServeHelp, stderr)
	url := fs.String("url", "http://127.0.0.1:8080", "the server's base `URL`")
	clients := fs.String("clients", "8", "concurrent clients, comma-separated for several runs (e.g. 1,8,32)")
	requests := fs.Int("requests", 0, "requests per run (default: 4 per client)")
	prefix := fs.Int("prefix-words", 256, "words of the shared prefix (about one token each)")
	suffix := fs.Int("suffix-words", 32, "words unique to each request")
	ntok := fs.Int("n", 64, "tokens generated per request")
	distinct := fs.Int("distinct", 0, "different prompts (0: one per request)")
	seed := fs.Uint64("seed", 1, "chooses the prompts' words")
	check := fs.Bool("check", false, "run each prompt alone first and count loaded texts that differ")
	noCache := fs.Bool("no-cache-prompt", false, "send cache_prompt false: the server evaluates every prompt whole")
	apiKey := fs.String("api-key", "", "bearer token to send")
	model := fs.String("model", "", "the requests' model field")
	label := fs.String("label", "", "a name for the server in the report")
	output := fs.String("o", "text", "output format: text, md or json")
	pos, err := parseFlags(fs, args)
	switch {
	case err != nil:
		return err
	case len(pos) > 0:
		return usageError(fs, stderr, "unexpected argument %q", pos[0])
	case *output != "text" && *output != "md" && *output != "json":
		return usageError(fs, stderr, "-o %q: want text, md or json", *output)
	}
	counts, err := parseCounts(*clients)
	if err != nil {
		return usageError(fs, stderr, "--clients: %v", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	name := *label
	if name == "" {
		name = *url
	}
	var rows []benchServeRow
	for _, n := range counts {
		cfg := loadgen.Config{URL: *url, APIKey: *apiKey, Model: *model, Clients: n, Requests: *requests,
			PrefixWords: *prefix, SuffixWords: *suffix, MaxTokens: *ntok, Seed: *seed, Distinct: *distinct, NoPromptCache: *noCache}
		if cfg.Requests == 0 {
			cfg.Requests = 4 * n
		}
		if err := cfg.Validate(); err != nil {
			return usageError(fs, stderr, "%v", err)
		}
		row, err := benchServeOnce(ctx, cfg, *check)
		if err != nil {
			return err
		}
		if *output == "text" {
			row.Summary.Report(stdout, fmt.Sprintf("%s, %d clients", name, n))
		}
		rows = append(rows, row)
	}
	switch *output {
	case "md":
		writeServeTable(stdout, name, rows)
	case "json":
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(rows)
	}
	return nil
}

// benchServeRow is one run's numbers (times in milliseconds).
type benchServeRow struct {
	Clients      int     `json:"clients"`
	Requests     int     `json:"requests"`
	Failed       int     `json:"failed"`
	OutputTokens int     `json:"output_tokens"`
	WallS        float64 `json:"duration_s"`
	TokPerS      float64 `json:"output_tokens_per_s"`
	TTFTp50      float64 `json:"ttft_p50_ms"`
	TTFTp99      float64 `json:"ttft_p99_ms"`
	TPOTp50      float64 `json:"tpot_p50_ms"`
	TPOTp99      float64 `json:"tpot_p99_ms"`
	Checked      bool    `json:"checked"`
	Mismatched   int     `json:"texts_differing"`

	Summary loadgen.Summary `json:"-"`
}

func benchServeOnce(ctx context.Context, cfg loadgen.Config, check bool) (benchServeRow, error) {
	var ref map[int]string
	if check {
		solo := cfg
		solo.Clients = 1
		solo.Requests = len(loadgen.Prompts(cfg))
		res, err := loadgen.Run(ctx, solo)
		if err != nil {
			return benchServeRow{}, err
		}
		if s := res.Summarize(nil); s.Failed > 0 {
			return benchServeRow{}, fmt.Errorf("the prompts run alone: %d failed, the first: %v", s.Failed, s.FirstError)
		}
		ref = res.Texts()
	}
	res, err := loadgen.Run(ctx, cfg)
	if err != nil {
		return benchServeRow{}, err
	}
	s := res.Summarize(ref)
	ms := func(d time.Duration) float64 { return float64(d) / 1e6 }
	return benchServeRow{Clients: cfg.Clients, Requests: s.Requests, Failed: s.Failed, OutputTokens: s.OutputTokens,
		WallS: s.Wall.Seconds(), TokPerS: s.TokensPerSecond, TTFTp50: ms(s.TTFTp50), TTFTp99: ms(s.TTFTp99),
		TPOTp50: ms(s.TPOTp50), TPOTp99: ms(s.TPOTp99), Checked: check, Mismatched: s.Mismatched, Summary: s}, nil
}

func writeServeTable(w io.Writer, name string, rows []benchServeRow) {
	fmt.Fprintf(w, "server: %s\n\n", name)
	fmt.Fprintln(w, "| clients | requests | failed | tok/s | TTFT p50 ms | TTFT p99 ms | TPOT p50 ms | TPOT p99 ms | texts differing |")
	fmt.Fprintln(w, "|---:|---:|---:|---:|---:|---:|---:|---:|---|")
	for _, r := range rows {
		diff := "not checked"
		if r.Checked {
			diff = strconv.Itoa(r.Mismatched)
		}
		fmt.Fprintf(w, "| %d | %d | %d | %.1f | %.1f | %.1f | %.2f | %.2f | %s |\n", r.Clients, r.Requests, r.Failed,
			r.TokPerS, r.TTFTp50, r.TTFTp99, r.TPOTp50, r.TPOTp99, diff)
	}
}

// parseCounts reads a comma-separated list of positive integers.
func parseCounts(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("%q is not a positive number", f)
		}
		out = append(out, n)
	}
	return out, nil
}
