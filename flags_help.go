package main

import (
	"flag"
	"fmt"
	"io"
	"reflect"
	"strings"
)

// The options' help, as llama.cpp prints it: grouped in sections ("----- sampling params
// -----"), each option once with its aliases on one line, spelt with llama.cpp's dashes, one
// placeholder style (upper case) and its default said once.

// helpSection names the section of the options every command shares; the rest are the
// command's own.
var helpSection = map[string]string{}

func init() {
	for _, name := range strings.Fields(`m model hf hf-repo t threads tb threads-batch c ctx-size b batch-size
		ub ubatch-size ngl n-gpu-layers quantized-activations mem-limit kv-budget no-mmap mlock no-warmup fa flash-attn
		ctk cache-type-k ctv cache-type-v
		chat-template chat-template-file`) {
		helpSection[name] = "common params"
	}
	for _, name := range strings.Fields(`temp top-k top-p min-p repeat-penalty repeat-last-n frequency-penalty
		presence-penalty l logit-bias seed s ignore-eos grammar grammar-file j json-schema`) {
		helpSection[name] = "sampling params"
	}
	for _, name := range strings.Fields(`v verbose log-disable log-file color`) {
		helpSection[name] = "logging"
	}
}

// helpEntry is one option with its aliases.
type helpEntry struct {
	names []string // as registered, the one with the description first
	flag  *flag.Flag
}

// printHelp writes the synopsis and fs's options, grouped.
func printHelp(w io.Writer, fs *flag.FlagSet, synopsis string) {
	fmt.Fprintf(w, "%s\n", synopsis)
	entries := helpEntries(fs)
	order := []string{"common params", "sampling params", fs.Name() + " params", "logging"}
	bySection := map[string][]helpEntry{}
	for _, e := range entries {
		s, ok := helpSection[e.names[0]]
		if !ok {
			s = fs.Name() + " params"
		}
		bySection[s] = append(bySection[s], e)
	}
	for _, s := range order {
		if len(bySection[s]) == 0 {
			continue
		}
		fmt.Fprintf(w, "\n----- %s -----\n\n", s)
		for _, e := range bySection[s] {
			printEntry(w, e)
		}
	}
}

// helpEntries groups fs's options by the variable they set: aliases share one (flag.Value
// pointers compare equal). Entries keep the order of their first registration... as flag's
// VisitAll sorts by name, the order is alphabetical by the entry's main name.
func helpEntries(fs *flag.FlagSet) []helpEntry {
	var entries []helpEntry
	index := map[any]int{}
	fs.VisitAll(func(f *flag.Flag) {
		key := valueKey(f.Value)
		if i, ok := index[key]; ok && key != nil {
			e := &entries[i]
			if isAliasUsage(e.flag.Usage) && !isAliasUsage(f.Usage) {
				e.flag = f
				e.names = append([]string{f.Name}, e.names...)
			} else {
				e.names = append(e.names, f.Name)
			}
			return
		}
		if key != nil {
			index[key] = len(entries)
		}
		entries = append(entries, helpEntry{names: []string{f.Name}, flag: f})
	})
	return entries
}

// valueKey identifies the variable a flag sets: its Value when that is a pointer (aliases
// registered on one variable share it), or a struct's pointer field (a Value wrapping the
// variable, such as modelPath), else nil (no aliases). The flag's type is part of the key:
// -m and -hf set one variable but are not aliases.
func valueKey(v flag.Value) any {
	type key struct {
		t reflect.Type
		p uintptr
	}
	rv := reflect.ValueOf(v)
	switch {
	case rv.Kind() == reflect.Pointer:
		return key{rv.Type(), rv.Pointer()}
	case rv.Kind() == reflect.Struct && rv.NumField() > 0 && rv.Field(0).Kind() == reflect.Pointer:
		return key{rv.Type(), rv.Field(0).Pointer()}
	}
	return nil
}

func isAliasUsage(u string) bool { return strings.HasPrefix(u, "same as ") }

// printEntry writes "  -m, --model FILE" and its description, indented below.
func printEntry(w io.Writer, e helpEntry) {
	placeholder, usage := flag.UnquoteUsage(e.flag)
	placeholder = strings.ToUpper(placeholder)
	if placeholder == "STRING" || placeholder == "VALUE" {
		placeholder = "TEXT"
	}
	if g, ok := e.flag.Value.(flag.Getter); ok {
		switch g.Get().(type) {
		case int, int64, uint, uint64, float64:
			placeholder = "N" // one placeholder for every number
		}
	}
	names := orderNames(e.names)
	spelt := make([]string, len(names))
	for i, n := range names {
		spelt[i] = dashed(n)
	}
	line := "  " + strings.Join(spelt, ", ")
	if placeholder != "" {
		line += " " + placeholder
	}
	if d := shownDefault(e.flag, usage); d != "" {
		usage += " (default: " + d + ")"
	}
	fmt.Fprintf(w, "%s\n        %s\n", line, strings.ReplaceAll(usage, "\n", "\n        "))
}

// orderNames puts short names (as llama.cpp: -m, --model) before long ones.
func orderNames(names []string) []string {
	out := append([]string(nil), names...)
	short := func(n string) bool { return len(dashed(n)) < len(n)+2 }
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && short(out[j]) && !short(out[j-1]); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out
}

// shownDefault is the default worth saying: not a zero value, and not already in the
// description.
func shownDefault(f *flag.Flag, usage string) string {
	switch d := f.DefValue; {
	case strings.Contains(usage, "default"):
		return ""
	case d == "" || d == "0" || d == "false" || d == "[]":
		return ""
	default:
		return d
	}
}
