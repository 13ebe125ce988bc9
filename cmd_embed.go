package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"time"

	"github.com/gorun-dev/gorun/llm"
)

// cmdEmbed is llama-embedding: one embedding per line of the prompt (--embd-separator),
// printed as llama-embedding prints them.
func cmdEmbed(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("embed", "gorun embed -m MODEL.gguf -p TEXT [--pooling mean|last|cls] [--embd-normalize 2] [--embd-output-format json]: print text embeddings (llama-embedding)", stderr)
	var mf modelFlags
	mf.register(fs)
	text := fs.String("p", "", "`text` to embed; each part between separators is one input")
	fs.StringVar(text, "prompt", "", "same as -p")
	file := fs.String("f", "", "read the text from `FILE`")
	fs.StringVar(file, "file", "", "same as -f")
	pooling := fs.String("pooling", "", "`mean|last|cls` (default: the model's pooling_type, else mean)")
	norm := fs.Int("embd-normalize", llm.NormalizeEuclidean, "`N`: -1 none, 0 max absolute (int16 range), 1 taxicab, 2 Euclidean, >2 p-norm")
	format := fs.String("embd-output-format", "", "`FORMAT`: empty for text, array, json, json+ (json with the cosine similarity matrix)")
	sep := fs.String("embd-separator", "\n", "`STRING` that separates the inputs of the text")
	noEscape := fs.Bool("no-escape", false, "do not process escapes (\\n, \\t, ...) in -p and --embd-separator")
	if err := parseModelFlags(fs, args, &mf.model, stderr); err != nil {
		return err
	}
	opts := llm.EmbedOptions{Normalize: *norm}
	var err error
	if opts.Pooling, err = llm.ParsePooling(*pooling); err != nil || *pooling == "default" {
		return usageError(fs, stderr, "--pooling %q: want mean, last or cls", *pooling)
	}
	switch {
	case *norm < llm.NormalizeNone:
		return usageError(fs, stderr, "--embd-normalize %d: want -1, 0, 1, 2 or a p-norm > 2", *norm)
	case *format != "" && *format != "array" && *format != "json" && *format != "json+":
		return usageError(fs, stderr, "--embd-output-format %q: want array, json or json+ (or none for text)", *format)
	case *sep == "":
		return usageError(fs, stderr, "--embd-separator is empty")
	case !given(fs, "p", "prompt", "f", "file"):
		return usageError(fs, stderr, "no text: use -p TEXT or -f FILE")
	}
	input, err := promptText(fs, stderr, *text, *file)
	if err != nil {
		return err
	}
	if !*noEscape {
		if *file == "" {
			input = processEscapes(input)
		}
		*sep = processEscapes(*sep)
	}
	prompts := strings.Split(input, *sep)
	m, err := mf.load(stderr)
	if err != nil {
		return err
	}
	defer m.Close()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	seqs := make([][]int32, len(prompts))
	ntok := 0
	for i, p := range prompts {
		seqs[i] = m.Tokenize(p, true) // llama-embedding tokenizes with add_special
		ntok += len(seqs[i])
	}
	embs, err := m.EmbedTokens(ctx, seqs, opts)
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "embed: %d inputs, %d tokens, pooling %s, in %.2f s\n", len(prompts), ntok, m.Pooling(opts.Pooling), time.Since(start).Seconds())
	if *format == "" {
		writeEmbeddingsText(stdout, prompts, embs, *norm)
		return nil
	}
	writeEmbeddingsJSON(stdout, embs, *norm, *format)
	return nil
}

// given reports whether any of the named flags was set on the command line.
func given(fs *flag.FlagSet, names ...string) bool {
	found := false
	fs.Visit(func(f *flag.Flag) {
		for _, n := range names {
			found = found || f.Name == n
		}
	})
	return found
}

// writeEmbeddingsText prints as llama-embedding does without --embd-output-format: a line per
// input ("embedding 0: ..."; all values for one input, the first 16 for several), then, for
// several inputs, their cosine similarity matrix.
func writeEmbeddingsText(w io.Writer, prompts []string, embs [][]float32, norm int) {
	var b strings.Builder
	b.WriteString("\n")
	for j, e := range embs {
		fmt.Fprintf(&b, "embedding %d: ", j)
		n := len(e)
		if len(embs) > 1 {
			n = min(16, n)
		}
		for _, v := range e[:n] {
			if norm == llm.NormalizeMaxAbs {
				fmt.Fprintf(&b, "%6.0f ", v)
			} else {
				fmt.Fprintf(&b, "%9.6f ", v)
			}
		}
		b.WriteString("\n")
	}
	if len(embs) > 1 {
		b.WriteString("\ncosine similarity matrix:\n\n")
		for _, p := range prompts {
			fmt.Fprintf(&b, "%6.6s ", p)
		}
		b.WriteString("\n")
		for i := range embs {
			for j := range embs {
				fmt.Fprintf(&b, "%6.2f ", cosine(embs[i], embs[j]))
			}
			fmt.Fprintf(&b, "%1.10s\n", prompts[i])
		}
	}
	io.WriteString(w, b.String())
}

// writeEmbeddingsJSON prints llama-embedding's array, json (OpenAI's list) and json+ (with
// "cosineSimilarity") outputs, with its number formats (7 decimals; integers for max-abs).
func writeEmbeddingsJSON(w io.Writer, embs [][]float32, norm int, format string) {
	prec := 7
	if norm == llm.NormalizeMaxAbs {
		prec = 0
	}
	list := format != "array"
	var b strings.Builder
	if list {
		b.WriteString("{\n  \"object\": \"list\",\n  \"data\": [\n")
	} else {
		b.WriteString("[")
	}
	for j, e := range embs {
		if list {
			fmt.Fprintf(&b, "    {\n      \"object\": \"embedding\",\n      \"index\": %d,\n      \"embedding\": ", j)
		}
		b.WriteString("[")
		for i, v := range e {
			if i > 0 {
				b.WriteString(",")
			}
			b.WriteString(strconv.FormatFloat(float64(v), 'f', prec, 32))
		}
		b.WriteString("]")
		if list {
			b.WriteString("\n    }")
		}
		if j < len(embs)-1 {
			b.WriteString(map[bool]string{true: ",\n", false: ","}[list])
		}
	}
	if !list {
		b.WriteString("]\n")
		io.WriteString(w, b.String())
		return
	}
	b.WriteString("\n  ]")
	if format == "json+" && len(embs) > 1 {
		b.WriteString(",\n  \"cosineSimilarity\": [\n")
		for i := range embs {
			b.WriteString("    [")
			for j := range embs {
				if j > 0 {
					b.WriteString(", ")
				}
				fmt.Fprintf(&b, "%6.2f", cosine(embs[i], embs[j]))
			}
			b.WriteString(" ]")
			if i < len(embs)-1 {
				b.WriteString(",\n")
			}
		}
		b.WriteString("\n  ]")
	}
	b.WriteString("\n}\n")
	io.WriteString(w, b.String())
}

// cosine is the cosine similarity of a and b, 0 when either is zero (as llama.cpp's
// common_embd_similarity_cos, which gives 1 when both are).
func cosine(a, b []float32) float64 {
	var dot, aa, bb float64
	for i := range a {
		dot += float64(a[i]) * float64(b[i])
		aa += float64(a[i]) * float64(a[i])
		bb += float64(b[i]) * float64(b[i])
	}
	switch {
	case aa == 0 && bb == 0:
		return 1
	case aa == 0 || bb == 0:
		return 0
	}
	return dot / math.Sqrt(aa*bb)
}
