package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"math/rand/v2"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"github.com/gorun-dev/gorun/cpu/kernels"
	"github.com/gorun-dev/gorun/hub"
	"github.com/gorun-dev/gorun/llm"
	"github.com/gorun-dev/gorun/models"
	"github.com/gorun-dev/gorun/quant"
	"github.com/klauspost/cpuid/v2"
)

// benchResult is one row of the table: a test repeated several times. Its JSON is
// llama-bench's -o json, field for field and in its order, so a script written for
// llama-bench reads gorun's unchanged; the fields describe what gorun did (type_k f32: its KV
// cache; flash_attn false: it has no flash-attention switch; use_mmap true: it maps the model).
type benchResult struct {
	BuildCommit string    `json:"build_commit"` // the VCS revision the binary was built from
	BuildNumber int       `json:"build_number"` // llama.cpp's commit count: 0, gorun has none
	CPUInfo     string    `json:"cpu_info"`
	GPUInfo     string    `json:"gpu_info"`
	Backend     string    `json:"backends"`
	File        string    `json:"model_filename"`
	Model       string    `json:"model_type"` // "gpt2 0.1B Q8_0": architecture, size label, file type
	Size        int64     `json:"model_size"`
	Params      int64     `json:"model_n_params"`
	NBatch      int       `json:"n_batch"`
	NUbatch     int       `json:"n_ubatch"`
	Threads     int       `json:"n_threads"`
	CPUMask     string    `json:"cpu_mask"`
	CPUStrict   bool      `json:"cpu_strict"`
	Poll        int       `json:"poll"`
	TypeK       string    `json:"type_k"`
	TypeV       string    `json:"type_v"`
	GPU         int       `json:"n_gpu_layers"`
	SplitMode   string    `json:"split_mode"`
	MainGPU     int       `json:"main_gpu"`
	NoKVOffload bool      `json:"no_kv_offload"`
	FlashAttn   bool      `json:"flash_attn"`
	TensorSplit string    `json:"tensor_split"`
	UseMmap     bool      `json:"use_mmap"`
	Embeddings  bool      `json:"embeddings"`
	NPrompt     int       `json:"n_prompt"`
	NGen        int       `json:"n_gen"`
	Time        string    `json:"test_time"`
	AvgNs       int64     `json:"avg_ns"`
	StdNs       int64     `json:"stddev_ns"`
	Mean        float64   `json:"avg_ts"`
	Stddev      float64   `json:"stddev_ts"`
	SampleNs    []int64   `json:"samples_ns"`
	Samples     []float64 `json:"samples_ts"`
	Kernels     string    `json:"cpu_kernels"` // gorun's SIMD tier (no llama-bench equivalent)
	Test        string    `json:"-"`
}

// buildCommit is the short VCS revision of the binary, as llama.cpp's LLAMA_COMMIT ("unknown"
// when the build did not record it).
func buildCommit() string {
	rev, dirty := "", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "-dirty"
				}
			}
		}
	}
	if rev == "" {
		return "unknown"
	}
	return rev[:min(7, len(rev))] + dirty
}

// hfModels is bench's -hf: each adds hf://ORG/NAME[:QUANT] to the models.
type hfModels struct{ models *modelList }

func (h hfModels) String() string { return "" }
func (h hfModels) Set(s string) error {
	if _, _, err := hub.ParseRef(s); err != nil {
		return err
	}
	*h.models = append(*h.models, "hf://"+s)
	return nil
}

