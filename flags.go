package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
)

// The option parsing every command shares: flag sets that report instead of exiting, options
// before, between or after arguments, "did you mean" suggestions, one-line usage errors.

// newFlags makes a flag set that reports errors (to stderr) instead of exiting.
func newFlags(name, synopsis string, stderr io.Writer) *flag.FlagSet {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() { printHelp(stderr, fs, synopsis) }
	return fs
}

// parseFlags parses flags that may come before, between or after positional arguments, and
// returns the positional ones.
func parseFlags(fs *flag.FlagSet, args []string) ([]string, error) {
	var pos []string
	// The flag package prints its usage after every error; gorun prints one line instead (with
	// a suggestion for a misspelt option), and the usage only when asked for.
	args = joinOptionalValues(fs, args)
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
				msg = "unknown option " + typedOption(args, name)
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

// optionalValues are the words a boolean-looking option of llama.cpp's takes as its next
// argument (-fa on): joined to it (-fa=on), as the flag package reads a boolean option's value
// only after "=".
var optionalValues = map[string][]string{"fa": {"on", "off", "auto"}, "flash-attn": {"on", "off", "auto"}, "color": {"on", "off", "auto"}}

func joinOptionalValues(fs *flag.FlagSet, args []string) []string {
	var out []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if a == "--" {
			return append(out, args[i:]...)
		}
		name := strings.TrimLeft(a, "-")
		if words, ok := optionalValues[name]; ok && strings.HasPrefix(a, "-") && fs.Lookup(name) != nil &&
			i+1 < len(args) && slices.Contains(words, args[i+1]) {
			out = append(out, a+"="+args[i+1])
			i++
			continue
		}
		out = append(out, a)
	}
	return out
}

// suggestFlag returns what the user probably meant by an unknown option, spelt with
// llama.cpp's dashes, or "" when nothing is close: an option glued to its number (-n4: -n 4),
// the one option the name begins (-ctx: --ctx-size), or the option a typo away (--tmep:
// --temp; a swap of two letters counts as one). Names of one or two letters are too short to
// guess from (-hf is not -if).
func suggestFlag(fs *flag.FlagSet, name string) string {
	name = strings.ToLower(name)
	for i := 1; i < len(name); i++ {
		if f := fs.Lookup(name[:i]); f != nil && !isBoolFlag(f) && isNumber(name[i:]) {
			return dashed(name[:i]) + " " + name[i:]
		}
	}
	if len(name) < 3 {
		return ""
	}
	var prefixed []string
	fs.VisitAll(func(f *flag.Flag) {
		if strings.HasPrefix(f.Name, name) {
			prefixed = append(prefixed, f.Name)
		}
	})
	if len(prefixed) == 1 {
		return dashed(prefixed[0])
	}
	limit := 1 // a typo in a short name: one letter off
	if len(name) > 5 {
		limit = 2
	}
	best, bestD := "", limit+1
	fs.VisitAll(func(f *flag.Flag) {
		if d := editDistance(name, f.Name); d < bestD && len(f.Name) > 2 {
			best, bestD = f.Name, d
		}
	})
	return dashed(best)
}

// typedOption is the unknown option name as the user typed it in args (-n4 or --n4).
func typedOption(args []string, name string) string {
	for _, a := range args {
		if opt, _, _ := strings.Cut(a, "="); strings.TrimLeft(opt, "-") == name && strings.HasPrefix(opt, "-") {
			return opt
		}
	}
	return dashed(name)
}

func isBoolFlag(f *flag.Flag) bool {
	b, ok := f.Value.(interface{ IsBoolFlag() bool })
	return ok && b.IsBoolFlag()
}

func isNumber(s string) bool {
	_, err := strconv.ParseFloat(s, 64)
	return err == nil
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
var llamaShort = map[string]bool{"ngl": true, "if": true, "cnv": true, "no-cnv": true, "sys": true,
	"fa": true, "tb": true, "ub": true, "np": true, "sp": true, "hf": true, "ctk": true, "ctv": true}

// editDistance is the number of single-byte insertions, deletions, substitutions and swaps of
// neighbours that turn a into b (the optimal string alignment distance: "tmep" is one from
// "temp").
func editDistance(a, b string) int {
	d := make([][]int, len(a)+1)
	for i := range d {
		d[i] = make([]int, len(b)+1)
		d[i][0] = i
	}
	for j := range d[0] {
		d[0][j] = j
	}
	for i := 1; i <= len(a); i++ {
		for j := 1; j <= len(b); j++ {
			c := d[i-1][j-1]
			if a[i-1] != b[j-1] {
				c++
			}
			d[i][j] = min(c, d[i-1][j]+1, d[i][j-1]+1)
			if i > 1 && j > 1 && a[i-1] == b[j-2] && a[i-2] == b[j-1] {
				d[i][j] = min(d[i][j], d[i-2][j-2]+1)
			}
		}
	}
	return d[len(a)][len(b)]
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

// promptText returns the text of -p, or of the file named by -f ("-" or /dev/stdin: the
// standard input).
func promptText(fs *flag.FlagSet, stderr io.Writer, text, file string) (string, error) {
	switch {
	case file != "" && text != "":
		return "", usageError(fs, stderr, "use -p or -f, not both")
	case isStdin(file):
		b, err := readStdin("-f "+file, maxPromptBytes)
		return strings.TrimSuffix(string(b), "\n"), err
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
