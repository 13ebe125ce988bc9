package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/gorun-dev/gorun/internal/testmodel"
	"github.com/gorun-dev/gorun/quant"
	"github.com/gorun-dev/gorun/quantize"
)

func cmdRandomModel(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("random-model", "gorun random-model -shape 124M -o OUT.gguf: write a GPT-2, Llama or Qwen2 of a real shape with random weights (for benchmarks; it writes no sensible text)", stderr)
	shape := fs.String("shape", "124M", "`SHAPE` (any case): "+testmodel.PresetNames)
	out := fs.String("o", "", "output `FILE`")
	typ := fs.String("type", "f16", "matrix `TYPE`: f32, f16 or bf16")
	seed := fs.Int64("seed", 1, "random seed")
	// One rule for the commands that write a model (convert, quantize, random-model), as
	// llama-quantize and convert_hf_to_gguf.py: an existing output file is replaced.
	fs.Bool("f", false, "accepted for older command lines: an existing output file is replaced, as convert and quantize replace theirs")
	fs.Bool("force", false, "same as -f")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	switch {
	case len(pos) > 0:
		return usageError(fs, stderr, "unexpected argument %q", pos[0])
	case *out == "":
		return usageError(fs, stderr, "no output: use -o FILE")
	}
	c, err := testmodel.Preset(presetName(*shape))
	if err != nil {
		return usageError(fs, stderr, "-shape %q: want one of %s", *shape, testmodel.PresetNames)
	}
	if c.Type, err = quant.ParseType(*typ); err != nil || (c.Type != quant.F32 && c.Type != quant.F16 && c.Type != quant.BF16) {
		return usageError(fs, stderr, "-type must be f32, f16 or bf16")
	}
	c.Seed = *seed
	if err := testmodel.Write(*out, c); err != nil {
		return err
	}
	arch := c.Arch
	if arch == "" {
		arch = "gpt2"
	}
	fmt.Fprintf(stderr, "wrote %s: %s %s, %v matrices, random weights\n", *out, arch, *shape, c.Type)
	return nil
}

// presetName is the preset named s in any case (124m, LLAMA-TINY), or s.
func presetName(s string) string {
	for _, part := range strings.FieldsFunc(testmodel.PresetNames, func(r rune) bool { return r == ',' || r == ';' }) {
		name, _, _ := strings.Cut(strings.TrimSpace(part), " ") // "1.5B (GPT-2)"
		if strings.EqualFold(name, s) {
			return name
		}
	}
	return s
}

// fileTypeName names a general.file_type value as llama.cpp does.
func fileTypeName(v uint64) string {
	switch quantize.FileType(v) {
	case quantize.FileAllF32:
		return "all F32"
	case quantize.FileF16:
		return "F16"
	}
	return quantize.FileType(v).String()
}