func cmdBench(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("bench", "gorun bench -m MODEL.gguf [-p 512] [-n 128] [-r 5] [-t 2,4]: measure prompt and generation speed (like llama-bench)", stderr)
	var models modelList
	fs.Var(&models, "m", "model `FILE` (GGUF); several as -m a -m b or -m a,b")
	fs.Var(&models, "model", "same as -m")
	fs.Var(hfModels{&models}, "hf", "model `ORG/NAME[:QUANT]` of the Hugging Face Hub, pulled if not in the cache; repeatable")
	fs.Var(hfModels{&models}, "hf-repo", "same as -hf")
	pp := fs.String("p", "512", "prompt lengths to test, `N,...` (0: none)")
	tg := fs.String("n", "128", "generation lengths to test, `N,...` (0: none)")
	reps := fs.Int("r", 5, "repetitions of each test")
	threads := fs.String("t", "", "thread counts, `N,...` (default: one per physical core)")
	output := fs.String("o", "md", "output `FORMAT`: md or json")
	ngl := fs.Int("ngl", 0, "layers to offload to the GPU (a CUDA build offloads all or none: 99 for all)")
	fs.IntVar(ngl, "n-gpu-layers", 0, "same as -ngl")
	var cache modelFlags // only its -ctk/-ctv
	fs.StringVar(&cache.cacheK, "ctk", "f32", "KV cache `TYPE` of the keys: f32 or f16 (-ctv must match)")
	fs.StringVar(&cache.cacheK, "cache-type-k", "f32", "same as -ctk")
	fs.StringVar(&cache.cacheV, "ctv", "f32", "KV cache `TYPE` of the values: f32 or f16")
	fs.StringVar(&cache.cacheV, "cache-type-v", "f32", "same as -ctv")
	var qact quantActFlag
	fs.Var(&qact, "quantized-activations", quantActHelp)
	pos, err := parseFlags(fs, args)
	switch {
	case err != nil:
		return err
	case len(pos) > 0:
		return usageError(fs, stderr, "unexpected argument %q", pos[0])
	case len(models) == 0:
		return usageError(fs, stderr, "no model: use -m FILE")
	}
	cacheType, err := cache.cacheType()
	if err != nil {
		return usageError(fs, stderr, "%v", err)
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
		if err := benchModel(models[i], ths, pps, tgs, *reps, *ngl, cacheType, llm.QuantAct(qact), *output, stdout, stderr, &results); err != nil {
			return err
		}
	}
	if *output == "json" {
		enc := json.NewEncoder(stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(results)
	}
	fmt.Fprintf(stdout, "\nbuild: %s (%d)\n", buildCommit(), 0) // llama-bench's last line
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
func benchModel(path string, ths, pps, tgs []int, reps, ngl int, cacheType quant.Type, qact llm.QuantAct, output string, stdout, stderr io.Writer, results *[]benchResult) error {
	for _, th := range ths {
		if ngl < 0 {
			return fmt.Errorf("-ngl %d: the layer count must be >= 0", ngl)
		}
		m, err := loadOnDevice(path, llm.Options{Threads: th, GPULayers: ngl, BatchSize: benchBatch, CacheType: cacheType, QuantizedActivations: qact,
			// every repetition evaluates the same tokens: a prefix cache would skip the work measured
			NoPrefixCache: true}, stderr)
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
	r := benchResult{BuildCommit: buildCommit(), File: m.Path(), Model: modelLabel(m), Backend: strings.ToUpper(m.Backend().Name()),
		Threads: m.Threads(), Test: test, CPUInfo: cpuid.CPU.BrandName, Kernels: kernels.Active().String(), TypeK: m.CacheType().String(), TypeV: m.CacheType().String(),
		NBatch: benchBatch, NUbatch: benchBatch, CPUMask: "0x0", Poll: 50, SplitMode: "layer", TensorSplit: "0.00", UseMmap: true,
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

// benchBatch is the prompt batch bench loads models with (llm's default, llama-bench's too).
const benchBatch = 512

// modelLabel is llama.cpp's model description: architecture, size label, file type
// ("gpt2 0.1B Q8_0", "llama 1B Q4_0", "gpt2 ?B F16").
func modelLabel(m *llm.Model) string {
	ft := "?"
	if v, err := m.File().Uint("general.file_type"); err == nil {
		ft = fileTypeName(v)
	}
	hp := m.Hparams()
	return fmt.Sprintf("%s %s %s", hp.Arch, sizeLabelOf(hp), ft)
}

// sizeLabelOf is llama.cpp's size label of a model (llm_type_name of the type its
// load_hparams chooses by layer count and width), "?B" where llama.cpp has none.
func sizeLabelOf(hp models.Hparams) string {
	switch hp.Arch {
	case "gpt2":
		switch hp.NLayer {
		case 12:
			return "0.1B"
		case 24:
			return "0.4B"
		case 36:
			return "0.8B"
		case 48:
			return "1.5B"
		}
	case "llama":
		switch hp.NLayer {
		case 16, 22:
			return "1B"
		case 26, 28:
			return "3B"
		case 32:
			switch {
			case hp.NVocab == 49152:
				return "3B"
			case hp.NVocab < 40000:
				return "7B"
			}
			return "8B"
		case 36:
			return "8B"
		case 40:
			return "13B"
		case 48:
			return "34B"
		case 60:
			return "30B"
		case 80:
			if hp.NHead == hp.NHeadKV {
				return "65B"
			}
			return "70B"
		}
	case "qwen2":
		switch hp.NLayer {
		case 24:
			if hp.NEmbd == 1024 {
				return "0.5B"
			}
			return "1B"
		case 28:
			if hp.NEmbd == 1536 {
				return "1.5B"
			}
			return "7B"
		case 32:
			return "7B"
		case 36:
			return "3B"
		case 40:
			if hp.NHead == 20 {
				return "4B"
			}
			return "13B"
		case 48:
			return "14B"
		case 64:
			return "32B"
		case 80:
			return "70B"
		}
	}
	return "?B"
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
