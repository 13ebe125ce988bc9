package server

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorun-dev/gorun/internal/testmodel"
	"github.com/gorun-dev/gorun/llm"
)

// pooledModel loads a small random GPT-2 with a context of nctx and a KV pool of pool
// positions.
func pooledModel(t testing.TB, nctx, pool int) *llm.Model {
	t.Helper()
	c, err := testmodel.Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	c.NCtx = nctx
	path := filepath.Join(t.TempDir(), "random.gguf")
	if err := testmodel.Write(path, c); err != nil {
		t.Fatal(err)
	}
	m, err := llm.Load(path, llm.Options{Threads: 2, KVPool: pool})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	if !m.KVStats().Paged {
		t.Fatal("the CPU model is not paged")
	}
	return m
}

// noLeak waits for the server to be idle, checks that the blocks in use are those of the
// idle slots' kept contexts, then drops those contexts and checks that every block is free:
// nothing a scenario did holds a block it should not.
func noLeak(t *testing.T, s *Server, m *llm.Model, scenario string) {
	t.Helper()
	waitIdle(t, s, 10*time.Second)
	held := 0
	for _, sl := range s.pool.all {
		held += (len(sl.tokens) + 15) / 16
	}
	if used := m.KVStats().Used(); used > held {
		t.Errorf("%s: %d blocks in use, the idle slots' contexts hold %d", scenario, used, held)
	}
	for s.pool.evictIdle() {
	}
	if kv := m.KVStats(); kv.Free != kv.Blocks {
		t.Fatalf("%s: %d of %d blocks free with every slot idle and empty", scenario, kv.Free, kv.Blocks)
	}
}

// While the pool is short, requests wait (holding their slots) instead of failing, idle slots'
// kept contexts are dropped for them, and every request gets the library's greedy text; no
// block is left behind.
func TestServeKVPoolExhaustion(t *testing.T) {
	m := pooledModel(t, 256, 6*16) // 6 blocks: two 40-token generations at a time
	s, url, client := start(t, m, Config{Parallel: 4, Queue: 16})
	prompts := []string{"a b", "c d e", "f", "g h i j"}
	const ntok = 40
	want := map[string]string{}
	for _, p := range prompts {
		want[p] = libraryGreedy(t, m, p, ntok, nil)
	}
	waited := make(chan bool, 1)
	go func() { // see a request wait for blocks
		for start := time.Now(); time.Since(start) < 20*time.Second; time.Sleep(time.Millisecond) {
			if s.pool.kvWaiting.Load() > 0 {
				waited <- true
				return
			}
		}
		waited <- false
	}()
	concurrentStreams(t, client, 8, ntok, prompts, want)
	if !<-waited {
		t.Error("no request waited for KV blocks with 8 clients over a pool for 2")
	}
	if kv := m.KVStats(); kv.Peak > kv.Blocks || kv.Peak < 5 {
		t.Errorf("peak use %d of %d blocks", kv.Peak, kv.Blocks)
	}
	page := metricsText(t, url)
	for _, name := range []string{"llamacpp:kv_pool_blocks 6", "llamacpp:kv_pool_blocks_peak", "llamacpp:kv_pool_evictions_total"} {
		if !strings.Contains(page, name) {
			t.Errorf("/metrics lacks %q", name)
		}
	}
	noLeak(t, s, m, "exhaustion")
}

