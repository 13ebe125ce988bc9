package grammar

import (
	"bytes"
	"errors"
	"slices"
)

// Vocab is a vocabulary's token texts arranged for masking: a trie of the tokens' bytes, so
// that the tokens the grammar allows are found in one walk that shares every common prefix
// and abandons a branch at its first refused character, instead of running every token
// through the matcher. Immutable after NewVocab; safe to share.
type Vocab struct {
	tokens [][]byte
	eog    []bool
	nodes  []trieNode // nodes[0] is the root (the empty prefix)
	ids    []int32    // token ids sorted by their bytes; a node's tokens are a run of it
}

// trieNode is a prefix: the byte that ends it, its children (a contiguous run of nodes,
// sorted by byte) and the tokens whose text it is (a run of Vocab.ids).
type trieNode struct {
	child0, nchild int32
	tok0, ntok     int32
	b              byte
}

// NewVocab arranges the token texts (tokens[id], the bytes a token adds to the text) and the
// end-of-generation tokens. Tokens with no bytes are never allowed (as in llama.cpp), except
// end-of-generation tokens, which are allowed only where the grammar may end.
func NewVocab(tokens [][]byte, eog []int32) *Vocab {
	v := &Vocab{tokens: tokens, eog: make([]bool, len(tokens))}
	for _, id := range eog {
		if id >= 0 && int(id) < len(tokens) {
			v.eog[id] = true
		}
	}
	for id, t := range tokens {
		if len(t) > 0 && !v.eog[id] {
			v.ids = append(v.ids, int32(id))
		}
	}
	slices.SortFunc(v.ids, func(a, b int32) int { return bytes.Compare(tokens[a], tokens[b]) })
	v.build()
	return v
}

// build lays the trie out breadth-first, so each node's children are contiguous.
func (v *Vocab) build() {
	type span struct{ node, lo, hi, depth int32 }
	v.nodes = []trieNode{{}}
	queue := []span{{0, 0, int32(len(v.ids)), 0}}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		lo := s.lo
		for lo < s.hi && int32(len(v.tokens[v.ids[lo]])) == s.depth { // shorter sorts first
			lo++
		}
		n := &v.nodes[s.node]
		n.tok0, n.ntok = s.lo, lo-s.lo
		n.child0 = int32(len(v.nodes))
		for lo < s.hi {
			b := v.tokens[v.ids[lo]][s.depth]
			hi := lo + 1
			for hi < s.hi && v.tokens[v.ids[hi]][s.depth] == b {
				hi++
			}
			queue = append(queue, span{int32(len(v.nodes)), lo, hi, s.depth + 1})
			v.nodes = append(v.nodes, trieNode{b: b})
			lo = hi
		}
		v.nodes[s.node].nchild = int32(len(v.nodes)) - v.nodes[s.node].child0
	}
}

// Size is the number of tokens.
func (v *Vocab) Size() int { return len(v.tokens) }

// IsEOG reports whether id is an end-of-generation token.
func (v *Vocab) IsEOG(id int32) bool { return id >= 0 && int(id) < len(v.eog) && v.eog[id] }

// AllowsToken reports whether token id may come next: its bytes continue the grammar, or it
// ends generation, allowEOG is set and the text so far is complete.
func (m *Matcher) AllowsToken(v *Vocab, id int32, allowEOG bool) (bool, error) {
	if id < 0 || int(id) >= len(v.tokens) {
		return false, nil
	}
	if v.eog[id] {
		return allowEOG && m.CanEnd(), nil
	}
	if len(v.tokens[id]) == 0 {
		return false, nil
	}
	return m.Allows(v.tokens[id])
}

// AcceptToken advances the matcher over token id (an end-of-generation token changes
// nothing).
func (m *Matcher) AcceptToken(v *Vocab, id int32) error {
	if v.IsEOG(id) {
		return nil
	}
	if id < 0 || int(id) >= len(v.tokens) || len(v.tokens[id]) == 0 {
		return errNoText(id)
	}
	return m.Accept(v.tokens[id])
}

func errNoText(id int32) error {
	return &SyntaxError{Msg: "token " + itoa(int(id)) + " has no text: the grammar cannot accept it"}
}

