// Command gorun runs GGUF language models on the CPU: generate text, tokenize, quantize,
// measure perplexity and speed. It follows llama.cpp's command-line conventions.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"strings"
)

const usage = `gorun: run GGUF language models (GPT-2) in pure Go

Usage:
  gorun -m MODEL.gguf -p PROMPT [options]      generate text (the default command)
  gorun tokenize -m MODEL.gguf -p TEXT [--ids] print the tokens of a text
  gorun perplexity -m MODEL.gguf -f TEXT       measure perplexity (llama-perplexity's protocol)
  gorun quantize IN.gguf OUT.gguf TYPE         write a quantized copy of a model
  gorun bench -m MODEL.gguf [-p 512] [-n 128]  measure prompt and generation speed (llama-bench)
  gorun random-model -shape 124M -o OUT.gguf   write a random-weight GPT-2 for benchmarks
  gorun convert HF_DIR OUT.gguf [--outtype T]  convert a Hugging Face GPT-2 (safetensors) to GGUF
  gorun pull ORG/NAME[:QUANT]                  download a model from the Hugging Face Hub
  gorun serve -m MODEL.gguf [--port 8080]      OpenAI-compatible HTTP server
  gorun help [COMMAND]                         show help

Run 'gorun COMMAND -h' for a command's options.
`

// commands maps subcommand names to their entry points. Each returns an error to print; the
// exit status is 0 on success, 2 for a usage error, 130 when interrupted (Ctrl-C), 1 for any
// other error.
var commands = map[string]func(args []string, stdout, stderr io.Writer) error{
	"run":          cmdRun,
	"tokenize":     cmdTokenize,
	"perplexity":   cmdPerplexity,
	"quantize":     cmdQuantize,
	"bench":        cmdBench,
	"random-model": cmdRandomModel,
	"convert":      cmdConvert,
	"pull":         cmdPull,
	"serve":        cmdServe,
}

// errUsage marks errors caused by the command line (already explained on stderr).
var errUsage = errors.New("usage")

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	name := "run"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if name == "help" {
		if len(args) > 0 && commands[args[0]] != nil {
			return exitCode(commands[args[0]]([]string{"-h"}, stdout, stderr), stderr)
		}
		fmt.Fprint(stdout, usage)
		return 0
	}
	if len(args) == 0 && name == "run" {
		fmt.Fprint(stderr, usage)
		return 2
	}
	cmd := commands[name]
	if cmd == nil {
		fmt.Fprintf(stderr, "gorun: unknown command %q\n\n%s", name, usage)
		return 2
	}
	return exitCode(cmd(args, stdout, stderr), stderr)
}

// Exit statuses, as llama.cpp's tools and shells use them.
const (
	exitOK          = 0
	exitError       = 1
	exitUsage       = 2
	exitInterrupted = 130 // 128 + SIGINT
)

func exitCode(err error, stderr io.Writer) int {
	switch {
	case err == nil || errors.Is(err, flag.ErrHelp):
		return exitOK
	case errors.Is(err, errUsage):
		return exitUsage
	case errors.Is(err, context.Canceled):
		fmt.Fprintln(stderr, "gorun: interrupted")
		return exitInterrupted
	}
	fmt.Fprintf(stderr, "gorun: %v\n", err)
	return exitError
}

// newFlags makes a flag set that reports errors (to stderr) instead of exiting.
func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, "%s\n\nOptions (one or two dashes):\n", synopsis)
		fs.PrintDefaults()
	}
	return fs
}

// parseFlags parses flags that may come before, between or after positional arguments, and
// returns the positional ones.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return nil, err
			}
			return nil, errUsage
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, checkFinite(fs)
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// checkFinite refuses NaN and infinite values of every floating-point option that was set: NaN
// passes every < and > range check, so it must be stopped here, by name.
func checkFinite(fs *flag.FlagSet) error {
	var bad *flag.Flag
	fs.Visit(func(f *flag.Flag) {
		if g, ok := f.Value.(flag.Getter); ok && bad == nil {
			if x, ok := g.Get().(float64); ok && (math.IsNaN(x) || math.IsInf(x, 0)) {
				bad = f
			}
		}
	})
	if bad != nil {
		return usageError(fs, fs.Output(), "-%s %s: not a finite number", bad.Name, bad.Value)
	}
	return nil
}

// parseModelFlags parses a command that takes no positional arguments and needs -m.
func parseModelFlags(fs *flag.FlagSet, args []string, model *string, stderr io.Writer) error {
	pos, err := parseFlags(fs, args)
	switch {
	case err != nil:
		return err
	case len(pos) > 0:
		return usageError(fs, stderr, "unexpected argument %q", pos[0])
	case *model == "":
		return usageError(fs, stderr, "no model: use -m FILE")
	}
	return resolveModel(model, stderr) // hf://ORG/NAME[:QUANT] from the Hub's cache or by pulling
}

// promptText returns the text of -p, or of the file named by -f.
func promptText(fs *flag.FlagSet, stderr io.Writer, text, file string) (string, error) {
	switch {
	case file != "" && text != "":
		return "", usageError(fs, stderr, "use -p or -f, not both")
	case file != "":
		b, err := readInput("-f", file, maxPromptBytes)
		return string(b), err
	}
	return text, nil
}

// usageError prints a message and the usage of fs, and returns errUsage.
func usageError(fs *flag.FlagSet, stderr io.Writer, format string, a ...any) error {
	fmt.Fprintf(stderr, "gorun %s: %s\n", fs.Name(), fmt.Sprintf(format, a...))
	fs.Usage()
	return errUsage
}
