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
	"runtime/pprof"
	"strings"
)

const usage = `gorun: run GGUF language models (GPT-2, Llama, Qwen2) in pure Go

Usage:
  gorun -m MODEL.gguf -p PROMPT [options]      generate text (the default command: run)
  gorun run MODEL PROMPT [options]             the same, ollama's way (MODEL: a file or ORG/NAME[:QUANT])
  gorun tokenize -m MODEL.gguf -p TEXT [--ids] print the tokens of a text
  gorun embed -m MODEL.gguf -p TEXT            print text embeddings (llama-embedding)
  gorun perplexity -m MODEL.gguf -f TEXT       measure perplexity (llama-perplexity's protocol)
  gorun quantize IN.gguf OUT.gguf TYPE         write a quantized copy of a model
  gorun imatrix -m MODEL.gguf -f TEXT          compute an importance matrix (llama-imatrix)
  gorun bench -m MODEL.gguf [-p 512] [-n 128]  measure prompt and generation speed (llama-bench)
  gorun random-model -shape 124M -o OUT.gguf   write a random-weight model for benchmarks (GPT-2 or Llama shapes)
  gorun convert HF_DIR OUT.gguf [--outtype T]  convert a Hugging Face checkpoint (GPT-2, Llama, Mistral, Qwen2) to GGUF
  gorun pull ORG/NAME[:QUANT]                  download a model from the Hugging Face Hub
  gorun list                                   the models pulled (Hugging Face cache)
  gorun show MODEL                             a model's name, architecture, quantization, size, context
  gorun rm ORG/NAME[:QUANT]                    remove a pulled model
  gorun serve -m MODEL.gguf [--port 8080]      HTTP server: OpenAI's, llama-server's and ollama's APIs
  gorun bench-serve --url URL [--clients 8,32] load-test a server (gorun's or llama-server)
  gorun help [COMMAND]                         show help

Run 'gorun COMMAND -h' for a command's options.
`

// commands maps subcommand names to their entry points. Each returns an error to print; the
// exit status is 0 on success, 2 for a usage error, 130 when interrupted (Ctrl-C), 1 for any
// other error.
var commands = map[string]func(args []string, stdout, stderr io.Writer) error{
	"run":          cmdRun,
	"tokenize":     cmdTokenize,
	"embed":        cmdEmbed,
	"perplexity":   cmdPerplexity,
	"quantize":     cmdQuantize,
	"imatrix":      cmdIMatrix,
	"bench":        cmdBench,
	"random-model": cmdRandomModel,
	"convert":      cmdConvert,
	"pull":         cmdPull,
	"serve":        cmdServe,
	"bench-serve":  cmdBenchServe,
	"list":         cmdList,
	"show":         cmdShow,
	"rm":           cmdRm,
}

// errUsage marks errors caused by the command line (already explained on stderr).
var errUsage = errors.New("usage")

func main() {
	stop := startProfile(os.Getenv("GORUN_CPUPROFILE"))
	code := run(os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// startProfile writes a CPU profile of the whole command to path (for developers: where does
// a server's or a generation's host time go); "" does nothing.
func startProfile(path string) (stop func()) {
	if path == "" {
		return func() {}
	}
	f, err := os.Create(path)
	if err == nil {
		err = pprof.StartCPUProfile(f)
	}
	if err != nil {
		fmt.Fprintf(os.Stderr, "gorun: GORUN_CPUPROFILE: %v\n", err)
		return func() {}
	}
	return func() { pprof.StopCPUProfile(); f.Close() }
}

func run(args []string, stdout, stderr io.Writer) int {
	name := "run"
	if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
		name, args = args[0], args[1:]
	}
	if name == "help" {
		switch {
		case len(args) == 0:
			name, args = "run", []string{"-h"}
		case commands[args[0]] != nil:
			name, args = args[0], []string{"-h"}
		default:
			fmt.Fprintf(stderr, "gorun help: unknown command %q (run 'gorun help' for the commands)\n", args[0])
			return exitUsage
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
