package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"io"

	"github.com/gorun-dev/gorun/llm"
	"github.com/gorun-dev/gorun/tokenizer"
)

func cmdTokenize(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("tokenize", "gorun tokenize -m MODEL.gguf -p TEXT [--ids]: print the tokens of a text", stderr)
	model := fs.String("m", "", "model `FILE` (GGUF; only its vocabulary is read)")
	fs.StringVar(model, "model", "", "same as -m")
	text := fs.String("p", "", "`text` to tokenize")
	fs.StringVar(text, "prompt", "", "same as -p")
	file := fs.String("f", "", "read the text from `FILE`")
	ids := fs.Bool("ids", false, "print only the ids, as one JSON array")
	if err := parseModelFlags(fs, args, model, stderr); err != nil {
		return err
	}
	// Only a missing -p or -f is a usage error: -p '' is a text, with no tokens.
	given, fileGiven := false, false
	fs.Visit(func(f *flag.Flag) {
		switch f.Name {
		case "p", "prompt":
			given = true
		case "f":
			given, fileGiven = true, true
		}
	})
	switch {
	case !given:
		return usageError(fs, stderr, "no text: use -p TEXT or -f FILE")
	case fileGiven && *file == "":
		return usageError(fs, stderr, "-f names no file")
	}
	input, err := promptText(fs, stderr, *text, *file)
	if err != nil {
		return err
	}
	tok, err := llm.LoadTokenizer(*model)
	if err != nil {
		return err
	}
	toks := tok.Encode(input)
	if *ids {
		if toks == nil {
			toks = []int32{}
		}
		b, _ := json.Marshal(toks)
		fmt.Fprintln(stdout, string(b))
		return nil
	}
	for _, id := range toks {
		fmt.Fprintf(stdout, "%6d -> '%s'\n", id, printable(tok, id))
	}
	return nil
}

// printable shows a token's bytes, escaping what would not print.
func printable(tok tokenizer.Tokenizer, id int32) string {
	q := fmt.Sprintf("%q", tok.TokenBytes(id))
	return q[1 : len(q)-1]
}
