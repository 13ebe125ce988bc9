package grammar

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// matchesAll reports whether the matcher accepts s as a complete text.
func matchesAll(g *Grammar, s string) bool {
	m := g.NewMatcher()
	return m.Accept([]byte(s)) == nil && m.CanEnd()
}

func TestParseValid(t *testing.T) {
	cases := []struct {
		grammar  string
		yes, not []string
	}{
		{`root ::= "yes" | "no"`, []string{"yes", "no"}, []string{"", "y", "yesno", "No"}},
		{"# a comment\nroot ::= a b # trailing\na ::= \"x\"\nb ::= \"y\"\n", []string{"xy"}, []string{"x", "yx"}},
		{`root ::= [a-c]+ [^a-c]?`, []string{"a", "abcc", "ab9", "cé"}, []string{"", "9", "a99"}},
		{`root ::= "a"* "b"`, []string{"b", "ab", "aaab"}, []string{"a", "ba"}},
		{`root ::= ("ab" | "c")? "d"`, []string{"d", "abd", "cd"}, []string{"ad", "abcd"}},
		{`root ::= "ab"+`, []string{"ab", "abab"}, []string{"", "aba", "abb"}},
		{`root ::= [0-9]{3}`, []string{"123"}, []string{"12", "1234"}},
		{`root ::= [0-9]{2,}`, []string{"12", "12345"}, []string{"1"}},
		{`root ::= [0-9]{1,3}`, []string{"1", "123"}, []string{"", "1234"}},
		{`root ::= [0-9]{0,2} "x"`, []string{"x", "1x", "12x"}, []string{"123x"}},
		{`root ::= . "."`, []string{"a.", "é.", "\n."}, []string{"ab", "."}},
		{`root ::= "\x41\u00e9\U0001F600\n\t\"\\"`, []string{"Aé😀\n\t\"\\"}, []string{"A"}},
		{`root ::= [\x00-\x1F\]\[\-]`, []string{"\x01", "]", "[", "-"}, []string{"a"}},
		{"root ::=\n  \"a\"\n  | \"b\"\n", []string{"a", "b"}, []string{"ab"}},
		{"root ::= (\n \"a\"\n \"b\" # inside\n)", []string{"ab"}, []string{"a"}},
		{`root ::= "(" root ")" | ""`, []string{"", "()", "((()))"}, []string{"(", "())"}},
		{`root ::= item ("," item)*` + "\nitem ::= [a-z]+", []string{"a", "ab,c,de"}, []string{"a,", ",a"}},
		{"root ::= x\nx ::= \"\"", []string{""}, []string{"a"}},
		{`root ::= [a-]`, []string{"a", "-"}, []string{"b"}},
		// Repetitions of an empty literal repeat nothing (a fuzzer's find: they panicked).
		{`root ::= ""* "a" ""+ ""{2,5} ""?`, []string{"a"}, []string{"", "aa"}},
	}
	for _, c := range cases {
		g, err := Parse(c.grammar)
		if err != nil {
			t.Fatalf("%q: %v", c.grammar, err)
		}
		for _, s := range c.yes {
			if !matchesAll(g, s) {
				t.Errorf("%q refuses %q", c.grammar, s)
			}
		}
		for _, s := range c.not {
			if matchesAll(g, s) {
				t.Errorf("%q accepts %q", c.grammar, s)
			}
		}
		// The compiled grammar written back parses to a grammar of the same language.
		g2, err := Parse(g.String())
		if err != nil {
			t.Fatalf("%q: its String() does not parse: %v\n%s", c.grammar, err, g.String())
		}
		for _, s := range append(c.yes, c.not...) {
			if matchesAll(g, s) != matchesAll(g2, s) {
				t.Errorf("%q: String() changes the answer for %q", c.grammar, s)
			}
		}
	}
}

