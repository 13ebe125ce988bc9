// Package loadgen drives an OpenAI-compatible completion server (gorun serve, llama-server, or
// anything speaking /v1/completions with server-sent events) with concurrent streamed requests
// and measures what its users feel: aggregate output tokens per second, time to first token and
// time per output token, as vLLM's benchmark_serving reports them.
//
// Every prompt is a shared prefix (a system prompt) followed by a suffix unique to the request,
// so a server with a prefix cache reuses the prefix. Requests are greedy with a fixed length
// (ignore_eos), so both servers generate the same number of tokens and each request's text can
// be compared with the same prompt's text when it ran alone.
package loadgen

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"
)

// Config is one benchmark run.
type Config struct {
	URL         string // the server's base URL, e.g. http://127.0.0.1:8080
	APIKey      string // sent as a bearer token when set
	Model       string // the "model" field (empty: left out)
	Clients     int    // concurrent clients, each sending its requests one after another
	Requests    int    // requests in all (at least Clients)
	PrefixWords int    // words of the shared prefix (about a token each)
	SuffixWords int    // words unique to each request
	MaxTokens   int    // tokens generated per request
	Seed        uint64 // chooses the words
	// Distinct is how many different suffixes there are (0: one per request); with fewer,
	// requests repeat prompts, so their texts can be checked against each other.
	Distinct int
	// NoPromptCache sends cache_prompt false: the server evaluates every prompt whole.
	NoPromptCache bool
	// Timeout bounds each request (0: 10 minutes).
	Timeout time.Duration
}

// Request is what one request measured.
type Request struct {
	Prompt   int           // index of its prompt (suffix)
	Start    time.Duration // since the run began
	TTFT     time.Duration // time to the first text
	Total    time.Duration // time to the end of the stream
	Tokens   int           // completion tokens: the final usage when the server sends it, else the chunks with text
	Text     string
	Err      error
	Received []time.Duration // arrival time of each chunk with text, since the request began
}

// TPOT is the mean time per output token after the first (vLLM's definition).
func (r Request) TPOT() time.Duration {
	if r.Tokens < 2 {
		return 0
	}
	return (r.Total - r.TTFT) / time.Duration(r.Tokens-1)
}

// Result is a whole run.
type Result struct {
	Config   Config
	Wall     time.Duration
	Requests []Request
}

// Prompts returns the run's prompts: the shared prefix plus each distinct suffix.
func Prompts(c Config) []string {
	words := vocabulary()
	rng := c.Seed*0x9E3779B97F4A7C15 + 1
	next := func() string {
		rng ^= rng << 13
		rng ^= rng >> 7
		rng ^= rng << 17
		return words[rng%uint64(len(words))]
	}
	prefix := make([]string, c.PrefixWords)
	for i := range prefix {
		prefix[i] = next()
	}
	n := c.Distinct
	if n <= 0 {
		n = c.Requests
	}
	out := make([]string, n)
	for i := range out {
		suffix := make([]string, c.SuffixWords)
		for j := range suffix {
			suffix[j] = next()
		}
		out[i] = strings.Join(prefix, " ") + "\n\n" + fmt.Sprintf("Request %d: ", i) + strings.Join(suffix, " ")
	}
	return out
}

// vocabulary is a list of common English words, each one token for GPT-2's and Llama's
// tokenizers, so that word counts approximate token counts.
func vocabulary() []string {
	return strings.Fields(`the of and to in is was that for on with as by at from his her they this
		which or had are not but be have one all were we when there can an your their said each she
		do how if will up other about out many then them these so some would make like him into time
		has look two more write go see number no way could people my than first water been call who
		oil its now find long down day did get come made may part over new sound take only little
		work know place year live me back give most very after thing our just name good sentence man
		think say great where help through much before line right too mean old any same tell boy
		follow came want show also around form three small set put end does another well large must
		big even such because turn here why ask went men read need land different home us move try
		kind hand picture again change off play spell air away animal house point page letter mother
		answer found study still learn should world high every near add food between own below
		country plant last school father keep tree never start city earth eye light thought head under
		story saw left few while along might close something seem next hard open example begin life
		always those both paper together got group often run important until children side feet car
		mile night walk white sea began grow took river four carry state once book hear stop without
		second later miss idea enough eat face watch far real almost let above girl sometimes mountain
		cut young talk soon list song being leave family`)
}

