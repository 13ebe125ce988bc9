package llm

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/internal/testmodel"
	"github.com/gorun-dev/gorun/quant"
	"github.com/gorun-dev/gorun/quantize"
)

// fuzzSeed is a valid tiny model split where the fuzzer works on it: the header (magic,
// counts, metadata, tensor infos) and the tensor data.
type fuzzSeed struct {
	header, data []byte
}

var (
	fuzzSeedsOnce sync.Once
	fuzzSeeds     []fuzzSeed
	fuzzSeedsErr  error
)

// loadFuzzSeeds writes a few tiny models (f16 and f32 matrices, tied and separate output, and
// a q8_0 copy) and splits each into header and data.
func loadFuzzSeeds(dir string) ([]fuzzSeed, error) {
	fuzzSeedsOnce.Do(func() {
		base := testmodel.Config{Name: "fuzz", NVocab: 300, NCtx: 16, NEmbd: 32, NHead: 2, NLayer: 1, NFF: 64, Type: quant.F16, Seed: 7}
		var paths []string
		for i, edit := range []func(c *testmodel.Config){
			func(c *testmodel.Config) {},
			func(c *testmodel.Config) { c.Type, c.NoOutput = quant.F32, true },
			func(c *testmodel.Config) { c.NLayer, c.NCtx = 2, 8 },
		} {
			c := base
			edit(&c)
			p := filepath.Join(dir, fmt.Sprintf("seed%d.gguf", i))
			if fuzzSeedsErr = testmodel.Write(p, c); fuzzSeedsErr != nil {
				return
			}
			paths = append(paths, p)
		}
		q := filepath.Join(dir, "seedq.gguf")
		if _, fuzzSeedsErr = quantize.File(paths[0], q, quantize.Options{FileType: quantize.FileQ8_0, Threads: 1, Pure: true}); fuzzSeedsErr != nil {
			return
		}
		for _, p := range append(paths, q) {
			b, err := os.ReadFile(p)
			if err != nil {
				fuzzSeedsErr = err
				return
			}
			f, err := gguf.Parse(b)
			if err != nil {
				fuzzSeedsErr = err
				return
			}
			fuzzSeeds = append(fuzzSeeds, fuzzSeed{header: b[:f.DataOffset], data: b[f.DataOffset:]})
		}
	})
	return fuzzSeeds, fuzzSeedsErr
}

// FuzzLoad mutates the header, metadata and tensor-info bytes of valid tiny models (the data
// section of the chosen seed follows, at the alignment) and runs what a user would: Load, a
// 4-token generation, perplexity on a short text and quantize. Any input must end in an error
// or a result, never a panic, within 10 s and 1 GB of allocation.
func FuzzLoad(f *testing.F) {
	seeds, err := loadFuzzSeeds(f.TempDir())
	if err != nil {
		f.Fatal(err)
	}
	for i, s := range seeds {
		if _, err := newModel(must(gguf.Parse(append(append([]byte(nil), s.header...), s.data...))), Options{Threads: 1}); err != nil {
			f.Fatalf("seed %d does not load: %v", i, err)
		}
		f.Add(uint8(i), s.header)
	}
	dir := f.TempDir()
	f.Fuzz(func(t *testing.T, which uint8, header []byte) {
		s := seeds[int(which)%len(seeds)]
		b := make([]byte, 0, len(header)+32+len(s.data))
		b = append(b, header...)
		for len(b)%32 != 0 {
			b = append(b, 0)
		}
		b = append(b, s.data...)
		timer := time.AfterFunc(10*time.Second, func() {
			panic(fmt.Sprintf("input ran over 10 s (header %q)", header))
		})
		before := heapAllocs()
		exerciseModel(t, b, dir)
		timer.Stop()
		if used := heapAllocs() - before; used > 1<<30 {
			t.Fatalf("allocated %d bytes", used)
		}
	})
}

// exerciseModel loads a model from b and, when that works, generates, scores and quantizes.
func exerciseModel(t *testing.T, b []byte, dir string) {
	f, err := gguf.Parse(b)
	if err != nil {
		return
	}
	m, err := newModel(f, Options{Threads: 1, MemoryLimit: 256 << 20})
	if err != nil {
		return
	}
	defer m.Close()
	if s, err := m.NewSession(); err == nil {
		s.Generate(context.Background(), "Hello world", GenerateOptions{MaxTokens: 4, Sample: SampleOptions{Temperature: 0, RepeatPenalty: 1}}, func(string) error { return nil })
		toks := m.Tokenizer().Encode(strings.Repeat("The quick brown fox jumps over the lazy dog. ", 4))
		s.Perplexity(context.Background(), toks, PerplexityOptions{Chunk: min(8, m.ContextLength())})
	}
	in := filepath.Join(dir, "in.gguf")
	if err := os.WriteFile(in, b, 0o644); err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "out.gguf")
	if _, err := quantize.File(in, out, quantize.Options{FileType: quantize.FileQ8_0, Threads: 1}); err == nil {
		if st, err := os.Stat(out); err == nil && st.Size() > 4*int64(len(b))+1<<20 {
			t.Fatalf("quantizing %d bytes wrote %d", len(b), st.Size())
		}
	}
	os.Remove(out)
}

func must[T any](x T, err error) T {
	if err != nil {
		panic(err)
	}
	return x
}
