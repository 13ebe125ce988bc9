// Command gorun runs GGUF language models on the CPU: generate text, tokenize, quantize,
// measure perplexity and speed. It follows llama.cpp's command-line conventions.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
)

const usage = `gorun: run GGUF language models (GPT-2, Llama, Qwen2) in pure Go

Usage:
  gorun -m MODEL.gguf -p PROMPT [options]      generate text (the default command)
  gorun tokenize -m MODEL.gguf -p TEXT [--ids] print the tokens of a text
  gorun perplexity -m MODEL.gguf -f TEXT       measure perplexity (llama-perplexity's protocol)
  gorun quantize IN.gguf OUT.gguf TYPE         write a quantized copy of a model
  gorun imatrix -m MODEL.gguf -f TEXT          compute an importance matrix (llama-imatrix)
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
	"imatrix":      cmdIMatrix,
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
			name, args = args[0], []string{"-h"}
		} else {
			args = []string{"-h"}
			name = "run"
		}
	}
	if len(args) == 0 && name == "run" {
		fmt.Fprint(stderr, usage)
		return 2
	}
	if len(args) == 1 && name == "run" && (args[0] == "--version" || args[0] == "-version") {
		fmt.Fprintln(stdout, versionLine())
		return 0
	}
	cmd := commands[name]
	if cmd == nil {
		fmt.Fprintf(stderr, "gorun: unknown command %q (run 'gorun help' for the commands)\n", name)
		return 2
	}
	if wantsHelp(args) {
		// Help is what the user asked for: it goes to stdout (llama-cli's --help does), and
		// the default command's help lists the subcommands too.
		if name == "run" {
			fmt.Fprint(stdout, usage+"\n")
		}
		return exitCode(cmd(args, stdout, stdout), stderr)
	}
	return exitCode(cmd(args, stdout, stderr), stderr)
}

// wantsHelp reports whether args ask for help (-h, -help, --help before any "--").
func wantsHelp(args []string) bool {
	for _, a := range args {
		switch a {
		case "--":
			return false
		case "-h", "-help", "--help":
			return true
		}
	}
	return false
}

// versionLine is what --version prints: the module's version and the commit it was built from,
// when the build recorded them.
func versionLine() string {
	v, rev, dirty := "(devel)", "", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				rev = s.Value
			case "vcs.modified":
				if s.Value == "true" {
					dirty = "+dirty"
				}
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	line := "gorun version " + v
	if rev != "" {
		line += " (commit " + rev + dirty + ")"
	}
	return line + ", " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH
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
