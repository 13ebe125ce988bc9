package server

import (
	"encoding/json"
	"io"
	"net/http"
	"regexp"
	"strconv"
	"testing"
)

// scrape reads /metrics into name -> value (llamacpp: prefix dropped), checking the text format.
func scrape(t *testing.T, url string) map[string]float64 {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/plain; version=0.0.4" {
		t.Fatalf("/metrics: %d %q\n%s", resp.StatusCode, resp.Header.Get("Content-Type"), b)
	}
	line := regexp.MustCompile(`(?m)^llamacpp:(\w+) (\S+)$`)
	out := map[string]float64{}
	for _, m := range line.FindAllStringSubmatch(string(b), -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			t.Fatalf("metric %s: value %q", m[1], m[2])
		}
		out[m[1]] = v
	}
	return out
}

// /metrics counts the prompt tokens evaluated and reused and the tokens generated, under
// llama-server's names; /slots shows each slot's context.
func TestServeMetricsAndSlots(t *testing.T) {
	m := randomModel(t)
	_, url, _ := start(t, m, Config{Parallel: 2})
	if got := scrape(t, url); got["prompt_tokens_total"] != 0 || got["requests_processing"] != 0 || len(got) < 12 {
		t.Fatalf("fresh server: %v", got)
	}
	body := `{"prompt":"one two three four five six","max_tokens":5,"temperature":0,"ignore_eos":true}`
	for range 2 {
		if code, b := post(t, url+"/v1/completions", body); code != 200 {
			t.Fatalf("%d %s", code, b)
		}
	}
	n := len(m.Tokenize("one two three four five six", true))
	got := scrape(t, url)
	// The second request finds the whole prompt but its last token in the slot's cache.
	if got["prompt_tokens_total"] != float64(n+1) || got["prompt_tokens_cached_total"] != float64(n-1) {
		t.Errorf("prompt tokens evaluated %v, cached %v; want %d, %d", got["prompt_tokens_total"], got["prompt_tokens_cached_total"], n+1, n-1)
	}
	if got["tokens_predicted_total"] != 10 || got["requests_total"] != 2 || got["n_decode_total"] < 8 {
		t.Errorf("predicted %v, requests %v, decode steps %v", got["tokens_predicted_total"], got["requests_total"], got["n_decode_total"])
	}
	// The slot keeps prompt + 5 generated tokens; the last one is not evaluated yet but is in its context.
	if got["kv_cache_tokens"] != float64(n+5) || got["kv_cache_usage_ratio"] <= 0 {
		t.Errorf("kv tokens %v ratio %v, want %d", got["kv_cache_tokens"], got["kv_cache_usage_ratio"], n+5)
	}
	resp, err := http.Get(url + "/slots")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var slots []slotInfo
	if err := json.NewDecoder(resp.Body).Decode(&slots); err != nil {
		t.Fatal(err)
	}
	if len(slots) != 2 || slots[0].IsProcessing || slots[1].IsProcessing || slots[0].Requests+slots[1].Requests != 2 {
		t.Fatalf("slots: %+v", slots)
	}
}
