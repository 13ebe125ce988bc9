package llm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/gorun-dev/gorun/cpu"
	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/internal/testmodel"
	"github.com/gorun-dev/gorun/quant"
)

// noPagedBackend is a CPU backend without the paged ops (as the CUDA backend): its sessions
// keep whole-context caches.
type noPagedBackend struct{ graph.Backend }

func (b noPagedBackend) Supports(n *graph.Tensor) error {
	if n.Op == graph.OpStoreKVPaged || n.Op == graph.OpAttentionPaged {
		return fmt.Errorf("op %v is not supported", n.Op)
	}
	return b.Backend.Supports(n)
}

// trace evaluates a prompt in two batches (the second crossing a block boundary), then steps
// token by token, and returns every logit row it saw.
func trace(t *testing.T, m *Model, prompt []int32, steps int) []float32 {
	t.Helper()
	s, err := m.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var all []float32
	for _, part := range [][]int32{prompt[:7], prompt[7:]} {
		l, err := s.Eval(part)
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, l...)
	}
	tok := int32(3)
	for i := 0; i < steps; i++ {
		l, err := s.Eval([]int32{tok})
		if err != nil {
			t.Fatal(err)
		}
		all = append(all, l...)
		tok = int32(argmax(l))
	}
	return all
}

func sameBits(a, b []float32) int {
	if len(a) != len(b) {
		return 0
	}
	for i := range a {
		if math.Float32bits(a[i]) != math.Float32bits(b[i]) {
			return i
		}
	}
	return -1
}

// Sessions over the paged pool compute the logits of a whole-context cache bit for bit:
// prompts in batches, single steps, GPT-2 and grouped-query Llama, head sizes on the SIMD path
// (64) and off it (16), f32 and f16 caches.
func TestPagedMatchesContiguous(t *testing.T) {
	cases := []struct {
		name, preset string
		edit         func(c *testmodel.Config)
		typ          quant.Type
	}{
		{"gpt2-d16-f32", "tiny", nil, quant.F32},
		{"gpt2-d64-f32", "tiny", func(c *testmodel.Config) { c.NEmbd, c.NHead = 128, 2 }, quant.F32},
		{"gpt2-d16-f16", "tiny", nil, quant.F16},
		{"llama-gqa-d16-f32", "llama-tiny", nil, quant.F32},
		{"llama-gqa-d64-f32", "llama-tiny", func(c *testmodel.Config) { c.NEmbd, c.NHead, c.NHeadKV = 256, 4, 2 }, quant.F32},
		{"llama-gqa-d64-f16", "llama-tiny", func(c *testmodel.Config) { c.NEmbd, c.NHead, c.NHeadKV = 256, 4, 2 }, quant.F16},
	}
	prompt := append(append([]int32{}, testTokens...), testTokens[:13]...) // 33 tokens: three blocks
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			be := cpu.New(2)
			defer be.Close()
			paged := presetModel(t, c.preset, c.edit, Options{Threads: 2, CacheType: c.typ})
			whole := presetModel(t, c.preset, c.edit, Options{Backend: noPagedBackend{be}, CacheType: c.typ})
			if !paged.KVStats().Paged || whole.KVStats().Paged {
				t.Fatalf("paged %v, whole %v", paged.KVStats().Paged, whole.KVStats().Paged)
			}
			a, b := trace(t, paged, prompt, 20), trace(t, whole, prompt, 20)
			if i := sameBits(a, b); i >= 0 {
				t.Fatalf("logit %d differs: paged %v, contiguous %v", i, a[i], b[i])
			}
			if st := paged.KVStats(); st.Free != st.Blocks || st.Sessions != 0 {
				t.Fatalf("after Close: %+v", st)
			}
		})
	}
}

