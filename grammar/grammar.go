// Package grammar constrains generated text to a formal grammar, as llama.cpp's GBNF grammars
// do: Parse compiles GBNF text, FromJSONSchema converts a JSON schema to GBNF, a Matcher
// follows the text generated so far over code points, and a Vocab (the vocabulary's token
// bytes in a trie) answers which tokens may come next.
//
// The matcher is llama.cpp's llama_grammar: its state is a set of stacks of positions in the
// grammar's rules; each stack's top is a character class the next code point may match.
// Grammars are refused at Parse when they are left-recursive (the stacks would grow without
// consuming text) or larger than MaxElements after expanding repetitions.
package grammar

import (
	"fmt"
	"strings"
)

// Limits that keep a hostile grammar from exhausting memory or time.
const (
	// MaxElements bounds a compiled grammar's size (symbols of every rule, repetitions
	// expanded): "x{100000}" is refused, not expanded.
	MaxElements = 1 << 18
	// MaxNesting bounds the depth of parentheses.
	MaxNesting = 256
	// MaxStacks bounds the matcher's stack set: a grammar so ambiguous that more stacks are
	// alive at once is an error (ErrTooAmbiguous) instead of an explosion of work.
	MaxStacks = 1024
	// maxExpansions bounds the rule references expanded to reach the next characters after
	// one code point.
	maxExpansions = 1 << 16
)

// ErrTooAmbiguous: more than MaxStacks parses of the text so far are alive at once.
var ErrTooAmbiguous = fmt.Errorf("grammar: too ambiguous (more than %d stacks alive at once)", MaxStacks)

type elemKind uint8

const (
	kindEnd  elemKind = iota // the end of an alternative
	kindRef                  // a reference to another rule
	kindChar                 // a character class
)

// runeRange is an inclusive range of code points.
type runeRange struct{ lo, hi rune }

// elem is one symbol of an alternative in the compiled grammar.
type elem struct {
	kind   elemKind
	neg    bool        // kindChar: matches the code points outside ranges ("[^...]", ".")
	ref    int32       // kindRef: the rule
	ranges []runeRange // kindChar
}

// matches reports whether a character class elem accepts c.
func (e *elem) matches(c rune) bool {
	for _, r := range e.ranges {
		if c >= r.lo && c <= r.hi {
			return !e.neg
		}
	}
	return e.neg
}

// matchesSome reports whether a character class elem accepts some code point in [lo, hi]
// (used for a token that ends inside a UTF-8 character).
func (e *elem) matchesSome(lo, hi rune) bool {
	if !e.neg {
		for _, r := range e.ranges {
			if r.lo <= hi && r.hi >= lo {
				return true
			}
		}
		return false
	}
	// Some code point of [lo, hi] is outside every range: walk up from lo past covering ranges.
	c := lo
	for moved := true; moved && c <= hi; {
		moved = false
		for _, r := range e.ranges {
			if c >= r.lo && c <= r.hi {
				c, moved = r.hi+1, true
			}
		}
	}
	return c <= hi
}

// Grammar is a compiled grammar: immutable, safe to share between goroutines and matchers.
type Grammar struct {
	elems []elem    // every alternative of every rule, each ended by a kindEnd elem
	alts  [][]int32 // per rule, the position of each alternative's first elem
	names []string  // per rule
	root  int32
	start []*stack // the stacks before any text
}

// Rules is the number of rules (those generated for groups and repetitions included).
func (g *Grammar) Rules() int { return len(g.alts) }

// Size is the number of elements of the compiled grammar (bounded by MaxElements).
func (g *Grammar) Size() int { return len(g.elems) }

// String writes the compiled grammar back as GBNF (groups and repetitions as their rules).
func (g *Grammar) String() string {
	var b strings.Builder
	for r, alts := range g.alts {
		fmt.Fprintf(&b, "%s ::=", g.names[r])
		for i, a := range alts {
			if i > 0 {
				b.WriteString(" |")
			}
			if g.elems[a].kind == kindEnd {
				b.WriteString(` ""`) // an empty alternative, which a bare "|" at a line end would not end
			}
			for p := a; g.elems[p].kind != kindEnd; p++ {
				b.WriteByte(' ')
				g.writeElem(&b, &g.elems[p])
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func (g *Grammar) writeElem(b *strings.Builder, e *elem) {
	if e.kind == kindRef {
		b.WriteString(g.names[e.ref])
		return
	}
	if e.neg && len(e.ranges) == 0 {
		b.WriteByte('.')
		return
	}
	b.WriteByte('[')
	if e.neg {
		b.WriteByte('^')
	}
	for _, r := range e.ranges {
		b.WriteString(escapeClassRune(r.lo))
		if r.hi != r.lo {
			b.WriteByte('-')
			b.WriteString(escapeClassRune(r.hi))
		}
	}
	b.WriteByte(']')
}

func escapeClassRune(c rune) string {
	switch c {
	case ']', '[', '\\', '-', '^', '"':
		return `\` + string(c)
	}
	if c < 0x20 || c == 0x7f {
		return fmt.Sprintf(`\x%02X`, c)
	}
	if c > 0xffff {
		return fmt.Sprintf(`\U%08X`, c)
	}
	if c >= 0xd800 && c <= 0xdfff {
		return fmt.Sprintf(`\u%04X`, c)
	}
	return string(c)
}
