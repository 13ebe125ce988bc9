package llm

import (
	"flag"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/gorun-dev/gorun/internal/testmodel"
	"github.com/gorun-dev/gorun/quantize"
)

var (
	benchThreads = flag.Int("threads", 2, "CPU threads for the benchmarks")
	benchShape   = flag.String("shape", "124M", "GPT-2 shape for the benchmarks (testmodel preset)")
	benchRecipe  = flag.String("recipe", "f16", "quantization recipe of the benchmark model")
	benchFile    = flag.String("model", "", "GGUF file for the benchmarks instead of a generated GPT-2 (-shape, -recipe ignored)")
)

// benchQAct is -qact: the benchmark model's quantized activations (auto, true or false).
var benchQAct qactFlag

func init() {
	flag.Var(&benchQAct, "qact", "8-bit activations (ggml's integer path): auto, true (or alone) or false")
}

// qactFlag reads a QuantAct as a flag that may stand alone (on).
type qactFlag QuantAct

func (v *qactFlag) String() string   { return QuantAct(*v).String() }
func (v *qactFlag) IsBoolFlag() bool { return true }
func (v *qactFlag) Set(s string) error {
	q, err := ParseQuantAct(s)
	*v = qactFlag(q)
	return err
}

var (
	benchOnce sync.Once
	benchDir  string
	benchPath string
	benchErr  error
)

// TestMain removes the benchmark model (hundreds of MB) when the test binary ends.
func TestMain(m *testing.M) {
	code := m.Run()
	if benchDir != "" {
		os.RemoveAll(benchDir)
	}
	os.Exit(code)
}

// benchModel writes the random model of the benchmark shape once per test binary run.
func benchModel(b *testing.B) *Model {
	benchOnce.Do(func() {
		if *benchFile != "" {
			benchPath = *benchFile
			return
		}
		dir, err := os.MkdirTemp("", "gorun-bench")
		if err != nil {
			benchErr = err
			return
		}
		benchDir = dir
		c, err := testmodel.Preset(*benchShape)
		if err != nil {
			benchErr = err
			return
		}
		benchPath = filepath.Join(dir, *benchShape+".gguf")
		if benchErr = testmodel.Write(benchPath, c); benchErr != nil || *benchRecipe == "f16" {
			return
		}
		ft, err := quantize.ParseFileType(*benchRecipe)
		if err != nil {
			benchErr = err
			return
		}
		q := filepath.Join(dir, *benchShape+"-"+*benchRecipe+".gguf")
		if _, benchErr = quantize.File(benchPath, q, quantize.Options{FileType: ft, Reference: true}); benchErr == nil {
			benchPath = q
		}
	})
	if benchErr != nil {
		b.Fatal(benchErr)
	}
	m, err := Load(benchPath, Options{Threads: *benchThreads, QuantizedActivations: QuantAct(benchQAct)})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { m.Close() })
	return m
}

// BenchmarkDecode measures generation: one token per op through the KV cache, reported as
// tokens/s (like llama-bench's tg test), at context positions 16..16+N.
func BenchmarkDecode(b *testing.B) {
	m := benchModel(b)
	s, err := m.NewSession()
	if err != nil {
		b.Fatal(err)
	}
	prompt := make([]int32, 16)
	one := []int32{464}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		if s.Pos()+1 > 512 || i == 0 {
			b.StopTimer()
			s.Reset()
			if _, err := s.Eval(prompt); err != nil {
				b.Fatal(err)
			}
			b.StartTimer()
		}
		if _, err := s.Eval(one); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "tokens/s")
	reportCPU(b, cpu0, b.N)
}

// BenchmarkPrompt measures prompt processing of 128 tokens per op (llama-bench's pp test).
func BenchmarkPrompt(b *testing.B) {
	m := benchModel(b)
	s, err := m.NewSession()
	if err != nil {
		b.Fatal(err)
	}
	prompt := make([]int32, 128)
	for i := range prompt {
		prompt[i] = int32(i * 37 % 50000)
	}
	b.ResetTimer()
	cpu0 := processCPU()
	for i := 0; i < b.N; i++ {
		s.Reset()
		if _, err := s.Eval(prompt); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.N*len(prompt))/b.Elapsed().Seconds(), "tokens/s")
	reportCPU(b, cpu0, b.N*len(prompt))
}

// reportCPU adds the process CPU time per token: on a shared machine wall time also counts
// other processes' turns, CPU time does not (with one thread it is the compute time).
func reportCPU(b *testing.B, cpu0 time.Duration, tokens int) {
	if c := processCPU() - cpu0; c > 0 {
		b.ReportMetric(float64(c.Microseconds())/1000/float64(tokens), "cpu-ms/token")
	}
}

func processCPU() time.Duration {
	return procCPUTime() // cputime_*_test.go: getrusage where there is one
}
