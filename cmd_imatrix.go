package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"

	"github.com/gorun-dev/gorun/internal/progress"
	"github.com/gorun-dev/gorun/llm"
	"github.com/gorun-dev/gorun/quantize"
)

const imatrixSynopsis = `gorun imatrix -m MODEL.gguf -f TEXT [-o imatrix.dat] [-c 512] [--chunks N] [--process-output]:
compute an importance matrix, as llama-imatrix

The model runs over the text in chunks of -c tokens (whole chunks only, each from an empty
context, starting with BOS when the model wants one) and records, for every matrix of the
layers, the mean square of the activations each input column meets: the weight of that
column's error in the matrix's output. The file is llama-imatrix's (imatrix.dat, llama.cpp
c392e509): llama-quantize --imatrix reads gorun's, gorun quantize --imatrix reads
llama-imatrix's. --process-output adds the output matrix (also when it is the tied token
embedding). gorun quantize --calib TEXT computes the same statistics in memory.`

// defaultIMatrixChunk is llama-imatrix's default context (-c).
const defaultIMatrixChunk = 512

func cmdIMatrix(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("imatrix", imatrixSynopsis, stderr)
	var mf modelFlags
	mf.register(fs)
	fs.Lookup("c").Usage = "chunk length in tokens (default: 512, or the model's context if shorter)"
	file := fs.String("f", "", "calibration text `FILE`")
	fs.StringVar(file, "file", "", "same as -f")
	out := fs.String("o", "imatrix.dat", "output `FILE`")
	chunks := fs.Int("chunks", 0, "process at most `N` chunks (default: all)")
	processOutput := fs.Bool("process-output", false, "also collect the output matrix's statistics")
	if err := parseModelFlags(fs, args, &mf.model, stderr); err != nil {
		return err
	}
	if *file == "" {
		return usageError(fs, stderr, "no text: use -f FILE")
	}
	if *chunks < 0 {
		return usageError(fs, stderr, "--chunks %d: must be >= 0", *chunks)
	}
	if fi, err := os.Stat(*out); err == nil && !fi.Mode().IsRegular() {
		return fmt.Errorf("output %s: %w", *out, errNotRegular)
	}
	m, chunk, err := loadForIMatrix(mf, stderr)
	if err != nil {
		return err
	}
	defer m.Close()
	defer removeOnSignal(stderr, "imatrix", *out+".tmp")()
	im, err := collectIMatrix(m, "-f", *file, llm.ImportanceOptions{Chunk: chunk, MaxChunks: *chunks, ProcessOutput: *processOutput}, stderr)
	if err != nil {
		return err
	}
	b, err := im.Encode()
	if err != nil {
		return err
	}
	if err := writeFileAtomic(*out, b); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "imatrix: %d entries from %d chunks of %d tokens written to %s\n", len(im.Entries), im.Chunks, chunk, *out)
	return nil
}

// loadForIMatrix loads the model with a context of the chunk size (-c, default 512 or the
// model's context if shorter) and batches of a whole chunk.
func loadForIMatrix(mf modelFlags, stderr io.Writer) (*llm.Model, int, error) {
	explicit := mf.ctx != 0
	if !explicit {
		mf.ctx = defaultIMatrixChunk
	}
	mf.batch = max(mf.batch, mf.ctx)
	mf.ubatch = max(mf.ubatch, mf.batch) // a chunk is one batch
	m, err := mf.load(stderr)
	if err != nil && !explicit && errors.Is(err, llm.ErrInvalidOption) {
		// The default chunk may exceed a small model's context: use the model's.
		mf.ctx = 0
		m, err = mf.load(stderr)
	}
	if err != nil {
		return nil, 0, err
	}
	return m, m.ContextLength(), nil
}

// collectIMatrix computes llama-imatrix's statistics of the model on a text file.
// option names the text's option in errors (-f, --calib).
func collectIMatrix(m *llm.Model, option, textFile string, opts llm.ImportanceOptions, stderr io.Writer) (*quantize.IMatrix, error) {
	text, err := readInput(option, textFile, maxTextBytes)
	if err != nil {
		return nil, err
	}
	tokens := m.Tokenize(string(text), true) // llama-imatrix tokenizes with add_special
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	bar := progress.New(stderr, "imatrix", 1)
	opts.Progress = func(done, total int) {
		bar = bar.Resize(int64(total))
		bar.Set(int64(done), "chunks", true)
	}
	im, err := m.CollectImportance(ctx, tokens, opts)
	bar.Done()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", textFile, err)
	}
	fmt.Fprintf(stderr, "imatrix: %d tokens of %s, %d chunks, statistics for %d matrices\n", len(tokens), textFile, im.Chunks, len(im.Sums))
	return toIMatrix(im, textFile), nil
}

// toIMatrix stores the statistics as llama-imatrix does: per column sum/count*calls.
func toIMatrix(im *llm.Importance, dataset string) *quantize.IMatrix {
	out := &quantize.IMatrix{Chunks: im.Chunks, Dataset: dataset}
	for name, sums := range im.Sums {
		calls, count := im.Calls[name], float64(im.Counts[name])
		e := quantize.IMatrixEntry{Name: name, Calls: calls, Values: make([]float32, len(sums))}
		for j, s := range sums {
			e.Values[j] = float32(s / count * float64(calls))
		}
		out.Entries = append(out.Entries, e)
	}
	slices.SortFunc(out.Entries, func(a, b quantize.IMatrixEntry) int { return strings.Compare(a.Name, b.Name) })
	return out
}