// Validate checks a configuration.
func (c Config) Validate() error {
	switch {
	case c.URL == "":
		return errors.New("no server URL")
	case c.Clients < 1 || c.Clients > 4096:
		return fmt.Errorf("%d clients (want 1 to 4096)", c.Clients)
	case c.Requests < c.Clients:
		return fmt.Errorf("%d requests for %d clients (want at least one each)", c.Requests, c.Clients)
	case c.PrefixWords < 0 || c.SuffixWords < 0 || c.PrefixWords+c.SuffixWords > 1<<20:
		return fmt.Errorf("prompt of %d + %d words", c.PrefixWords, c.SuffixWords)
	case c.MaxTokens < 1:
		return fmt.Errorf("%d tokens to generate (want at least 1)", c.MaxTokens)
	case c.Distinct < 0:
		return fmt.Errorf("%d distinct prompts", c.Distinct)
	}
	return nil
}

// Run sends the requests: each client takes the next request number until all are sent.
func Run(ctx context.Context, c Config) (*Result, error) {
	if err := c.Validate(); err != nil {
		return nil, err
	}
	if c.Timeout <= 0 {
		c.Timeout = 10 * time.Minute
	}
	prompts := Prompts(c)
	res := &Result{Config: c, Requests: make([]Request, c.Requests)}
	// A connection per request: llama-server (cpp-httplib) closes a kept-alive connection after
	// a few requests, and a POST sent on one it has just closed fails with EOF (Go does not
	// retry non-idempotent requests); a fresh loopback connection costs ~0.1 ms.
	client := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}}
	var mu sync.Mutex
	next := 0
	begin := time.Now()
	var wg sync.WaitGroup
	for range c.Clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				mu.Lock()
				i := next
				next++
				mu.Unlock()
				if i >= c.Requests || ctx.Err() != nil {
					return
				}
				p := i % len(prompts)
				r := stream(ctx, client, c, prompts[p], begin)
				r.Prompt = p
				res.Requests[i] = r
			}
		}()
	}
	wg.Wait()
	res.Wall = time.Since(begin)
	return res, ctx.Err()
}

// stream sends one streamed completion request and times its chunks.
func stream(ctx context.Context, client *http.Client, c Config, prompt string, begin time.Time) (r Request) {
	body := map[string]any{"prompt": prompt, "max_tokens": c.MaxTokens, "temperature": 0, "stream": true,
		"ignore_eos": true, "cache_prompt": !c.NoPromptCache,
		"stream_options": map[string]any{"include_usage": true}}
	if c.Model != "" {
		body["model"] = c.Model
	}
	b, _ := json.Marshal(body)
	ctx, cancel := context.WithTimeout(ctx, c.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", strings.TrimSuffix(c.URL, "/")+"/v1/completions", bytes.NewReader(b))
	if err != nil {
		r.Err = err
		return r
	}
	req.Header.Set("Content-Type", "application/json")
	if c.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+c.APIKey)
	}
	start := time.Now()
	r.Start = start.Sub(begin)
	resp, err := client.Do(req)
	if err != nil {
		r.Err = err
		return r
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 512))
		r.Err = fmt.Errorf("HTTP %d: %s", resp.StatusCode, bytes.TrimSpace(msg))
		return r
	}
	var text strings.Builder
	usage := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		line := sc.Bytes()
		data, ok := bytes.CutPrefix(line, []byte("data: "))
		if !ok {
			continue
		}
		if string(data) == "[DONE]" {
			break
		}
		var ev struct {
			Choices []struct {
				Text string `json:"text"`
			} `json:"choices"`
			Error *struct {
				Message string `json:"message"`
			} `json:"error"`
			Usage *struct {
				CompletionTokens int `json:"completion_tokens"`
			} `json:"usage"`
		}
		if err := json.Unmarshal(data, &ev); err != nil {
			r.Err = fmt.Errorf("bad event %q: %v", data, err)
			return r
		}
		if ev.Error != nil {
			r.Err = fmt.Errorf("server error: %s", ev.Error.Message)
			return r
		}
		if ev.Usage != nil {
			usage = ev.Usage.CompletionTokens
		}
		if len(ev.Choices) == 0 || ev.Choices[0].Text == "" {
			continue
		}
		t := time.Since(start)
		if r.Tokens == 0 {
			r.TTFT = t
		}
		r.Tokens++
		r.Received = append(r.Received, t)
		text.WriteString(ev.Choices[0].Text)
	}
	r.Total = time.Since(start)
	r.Text = text.String()
	if usage > 0 {
		r.Tokens = usage
	}
	if err := sc.Err(); err != nil && r.Err == nil {
		r.Err = err
	}
	return r
}

