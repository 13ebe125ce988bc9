package grammar

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// FuzzParse: any text either compiles or is refused with a SyntaxError or ErrTooAmbiguous,
// quickly; a compiled grammar writes back (String) to text that compiles, and its matcher
// and masks run over any bytes without failing other than by refusing them.
func FuzzParse(f *testing.F) {
	for _, s := range []string{`root ::= "yes" | "no"`, JSONGrammar(), "root ::= [a-z]{2,5} (\",\" root)?\n",
		"root ::= x*\nx ::= \"a\" | \"a\" \"a\"", `root ::= [^\x00-\x1F"]+ .`, "root ::= (\n\"a\"\n| \"b\"){0,3}"} {
		f.Add(s, []byte("yes, {\"a\": [1]}"))
	}
	toks, eog := testVocab()
	v := NewVocab(toks, eog)
	allowed := make([]bool, len(toks))
	f.Fuzz(func(t *testing.T, src string, text []byte) {
		start := time.Now()
		g, err := Parse(src)
		if d := time.Since(start); d > 5*time.Second {
			t.Fatalf("Parse took %v", d)
		}
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) && !errors.Is(err, ErrTooAmbiguous) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		if _, err := Parse(g.String()); err != nil && !errors.Is(err, ErrTooAmbiguous) && !strings.Contains(err.Error(), "larger than") {
			t.Fatalf("String() does not compile: %v\n%s", err, g.String())
		}
		m := g.NewMatcher()
		for i := 0; i < len(text); i += 3 {
			if _, err := m.Mask(v, true, allowed); err != nil && !errors.Is(err, ErrTooAmbiguous) {
				t.Fatal(err)
			}
			if m.Accept(text[i:min(i+3, len(text))]) != nil {
				break
			}
		}
	})
}

// FuzzJSONSchema: any input converts to a grammar that compiles, or is refused with a
// SchemaError (or, for huge expansions, a SyntaxError naming the limit).
func FuzzJSONSchema(f *testing.F) {
	for _, s := range []string{`{}`, `{"type":"object","properties":{"a":{"type":"string","maxLength":3}},"required":["a"]}`,
		`{"$defs":{"n":{"anyOf":[{"type":"null"},{"type":"array","items":{"$ref":"#/$defs/n"}}]}},"$ref":"#/$defs/n"}`,
		`{"enum":[1,"x",null,{"k":[true]}]}`, `{"type":["integer","boolean"]}`, `{"type":"array","minItems":2,"maxItems":5}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, schema []byte) {
		src, err := FromJSONSchema(schema)
		if err != nil {
			var se *SchemaError
			if !errors.As(err, &se) {
				t.Fatalf("error of type %T: %v", err, err)
			}
			return
		}
		if _, err := Parse(src); err != nil {
			var se *SyntaxError
			if !errors.Is(err, ErrTooAmbiguous) && !(errors.As(err, &se) && strings.Contains(se.Msg, "past")) {
				t.Fatalf("the converted grammar does not compile: %v\n%s", err, src)
			}
		}
	})
}
