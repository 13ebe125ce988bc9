package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/gorun-dev/gorun/convert"
	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/internal/progress"
	"github.com/gorun-dev/gorun/quantize"
)

const convertSynopsis = `gorun convert HF_DIR OUT.gguf [--outtype f16]: convert a Hugging Face checkpoint to GGUF

HF_DIR is a GPT2LMHeadModel, LlamaForCausalLM, MistralForCausalLM or Qwen2ForCausalLM directory
as transformers saves it: config.json, model.safetensors (or shards listed by
model.safetensors.index.json; F32, F16 or BF16 weights) and a byte-level BPE tokenizer.json (or
vocab.json and merges.txt). SentencePiece tokenizers (tokenizer.model) and pytorch_model.bin (a
pickle) are not read.
The output is what llama.cpp's convert_hf_to_gguf.py writes for the same checkpoint: the same
metadata, tensor names, order, shapes, types and bytes. OUT is written to OUT.tmp and renamed
when complete. --outtype is f32, f16 (the default), bf16, auto (f16 when the checkpoint is F16,
else bf16), or a 'gorun quantize' recipe, applied after conversion:
%s.`

func cmdConvert(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("convert", fmt.Sprintf(convertSynopsis, strings.Join(quantize.FileTypeNames(), ", ")), stderr)
	outType := fs.String("outtype", "f16", "output `type`: f32, f16, bf16, auto, q8_0 or a quantize recipe")
	outFile := fs.String("outfile", "", "output `FILE` (instead of the second argument, as llama.cpp spells it)")
	name := fs.String("model-name", "", "`NAME` written as general.name (default: derived from the directory's name, as llama.cpp does)")
	threads := fs.Int("t", 0, "`threads` for quantized recipes (default: one per physical core)")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if *outFile != "" {
		pos = append(pos, *outFile)
	}
	if len(pos) != 2 {
		return usageError(fs, stderr, "want HF_DIR OUT.gguf, got %s", plural(len(pos), "argument"))
	}
	dir, out := pos[0], pos[1]
	if st, err := os.Stat(dir); err != nil || !st.IsDir() {
		if err == nil {
			err = fmt.Errorf("not a directory")
		}
		return fmt.Errorf("%s: %w (want a Hugging Face model directory)", dir, err)
	}
	target, err := gguf.ResolveOutput(out)
	if err != nil {
		return err
	}
	defer removeOnSignal(stderr, "convert", gguf.TempPath(target), target+".f32.tmp")()
	start := time.Now()
	bar := progress.New(stderr, "convert", 1).Bytes()
	var qbar *progress.Bar
	opts := convert.Options{OutType: *outType, Name: *name, Threads: *threads,
		Progress: func(done, total int64, tensor string) {
			bar = bar.Resize(total * 4)
			bar.Set(done*4, tensor, true)
		},
		QuantizeProgress: func(done, total int64, t quantize.TensorReport) {
			if qbar == nil {
				bar.Done()
				qbar = progress.New(stderr, "quantize", total).Bytes()
			}
			qbar.Set(done, fmt.Sprintf("%-28s %6v -> %-6v", t.Name, t.From, t.To), false)
		}}
	rep, err := convert.Convert(dir, out, opts)
	if qbar != nil {
		qbar.Done()
	} else {
		bar.Done()
	}
	if err != nil {
		return err
	}
	for _, w := range rep.Warnings {
		fmt.Fprintf(stderr, "convert: warning: %s\n", w)
	}
	fmt.Fprintf(stdout, "wrote %s: %q, %d tensors, %d parameters, --outtype %s (file type %v), tokenizer from %s (pre-tokenizer %s), %d bytes, %.1f s\n",
		out, rep.Name, rep.Tensors, rep.Params, rep.OutType, rep.FileType, rep.Tokenizer, rep.Pre, rep.FileBytes, time.Since(start).Seconds())
	return nil
}
