package grammar

import (
	"errors"
	"fmt"
	"strings"
	"unicode/utf8"
)

// SyntaxError is a grammar that does not parse or compile: where (1-based line and column,
// in bytes) and what.
type SyntaxError struct {
	Line, Col int
	Msg       string
}

func (e *SyntaxError) Error() string {
	if e.Line == 0 {
		return "grammar: " + e.Msg
	}
	return fmt.Sprintf("grammar: line %d, column %d: %s", e.Line, e.Col, e.Msg)
}

// symbol is a parsed symbol: a rule reference (ref >= 0) or a character class.
type symbol struct {
	ref    int32
	neg    bool
	ranges []runeRange
}

type alternative []symbol

// parser builds the rules of a GBNF text (llama.cpp's grammar syntax) by recursive descent.
type parser struct {
	src       string
	pos       int
	names     map[string]int32
	ruleNames []string
	rules     [][]alternative
	defined   []int // per rule: the offset of its definition, -1 if none yet (or generated)
	used      []int // per rule: the offset of its first use
	size      int   // symbols so far, repetitions expanded
	depth     int
}

// Parse compiles a GBNF grammar (llama.cpp's syntax): rules `name ::= alternatives`,
// alternatives separated by `|`, sequences of literals ("..." with escapes \n \t \r \" \\
// \xNN \uNNNN \UNNNNNNNN), character classes ([a-z], [^"\\]), `.` (any character), rule
// names, groups ( ... ), repetitions `*` `+` `?` `{m}` `{m,}` `{m,n}`, comments from `#` to
// the end of the line. Newlines may follow "::=" and "|", come inside parentheses, and
// precede a "|" that continues a rule's alternatives. A `root` rule is required. Errors name
// the line and column.
func Parse(src string) (*Grammar, error) {
	if !utf8.ValidString(src) {
		return nil, &SyntaxError{Msg: "the grammar is not valid UTF-8"}
	}
	p := &parser{src: src, names: map[string]int32{}}
	if err := p.parseRules(); err != nil {
		return nil, err
	}
	return p.compile()
}

