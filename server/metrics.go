package server

import (
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"
)

// metrics are the server's counters since start, reported by /metrics in Prometheus' text
// format under llama-server's names (llamacpp:...), so dashboards written for it work.
type metrics struct {
	mu            sync.Mutex
	promptTokens  int64         // prompt tokens evaluated (not those reused from a slot's cache)
	promptTime    time.Duration // time spent evaluating them
	cachedTokens  int64         // prompt tokens reused from a slot's cache
	predicted     int64         // tokens generated
	predictedTime time.Duration
	requests      int64 // generations finished
}

// record adds one generation's counts.
func (m *metrics) record(evaluated, cached, generated int, promptTime, genTime time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.promptTokens += int64(evaluated)
	m.cachedTokens += int64(cached)
	m.promptTime += promptTime
	m.predicted += int64(generated)
	m.predictedTime += genTime
	m.requests++
}

func (m *metrics) snapshot() metrics {
	m.mu.Lock()
	defer m.mu.Unlock()
	return metrics{promptTokens: m.promptTokens, promptTime: m.promptTime, cachedTokens: m.cachedTokens,
		predicted: m.predicted, predictedTime: m.predictedTime, requests: m.requests}
}

// rate is tokens per second, 0 when nothing was timed.
func rate(n int64, d time.Duration) float64 {
	if n == 0 || d <= 0 {
		return 0
	}
	return float64(n) / d.Seconds()
}

// promMetric is one metric of the /metrics page.
type promMetric struct {
	name, kind, help string
	value            float64
}

func (s *Server) metricsPage(w http.ResponseWriter, r *http.Request) {
	m := s.metrics.snapshot()
	dec := s.model.DecodeStats()
	busy, queued := s.pool.stats()
	used, capacity := s.pool.kvTokens(s.model)
	kv := s.model.KVStats()
	perDecode := 0.0
	if dec.Steps > 0 {
		perDecode = float64(dec.Rows) / float64(dec.Steps)
	}
	usage := 0.0
	switch {
	case kv.Paged && kv.Blocks > 0: // the blocks taken, idle slots' kept contexts included
		usage = float64(kv.Used()) / float64(kv.Blocks)
	case capacity > 0:
		usage = float64(used) / float64(capacity)
	}
	all := []promMetric{
		{"prompt_tokens_total", "counter", "Number of prompt tokens processed.", float64(m.promptTokens)},
		{"prompt_seconds_total", "counter", "Prompt process time", m.promptTime.Seconds()},
		{"tokens_predicted_total", "counter", "Number of generation tokens processed.", float64(m.predicted)},
		{"tokens_predicted_seconds_total", "counter", "Predict process time", m.predictedTime.Seconds()},
		{"n_decode_total", "counter", "Total number of single-token decode steps (all slots' rows in one step count once).", float64(dec.Steps)},
		{"n_busy_slots_per_decode", "counter", "Average number of busy slots per decode step", perDecode},
		{"prompt_tokens_cached_total", "counter", "Prompt tokens reused from a slot's KV cache instead of evaluated.", float64(m.cachedTokens)},
		{"requests_total", "counter", "Generations finished.", float64(m.requests)},
		{"prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s.", rate(m.promptTokens, m.promptTime)},
		{"predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s.", rate(m.predicted, m.predictedTime)},
		{"kv_cache_usage_ratio", "gauge", "KV-cache usage. 1 means 100 percent usage.", usage},
		{"kv_cache_tokens", "gauge", "KV-cache tokens.", float64(used)},
		{"requests_processing", "gauge", "Number of requests processing.", float64(busy)},
		{"requests_deferred", "gauge", "Number of requests deferred.", float64(queued)},
	}
	if kv.Paged { // gorun's own: the paged KV pool
		all = append(all,
			promMetric{"kv_pool_blocks", "gauge", "Blocks of the paged KV pool (kv_pool_block_size positions each).", float64(kv.Blocks)},
			promMetric{"kv_pool_block_size", "gauge", "Positions per block of the KV pool.", float64(kv.BlockSize)},
			promMetric{"kv_pool_blocks_free", "gauge", "Free blocks of the KV pool.", float64(kv.Free)},
			promMetric{"kv_pool_blocks_peak", "gauge", "Most blocks of the KV pool in use at once since start.", float64(kv.Peak)},
			promMetric{"kv_pool_blocks_cached", "gauge", "Free blocks keeping a prompt prefix's keys and values for later requests.", float64(kv.Cached)},
			promMetric{"kv_pool_prefix_hits_total", "counter", "Blocks of prompt prefixes taken from the KV pool's cache instead of evaluated.", float64(kv.Hits)},
			promMetric{"kv_pool_requests_waiting", "gauge", "Requests holding a slot and waiting for KV blocks.", float64(s.pool.kvWaiting.Load())},
			promMetric{"kv_pool_evictions_total", "counter", "Idle slots' kept contexts dropped to free KV blocks.", float64(s.pool.evictions.Load())},
		)
	}
	var b strings.Builder
	for _, x := range all {
		fmt.Fprintf(&b, "# HELP llamacpp:%s %s\n# TYPE llamacpp:%s %s\nllamacpp:%s %g\n", x.name, x.help, x.name, x.kind, x.name, x.value)
	}
	w.Header().Set("Content-Type", "text/plain; version=0.0.4")
	w.Header().Set("Process-Start-Time-Unix", fmt.Sprint(s.created))
	w.WriteHeader(http.StatusOK)
	fmt.Fprint(w, b.String())
}

// slotInfo is what /slots says of a slot.
type slotInfo struct {
	ID           int   `json:"id"`
	NCtx         int   `json:"n_ctx"`
	IsProcessing bool  `json:"is_processing"`
	NPast        int   `json:"n_past"`          // tokens its context holds (when idle; when busy, at the start of its request)
	NCached      int   `json:"n_prompt_cached"` // prompt tokens its last request found in the cache
	Requests     int64 `json:"requests"`        // requests served
	BusySince    int64 `json:"busy_since_unix"` // 0 when idle
}

func (s *Server) slots(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.pool.describe(s.model.ContextLength()))
}