func itoa(n int) string {
	if n < 0 {
		return "-" + itoa(-n)
	}
	if n < 10 {
		return string(rune('0' + n))
	}
	return itoa(n/10) + string(rune('0'+n%10))
}

// maskCacheSize is how many masks a matcher keeps: a state often recurs (inside a JSON
// string every character leads back to the same stacks), and a mask there costs a walk of
// most of the trie.
const maskCacheSize = 8

// cachedMask is the allowed tokens of a state, keyed by the state's content.
type cachedMask struct {
	key  string
	v    *Vocab
	ids  []int32  // ascending
	bits []uint64 // the same tokens as a set: bit id%64 of word id/64
}

// stateKey writes the matcher's state (its stacks' positions, the cut character) and the
// end-of-generation switch into m.keyBuf; equal keys have equal masks.
func (m *Matcher) stateKey(allowEOG bool) {
	b := m.keyBuf[:0]
	if allowEOG {
		b = append(b, 1)
	}
	b = append(b, byte(m.pend.n))
	b = append(b, m.pend.b[:m.pend.n]...)
	for _, s := range m.stacks {
		for ; s != nil; s = s.next {
			b = append(b, byte(s.pos), byte(s.pos>>8), byte(s.pos>>16), byte(s.pos>>24))
		}
		b = append(b, 0xff, 0xff, 0xff, 0xff) // no position is -1: the end of a stack
	}
	m.keyBuf = b
}

// CachedAllowed returns the tokens that may come next, ascending, if this state's were
// computed recently (by Allowed or Mask); the slice must not be modified.
func (m *Matcher) CachedAllowed(v *Vocab, allowEOG bool) ([]int32, bool) {
	if c := m.cached(v, allowEOG); c != nil {
		return c.ids, true
	}
	return nil, false
}

// CachedAllowedSet is CachedAllowed as a bit set (bit id%64 of word id/64 is set for an
// allowed token id), with the number of allowed tokens; the set must not be modified.
func (m *Matcher) CachedAllowedSet(v *Vocab, allowEOG bool) ([]uint64, int, bool) {
	if c := m.cached(v, allowEOG); c != nil {
		return c.bits, len(c.ids), true
	}
	return nil, 0, false
}

// Prepare computes the allowed tokens of the current state (as Allowed does), so that the
// next CachedAllowed or CachedAllowedSet finds them: a caller can do it while it waits for
// something else (the model's next step).
func (m *Matcher) Prepare(v *Vocab, allowEOG bool) error {
	_, err := m.Allowed(v, allowEOG)
	return err
}

// PrepareBounded is Prepare for states whose walk of the trie enters at most maxNodes nodes:
// those that allow few tokens, where checking the most likely tokens one by one finds none
// and a walk is what sampling needs. A state past the bound (inside a JSON string, say, where
// nearly every token is allowed and a walk costs a millisecond) is remembered and left to
// the one-by-one checks; it reports whether the state's tokens are now cached.
func (m *Matcher) PrepareBounded(v *Vocab, allowEOG bool, maxNodes int) (bool, error) {
	if m.cached(v, allowEOG) != nil {
		return true, nil
	}
	if m.wide[string(m.keyBuf)] {
		return false, nil
	}
	key := string(m.keyBuf)
	m.budget = maxNodes
	_, err := m.Allowed(v, allowEOG)
	m.budget = -1
	if err == errBudget {
		if m.wide == nil || len(m.wide) >= 256 {
			m.wide = map[string]bool{}
		}
		m.wide[key] = true
		return false, nil
	}
	return err == nil, err
}

// Fork returns a matcher in the same state with its own scratch memory and cache, for
// computing this state's allowed tokens on another goroutine (the stacks are immutable and
// shared); Adopt then brings its result into m.
func (m *Matcher) Fork() *Matcher {
	f := &Matcher{g: m.g, stacks: slices.Clone(m.stacks), pend: m.pend, budget: -1}
	f.w.g = m.g
	return f
}

// Adopt adds the allowed-token sets that f (a Fork of m, possibly advanced since) computed to
// m's cache, so that m finds them when it reaches those states; f must not be in use.
func (m *Matcher) Adopt(f *Matcher) {
	for _, c := range f.masks {
		if m.wide != nil {
			delete(m.wide, c.key)
		}
		if len(m.masks) < maskCacheSize {
			m.masks = append(m.masks, c)
			continue
		}
		m.masks[m.nextMask] = c
		m.nextMask = (m.nextMask + 1) % maskCacheSize
	}
}

