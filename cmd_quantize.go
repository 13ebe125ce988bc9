package main

import (
	"flag"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/internal/progress"
	"github.com/gorun-dev/gorun/llm"
	"github.com/gorun-dev/gorun/quant"
	"github.com/gorun-dev/gorun/quantize"
)

const quantizeSynopsis = `gorun quantize IN.gguf OUT.gguf TYPE [options]: write a quantized copy of a model

TYPE is a llama-quantize recipe: %s.
Each tensor gets the type llama-quantize gives it: matrices get TYPE; vectors (biases, norms),
position embeddings and expert routers stay as they are (F32); in the quantized recipes
output.weight (or a tied token_embd.weight) gets Q6_K (Q8_0 for q8_0); q4_k_m and q5_k_m give
attn_v and ffn_down Q6_K in the first and last eighth of the layers and every third layer
between, and attn_qkv Q5_K (q5_k_m: Q6_K); q4_k_s gives attn_v of the first 4 layers and ffn_down
of the first eighth Q5_K; the q3_k and q2_k recipes raise attn_v, ffn_down and attn_output (q2_k's
attn_v by the model's query heads per KV head); iq4_nl and iq4_xs (16 non-linear levels per
weight) give attn_v Q5_K with 4 or more query heads per KV head and, without an importance
matrix, ffn_down of the first eighth Q5_K; 70B-sized and 8-expert models get llama-quantize's
extra bits too. q3_k, q4_k and q5_k are llama-quantize's aliases of q3_k_m, q4_k_m and q5_k_m;
--pure gives every matrix the one type. --output-tensor-type and --token-embedding-type force a
ggml type (q8_0, q6_K, f16, ...) on those matrices, after the mixes and --pure, as llama-quantize
does; --leave-output-tensor copies output.weight as it is. A quantized input is requantized only
with --allow-requantize (tensors that keep their type are copied either way). --keep-split is
accepted and changes nothing: gorun's models are single files. Rows whose length is not a whole number of the type's
blocks fall back (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K, Q3_K and IQ4_XS -> IQ4_NL,
else F16), and the tool says so.
gorun's quantizers choose scales and rounding to minimize each block's error, weighted by an
importance matrix with --imatrix FILE (llama-imatrix's format; gorun imatrix writes it) or
--calib TEXT (computed in memory on the text); --calib TEXT --gptq also compensates each block's
error on the row's later columns (GPTQ, through the second moments of the calibration inputs); the files keep ggml's exact formats, so llama.cpp loads them.
--reference gives llama.cpp's own bytes instead.
--search picks how thoroughly gorun's quantizers search: grid (the default; alias fast) tries a
grid of candidate scales per block: within 2x of llama-quantize's time, never worse than
llama.cpp's per block; full sweeps every rounding of a window of scales: 2-8x grid's time for
0.1-0.25%% less weight error (below what perplexity or KL divergence resolve), the bytes gorun
wrote before grid became the default. Both give the same bytes for any -t.`

func cmdQuantize(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("quantize", fmt.Sprintf(quantizeSynopsis, strings.Join(quantize.FileTypeNames(), ", ")), stderr)
	threads := fs.Int("t", 0, "`threads` (default: one per physical core)")
	pure := fs.Bool("pure", false, "give every quantized matrix the recipe's type (no mixing)")
	reference := fs.Bool("reference", false, "use the reference quantizers (llama.cpp's bytes) instead of gorun's error-minimizing ones")
	calib := fs.String("calib", "", "calibration text `FILE`: compute an importance matrix on it in memory (as gorun imatrix --process-output) and use it")
	imatrix := fs.String("imatrix", "", "importance matrix `FILE` (llama-imatrix's imatrix.dat, or gorun imatrix's): weight each block's error by it")
	gptq := fs.Bool("gptq", false, "with --calib: GPTQ-style error compensation: each block's error is pushed onto the row's later columns through the calibration inputs' second moments (slower; see quant/QUALITY.md)")
	calibCtx := fs.Int("calib-c", 0, "chunk length of the calibration run (default: 512, or the model's context if shorter)")
	requant := fs.Bool("allow-requantize", false, "allow quantizing tensors that are already quantized")
	outputType := fs.String("output-tensor-type", "", "ggml `type` of output.weight (and of a token embedding that is also the output matrix), as llama-quantize's")
	embdType := fs.String("token-embedding-type", "", "ggml `type` of token_embd.weight, as llama-quantize's")
	leaveOutput := fs.Bool("leave-output-tensor", false, "copy output.weight as it is (llama-quantize's option)")
	keepSplit := fs.Bool("keep-split", false, "accepted for llama-quantize's command lines; changes nothing: gorun reads and writes single-file models")
	search := fs.String("search", "grid", "the error-minimizing quantizers' `search`: grid (alias fast: a grid of candidate scales) or full (complete sweeps: 2-8x slower, slightly lower error, other bytes)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 3 {
		return usageError(fs, stderr, "want IN.gguf OUT.gguf TYPE, got %s", plural(len(pos), "argument"))
	}
	in, out := pos[0], pos[1]
	ft, err := quantize.ParseFileType(pos[2])
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	if *reference && (*calib != "" || *imatrix != "") {
		return usageError(fs, stderr, "--reference and --calib or --imatrix do not mix: the reference quantizers take no statistics")
	}
	if *calib != "" && *imatrix != "" {
		return usageError(fs, stderr, "--calib and --imatrix contradict each other: --calib computes the importance matrix --imatrix reads")
	}
	if *gptq && *calib == "" {
		return usageError(fs, stderr, "--gptq needs --calib TEXT: it uses the second moments of the inputs, which importance matrix files do not hold")
	}
	srch, err := quant.ParseSearch(*search)
	if err != nil {
		return usageError(fs, stderr, "--search: %v", err)
	}
	if *reference && flagGiven(fs, "search") {
		return usageError(fs, stderr, "--reference and --search %s do not mix: the reference quantizers do not search", srch)
	}
	opts := quantize.Options{FileType: ft, Threads: *threads, Pure: *pure, Reference: *reference, AllowRequantize: *requant, Search: srch,
		LeaveOutputTensor: *leaveOutput}
	if opts.OutputTensorType, err = parseTypeFlag("--output-tensor-type", *outputType); err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	if opts.TokenEmbeddingType, err = parseTypeFlag("--token-embedding-type", *embdType); err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	if *keepSplit {
		fmt.Fprintln(stderr, "quantize: --keep-split: gorun writes one file (its input is one file), so there are no shards to keep")
	}
	// Refuse an output that cannot be written before any work, and remove the temporary file
	// if a signal ends the run.
	target, err := gguf.ResolveOutput(out)
	if err != nil {
		return err
	}
	defer removeOnSignal(stderr, "quantize", gguf.TempPath(target))()
	switch {
	case *imatrix != "":
		opts.Importance, err = readIMatrix(*imatrix, stderr)
	case *calib != "" && *gptq:
		opts.Importance, opts.Moments, err = calibrateGPTQ(in, *calib, *threads, *calibCtx, stderr)
	case *calib != "":
		opts.Importance, err = calibrate(in, *calib, *threads, *calibCtx, stderr)
	}
	if err != nil {
		return err
	}
	start := time.Now()
	bar := progress.New(stderr, "quantize", 1).Bytes()
	opts.Progress = func(done, total int64, t quantize.TensorReport) {
		bar = bar.Resize(total)
		note := fmt.Sprintf("%-28s %6v -> %-6v", t.Name, t.From, t.To)
		bar.Set(done, note, true)
		if t.Note != "" {
			fmt.Fprintf(stderr, "\nquantize: %s: %s\n", t.Name, t.Note)
		}
	}
	rep, err := quantize.File(in, out, opts)
	bar.Done()
	if err != nil {
		return err
	}
	printSizeTable(stdout, rep, ft, time.Since(start))
	return nil
}

