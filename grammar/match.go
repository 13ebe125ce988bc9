package grammar

import (
	"fmt"
	"unicode/utf8"
)

// stack is a persistent stack of grammar positions: each position is an elem index, the next
// symbol to match in some rule; the top (the first node) is always a character class. Stacks
// share their tails, so pushing and popping copy nothing. The empty stack (nil) means the
// text so far is a complete match of the grammar.
type stack struct {
	pos  int32
	next *stack
}

// sameStack compares two stacks by content (shared tails end the walk early).
func sameStack(a, b *stack) bool {
	for a != b {
		if a == nil || b == nil || a.pos != b.pos {
			return false
		}
		a, b = a.next, b.next
	}
	return true
}

// arena hands out stack nodes in chunks, for the scratch work of checking tokens: its nodes
// are dropped together (reset to a mark) instead of becoming garbage one by one. A nil arena
// allocates from the heap (the matcher's own state, which lives on).
type arena struct {
	chunks [][]stack
	n      int // nodes handed out
}

const chunkSize = 4096

func (a *arena) push(pos int32, next *stack) *stack {
	if a == nil {
		return &stack{pos: pos, next: next}
	}
	c, i := a.n/chunkSize, a.n%chunkSize
	if c == len(a.chunks) {
		a.chunks = append(a.chunks, make([]stack, chunkSize))
	}
	a.n++
	s := &a.chunks[c][i]
	s.pos, s.next = pos, next
	return s
}

// walker advances stack sets over code points; it holds the allocator and the work bound.
type walker struct {
	g          *Grammar
	a          *arena
	expansions int
}

// startStacks appends the stacks before any text to out.
func (w *walker) startStacks(out []*stack, a *arena) ([]*stack, error) {
	w.a, w.expansions = a, 0
	base := len(out)
	var err error
	for _, pos := range w.g.alts[w.g.root] {
		if out, err = w.advance(w.enter(nil, pos), out, base); err != nil {
			return out, err
		}
	}
	return out, nil
}

// enter pushes position pos above rest, unless pos is an alternative's end: then the rule is
// done and rest goes on (a tail reference leaves nothing behind, so right recursion such as
// x_rep ::= x x_rep does not grow the stack).
func (w *walker) enter(rest *stack, pos int32) *stack {
	if w.g.elems[pos].kind == kindEnd {
		return rest
	}
	return w.a.push(pos, rest)
}

// advance expands the rule references on top of s until each stack's top is a character
// class (or the stack is empty), appending the distinct results to out[base:].
func (w *walker) advance(s *stack, out []*stack, base int) ([]*stack, error) {
	if s != nil && w.g.elems[s.pos].kind == kindRef {
		if w.expansions++; w.expansions > maxExpansions {
			return out, ErrTooAmbiguous
		}
		e := &w.g.elems[s.pos]
		rest := w.enter(s.next, s.pos+1)
		var err error
		for _, pos := range w.g.alts[e.ref] {
			if out, err = w.advance(w.enter(rest, pos), out, base); err != nil {
				return out, err
			}
		}
		return out, nil
	}
	for _, t := range out[base:] {
		if sameStack(t, s) {
			return out, nil
		}
	}
	if len(out)-base >= MaxStacks {
		return out, ErrTooAmbiguous
	}
	return append(out, s), nil
}

// accept appends to out the stacks that follow in after the code point c.
func (w *walker) accept(in []*stack, c rune, out []*stack) ([]*stack, error) {
	w.expansions = 0
	base := len(out)
	var err error
	for _, s := range in {
		if s == nil || !w.g.elems[s.pos].matches(c) {
			continue
		}
		if out, err = w.advance(w.enter(s.next, s.pos+1), out, base); err != nil {
			return out, err
		}
	}
	return out, nil
}

// acceptsPartial reports whether some stack of in accepts some code point of [lo, hi] (the
// code points a cut UTF-8 sequence may still become).
func (w *walker) acceptsPartial(in []*stack, lo, hi rune) bool {
	for _, s := range in {
		if s != nil && w.g.elems[s.pos].matchesSome(lo, hi) {
			return true
		}
	}
	return false
}

// utf8Prefix describes the bytes of an unfinished UTF-8 sequence.
type utf8Prefix struct {
	b [4]byte
	n int
}

// need is the length of the sequence the lead byte c begins, 0 if c cannot begin one.
func utf8Need(c byte) int {
	switch {
	case c < 0x80:
		return 1
	case c >= 0xc2 && c <= 0xdf:
		return 2
	case c >= 0xe0 && c <= 0xef:
		return 3
	case c >= 0xf0 && c <= 0xf4:
		return 4
	}
	return 0
}

// validNext reports whether c may follow the prefix as its next byte (the second byte of
// E0, ED, F0 and F4 sequences is restricted: no overlong forms, surrogates or values
// beyond U+10FFFF).
func (p *utf8Prefix) validNext(c byte) bool {
	lo, hi := byte(0x80), byte(0xbf)
	if p.n == 1 {
		switch p.b[0] {
		case 0xe0:
			lo = 0xa0
		case 0xed:
			hi = 0x9f
		case 0xf0:
			lo = 0x90
		case 0xf4:
			hi = 0x8f
		}
	}
	return c >= lo && c <= hi
}