func metricsText(t *testing.T, url string) string {
	t.Helper()
	resp, err := http.Get(url + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var b strings.Builder
	buf := make([]byte, 4096)
	for {
		n, err := resp.Body.Read(buf)
		b.Write(buf[:n])
		if err != nil {
			break
		}
	}
	return b.String()
}

// Clients that disconnect mid-prompt, mid-stream or while waiting for blocks, and requests
// cancelled at random under load, leave no block behind, and the server then gives a request
// the library's greedy text.
func TestServeKVDisconnectsLeakNothing(t *testing.T) {
	m := pooledModel(t, 512, 20*16) // one 200-token prompt + 100 tokens at a time
	s, url, client := start(t, m, Config{Parallel: 3, Queue: 32})
	long := `{"prompt":"` + strings.Repeat("a b c d ", 50) + `","max_tokens":100,"temperature":0,"ignore_eos":true,"stream":true}`

	// Mid-stream: after the first token.
	cancel, _ := streamFirst(t, url+"/v1/completions", long)
	cancel()
	noLeak(t, s, m, "a disconnect mid-stream")

	// Mid-prompt: the client gives up while the 200-token prompt is evaluated.
	ctx, giveUp := context.WithCancel(context.Background())
	go func() {
		time.Sleep(2 * time.Millisecond)
		giveUp()
	}()
	req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/completions", strings.NewReader(long))
	req.Header.Set("Content-Type", "application/json")
	if resp, err := http.DefaultClient.Do(req); err == nil {
		resp.Body.Close()
	}
	noLeak(t, s, m, "a disconnect mid-prompt")

	// Under load: 12 clients on 3 slots and a pool for about 1.5 generations, each cancelled
	// at a random time (some while queued, some waiting for blocks, some mid-stream).
	rng := rand.New(rand.NewPCG(3, 4))
	var wg sync.WaitGroup
	for i := range 12 {
		delay := time.Duration(rng.IntN(300)) * time.Millisecond
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(context.Background(), delay)
			defer cancel()
			body := fmt.Sprintf(`{"prompt":"w%d %s","max_tokens":80,"temperature":0,"ignore_eos":true,"stream":true}`, i, strings.Repeat("x y ", i*5))
			req, _ := http.NewRequestWithContext(ctx, "POST", url+"/v1/completions", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if resp, err := http.DefaultClient.Do(req); err == nil {
				buf := make([]byte, 512)
				for {
					if _, err := resp.Body.Read(buf); err != nil {
						break
					}
				}
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	noLeak(t, s, m, "cancellations under load")

	want := libraryGreedy(t, m, "a b", 30, nil)
	if got, err := streamText(context.Background(), client, "a b", 30); err != nil || got != want {
		t.Fatalf("after the scenarios: %q (%v), the library %q", got, err, want)
	}
	noLeak(t, s, m, "a last request")
}

// A prompt the whole pool cannot hold is refused as too long (waiting would not help).
func TestServePromptOverPool(t *testing.T) {
	m := pooledModel(t, 512, 4*16)
	s, url, _ := start(t, m, Config{Parallel: 2})
	code, body := post(t, url+"/v1/completions", `{"prompt":"`+strings.Repeat("a b c d ", 20)+`","max_tokens":5}`)
	if code != 400 || !strings.Contains(string(body), "context_length_exceeded") || !strings.Contains(string(body), "KV pool") {
		t.Fatalf("%d %s", code, body)
	}
	noLeak(t, s, m, "a prompt over the pool")
}

// A full queue answers 503 with Retry-After.
func TestServeBusyRetryAfter(t *testing.T) {
	m := pooledModel(t, 256, 0)
	s, url, _ := start(t, m, Config{Parallel: 1, Queue: -1})
	cancel, _ := streamFirst(t, url+"/v1/completions", `{"prompt":"a","max_tokens":200,"ignore_eos":true,"stream":true}`)
	defer cancel()
	req, _ := http.NewRequest("POST", url+"/v1/completions", strings.NewReader(`{"prompt":"x","max_tokens":3}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("full queue: %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	req, _ = http.NewRequest("POST", url+"/api/generate", strings.NewReader(`{"model":"test-model","prompt":"x","stream":false}`))
	req.Header.Set("Content-Type", "application/json")
	resp, err = http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("full queue (ollama): %d, Retry-After %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	cancel()
	noLeak(t, s, m, "busy")
}

// 32 slots of 1,024-token contexts serve 32 concurrent requests within a pool of the blocks
// they use (64 blocks: 1,024 positions, not 32 x 1,024), each with the library's text.
func TestServe32SlotsSmallPool(t *testing.T) {
	m := pooledModel(t, 1024, 64*16)
	s, _, client := start(t, m, Config{Parallel: 32, Queue: 64})
	prompts := []string{"a b", "c d e", "f", "g h i j"}
	const ntok = 16
	want := map[string]string{}
	for _, p := range prompts {
		want[p] = libraryGreedy(t, m, p, ntok, nil)
	}
	concurrentStreams(t, client, 32, ntok, prompts, want)
	kv := m.KVStats()
	t.Logf("pool %d blocks (%d positions, %d bytes); peak use %d blocks", kv.Blocks, kv.Blocks*kv.BlockSize, kv.Bytes, kv.Peak)
	if kv.Peak > 64 {
		t.Errorf("peak %d blocks", kv.Peak)
	}
	noLeak(t, s, m, "32 slots")
}

// A request whose prompt starts like another slot's context takes that context's blocks from
// the pool (prefix caching across slots) and answers the library's greedy text; with
// cache_prompt false it takes none.
func TestServePrefixAcrossSlots(t *testing.T) {
	m := pooledModel(t, 512, 0)
	s, url, client := start(t, m, Config{Parallel: 2, Queue: 4})
	system := strings.Repeat("a b c d e f ", 12) // about 72 tokens: 4 full blocks
	cancel, _ := streamFirst(t, url+"/v1/completions", `{"prompt":"`+system+`one","max_tokens":300,"ignore_eos":true,"stream":true}`)
	defer cancel()
	want := libraryGreedy(t, m, system+"two", 10, nil)
	hits := m.KVStats().Hits
	got, err := streamText(context.Background(), client, system+"two", 10)
	if err != nil || got != want {
		t.Fatalf("%q (%v), the library %q", got, err, want)
	}
	if h := m.KVStats().Hits - hits; h < 4 {
		t.Fatalf("%d blocks taken from the other slot's context, want at least 4", h)
	}
	hits = m.KVStats().Hits
	code, body := post(t, url+"/v1/completions", `{"prompt":"`+system+`three","max_tokens":3,"cache_prompt":false}`)
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	if h := m.KVStats().Hits - hits; h != 0 {
		t.Fatalf("cache_prompt false took %d blocks", h)
	}
	if !strings.Contains(metricsText(t, url), "llamacpp:kv_pool_prefix_hits_total") {
		t.Error("/metrics lacks the prefix hits")
	}
	cancel()
	noLeak(t, s, m, "prefix across slots")
}
