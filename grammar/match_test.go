package grammar

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// rdEnds is a direct recursive-descent recognizer over the compiled rules, independent of
// the matcher's stacks: the positions where rule can end when it starts at i in text.
type rd struct {
	g    *Grammar
	text []rune
	memo map[[2]int][]int
}

func (r *rd) ruleEnds(rule int32, i int) []int {
	key := [2]int{int(rule), i}
	if e, ok := r.memo[key]; ok {
		return e
	}
	var ends []int
	for _, a := range r.g.alts[rule] {
		for _, e := range r.seqEnds(a, i) {
			if !slices.Contains(ends, e) {
				ends = append(ends, e)
			}
		}
	}
	r.memo[key] = ends
	return ends
}

func (r *rd) seqEnds(pos int32, i int) []int {
	e := &r.g.elems[pos]
	switch e.kind {
	case kindEnd:
		return []int{i}
	case kindChar:
		if i < len(r.text) && e.matches(r.text[i]) {
			return r.seqEnds(pos+1, i+1)
		}
		return nil
	}
	var ends []int
	for _, j := range r.ruleEnds(e.ref, i) {
		for _, k := range r.seqEnds(pos+1, j) {
			if !slices.Contains(ends, k) {
				ends = append(ends, k)
			}
		}
	}
	return ends
}

func rdMatches(g *Grammar, s string) bool {
	r := &rd{g: g, text: []rune(s), memo: map[[2]int][]int{}}
	return slices.Contains(r.ruleEnds(g.root, 0), len(r.text))
}

// randomGrammar writes a small random GBNF grammar over the letters a, b and é.
func randomGrammar(rng *rand.Rand) string {
	const rules = 4
	var b strings.Builder
	var term func(rule, depth int) string
	term = func(rule, depth int) string {
		var t string
		switch rng.IntN(7) {
		case 0:
			t = `"a"`
		case 1:
			t = `"bé"`
		case 2:
			t = `[ab]`
		case 3:
			t = `[^a]`
		case 4:
			t = "."
		case 5:
			// A reference to a later rule (earlier ones only after a character: no left
			// recursion by construction, though repetitions may still make some).
			if rule+1 < rules {
				t = fmt.Sprintf("r%d", rule+1+rng.IntN(rules-rule-1))
			} else {
				t = fmt.Sprintf(`"a" r%d`, rng.IntN(rules))
			}
		case 6:
			if depth < 2 {
				t = "(" + term(rule, depth+1) + " " + term(rule, depth+1) + " | " + term(rule, depth+1) + ")"
			} else {
				t = `"b"`
			}
		}
		switch rng.IntN(8) {
		case 0:
			t += "*"
		case 1:
			t += "+"
		case 2:
			t += "?"
		case 3:
			t += fmt.Sprintf("{%d,%d}", rng.IntN(2), 1+rng.IntN(2))
		}
		return t
	}
	for r := range rules {
		name := fmt.Sprintf("r%d", r)
		if r == 0 {
			name = "root"
		}
		fmt.Fprintf(&b, "%s ::= ", name)
		for a := range 1 + rng.IntN(3) {
			if a > 0 {
				b.WriteString(" | ")
			}
			b.WriteString(`"" `) // an alternative may be empty
			for range rng.IntN(3) {
				b.WriteString(term(r, 0) + " ")
			}
		}
		b.WriteString("\n")
	}
	return strings.ReplaceAll(b.String(), "r0", "root")
}

// allStrings lists every string of up to n letters of alphabet.
func allStrings(alphabet []rune, n int) []string {
	out := []string{""}
	level := []string{""}
	for range n {
		var next []string
		for _, s := range level {
			for _, c := range alphabet {
				next = append(next, s+string(c))
			}
		}
		out = append(out, next...)
		level = next
	}
	return out
}