func TestParseErrors(t *testing.T) {
	cases := []struct{ grammar, want string }{
		{"", "empty grammar"},
		{"  # only a comment\n\n", "empty grammar"},
		{`root ::= foo`, `line 1, column 10: undefined rule "foo"`},
		{"root ::= a\na ::= \"x\" b", `line 2, column 11: undefined rule "b"`},
		{`a ::= "x"`, `no "root" rule`},
		{`root ::= ("a"`, "line 1, column 10: unbalanced parentheses: '(' without ')'"},
		{`root ::= "a")`, "line 1, column 13: unbalanced parentheses: ')' without '('"},
		{"root ::= (\"a\"\nb ::= \"c\")", `unbalanced parentheses: rule "b" begins before ')'`},
		{`root ::= root "a" | "b"`, "left recursion (not supported): root -> root"},
		{"root ::= a\na ::= b \"x\"\nb ::= \"\" | a", "left recursion (not supported): a -> b -> a"},
		{`root ::= ("a"?)*`, "left recursion"},
		{`root ::= "abc`, "line 1, column 10: unterminated literal"},
		{`root ::= [abc`, "line 1, column 10: unterminated character class"},
		{`root ::= "\q"`, `line 1, column 11: unknown escape \q`},
		{`root ::= "\x4"`, "escape needs 2 hexadecimal digits"},
		{`root ::= "\U00110000"`, "beyond Unicode"},
		{`root ::= [z-a]`, "character range 'z'-'a' is reversed"},
		{`root ::= "a"{3,2}`, "the maximum is below the minimum"},
		{`root ::= "a"{2`, "expected '}'"},
		{`root ::= "a"{,2}`, "expected a repetition count"},
		{"root ::= \"a\"\nroot ::= \"b\"", `line 2, column 1: rule "root" is defined twice (first at line 1, column 1)`},
		{`root ::= * "a"`, `'*' repeats nothing`},
		{`root "a"`, "expected ::= after rule name"},
		{`root ::= "a" ::= "b"`, "expected the end of the line"},
		{`::= "a"`, "expected a rule name"},
		{"root ::= \"a\" b ::= \"c\"", `expected the end of the line before rule "b"`},
		{"root ::= \"\xff\"", "not valid UTF-8"},
	}
	for _, c := range cases {
		_, err := Parse(c.grammar)
		var se *SyntaxError
		if err == nil || !errors.As(err, &se) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one containing %q", c.grammar, err, c.want)
		}
	}
}

// Hostile grammars are refused quickly, with an error that says why, instead of exhausting
// memory or time.
func TestParseHostile(t *testing.T) {
	chain := "root ::= r0\n"
	for i := range 40 {
		chain += "r" + itoa(i) + " ::= r" + itoa(i+1) + " | r" + itoa(i+1) + "\n"
	}
	chain += "r40 ::= \"a\"\n"
	cases := []struct{ name, grammar, want string }{
		{"deep nesting", "root ::= " + strings.Repeat("(", 100000) + `"a"` + strings.Repeat(")", 100000), "nested deeper than 256"},
		{"huge count", `root ::= "a"{1000000000000}`, "larger than"},
		{"huge expansion", `root ::= "a"{200000} "b"{200000}`, "expands the grammar past"},
		{"huge range", `root ::= "a"{0,100000}`, "expands the grammar past"},
		{"nested expansions", `root ::= (("a"{0,90000}){0,90000}){0,90000}`, "expands the grammar past"},
		{"ambiguous nesting", `root ::= (("a"{0,50}){0,50}){0,50}`, "too ambiguous"},
		{"exponential ambiguity", chain, "too ambiguous"},
		{"many rules", strings.Repeat("root ::= \"a\"\n", 1) + strings.Repeat("x ::= \"a\"{100}\n", 3000), "defined twice"},
	}
	for _, c := range cases {
		start := time.Now()
		_, err := Parse(c.grammar)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: error %v, want %q", c.name, err, c.want)
		}
		if d := time.Since(start); d > 2*time.Second {
			t.Errorf("%s: took %v", c.name, d)
		}
	}
	// Large but legal repetitions compile into bounded grammars.
	g, err := Parse(`root ::= ("ab"{0,50} "c"){0,50}`)
	if err != nil {
		t.Fatal(err)
	}
	if g.Size() > 1000 || !matchesAll(g, strings.Repeat(strings.Repeat("ab", 50)+"c", 50)) || matchesAll(g, strings.Repeat("c", 51)) {
		t.Errorf("nested repetitions: size %d", g.Size())
	}
	// An ambiguous grammar whose stacks would multiply is stopped at MaxStacks.
	g, err = Parse(`root ::= x*` + "\n" + `x ::= "a" | "a" "a" | "a" "a" "a" | [a] x`)
	if err != nil {
		t.Fatal(err)
	}
	m := g.NewMatcher()
	if err := m.Accept([]byte(strings.Repeat("a", 200))); err != nil && !errors.Is(err, ErrTooAmbiguous) {
		t.Fatal(err)
	}
}