// errBudget ends a bounded walk (PrepareBounded).
var errBudget = errors.New("grammar: walk over its bound")

// cached returns the current state's cache entry, or nil.
func (m *Matcher) cached(v *Vocab, allowEOG bool) *cachedMask {
	m.stateKey(allowEOG)
	for i := range m.masks {
		if c := &m.masks[i]; c.v == v && c.key == string(m.keyBuf) {
			return c
		}
	}
	return nil
}

// Allowed returns the tokens that may come next, ascending, computed by one walk of the
// vocabulary's trie; the last few states' lists are kept, so a state seen again costs
// nothing. The slice must not be modified.
func (m *Matcher) Allowed(v *Vocab, allowEOG bool) ([]int32, error) {
	if ids, ok := m.CachedAllowed(v, allowEOG); ok {
		return ids, nil
	}
	key := string(m.keyBuf)
	if len(m.scratchMask) != v.Size() {
		m.scratchMask = make([]bool, v.Size())
	}
	n, err := m.mask(v, allowEOG, m.scratchMask)
	if err != nil {
		return nil, err
	}
	ids := make([]int32, 0, n)
	bits := make([]uint64, (v.Size()+63)/64)
	for id, ok := range m.scratchMask {
		if ok {
			ids = append(ids, int32(id))
			bits[id/64] |= 1 << (id % 64)
		}
	}
	c := cachedMask{key: key, v: v, ids: ids, bits: bits}
	if len(m.masks) < maskCacheSize {
		m.masks = append(m.masks, c)
	} else {
		m.masks[m.nextMask] = c
		m.nextMask = (m.nextMask + 1) % maskCacheSize
	}
	return ids, nil
}

// Mask sets allowed[id] (len(allowed) = v.Size()) for every token that may come next (see
// Allowed) and returns how many are allowed.
func (m *Matcher) Mask(v *Vocab, allowEOG bool, allowed []bool) (int, error) {
	ids, err := m.Allowed(v, allowEOG)
	if err != nil {
		return 0, err
	}
	clear(allowed)
	for _, id := range ids {
		allowed[id] = true
	}
	return len(ids), nil
}

// mask computes Mask's result.
func (m *Matcher) mask(v *Vocab, allowEOG bool, allowed []bool) (int, error) {
	clear(allowed)
	m.w.a = &m.scratch
	m.sets = m.sets[:0]
	n, err := m.maskNode(v, 0, m.stacks, m.pend, allowed)
	m.scratch.n = 0
	if err != nil {
		return 0, err
	}
	if allowEOG && m.CanEnd() {
		for id, e := range v.eog {
			if e {
				allowed[id] = true
				n++
			}
		}
	}
	return n, nil
}

// maskNode marks the tokens below node whose bytes continue the state (cur, pend).
func (m *Matcher) maskNode(v *Vocab, node int32, cur []*stack, pend utf8Prefix, allowed []bool) (int, error) {
	nd := v.nodes[node]
	count := 0
	for c := nd.child0; c < nd.child0+nd.nchild; c++ {
		child := &v.nodes[c]
		p := pend
		r, ok := p.add(child.b)
		if !ok {
			continue
		}
		next := cur
		mark, start := m.scratch.n, len(m.sets)
		if r >= 0 {
			var err error
			if m.sets, err = m.w.accept(cur, r, m.sets); err != nil {
				return 0, err
			}
			if len(m.sets) == start {
				continue
			}
			next = m.sets[start:]
		} else if lo, hi := p.span(); !m.w.acceptsPartial(cur, lo, hi) {
			continue
		}
		if m.budget >= 0 {
			if m.budget == 0 {
				return 0, errBudget
			}
			m.budget--
		}
		for _, id := range v.ids[child.tok0 : child.tok0+child.ntok] {
			allowed[id] = true
		}
		count += int(child.ntok)
		n, err := m.maskNode(v, c, next, p, allowed)
		if err != nil {
			return 0, err
		}
		count += n
		m.sets = m.sets[:start]
		m.scratch.n = mark
	}
	return count, nil
}