// The matcher agrees with recursive descent on every string of up to 5 letters, for random
// grammars; feeding the text byte by byte (characters cut between "tokens") changes nothing.
func TestMatcherAgreesWithRecursiveDescent(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 11))
	strs := allStrings([]rune("abé"), 5)
	compiled := 0
	for range 300 {
		src := randomGrammar(rng)
		g, err := Parse(src)
		if err != nil {
			if !strings.Contains(err.Error(), "left recursion") && !strings.Contains(err.Error(), "ambiguous") {
				t.Fatalf("%s: %v", src, err)
			}
			continue
		}
		compiled++
		for _, s := range strs {
			want := rdMatches(g, s)
			m := g.NewMatcher()
			err := m.Accept([]byte(s))
			if err != nil && strings.Contains(err.Error(), "ambiguous") {
				continue
			}
			if got := err == nil && m.CanEnd(); got != want {
				t.Fatalf("grammar\n%s\n%q: matcher %v (err %v), recursive descent %v", src, s, got, err, want)
			}
			// A refused text is not the prefix of any matching one.
			if err != nil {
				for _, c := range "abé" {
					if rdMatches(g, s+string(c)) {
						t.Fatalf("grammar\n%s\nrefused %q but %q matches", src, s, s+string(c))
					}
				}
			}
			m2 := g.NewMatcher()
			for i := 0; i < len(s) && err == nil; i++ {
				if e := m2.Accept([]byte{s[i]}); e != nil {
					t.Fatalf("grammar\n%s\n%q accepted whole but not byte %d: %v", src, s, i, e)
				}
			}
			if err == nil && m2.CanEnd() != m.CanEnd() {
				t.Fatalf("%q: byte by byte CanEnd %v, whole %v", s, m2.CanEnd(), m.CanEnd())
			}
		}
	}
	if compiled < 150 {
		t.Fatalf("only %d of 300 random grammars compiled", compiled)
	}
}

// testVocab is a vocabulary of ASCII pieces, multi-byte characters whole and cut, invalid
// bytes, an empty token and an end-of-generation token (the last).
func testVocab() ([][]byte, []int32) {
	var toks [][]byte
	for c := 0; c < 128; c++ {
		toks = append(toks, []byte{byte(c)})
	}
	for _, s := range []string{"ab", "abc", "ba", "true", "tr", "null", "\"a", "a\"", "{\"", "\"}", "é", "éa", "aé", "😀", "1.5", "12", "-1"} {
		toks = append(toks, []byte(s))
	}
	e := []byte("é")
	g := []byte("😀")
	toks = append(toks, e[:1], e[1:], g[:1], g[:2], g[:3], g[1:], g[2:], g[3:], []byte{0xff}, []byte{0xc0, 0x80}, []byte{0xed, 0xa0}, nil, []byte("<eos>"))
	return toks, []int32{int32(len(toks) - 1)}
}

// Mask (one walk of the trie) allows exactly the tokens AllowsToken allows one by one, at
// every step of texts generated at random under several grammars.
func TestMaskEqualsTokenByToken(t *testing.T) {
	toks, eog := testVocab()
	v := NewVocab(toks, eog)
	grammars := []string{
		JSONGrammar(),
		`root ::= [a-c]+ "é"? | "😀" [0-9]*`,
		`root ::= [^a]* "a"`,
		`root ::= ("tr" "ue" | "null") " "?`,
		`root ::= [\u00e0-\u00ff]{1,3} [\U0001F600-\U0001F64F]`,
	}
	rng := rand.New(rand.NewPCG(3, 5))
	allowed := make([]bool, len(toks))
	for _, src := range grammars {
		g, err := Parse(src)
		if err != nil {
			t.Fatal(err)
		}
		for run := range 20 {
			m := g.NewMatcher()
			for step := range 30 {
				n, err := m.Mask(v, true, allowed)
				if err != nil {
					t.Fatal(err)
				}
				var ids []int32
				for id := range toks {
					ok, err := m.AllowsToken(v, int32(id), true)
					if err != nil {
						t.Fatal(err)
					}
					if ok != allowed[id] {
						t.Fatalf("%s run %d step %d: token %q: mask %v, one by one %v", src, run, step, toks[id], allowed[id], ok)
					}
					if ok {
						ids = append(ids, int32(id))
					}
				}
				if n != len(ids) {
					t.Fatalf("Mask counted %d, allowed %d", n, len(ids))
				}
				if len(ids) == 0 {
					break
				}
				id := ids[rng.IntN(len(ids))]
				if v.IsEOG(id) {
					if !m.CanEnd() {
						t.Fatal("EOG allowed where the grammar cannot end")
					}
					break
				}
				if err := m.AcceptToken(v, id); err != nil {
					t.Fatalf("accepting allowed token %q: %v", toks[id], err)
				}
			}
		}
	}
}

