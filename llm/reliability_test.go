package llm

import (
	"context"
	"errors"
	"math"
	"os"
	"path/filepath"
	"runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/internal/testmodel"
	"github.com/gorun-dev/gorun/quant"
	"github.com/gorun-dev/gorun/quantize"
)

func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// bounded runs f and fails the test when it takes longer than d or allocates more than bytes
// on the heap.
func bounded(t *testing.T, what string, d time.Duration, bytes uint64, f func()) {
	t.Helper()
	start, before := time.Now(), heapAllocs()
	f()
	if took, used := time.Since(start), heapAllocs()-before; took > d || used > bytes {
		t.Errorf("%s took %v and allocated %d bytes (bounds: %v, %d)", what, took, used, d, bytes)
	}
}

// craft writes a test model, changing tensors' types (their data then zero) and metadata.
func craft(t *testing.T, c testmodel.Config, types map[string]quant.Type, kv map[string]any) string {
	t.Helper()
	src, data, err := testmodel.Writer(c)
	if err != nil {
		t.Fatal(err)
	}
	w := gguf.NewWriter()
	for _, e := range src.KV() {
		v := any(e.Value)
		if x, ok := kv[e.Key]; ok {
			v = x
		}
		if err := w.Set(e.Key, v); err != nil {
			t.Fatal(err)
		}
	}
	for _, ti := range src.Tensors() {
		typ := ti.Type
		if nt, ok := types[ti.Name]; ok {
			typ = nt
		}
		if err := w.AddTensor(ti.Name, typ, ti.Dims); err != nil {
			t.Fatal(err)
		}
	}
	srcT := src.Tensors()
	path := filepath.Join(t.TempDir(), "crafted.gguf")
	err = w.WriteFile(path, func(i int, ti *gguf.TensorInfo) ([]byte, error) {
		if ti.Type == srcT[i].Type {
			return data(i, &srcT[i])
		}
		return make([]byte, ti.Size), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return path
}

func tinyConfig() testmodel.Config {
	c, _ := testmodel.Preset("tiny")
	return c
}

// Issue 8, row 1: a weight stored in an activation format (Q8_1, Q8_K: no dot product with
// float32) is refused by Load, naming the tensor, instead of panicking in a worker.
func TestActivationTypeWeightsRefused(t *testing.T) {
	c := tinyConfig()
	c.NEmbd, c.NFF = 256, 512 // Q8_K needs rows of 256
	for name, typ := range map[string]quant.Type{"blk.0.ffn_up.weight": quant.Q8_1, "output.weight": quant.Q8_K, "blk.1.attn_qkv.weight": quant.Q8_K, "blk.0.attn_norm.bias": quant.F16} {
		path := craft(t, c, map[string]quant.Type{name: typ}, nil)
		m, err := Load(path, Options{Threads: 2})
		if err == nil {
			s, err := m.NewSession()
			if err == nil {
				s.Generate(context.Background(), "hi", GenerateOptions{MaxTokens: 2}, func(string) error { return nil })
			}
			m.Close()
			t.Fatalf("%s as %v loaded", name, typ)
		}
		if !strings.Contains(err.Error(), `tensor "`+name+`"`) || !strings.Contains(err.Error(), typ.String()) {
			t.Errorf("%s as %v: %v", name, typ, err)
		}
	}
}

// Issue 8, row 2: a small file whose metadata asks for a huge KV cache (1024 layers, 131072
// positions: 8 GiB here) is refused before anything is allocated, with the sizes and the
// flags to change; the limit is the machine's available memory unless set.
func TestMemoryBudgetRefusesHugeContext(t *testing.T) {
	c := tinyConfig()
	c.NLayer, c.NCtx, c.NEmbd, c.NHead, c.NFF = 1024, 131072, 8, 1, 8
	path := craft(t, c, nil, nil)
	defer func(f func() (int64, bool)) { memAvailable = f }(memAvailable)
	memAvailable = func() (int64, bool) { return 4 << 30, true }
	for _, limit := range []int64{0, 1 << 30} {
		var err error
		bounded(t, "refusing", 10*time.Second, 256<<20, func() { _, err = Load(path, Options{Threads: 2, MemoryLimit: limit}) })
		if !errors.Is(err, ErrOutOfMemory) || !strings.Contains(err.Error(), "KV cache 8.0 GiB") || !strings.Contains(err.Error(), "(-c)") {
			t.Fatalf("limit %d: %v", limit, err)
		}
	}
	// With a context that fits, it loads; the estimate is what an application sees.
	m, err := Load(path, Options{Threads: 2, ContextLength: 64})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	e, err := m.EstimateMemory(131072)
	if err != nil || e.KVCache != 2*1024*8*4*131072 {
		t.Fatalf("%+v %v", e, err)
	}
}

// Issue 8, row 12: a wide feed-forward layer (2^18) makes perplexity's batch graph need about
// 1 GiB of arena for -c 512; the estimate says so, and a limit refuses it at once.
func TestMemoryBudgetWideFeedForward(t *testing.T) {
	c := tinyConfig()
	c.NCtx, c.NEmbd, c.NHead, c.NLayer, c.NFF = 512, 4, 1, 1, 1<<18
	path := craft(t, c, nil, nil)
	var err error
	bounded(t, "refusing", 5*time.Second, 64<<20, func() {
		_, err = Load(path, Options{Threads: 2, BatchSize: 512, MemoryLimit: 256 << 20})
	})
	if !errors.Is(err, ErrOutOfMemory) || !strings.Contains(err.Error(), "compute 1.") {
		t.Fatalf("%v", err)
	}
	m, err := Load(path, Options{Threads: 2, BatchSize: 512, MemoryLimit: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	if e, _ := m.EstimateMemory(512); e.Compute < 1<<30 || e.Compute > 3<<30 {
		t.Errorf("compute estimate %s", FormatBytes(e.Compute))
	}
}

// The estimate covers what a session really allocates (KV cache, arenas, scratch), and not
// many times more.
func TestEstimateMatchesAllocation(t *testing.T) {
	m := tinyModel(t, nil, Options{Threads: 2})
	e, err := m.EstimateMemory(0)
	if err != nil {
		t.Fatal(err)
	}
	if want := int64(2 * 2 * 64 * 64 * 4); e.KVCache != want {
		t.Errorf("KV cache %d, want %d", e.KVCache, want)
	}
	n := m.ContextLength()
	tokens := make([]int32, n)
	for i := range tokens {
		tokens[i] = int32(i * 7 % 512)
	}
	logits := make([]float32, n*512)
	// The heap counter is process-wide: the least of three sessions leaves out whatever
	// another test's goroutines allocated meanwhile.
	used := int64(math.MaxInt64)
	for range 3 {
		before := heapAllocs()
		s, err := m.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		if err := s.EvalLogits(tokens, 0, logits); err != nil {
			t.Fatal(err)
		}
		s.Reset()
		if _, err := s.Eval(tokens[:1]); err != nil {
			t.Fatal(err)
		}
		used = min(used, int64(heapAllocs()-before))
		s.Close()
	}
	if used > e.Session() || used < e.Session()/8 {
		t.Errorf("a session allocated %s; estimated %v", FormatBytes(used), e)
	}
}

// Issue 8, row 5: absurd thread counts are refused before any thread starts.
func TestThreadCap(t *testing.T) {
	path := craft(t, tinyConfig(), nil, nil)
	var err error
	bounded(t, "refusing", 2*time.Second, 16<<20, func() { _, err = Load(path, Options{Threads: 2000000}) })
	if err == nil || !strings.Contains(err.Error(), "2000000 threads: at most") {
		t.Fatal(err)
	}
	bounded(t, "refusing", 2*time.Second, 16<<20, func() {
		_, err = quantize.File(path, filepath.Join(t.TempDir(), "q.gguf"), quantize.Options{FileType: quantize.FileQ8_0, Threads: 2000000})
	})
	if err == nil || !strings.Contains(err.Error(), "2000000 threads: at most") {
		t.Fatal(err)
	}
	if _, err := Load(path, Options{Threads: MaxThreads()}); err != nil {
		t.Fatal(err)
	}
}

// Issue 8, row 11: a vocabulary far larger than the model's embeddings (two million empty
// tokens) is refused after costing its bytes in the file, before a tokenizer is built.
func TestVocabularyCheckedBeforeTokenizer(t *testing.T) {
	const n = 2 << 20
	tokens := make([]string, n)
	tokens[0] = "<|endoftext|>"
	types := make([]int32, n)
	path := craft(t, tinyConfig(), nil, map[string]any{"tokenizer.ggml.tokens": tokens, "tokenizer.ggml.token_type": types})
	st, _ := os.Stat(path)
	for _, load := range []func() error{
		func() error { _, err := Load(path, Options{Threads: 2}); return err },
		func() error { _, err := LoadTokenizer(path); return err },
	} {
		var err error
		bounded(t, "refusing", 5*time.Second, uint64(st.Size())+8<<20, func() { err = load() })
		if err == nil || !strings.Contains(err.Error(), "tokenizer.ggml.tokens has 2097152 entries but token_embd.weight has 512 rows") {
			t.Fatal(err)
		}
	}
}

// Issue 8, row 8: perplexity that would score no token is an error, never PPL 0.
func TestPerplexityScoresSomething(t *testing.T) {
	m := tinyModel(t, nil, Options{Threads: 2})
	s, err := m.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	tokens := testTokens
	for _, c := range []struct {
		chunk int
		all   bool
		toks  []int32
		want  string
	}{
		{2, false, tokens, "scores no token"},
		{1, true, tokens, "must be 2.."},
		{16, false, tokens[:10], "fewer than one chunk"},
		{8, false, nil, "fewer than one chunk"},
	} {
		res, err := s.Perplexity(context.Background(), c.toks, PerplexityOptions{Chunk: c.chunk, ScoreAll: c.all})
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("chunk %d score-all %v: %+v, %v; want %q", c.chunk, c.all, res, err, c.want)
		}
	}
	for _, c := range []struct {
		chunk int
		all   bool
	}{{3, false}, {2, true}} {
		res, err := s.Perplexity(context.Background(), tokens, PerplexityOptions{Chunk: c.chunk, ScoreAll: c.all})
		if err != nil || res.Scored == 0 || !(res.PPL > 1) {
			t.Errorf("chunk %d: %+v %v", c.chunk, res, err)
		}
	}
}

// Issue 8, row 3: quantize of a 3 KB file whose general.alignment is 2^31 used to write 2 GiB
// of padding; the reader refuses the alignment (at most 1 MiB) at once and nothing is written.
func TestQuantizeHugeAlignment(t *testing.T) {
	var b []byte
	le32 := func(v uint32) { b = append(b, byte(v), byte(v>>8), byte(v>>16), byte(v>>24)) }
	le64 := func(v uint64) { le32(uint32(v)); le32(uint32(v >> 32)) }
	str := func(s string) { le64(uint64(len(s))); b = append(b, s...) }
	b = append(b, "GGUF"...)
	le32(3)
	le64(0) // tensors
	le64(3) // metadata
	str("general.architecture")
	le32(uint32(gguf.TypeString))
	str("gpt2")
	str("general.alignment")
	le32(uint32(gguf.TypeUint32))
	le32(1 << 31)
	str("general.description")
	le32(uint32(gguf.TypeString))
	str(strings.Repeat("x", 3000))
	dir := t.TempDir()
	in, out := filepath.Join(dir, "in.gguf"), filepath.Join(dir, "out.gguf")
	if err := os.WriteFile(in, b, 0o644); err != nil {
		t.Fatal(err)
	}
	var err error
	bounded(t, "quantize", 2*time.Second, 1<<20, func() {
		_, err = quantize.File(in, out, quantize.Options{FileType: quantize.FileQ8_0, Threads: 1})
	})
	if err == nil || !strings.Contains(err.Error(), "general.alignment is 2147483648, must be a power of two of at most 1048576") {
		t.Fatal(err)
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("left %v", entries)
	}
}
