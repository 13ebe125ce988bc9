package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/gorun-dev/gorun/cpu/kernels"
	"github.com/gorun-dev/gorun/llm"
	"github.com/klauspost/cpuid/v2"
)

// benchResult is one row of the table: a test repeated several times. The JSON names are
// llama-bench's, so tools written for llama-bench's -o json read gorun's too.
type benchResult struct {
	File     string    `json:"model_filename"`
	Model    string    `json:"model_type"`
	Size     int64     `json:"model_size"`
	Params   int64     `json:"model_n_params"`
	Backend  string    `json:"backends"`
	CPUInfo  string    `json:"cpu_info"`
	GPUInfo  string    `json:"gpu_info"`
	Kernels  string    `json:"cpu_kernels"` // gorun's SIMD tier (no llama-bench equivalent)
	Threads  int       `json:"n_threads"`
	GPU      int       `json:"n_gpu_layers"`
	TypeK    string    `json:"type_k"`
	TypeV    string    `json:"type_v"`
	NPrompt  int       `json:"n_prompt"`
	NGen     int       `json:"n_gen"`
	Time     string    `json:"test_time"`
	AvgNs    int64     `json:"avg_ns"`
	StdNs    int64     `json:"stddev_ns"`
	Mean     float64   `json:"avg_ts"`
	Stddev   float64   `json:"stddev_ts"`
	SampleNs []int64   `json:"samples_ns"`
	Samples  []float64 `json:"samples_ts"`
	Test     string    `json:"-"`
}

func cmdBench(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench", "gorun bench -m MODEL.gguf [-p 512] [-n 128] [-r 5] [-t 2,4]: measure prompt and generation speed (like llama-bench)", stderr)
	var models modelList
	fs.Var(&models, "m", "model `FILE` (GGUF); several as -m a -m b or -m a,b")
	fs.Var(&models, "model", "same as -m")
	pp := fs.String("p", "512", "prompt lengths to test, comma-separated (0: none)")
	tg := fs.String("n", "128", "generation lengths to test, comma-separated (0: none)")
	reps := fs.Int("r", 5, "repetitions of each test")
	threads := fs.String("t", "", "thread counts, comma-separated (default: one per physical core)")
	output := fs.String("o", "md", "output format: md or json")
	ngl := fs.Int("ngl", 0, "layers to offload to the GPU (a CUDA build offloads all or none: 99 for all)")
	fs.IntVar(ngl, "n-gpu-layers", 0, "same as -ngl")
	qact := fs.Bool("quantized-activations", false, "quantize activations to 8 bits for quantized weights (ggml's integer path) instead of float32")
	pos, err := parseFlags(fs, args)
	switch {
	case err != nil:
		return err
	case len(pos) > 0:
		return usageError(fs, stderr, "unexpected argument %q", pos[0])
	case len(models) == 0:
		return usageError(fs, stderr, "no model: use -m FILE")
	}
	for i := range models {
		if err := resolveModel(&models[i], stderr); err != nil {
			return err
		}
		if _, err := os.Stat(models[i]); err != nil {
			return fmt.Errorf("-m: %w", err) // before the table's header, as llama-bench
		}
	}
	switch {
	case *reps < 1:
		return usageError(fs, stderr, "-r must be at least 1")
	case *output != "md" && *output != "json":
		return usageError(fs, stderr, "-o must be md or json")
	}
	pps, err1 := intList(*pp)
	tgs, err2 := intList(*tg)
	ths, err3 := intList(*threads)
	if err := firstErr(err1, err2, err3); err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	if len(ths) == 0 {
		ths = []int{0}
	}
	var results []benchResult
	if *output == "md" {
		fmt.Fprintf(stdout, "| %-24s | %10s | %10s | %-7s | %7s | %8s | %20s |\n", "model", "size", "params", "backend", "threads", "test", "t/s")
		fmt.Fprintf(stdout, "| %s | %s: | %s: | %s | %s: | %s: | %s: |\n", strings.Repeat("-", 24), strings.Repeat("-", 9), strings.Repeat("-", 9), strings.Repeat("-", 7), strings.Repeat("-", 6), strings.Repeat("-", 7), strings.Repeat("-", 19))
	}
	for i := range models {
		if err := benchModel(models[i], ths, pps, tgs, *reps, *ngl, *qact, *output, stdout, stderr, &results); err != nil {
			return err
		}
	}
	if *output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(results)
	}
	return nil
}

// modelList is bench's -m: repeatable, and each value a comma-separated list (llama-bench's).
type modelList []string

func (l *modelList) String() string { return strings.Join(*l, ",") }
func (l *modelList) Set(s string) error {
	for _, f := range strings.Split(s, ",") {
		if f != "" {
			*l = append(*l, f)
		}
	}
	return nil
}

