package main

import (
	"flag"
	"io"

	"github.com/gorun-dev/gorun/grammar"
)

// grammarFlags are llama.cpp's constrained-output options: --grammar, --grammar-file,
// -j/--json-schema and --json-schema-file (at most one of them).
type grammarFlags struct {
	gbnf, gbnfFile, schema, schemaFile string
}

// maxGrammarBytes bounds a grammar or schema file.
const maxGrammarBytes = 1 << 20

func (g *grammarFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&g.gbnf, "grammar", "", "constrain the generated text to a GBNF `GRAMMAR` (llama.cpp's syntax, a root rule required)")
	fs.StringVar(&g.gbnfFile, "grammar-file", "", "read the GBNF grammar from `FILE`")
	fs.StringVar(&g.schema, "json-schema", "", "constrain the generated text to JSON matching a JSON `SCHEMA` ({} for any JSON value)")
	fs.StringVar(&g.schema, "j", "", "same as --json-schema")
	fs.StringVar(&g.schemaFile, "json-schema-file", "", "read the JSON schema from `FILE`")
}

// compile returns the grammar the options give (nil without one); an unreadable or invalid
// grammar or schema is a usage error naming the option and the problem.
func (g *grammarFlags) compile(fs *flag.FlagSet, stderr io.Writer) (*grammar.Grammar, error) {
	set := 0
	for _, v := range []string{g.gbnf, g.gbnfFile, g.schema, g.schemaFile} {
		if v != "" {
			set++
		}
	}
	if set == 0 {
		return nil, nil
	}
	if set > 1 {
		return nil, usageError(fs, stderr, "--grammar, --grammar-file, -j/--json-schema and --json-schema-file exclude each other: give one")
	}
	option, text, isSchema := "--grammar", g.gbnf, false
	switch {
	case g.schema != "":
		option, text, isSchema = "--json-schema", g.schema, true
	case g.gbnfFile != "" || g.schemaFile != "":
		option, isSchema = "--grammar-file", g.schemaFile != ""
		path := g.gbnfFile
		if isSchema {
			option, path = "--json-schema-file", g.schemaFile
		}
		b, err := readInput(option, path, maxGrammarBytes)
		if err != nil {
			return nil, usageError(fs, stderr, "%v", err)
		}
		text = string(b)
	}
	var gr *grammar.Grammar
	var err error
	if isSchema {
		gr, err = grammar.CompileJSONSchema([]byte(text))
	} else {
		gr, err = grammar.Parse(text)
	}
	if err != nil {
		return nil, usageError(fs, stderr, "%s: %v", option, err)
	}
	return gr, nil
}