// span is the range of code points the unfinished sequence can still become.
func (p *utf8Prefix) span() (lo, hi rune) {
	need := utf8Need(p.b[0])
	var l, h [4]byte
	copy(l[:], p.b[:p.n])
	copy(h[:], p.b[:p.n])
	for i := p.n; i < need; i++ {
		l[i], h[i] = 0x80, 0xbf
	}
	if p.n == 1 { // the restricted second bytes
		tmp := utf8Prefix{b: p.b, n: 1}
		for c := byte(0x80); c <= 0xbf; c++ {
			if tmp.validNext(c) {
				l[1] = c
				break
			}
		}
		for c := byte(0xbf); c >= 0x80; c-- {
			if tmp.validNext(c) {
				h[1] = c
				break
			}
		}
	}
	lo, _ = utf8.DecodeRune(l[:need])
	hi, _ = utf8.DecodeRune(h[:need])
	return lo, hi
}

// Matcher follows generated text through a grammar. It is not safe for concurrent use; each
// generation owns one (Grammar.NewMatcher).
type Matcher struct {
	g      *Grammar
	stacks []*stack
	pend   utf8Prefix // bytes of a character the last token cut

	// Scratch for checking tokens without committing them.
	w       walker
	scratch arena
	sets    []*stack

	masks       []cachedMask // the last few states' allowed tokens
	nextMask    int          // the one to replace next
	keyBuf      []byte
	scratchMask []bool
	// budget bounds the nodes a walk of the trie may enter (PrepareBounded); < 0: no bound
	budget int
	// wide holds the states whose walk went past a PrepareBounded budget (they allow many
	// tokens: checking the likely ones one by one is the cheap way there)
	wide map[string]bool
}

// NewMatcher returns a matcher at the start of the text.
func (g *Grammar) NewMatcher() *Matcher {
	m := &Matcher{g: g, stacks: g.start, budget: -1}
	m.w.g = g
	return m
}

// CanEnd reports whether the text so far is a complete match (an end-of-generation token may
// come now).
func (m *Matcher) CanEnd() bool {
	if m.pend.n > 0 {
		return false
	}
	for _, s := range m.stacks {
		if s == nil {
			return true
		}
	}
	return false
}

// Done reports whether the text so far is complete and nothing may follow it.
func (m *Matcher) Done() bool {
	return m.pend.n == 0 && len(m.stacks) == 1 && m.stacks[0] == nil
}

// Accept advances the matcher over the bytes of a token. Bytes the grammar refuses are an
// error and leave the matcher as it was. A token may end inside a UTF-8 character; the next
// one completes it.
func (m *Matcher) Accept(b []byte) error {
	stacks, pend, err := m.walkBytes(b, nil)
	if err != nil {
		return err
	}
	if stacks == nil {
		return fmt.Errorf("grammar: the text %q does not continue the grammar here", b)
	}
	// The nodes came from the heap (no arena): the new state only needs its own slice.
	m.stacks = append([]*stack(nil), stacks...)
	m.pend = pend
	return nil
}

// Allows reports whether the bytes of a token may come next (without accepting them).
func (m *Matcher) Allows(b []byte) (bool, error) {
	stacks, _, err := m.walkBytes(b, &m.scratch)
	m.scratch.n = 0
	return stacks != nil, err
}

// walkBytes runs b through the current state; nil stacks: refused.
func (m *Matcher) walkBytes(b []byte, a *arena) ([]*stack, utf8Prefix, error) {
	m.w.a = a
	cur := m.stacks
	pend := m.pend
	m.sets = m.sets[:0]
	var err error
	for _, c := range b {
		var ok bool
		var r rune
		if r, ok = pend.add(c); !ok {
			return nil, pend, nil
		}
		if r < 0 {
			continue
		}
		start := len(m.sets)
		if m.sets, err = m.w.accept(cur, r, m.sets); err != nil {
			return nil, pend, err
		}
		if len(m.sets) == start {
			return nil, pend, nil
		}
		cur = m.sets[start:]
	}
	if pend.n > 0 {
		lo, hi := pend.span()
		if !m.w.acceptsPartial(cur, lo, hi) {
			return nil, pend, nil
		}
	}
	return cur, pend, nil
}

// add appends byte c to the unfinished sequence: the completed code point (r >= 0), or
// r = -1 while unfinished; ok is false for bytes that cannot be UTF-8.
func (p *utf8Prefix) add(c byte) (r rune, ok bool) {
	if p.n == 0 {
		switch utf8Need(c) {
		case 0:
			return 0, false
		case 1:
			return rune(c), true
		}
		p.b[0], p.n = c, 1
		return -1, true
	}
	if !p.validNext(c) {
		return 0, false
	}
	p.b[p.n] = c
	p.n++
	if p.n < utf8Need(p.b[0]) {
		return -1, true
	}
	r, _ = utf8.DecodeRune(p.b[:p.n])
	p.n = 0
	return r, true
}