func presetModel(t *testing.T, preset string, edit func(c *testmodel.Config), opts Options) *Model {
	t.Helper()
	c, err := testmodel.Preset(preset)
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&c)
	}
	path := t.TempDir() + "/m.gguf"
	if err := testmodel.Write(path, c); err != nil {
		t.Fatal(err)
	}
	m, err := Load(path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { m.Close() })
	return m
}

// allFree fails the test unless every block of m's pool is free and no session holds a
// table.
func allFree(t *testing.T, m *Model, after string) {
	t.Helper()
	if st := m.KVStats(); st.Free != st.Blocks || st.Sessions != 0 {
		t.Fatalf("after %s: %d of %d blocks free, %d sessions", after, st.Free, st.Blocks, st.Sessions)
	}
}

// Every path that ends or shortens a session gives its blocks back: Close (also while a call
// runs), Reset, Rewind, a failed call, Save and LoadSession (also a refused one).
func TestPagedBlocksReturned(t *testing.T) {
	m := tinyModel(t, nil, Options{Threads: 1, KVPool: 256})
	st := m.KVStats()
	if st.Blocks != 16 || st.BlockSize != 16 {
		t.Fatalf("pool %+v", st)
	}
	s, _ := m.NewSession()
	if _, err := s.Eval(testTokens); err != nil { // 20 tokens: 2 blocks
		t.Fatal(err)
	}
	if used := m.KVStats().Used(); used != 2 {
		t.Fatalf("%d blocks for 20 tokens", used)
	}
	if err := s.Rewind(16); err != nil {
		t.Fatal(err)
	}
	if used := m.KVStats().Used(); used != 1 {
		t.Fatalf("%d blocks after rewinding to 16 tokens", used)
	}
	var saved bytes.Buffer
	if err := s.Save(&saved); err != nil {
		t.Fatal(err)
	}
	if err := s.Reset(); err != nil {
		t.Fatal(err)
	}
	if used := m.KVStats().Used(); used != 0 {
		t.Fatalf("%d blocks after Reset", used)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	allFree(t, m, "Close")

	r, err := m.LoadSession(bytes.NewReader(saved.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if used := m.KVStats().Used(); used != 1 {
		t.Fatalf("%d blocks after restoring 16 tokens", used)
	}
	r.Close()
	corrupt := bytes.Clone(saved.Bytes())
	corrupt[len(corrupt)-1] ^= 1
	if _, err := m.LoadSession(bytes.NewReader(corrupt)); !errors.Is(err, ErrBadFile) {
		t.Fatalf("corrupt session: %v", err)
	}
	allFree(t, m, "a refused LoadSession")

	// A failed call (a token outside the vocabulary in the second batch is refused before
	// anything runs; a cancelled prompt stops between batches) keeps no block.
	s, _ = m.NewSession()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.EvalContext(ctx, testTokens); !errors.Is(err, ErrCancelled) {
		t.Fatalf("cancelled eval: %v", err)
	}
	if used := m.KVStats().Used(); used != 0 || s.Pos() != 0 {
		t.Fatalf("%d blocks, %d tokens after a cancelled eval", used, s.Pos())
	}
	// Close while Generate runs: the blocks go back when the call returns.
	_, err = s.Generate(context.Background(), "a b c", GenerateOptions{MaxTokens: 40, IgnoreEOS: true}, func(string) error {
		if m.KVStats().Used() == 0 {
			t.Error("no block in use during generation")
		}
		return s.Close()
	})
	if !errors.Is(err, ErrClosed) {
		t.Fatalf("generate closed from its callback: %v", err)
	}
	allFree(t, m, "Close during Generate")

	// A session dropped without Close gives its blocks back when collected.
	func() {
		d, _ := m.NewSession()
		if _, err := d.Eval(testTokens); err != nil {
			t.Fatal(err)
		}
	}()
	for i := 0; i < 50 && m.KVStats().Sessions != 0; i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
	allFree(t, m, "a dropped session was collected")
}

// When the pool runs out, the session that needs a block fails with ErrKVFull and keeps its
// context as before the call; other sessions are untouched and go on exactly as alone; once
// blocks come back, the failed session goes on too.
func TestPagedPoolExhaustion(t *testing.T) {
	m := tinyModel(t, nil, Options{Threads: 1, KVPool: 64}) // 4 blocks
	alone := tinyModel(t, nil, Options{Threads: 1})
	want, _ := genText(t, mustSession(t, alone), "a b c", GenerateOptions{MaxTokens: 40, IgnoreEOS: true})

	a := mustSession(t, m)
	b := mustSession(t, m)
	if _, err := b.Eval(testTokens[:17]); err != nil { // 2 blocks
		t.Fatal(err)
	}
	var text bytes.Buffer
	collect := func(p string) error { text.WriteString(p); return nil }
	_, err := a.Generate(context.Background(), "a b c", GenerateOptions{MaxTokens: 40, IgnoreEOS: true}, collect)
	if !errors.Is(err, ErrKVFull) {
		t.Fatalf("generating past the pool: %v", err)
	}
	if st := m.KVStats(); st.Free != 0 || st.Denied == 0 {
		t.Fatalf("pool after the refusal: %+v", st)
	}
	if p := b.Pos(); p != 17 {
		t.Fatalf("the other session holds %d tokens", p)
	}
	// a holds what fitted: 32 evaluated tokens (its 2 blocks) and the token sampled last.
	if p := a.Pos(); p != 33 {
		t.Fatalf("the failed session holds %d tokens", p)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	generated := a.Pos() - len(m.Tokenize("a b c", true))
	if _, err := a.Generate(context.Background(), "", GenerateOptions{MaxTokens: 40 - generated, IgnoreEOS: true}, collect); err != nil {
		t.Fatalf("after blocks came back: %v", err)
	}
	if text.String() != want {
		t.Fatalf("text across the refusal %q, alone %q", text.String(), want)
	}
	a.Close()
	allFree(t, m, "exhaustion")
}

func mustSession(t *testing.T, m *Model) *Session {
	t.Helper()
	s, err := m.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// Concurrent sessions over one pool (batched steps through per-row block tables) each give
// the text they give alone, and leave every block free.
func TestPagedConcurrentSessions(t *testing.T) {
	m := tinyModel(t, nil, Options{Threads: 2})
	prompts := []string{"a b", "c d e f g h i j k l m n o p q r s", "t", "u v w"}
	opts := GenerateOptions{MaxTokens: 30, IgnoreEOS: true}
	want := make([]string, len(prompts))
	for i, p := range prompts {
		want[i], _ = genText(t, mustSession(t, m), p, opts)
	}
	got := make([]string, len(prompts))
	var wg sync.WaitGroup
	for i, p := range prompts {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s, err := m.NewSession()
			if err != nil {
				t.Error(err)
				return
			}
			defer s.Close()
			var sb bytes.Buffer
			if _, err := s.Generate(context.Background(), p, opts, func(x string) error { sb.WriteString(x); return nil }); err != nil {
				t.Error(err)
			}
			got[i] = sb.String()
		}()
	}
	wg.Wait()
	for i := range prompts {
		if got[i] != want[i] {
			t.Errorf("session %d: %q, alone %q", i, got[i], want[i])
		}
	}
	if m.DecodeStats().MaxRows < 2 {
		t.Log("no step was batched (the machine is slow or busy); texts still compared")
	}
}

// evalAt evaluates tokens in a new session of m and returns the logits after them (a copy),
// leaving the session open for more.
func evalAt(t *testing.T, m *Model, tokens []int32) (*Session, []float32) {
	t.Helper()
	s := mustSession(t, m)
	l, err := s.Eval(tokens)
	if err != nil {
		t.Fatal(err)
	}
	return s, append([]float32(nil), l...)
}

// Prefix caching: a session whose prompt starts like another's context takes its full blocks
// (from a running session, or cached after it closed) and computes bit-identical logits, as a
// model without the cache does; a session writing into a block it shares (after a rewind)
// copies it first, so the other session's later logits are untouched; cached blocks are
// reused for new data only when nothing else is free.
func TestPrefixCacheBitIdentical(t *testing.T) {
	cached := tinyModel(t, nil, Options{Threads: 1, KVPool: 8 * 16})
	plain := tinyModel(t, nil, Options{Threads: 1, NoPrefixCache: true})
	long := append(append(append([]int32{}, testTokens...), testTokens...), 9, 8, 7) // 43 tokens
	other := append(append([]int32{}, long[:37]...), 1, 2, 3)

	a, la := evalAt(t, cached, long)
	_, want := evalAt(t, plain, long)
	if i := sameBits(la, want); i >= 0 {
		t.Fatalf("logit %d of the first prompt differs", i)
	}
	// b starts like a's context: it takes a's two full blocks while a runs.
	b, lb := evalAt(t, cached, other)
	_, want = evalAt(t, plain, other)
	if i := sameBits(lb, want); i >= 0 {
		t.Fatalf("logit %d with a shared prefix differs", i)
	}
	if st := cached.KVStats(); st.Hits != 2 {
		t.Fatalf("%d blocks taken from the cache, want 2 (%+v)", st.Hits, st)
	}
	// a rewinds into its second (shared) block and writes there: it must copy it.
	if err := a.Rewind(20); err != nil {
		t.Fatal(err)
	}
	la2, err := a.Eval([]int32{100, 200, 300})
	if err != nil {
		t.Fatal(err)
	}
	_, want = evalAt(t, plain, append(append([]int32{}, long[:20]...), 100, 200, 300))
	if i := sameBits(la2, want); i >= 0 {
		t.Fatalf("logit %d after writing into a shared block differs", i)
	}
	lb2, err := b.Eval([]int32{42})
	if err != nil {
		t.Fatal(err)
	}
	_, want = evalAt(t, plain, append(append([]int32{}, other...), 42))
	if i := sameBits(lb2, want); i >= 0 {
		t.Fatalf("logit %d of the sharing session after the other wrote differs: its block was not copied", i)
	}
	a.Close()
	b.Close()
	st := cached.KVStats()
	if st.Free != st.Blocks || st.Cached == 0 {
		t.Fatalf("after both closed: %+v", st)
	}
	// A later session takes the cached blocks; with the cache off, it computes them.
	hits := st.Hits
	c, lc := evalAt(t, cached, long)
	_, want = evalAt(t, plain, long)
	if i := sameBits(lc, want); i >= 0 {
		t.Fatalf("logit %d from cached blocks differs", i)
	}
	if got := cached.KVStats().Hits - hits; got != 2 {
		t.Fatalf("%d blocks taken after the sessions closed, want 2", got)
	}
	c.SetPrefixCache(false)
	if err := c.Reset(); err != nil {
		t.Fatal(err)
	}
	hits = cached.KVStats().Hits
	if _, err := c.Eval(long); err != nil {
		t.Fatal(err)
	}
	if got := cached.KVStats().Hits - hits; got != 0 {
		t.Fatalf("%d blocks taken with SetPrefixCache(false)", got)
	}
	c.Close()
	// Filling the pool with other data reuses the cached blocks (least recently cached first).
	var fills []*Session
	for k := range 4 { // 4 sessions of 2 blocks: the whole pool
		fill := mustSession(t, cached)
		fills = append(fills, fill)
		ids := make([]int32, 31)
		for i := range ids {
			ids[i] = int32(400 + k*20 + i%20)
		}
		if _, err := fill.Eval(ids); err != nil {
			t.Fatalf("filling a pool of cached blocks: %v", err)
		}
	}
	if st := cached.KVStats(); st.Free != 0 || st.Cached != 0 {
		t.Fatalf("with the pool filled: %+v", st)
	}
	for _, s := range fills {
		s.Close()
	}
	allFree(t, cached, "prefix caching")
}
