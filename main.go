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
	"runtime"
	"runtime/debug"
	"strconv"
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
	// The flag package prints its usage after every error; gorun prints one line instead (with
	// a suggestion for a misspelt option), and the usage only when asked for.
	usage, out := fs.Usage, fs.Output()
	fs.Usage = func() {}
	fs.SetOutput(io.Discard)
	defer func() { fs.Usage = usage; fs.SetOutput(out) }()
	for {
		if err := fs.Parse(args); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				fs.SetOutput(out)
				usage()
				return nil, err
			}
			msg := err.Error()
			if name, ok := strings.CutPrefix(msg, "flag provided but not defined: -"); ok {
				if s := suggestFlag(fs, name); s != "" {
					msg += " (did you mean " + s + "?)"
				}
			}
			fmt.Fprintf(out, "gorun %s: %s (run 'gorun help %s' for the options)\n", fs.Name(), msg, fs.Name())
			return nil, errUsage
		}
		args = fs.Args()
		if len(args) == 0 {
			return pos, checkFinite(fs, out)
		}
		if args[0] == "--" {
			return append(pos, args[1:]...), nil
		}
		pos = append(pos, args[0])
		args = args[1:]
	}
}

// suggestFlag returns the defined option closest to the unknown one (edit distance at most 2,
// and less than its length), spelt with llama.cpp's dashes, or "".
func suggestFlag(fs *flag.FlagSet, name string) string {
	best, bestD := "", 3
	fs.VisitAll(func(f *flag.Flag) {
		if d := editDistance(name, f.Name); d < bestD && d < len(f.Name) {
			best, bestD = f.Name, d
		}
	})
	return dashed(best)
}

// dashed spells an option as llama.cpp does: -x, --long (or "" for "").
func dashed(name string) string {
	switch {
	case name == "":
		return ""
	case len(name) == 1 || llamaShort[name]:
		return "-" + name
	}
	return "--" + name
}

// llamaShort are llama.cpp's short options longer than a letter, spelt with one dash.
var llamaShort = map[string]bool{"ngl": true, "if": true, "cnv": true, "no-cnv": true, "sys": true}

// editDistance is the Levenshtein distance between a and b (bytes).
func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			c := prev[j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			cur[j] = min(c, prev[j]+1, cur[j-1]+1)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

// def32 is a float32 default as a float64 that prints as written (0.8, not 0.800000011920929).
func def32(x float32) float64 {
	v, _ := strconv.ParseFloat(strconv.FormatFloat(float64(x), 'g', -1, 32), 64)
	return v
}

// checkFinite refuses NaN and infinite values of every floating-point option that was set: NaN
// passes every < and > range check, so it must be stopped here, by name.
func checkFinite(fs *flag.FlagSet, stderr io.Writer) error {
	var bad *flag.Flag
	fs.Visit(func(f *flag.Flag) {
		if g, ok := f.Value.(flag.Getter); ok && bad == nil {
			if x, ok := g.Get().(float64); ok && (math.IsNaN(x) || math.IsInf(x, 0)) {
				bad = f
			}
		}
	})
	if bad != nil {
		return usageError(fs, stderr, "%s %s: not a finite number", dashed(bad.Name), bad.Value)
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
		// llama-cli strips one trailing newline of a prompt file (an editor's final newline).
		b, err := readInput("-f", file, maxPromptBytes)
		return strings.TrimSuffix(string(b), "\n"), err
	}
	return text, nil
}

// usageError prints a one-line message naming the command, and where its options are
// listed, and returns errUsage.
func usageError(fs *flag.FlagSet, stderr io.Writer, format string, a ...any) error {
	fmt.Fprintf(stderr, "gorun %s: %s (run 'gorun help %s' for the options)\n", fs.Name(), fmt.Sprintf(format, a...), fs.Name())
	return errUsage
}

// processEscapes replaces the escapes of a prompt as llama.cpp's string_process_escapes does:
// \n \r \t \' \" \\ and \xNN; any other backslash is kept with what follows it.
func processEscapes(s string) string {
	if !strings.Contains(s, "\\") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '\\' || i+1 == len(s) {
			b.WriteByte(s[i])
			continue
		}
		i++
		switch c := s[i]; c {
		case 'n':
			b.WriteByte('\n')
		case 'r':
			b.WriteByte('\r')
		case 't':
			b.WriteByte('\t')
		case '\'', '"', '\\':
			b.WriteByte(c)
		case 'x':
			if i+2 < len(s) {
				if v, err := strconv.ParseUint(s[i+1:i+3], 16, 8); err == nil {
					b.WriteByte(byte(v))
					i += 2
					break
				}
			}
			b.WriteString("\\x")
		default:
			b.WriteByte('\\')
			b.WriteByte(c)
		}
	}
	return b.String()
}