func (p *parser) errAt(pos int, format string, args ...any) error {
	line, col := 1, 1
	for i := 0; i < pos && i < len(p.src); i++ {
		if p.src[i] == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return &SyntaxError{Line: line, Col: col, Msg: fmt.Sprintf(format, args...)}
}

func (p *parser) peek() byte {
	if p.pos < len(p.src) {
		return p.src[p.pos]
	}
	return 0
}

// skipSpace skips blanks and comments, and newlines when newlines is set.
func (p *parser) skipSpace(newlines bool) {
	for p.pos < len(p.src) {
		switch c := p.src[p.pos]; {
		case c == ' ' || c == '\t':
			p.pos++
		case c == '#':
			for p.pos < len(p.src) && p.src[p.pos] != '\n' {
				p.pos++
			}
		case (c == '\n' || c == '\r') && newlines:
			p.pos++
		default:
			return
		}
	}
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_'
}

func (p *parser) parseName() string {
	start := p.pos
	for p.pos < len(p.src) && isNameByte(p.src[p.pos]) {
		p.pos++
	}
	return p.src[start:p.pos]
}

// rule returns the id of the rule name, creating it on first sight.
func (p *parser) rule(name string, at int) int32 {
	if id, ok := p.names[name]; ok {
		return id
	}
	id := int32(len(p.rules))
	p.names[name] = id
	p.ruleNames = append(p.ruleNames, name)
	p.rules = append(p.rules, nil)
	p.defined = append(p.defined, -1)
	p.used = append(p.used, at)
	return id
}

// newRule adds a rule generated for a group or a repetition inside rule parent. Its name
// (parent-N) is for messages only: it is not looked up, so a rule the grammar defines later
// under the same name is a different rule.
func (p *parser) newRule(parent int32, alts []alternative) int32 {
	id := int32(len(p.rules))
	p.ruleNames = append(p.ruleNames, fmt.Sprintf("%s-%d", p.ruleNames[parent], id))
	p.rules = append(p.rules, alts)
	p.defined = append(p.defined, p.pos)
	p.used = append(p.used, p.pos)
	return id
}

func (p *parser) parseRules() error {
	p.skipSpace(true)
	if p.pos == len(p.src) {
		return &SyntaxError{Msg: "empty grammar (no rules)"}
	}
	for p.pos < len(p.src) {
		if err := p.parseRule(); err != nil {
			return err
		}
		p.skipSpace(true)
	}
	return nil
}

func (p *parser) parseRule() error {
	at := p.pos
	name := p.parseName()
	if name == "" {
		return p.errAt(at, "expected a rule name, found %s", p.found())
	}
	id := p.rule(name, at)
	if p.defined[id] >= 0 {
		return p.errAt(at, "rule %q is defined twice (first at %s)", name, p.lineCol(p.defined[id]))
	}
	p.defined[id] = at
	p.skipSpace(false)
	if !strings.HasPrefix(p.src[p.pos:], "::=") {
		return p.errAt(p.pos, "expected ::= after rule name %q, found %s", name, p.found())
	}
	p.pos += 3
	p.skipSpace(true)
	alts, err := p.parseAlternatives(id, false)
	if err != nil {
		return err
	}
	p.rules[id] = alts
	switch c := p.peek(); {
	case c == 0 || c == '\n' || c == '\r':
		return nil
	case c == ')':
		return p.errAt(p.pos, "unbalanced parentheses: ')' without '('")
	default:
		return p.errAt(p.pos, "expected the end of the line after rule %q, found %s", name, p.found())
	}
}

func (p *parser) lineCol(pos int) string {
	var se *SyntaxError
	if errors.As(p.errAt(pos, ""), &se) {
		return fmt.Sprintf("line %d, column %d", se.Line, se.Col)
	}
	return ""
}

// found describes the text at the current position for an error.
func (p *parser) found() string {
	if p.pos >= len(p.src) {
		return "the end of the grammar"
	}
	r, _ := utf8.DecodeRuneInString(p.src[p.pos:])
	switch r {
	case '\n', '\r':
		return "the end of the line"
	}
	return fmt.Sprintf("%q", r)
}

// parseAlternatives parses sequences separated by '|'; nested is set inside parentheses,
// where newlines are blanks.
func (p *parser) parseAlternatives(rule int32, nested bool) ([]alternative, error) {
	var alts []alternative
	for {
		seq, err := p.parseSequence(rule, nested)
		if err != nil {
			return nil, err
		}
		alts = append(alts, seq)
		if !nested && p.peek() != '|' {
			// An alternative may also begin the next line with '|' (as in many grammars
			// written for readability); llama.cpp wants it on the same line.
			save := p.pos
			p.skipSpace(true)
			if p.peek() != '|' {
				p.pos = save
			}
		}
		if p.peek() != '|' {
			return alts, nil
		}
		p.pos++
		p.skipSpace(true)
	}
}

// parseSequence parses terms and their repetition operators up to '|', ')' or the end of
// the rule.
func (p *parser) parseSequence(rule int32, nested bool) (alternative, error) {
	var seq alternative
	last := -1 // where the last term's symbols begin in seq
	for {
		at := p.pos
		switch c := p.peek(); {
		case c == '"':
			p.pos++
			last = len(seq)
			for p.peek() != '"' {
				if p.pos >= len(p.src) || p.peek() == '\n' {
					return nil, p.errAt(at, "unterminated literal")
				}
				r, err := p.parseChar()
				if err != nil {
					return nil, err
				}
				seq = append(seq, symbol{ref: -1, ranges: []runeRange{{r, r}}})
			}
			p.pos++
		case c == '[':
			last = len(seq)
			sym, err := p.parseClass()
			if err != nil {
				return nil, err
			}
			seq = append(seq, sym)
		case c == '.':
			p.pos++
			last = len(seq)
			seq = append(seq, symbol{ref: -1, neg: true})
		case isNameByte(c):
			name := p.parseName()
			if p.followedByDefinition() {
				if nested {
					return nil, p.errAt(at, "unbalanced parentheses: rule %q begins before ')'", name)
				}
				return nil, p.errAt(at, "expected the end of the line before rule %q", name)
			}
			last = len(seq)
			seq = append(seq, symbol{ref: p.rule(name, at)})
		case c == '(':
			p.pos++
			if p.depth++; p.depth > MaxNesting {
				return nil, p.errAt(at, "parentheses nested deeper than %d", MaxNesting)
			}
			p.skipSpace(true)
			alts, err := p.parseAlternatives(rule, true)
			if err != nil {
				return nil, err
			}
			if p.peek() != ')' {
				return nil, p.errAt(at, "unbalanced parentheses: '(' without ')'")
			}
			p.pos++
			p.depth--
			last = len(seq)
			seq = append(seq, symbol{ref: p.newRule(rule, alts)})
		case c == '*' || c == '+' || c == '?' || c == '{':
			if last < 0 {
				return nil, p.errAt(at, "%q repeats nothing", c)
			}
			lo, hi, err := p.parseRepetition()
			if err != nil {
				return nil, err
			}
			seq, err = p.repeat(rule, seq, last, lo, hi, at)
			if err != nil {
				return nil, err
			}
			last = -1
		default:
			return seq, nil
		}
		if p.size += 1; p.size > MaxElements {
			return nil, p.errAt(at, "the grammar is larger than %d elements", MaxElements)
		}
		p.skipSpace(nested)
	}
}

// followedByDefinition reports whether "::=" follows (after blanks): a name there begins the
// next rule, so the previous one lacked its line end.
func (p *parser) followedByDefinition() bool {
	i := p.pos
	for i < len(p.src) && (p.src[i] == ' ' || p.src[i] == '\t') {
		i++
	}
	return strings.HasPrefix(p.src[i:], "::=")
}

// parseRepetition reads *, +, ?, {m}, {m,} or {m,n}; hi < 0 is unbounded.
func (p *parser) parseRepetition() (lo, hi int, err error) {
	at := p.pos
	c := p.src[p.pos]
	p.pos++
	switch c {
	case '*':
		return 0, -1, nil
	case '+':
		return 1, -1, nil
	case '?':
		return 0, 1, nil
	}
	p.skipSpace(false)
	if lo, err = p.parseCount(at); err != nil {
		return 0, 0, err
	}
	p.skipSpace(false)
	hi = lo
	if p.peek() == ',' {
		p.pos++
		p.skipSpace(false)
		hi = -1
		if p.peek() != '}' {
			if hi, err = p.parseCount(at); err != nil {
				return 0, 0, err
			}
			p.skipSpace(false)
		}
	}
	if p.peek() != '}' {
		return 0, 0, p.errAt(p.pos, "expected '}' to end the repetition, found %s", p.found())
	}
	p.pos++
	if hi >= 0 && hi < lo {
		return 0, 0, p.errAt(at, "repetition {%d,%d}: the maximum is below the minimum", lo, hi)
	}
	return lo, hi, nil
}

func (p *parser) parseCount(at int) (int, error) {
	start := p.pos
	n := 0
	for p.pos < len(p.src) && p.src[p.pos] >= '0' && p.src[p.pos] <= '9' {
		if n = n*10 + int(p.src[p.pos]-'0'); n > MaxElements {
			return 0, p.errAt(at, "repetition count %s... is larger than %d", p.src[start:p.pos+1], MaxElements)
		}
		p.pos++
	}
	if p.pos == start {
		return 0, p.errAt(p.pos, "expected a repetition count, found %s", p.found())
	}
	return n, nil
}

// repeat replaces the last term of seq (seq[last:]) by lo copies of it followed by up to
// hi-lo optional ones (hi < 0: any number), as llama.cpp rewrites repetitions: x{2,4} is
// x x r1, r1 ::= x r2 |, r2 ::= x |; x{1,} is x r, r ::= x r |.
func (p *parser) repeat(rule int32, seq alternative, last, lo, hi, at int) (alternative, error) {
	if last >= len(seq) { // an empty literal (""): any number of nothing is nothing
		return seq, nil
	}
	term := seq[last]
	if len(seq)-last > 1 { // a literal of several characters repeats as a whole
		term = symbol{ref: p.newRule(rule, []alternative{append(alternative(nil), seq[last:]...)})}
	}
	seq = seq[:last]
	cost := lo
	if hi < 0 {
		cost += 3
	} else {
		cost += 3 * (hi - lo)
	}
	if p.size += cost; p.size > MaxElements {
		return nil, p.errAt(at, "the repetition expands the grammar past %d elements", MaxElements)
	}
	for range lo {
		seq = append(seq, term)
	}
	switch {
	case hi < 0:
		r := p.newRule(rule, nil)
		p.rules[r] = []alternative{{term, {ref: r}}, {}}
		seq = append(seq, symbol{ref: r})
	case hi > lo:
		next := p.newRule(rule, []alternative{{term}, {}})
		for range hi - lo - 1 {
			next = p.newRule(rule, []alternative{{term, {ref: next}}, {}})
		}
		seq = append(seq, symbol{ref: next})
	}
	return seq, nil
}

// parseClass reads [...] or [^...].
func (p *parser) parseClass() (symbol, error) {
	at := p.pos
	p.pos++
	sym := symbol{ref: -1}
	if p.peek() == '^' {
		sym.neg = true
		p.pos++
	}
	for p.peek() != ']' {
		if p.pos >= len(p.src) || p.peek() == '\n' {
			return sym, p.errAt(at, "unterminated character class")
		}
		lo, err := p.parseChar()
		if err != nil {
			return sym, err
		}
		hi := lo
		if p.peek() == '-' && p.pos+1 < len(p.src) && p.src[p.pos+1] != ']' {
			p.pos++
			rangeAt := p.pos
			if hi, err = p.parseChar(); err != nil {
				return sym, err
			}
			if hi < lo {
				return sym, p.errAt(rangeAt, "character range %q-%q is reversed", lo, hi)
			}
		}
		sym.ranges = append(sym.ranges, runeRange{lo, hi})
	}
	p.pos++
	return sym, nil
}

// parseChar reads one character of a literal or class, with its escape.
func (p *parser) parseChar() (rune, error) {
	at := p.pos
	if p.peek() != '\\' {
		r, n := utf8.DecodeRuneInString(p.src[p.pos:])
		p.pos += n
		return r, nil
	}
	p.pos++
	if p.pos >= len(p.src) {
		return 0, p.errAt(at, "escape at the end of the grammar")
	}
	c := p.src[p.pos]
	p.pos++
	switch c {
	case 'n':
		return '\n', nil
	case 't':
		return '\t', nil
	case 'r':
		return '\r', nil
	case '\\', '"', '[', ']', '-', '^', '/':
		return rune(c), nil
	case 'x':
		return p.parseHex(at, 2)
	case 'u':
		return p.parseHex(at, 4)
	case 'U':
		return p.parseHex(at, 8)
	}
	return 0, p.errAt(at, "unknown escape \\%c", c)
}

func (p *parser) parseHex(at, n int) (rune, error) {
	if p.pos+n > len(p.src) {
		return 0, p.errAt(at, "escape needs %d hexadecimal digits", n)
	}
	var r rune
	for _, c := range []byte(p.src[p.pos : p.pos+n]) {
		var d byte
		switch {
		case c >= '0' && c <= '9':
			d = c - '0'
		case c >= 'a' && c <= 'f':
			d = c - 'a' + 10
		case c >= 'A' && c <= 'F':
			d = c - 'A' + 10
		default:
			return 0, p.errAt(at, "escape needs %d hexadecimal digits", n)
		}
		r = r<<4 | rune(d)
	}
	p.pos += n
	if r > utf8.MaxRune {
		return 0, p.errAt(at, "escape U+%X is beyond Unicode", r)
	}
	return r, nil
}