// parseTypeFlag reads a ggml type name given to a type option; "" (not given) is nil.
func parseTypeFlag(flag, name string) (*quant.Type, error) {
	if name == "" {
		return nil, nil
	}
	t, err := quant.ParseType(name)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", flag, err)
	}
	return &t, nil
}

// flagGiven says whether the command line set the option name.
func flagGiven(fs *flag.FlagSet, name string) bool {
	given := false
	fs.Visit(func(f *flag.Flag) { given = given || f.Name == name })
	return given
}

// calibrate computes the importance matrix of the input model on a text in memory, as
// gorun imatrix --process-output would write it, and returns its weights.
func calibrate(model, textFile string, threads, ctxLen int, stderr io.Writer) (map[string][]float32, error) {
	m, chunk, err := loadForIMatrix(modelFlags{model: model, threads: threads, ctx: ctxLen, batch: 1}, stderr)
	if err != nil {
		return nil, err
	}
	defer m.Close()
	im, err := collectIMatrix(m, "--calib", textFile, llm.ImportanceOptions{Chunk: chunk, ProcessOutput: true}, stderr)
	if err != nil {
		return nil, err
	}
	return im.Weights(), nil
}

// readIMatrix reads an importance matrix file for --imatrix.
func readIMatrix(path string, stderr io.Writer) (map[string][]float32, error) {
	im, err := quantize.ReadIMatrix(path)
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "quantize: imatrix %s: %d entries, %d chunks of %q\n", path, len(im.Entries), im.Chunks, im.Dataset)
	return im.Weights(), nil
}

func printSizeTable(w io.Writer, rep quantize.Report, ft quantize.FileType, took time.Duration) {
	type row struct {
		n     int
		bytes int64
		elems int64
	}
	by := map[quant.Type]*row{}
	for _, t := range rep.Tensors {
		r := by[t.To]
		if r == nil {
			r = &row{}
			by[t.To] = r
		}
		r.n++
		r.bytes += t.OutBytes
	}
	types := make([]quant.Type, 0, len(by))
	for t := range by {
		types = append(types, t)
	}
	sort.Slice(types, func(i, j int) bool { return by[types[i]].bytes > by[types[j]].bytes })
	fmt.Fprintf(w, "%-8s %8s %12s\n", "type", "tensors", "MiB")
	for _, t := range types {
		fmt.Fprintf(w, "%-8v %8d %12.2f\n", t, by[t].n, float64(by[t].bytes)/(1<<20))
	}
	fmt.Fprintf(w, "%-8s %8d %12.2f\n", "total", len(rep.Tensors), float64(rep.OutBytes)/(1<<20))
	fmt.Fprintf(w, "recipe %v: tensor data %.2f MiB -> %.2f MiB (%.2f bits per weight), file %d bytes, %.1f s\n",
		ft, float64(rep.InBytes)/(1<<20), float64(rep.OutBytes)/(1<<20), 8*float64(rep.OutBytes)/float64(rep.Params), rep.FileBytes, took.Seconds())
}
