package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
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
weight) give attn_v Q5_K with 4 or more query heads per KV head and, without --calib, ffn_down of
the first eighth Q5_K; 70B-sized and 8-expert models get llama-quantize's extra bits too. q3_k, q4_k and q5_k are llama-quantize's aliases of q3_k_m, q4_k_m and q5_k_m;
--pure gives every matrix the one type. Rows whose length is not a whole number of the type's
blocks fall back (Q4_K -> Q5_0, Q5_K -> Q5_1, Q6_K -> Q8_0, Q2_K, Q3_K and IQ4_XS -> IQ4_NL,
else F16), and the tool says so.
gorun's quantizers choose scales and rounding to minimize each block's error (weighted by
activation statistics with --calib); the files keep ggml's exact formats, so llama.cpp loads them.
--reference gives llama.cpp's own bytes instead.
--search picks how thoroughly gorun's quantizers search: full (the default) sweeps every
rounding of a window of scales; grid (or fast) tries a grid of candidate scales, several times
faster, with nearly the same error (never worse than llama.cpp's per block) but other bytes.`

func cmdQuantize(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("quantize", fmt.Sprintf(quantizeSynopsis, strings.Join(quantize.FileTypeNames(), ", ")), stderr)
	threads := fs.Int("t", 0, "`threads` (default: one per physical core)")
	pure := fs.Bool("pure", false, "give every quantized matrix the recipe's type (no mixing)")
	reference := fs.Bool("reference", false, "use the reference quantizers (llama.cpp's bytes) instead of gorun's error-minimizing ones")
	calib := fs.String("calib", "", "calibration text `FILE`: weight each block's error by activation statistics gathered on it")
	calibCtx := fs.Int("calib-c", 0, "context length of the calibration run (default: the model's)")
	requant := fs.Bool("allow-requantize", false, "allow quantizing tensors that are already quantized")
	search := fs.String("search", "full", "the error-minimizing quantizers' `search`: full (complete sweeps) or grid (alias fast: a grid of candidate scales; faster, other bytes)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 3 {
		return usageError(fs, stderr, "want IN.gguf OUT.gguf TYPE, got %d arguments", len(pos))
	}
	in, out := pos[0], pos[1]
	ft, err := quantize.ParseFileType(pos[2])
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	if *reference && *calib != "" {
		return usageError(fs, stderr, "--reference and --calib do not mix: the reference quantizers take no statistics")
	}
	srch, err := quant.ParseSearch(*search)
	if err != nil {
		return usageError(fs, stderr, "--search: %v", err)
	}
	if *reference && srch != quant.SearchFull {
		return usageError(fs, stderr, "--reference and --search %s do not mix: the reference quantizers do not search", srch)
	}
	opts := quantize.Options{FileType: ft, Threads: *threads, Pure: *pure, Reference: *reference, AllowRequantize: *requant, Search: srch}
	// Refuse an output that cannot be written before any work, and remove the temporary file
	// if a signal ends the run.
	target, err := gguf.ResolveOutput(out)
	if err != nil {
		return err
	}
	defer removeOnSignal(stderr, "quantize", gguf.TempPath(target))()
	if *calib != "" {
		if opts.Importance, err = calibrate(in, *calib, *threads, *calibCtx, stderr); err != nil {
			return err
		}
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

// calibrate gathers activation statistics of the input model on a text.
func calibrate(model, textFile string, threads, ctxLen int, stderr io.Writer) (map[string][]float32, error) {
	text, err := readInput("--calib", textFile, maxTextBytes)
	if err != nil {
		return nil, err
	}
	m, err := llm.Load(model, llm.Options{Threads: threads, ContextLength: ctxLen})
	if err != nil {
		return nil, err
	}
	defer m.Close()
	tokens := m.Tokenizer().Encode(string(text))
	if len(tokens) < 2 {
		return nil, fmt.Errorf("calibration text %s has %d tokens; it needs many (thousands)", textFile, len(tokens))
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	bar := progress.New(stderr, "calibrate", int64(len(tokens)))
	im, err := m.CollectImportance(ctx, tokens, func(done, total int) { bar.Set(int64(done), "tokens", true) })
	bar.Done()
	if err != nil {
		return nil, err
	}
	fmt.Fprintf(stderr, "calibrate: %d tokens of %s, statistics for %d matrices\n", len(tokens), textFile, len(im.Sums))
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