// A character cut between tokens is completed by the next token; the cut part alone is
// allowed only if some completion matches.
func TestMatcherPartialUTF8(t *testing.T) {
	g, err := Parse(`root ::= "é" [\U0001F600-\U0001F64F]`)
	if err != nil {
		t.Fatal(err)
	}
	e, smile, other := []byte("é"), []byte("😀"), []byte("🌀") // U+1F300: outside the class
	m := g.NewMatcher()
	for _, c := range []struct {
		b  []byte
		ok bool
	}{{e[:1], true}, {[]byte("è")[:1], true}, {[]byte("ü")[:1], true}, {[]byte("a"), false}, {[]byte("€")[:1], false}} {
		if ok, _ := m.Allows(c.b); ok != c.ok {
			t.Errorf("before é: %x allowed %v, want %v", c.b, ok, c.ok)
		}
	}
	if err := m.Accept(e[:1]); err != nil {
		t.Fatal(err)
	}
	if m.CanEnd() {
		t.Fatal("CanEnd inside a character")
	}
	if ok, _ := m.Allows([]byte("è")[1:]); ok {
		t.Error("the completion to è is allowed")
	}
	if err := m.Accept(e[1:]); err != nil {
		t.Fatal(err)
	}
	if ok, _ := m.Allows(other[:3]); ok {
		t.Errorf("%x (only U+1F300..U+1F33F) allowed", other[:3])
	}
	for i := 1; i < 4; i++ {
		if ok, _ := m.Allows(smile[:i]); !ok {
			t.Errorf("%x refused", smile[:i])
		}
	}
	if err := m.Accept(smile[:2]); err != nil {
		t.Fatal(err)
	}
	if err := m.Accept(smile[2:]); err != nil {
		t.Fatal(err)
	}
	if !m.Done() {
		t.Fatal("not done after é😀")
	}
	if utf8.RuneLen('😀') != 4 {
		t.Fatal("test assumes a 4-byte emoji")
	}
}

// PrepareBounded caches a state whose walk fits the bound (the same set Allowed gives, as a
// list and as bits) and remembers one that does not, leaving it uncached; the matcher works
// on unchanged after an aborted walk.
func TestPrepareBounded(t *testing.T) {
	toks, eog := testVocab()
	v := NewVocab(toks, eog)
	g, err := Parse(JSONGrammar())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		prefix string
		bound  int
		cached bool
	}{{"{", 1 << 20, true}, {"{\"a", 8, false}, {"{\"a", 1 << 20, true}, {"{\"a\": [1, ", 1 << 20, true}} {
		m := g.NewMatcher()
		if err := m.Accept([]byte(c.prefix)); err != nil {
			t.Fatal(err)
		}
		ok, err := m.PrepareBounded(v, true, c.bound)
		if err != nil || ok != c.cached {
			t.Fatalf("%q bound %d: cached %v, %v; want %v", c.prefix, c.bound, ok, err, c.cached)
		}
		set, n, hit := m.CachedAllowedSet(v, true)
		if hit != c.cached {
			t.Fatalf("%q: CachedAllowedSet hit %v after PrepareBounded %v", c.prefix, hit, ok)
		}
		if again, _ := m.PrepareBounded(v, true, c.bound); again != c.cached {
			t.Fatalf("%q: a second PrepareBounded says %v", c.prefix, again)
		}
		ids, err := m.Allowed(v, true) // the unbounded walk still works and agrees
		if err != nil {
			t.Fatal(err)
		}
		if hit {
			if n != len(ids) {
				t.Fatalf("%q: set of %d, list of %d", c.prefix, n, len(ids))
			}
			for _, id := range ids {
				if set[id/64]&(1<<(id%64)) == 0 {
					t.Fatalf("%q: token %d allowed but not in the set", c.prefix, id)
				}
			}
		}
	}
}

// A fork computes the state's allowed tokens on another goroutine while the matcher goes on;
// adopted, they are found when the matcher comes back to that state.
func TestForkAdopt(t *testing.T) {
	toks, eog := testVocab()
	v := NewVocab(toks, eog)
	g, err := Parse(JSONGrammar())
	if err != nil {
		t.Fatal(err)
	}
	m := g.NewMatcher()
	if err := m.Accept([]byte("{\"a")); err != nil {
		t.Fatal(err)
	}
	f := m.Fork()
	done := make(chan error)
	go func() { done <- f.Prepare(v, true) }()
	if err := m.Accept([]byte("b\": ")); err != nil { // the matcher moves on meanwhile
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	m.Adopt(f)
	if _, _, hit := m.CachedAllowedSet(v, true); hit {
		t.Fatal("the fork's state found in another state")
	}
	back := g.NewMatcher()
	if err := back.Accept([]byte("{\"a")); err != nil {
		t.Fatal(err)
	}
	back.Adopt(f)
	ids, ok := back.CachedAllowed(v, true)
	if !ok {
		t.Fatal("adopted set not found")
	}
	fresh := g.NewMatcher()
	if err := fresh.Accept([]byte("{\"a")); err != nil {
		t.Fatal(err)
	}
	if want, err := fresh.Allowed(v, true); err != nil || !slices.Equal(ids, want) {
		t.Fatalf("adopted %d tokens, a fresh walk %d (%v)", len(ids), len(want), err)
	}
}
