package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
)

// The option parsing every command shares: flag sets that report instead of exiting, options
// before, between or after arguments, "did you mean" suggestions, one-line usage errors.

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