// Summary is a run's statistics.
type Summary struct {
	Requests, Failed          int
	OutputTokens              int
	Wall                      time.Duration
	TokensPerSecond           float64 // output tokens of all requests / wall time
	RequestsPerSecond         float64
	TTFTp50, TTFTp99, TTFTmax time.Duration
	TPOTp50, TTFTMean         time.Duration
	TPOTp99                   time.Duration
	// Mismatched counts requests whose text differs from the reference text of their prompt
	// (the first request of the same prompt when there is no reference).
	Mismatched int
	FirstError error
}

// Texts returns each prompt's text from its first successful request.
func (r *Result) Texts() map[int]string {
	out := map[int]string{}
	for _, q := range r.Requests {
		if _, ok := out[q.Prompt]; !ok && q.Err == nil {
			out[q.Prompt] = q.Text
		}
	}
	return out
}

// Summarize computes the statistics of the successful requests; ref, when not nil, holds the
// expected text of each prompt (from a run with one client).
func (r *Result) Summarize(ref map[int]string) Summary {
	s := Summary{Requests: len(r.Requests), Wall: r.Wall}
	var ttft, tpot []time.Duration
	first := map[int]string{}
	for _, q := range r.Requests {
		if q.Err != nil {
			s.Failed++
			if s.FirstError == nil {
				s.FirstError = q.Err
			}
			continue
		}
		s.OutputTokens += q.Tokens
		ttft = append(ttft, q.TTFT)
		tpot = append(tpot, q.TPOT())
		if t, ok := ref[q.Prompt]; ok {
			if t != q.Text {
				s.Mismatched++
			}
		} else if t, ok := first[q.Prompt]; !ok {
			first[q.Prompt] = q.Text
		} else if t != q.Text {
			s.Mismatched++
		}
	}
	if r.Wall > 0 {
		s.TokensPerSecond = float64(s.OutputTokens) / r.Wall.Seconds()
		s.RequestsPerSecond = float64(len(ttft)) / r.Wall.Seconds()
	}
	s.TTFTp50, s.TTFTp99, s.TTFTmax = percentile(ttft, 50), percentile(ttft, 99), percentile(ttft, 100)
	s.TPOTp50, s.TPOTp99 = percentile(tpot, 50), percentile(tpot, 99)
	s.TTFTMean = mean(ttft)
	return s
}

// percentile is the nearest-rank percentile (100: the maximum).
func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	d = slices.Clone(d)
	slices.Sort(d)
	k := int(math.Ceil(p/100*float64(len(d)))) - 1
	return d[max(0, min(k, len(d)-1))]
}

func mean(d []time.Duration) time.Duration {
	if len(d) == 0 {
		return 0
	}
	var t time.Duration
	for _, x := range d {
		t += x
	}
	return t / time.Duration(len(d))
}

// Report writes the summary as vLLM's benchmark_serving does (one value per line).
func (s Summary) Report(w io.Writer, label string) {
	ms := func(d time.Duration) string { return fmt.Sprintf("%.2f", float64(d)/1e6) }
	fmt.Fprintf(w, "============ Serving Benchmark Result: %s ============\n", label)
	fmt.Fprintf(w, "%-40s %d\n", "Successful requests:", s.Requests-s.Failed)
	if s.Failed > 0 {
		fmt.Fprintf(w, "%-40s %d (first: %v)\n", "Failed requests:", s.Failed, s.FirstError)
	}
	fmt.Fprintf(w, "%-40s %.2f\n", "Benchmark duration (s):", s.Wall.Seconds())
	fmt.Fprintf(w, "%-40s %d\n", "Total generated tokens:", s.OutputTokens)
	fmt.Fprintf(w, "%-40s %.2f\n", "Request throughput (req/s):", s.RequestsPerSecond)
	fmt.Fprintf(w, "%-40s %.2f\n", "Output token throughput (tok/s):", s.TokensPerSecond)
	fmt.Fprintf(w, "%-40s %s\n", "Mean TTFT (ms):", ms(s.TTFTMean))
	fmt.Fprintf(w, "%-40s %s\n", "Median TTFT (ms):", ms(s.TTFTp50))
	fmt.Fprintf(w, "%-40s %s\n", "P99 TTFT (ms):", ms(s.TTFTp99))
	fmt.Fprintf(w, "%-40s %s\n", "Median TPOT (ms):", ms(s.TPOTp50))
	fmt.Fprintf(w, "%-40s %s\n", "P99 TPOT (ms):", ms(s.TPOTp99))
	fmt.Fprintf(w, "%-40s %d\n", "Texts differing for the same prompt:", s.Mismatched)
}