// benchModel runs every test of one model and appends the results (printing the rows of the
// markdown table as they come).
func benchModel(path string, ths, pps, tgs []int, reps, ngl int, qact bool, output string, stdout, stderr io.Writer, results *[]benchResult) error {
	for _, th := range ths {
		if ngl < 0 {
			return fmt.Errorf("-ngl %d: the layer count must be >= 0", ngl)
		}
		m, err := loadOnDevice(path, llm.Options{Threads: th, GPULayers: ngl, QuantizedActivations: qact}, stderr)
		if err != nil {
			return err
		}
		gpuInfo := ""
		if name := m.Backend().Name(); name != "cpu" {
			gpuInfo = name
		}
		run := func(test string, n int, f func(*llm.Session, []int32) error) error {
			if n <= 0 {
				return nil
			}
			if n > m.ContextLength() {
				return fmt.Errorf("%s needs %d tokens; the model's context holds %d", test, n, m.ContextLength())
			}
			r, err := benchTest(m, test, n, reps, f)
			if err != nil {
				return err
			}
			r.GPUInfo, r.GPU = gpuInfo, ngl
			if strings.HasPrefix(test, "pp") {
				r.NPrompt = n
			} else {
				r.NGen = n
			}
			*results = append(*results, r)
			if output == "md" {
				fmt.Fprintf(stdout, "| %-24s | %6.2f MiB | %8.2f M | %-7s | %7d | %8s | %12.2f ± %5.2f |\n", r.Model, float64(r.Size)/(1<<20), float64(r.Params)/1e6, r.Backend, r.Threads, r.Test, r.Mean, r.Stddev)
			}
			return nil
		}
		for _, n := range pps {
			if err := run(fmt.Sprintf("pp%d", n), n, benchPrompt); err != nil {
				m.Close()
				return err
			}
		}
		for _, n := range tgs {
			if err := run(fmt.Sprintf("tg%d", n), n, benchGenerate); err != nil {
				m.Close()
				return err
			}
		}
		m.Close()
	}
	return nil
}

// benchPrompt evaluates the tokens as one prompt.
func benchPrompt(s *llm.Session, toks []int32) error {
	_, err := s.Eval(toks)
	return err
}

// benchGenerate evaluates the tokens one at a time, as generation does.
func benchGenerate(s *llm.Session, toks []int32) error {
	for i := range toks {
		if _, err := s.Eval(toks[i : i+1]); err != nil {
			return err
		}
	}
	return nil
}

// benchTest runs a warm-up and reps timed runs of f over n random tokens in a fresh context.
func benchTest(m *llm.Model, test string, n, reps int, f func(*llm.Session, []int32) error) (benchResult, error) {
	hp := m.Hparams()
	r := benchResult{File: m.Path(), Model: modelLabel(m), Backend: strings.ToUpper(m.Backend().Name()), Threads: m.Threads(),
		Test: test, CPUInfo: cpuid.CPU.BrandName, Kernels: kernels.Active().String(), TypeK: "f32", TypeV: "f32",
		Time: time.Now().UTC().Format(time.RFC3339)}
	for _, t := range m.File().Tensors { // as llama-bench counts: every tensor of the file
		r.Size += t.Size
		r.Params += t.Elements()
	}
	s, err := m.NewSession()
	if err != nil {
		return r, err
	}
	rng := rand.New(rand.NewPCG(1, 2))
	toks := make([]int32, n)
	for i := range toks {
		toks[i] = int32(rng.IntN(hp.NVocab))
	}
	for i := 0; i <= reps; i++ {
		s.Reset()
		start := time.Now()
		if err := f(s, toks); err != nil {
			return r, err
		}
		if i > 0 { // the first run warms caches and builds graphs
			d := time.Since(start)
			r.SampleNs = append(r.SampleNs, d.Nanoseconds())
			r.Samples = append(r.Samples, float64(n)/d.Seconds())
		}
	}
	r.Mean, r.Stddev = meanStd(r.Samples)
	ns := make([]float64, len(r.SampleNs))
	for i, v := range r.SampleNs {
		ns[i] = float64(v)
	}
	avg, sd := meanStd(ns)
	r.AvgNs, r.StdNs = int64(avg), int64(sd)
	return r, nil
}

func modelLabel(m *llm.Model) string {
	ft := "?"
	if v, err := m.File().Uint("general.file_type"); err == nil {
		ft = fileTypeName(v)
	}
	return fmt.Sprintf("%s %s", m.Hparams().Arch, ft)
}

func meanStd(x []float64) (float64, float64) {
	var s float64
	for _, v := range x {
		s += v
	}
	mean := s / float64(len(x))
	if len(x) < 2 {
		return mean, 0
	}
	var ss float64
	for _, v := range x {
		ss += (v - mean) * (v - mean)
	}
	return mean, math.Sqrt(ss / float64(len(x)-1))
}

func intList(s string) ([]int, error) {
	var out []int
	for _, f := range strings.Split(s, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("%q is not a count", f)
		}
		out = append(out, n)
	}
	return out, nil
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}
