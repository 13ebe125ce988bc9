package tokenizer

// specialMatcher finds, at any position of a text, the longest special token that starts
// there, at a cost linear in the text whatever the vocabulary: an Aho-Corasick automaton over
// the reversed special tokens, run backwards over the text. After reading text[i:] backwards
// the automaton's state is the longest suffix of the reversed text read that is a prefix of a
// reversed special, so the longest special that is a prefix of text[i:] is the longest
// terminal on that state's failure chain (precomputed per state).
//
// Scanning by windows keeps the memory bounded: the state at a position depends only on the
// maxLen bytes after it, so a window [a, b) is scanned from b+maxLen.
type specialMatcher struct {
	root   [256]int32       // transitions from the root (0: none)
	next   map[uint64]int32 // state<<8 | byte -> state, for states other than the root
	fail   []int32
	best   []int32 // per state: the longest special that is a suffix of it (reversed), or -1
	maxLen int
}

func newSpecialMatcher(tokens []string, specials []int32) *specialMatcher {
	m := &specialMatcher{next: map[uint64]int32{}, fail: []int32{0}, best: []int32{-1}}
	// Children in creation order, for the breadth-first pass.
	var child, sibling []int32 = []int32{-1}, []int32{-1}
	var label []byte = []byte{0}
	newState := func(parent int32, c byte) int32 {
		s := int32(len(m.fail))
		m.fail = append(m.fail, 0)
		m.best = append(m.best, -1)
		child = append(child, -1)
		sibling = append(sibling, child[parent])
		label = append(label, c)
		child[parent] = s
		return s
	}
	for _, id := range specials { // longest first, so a shorter duplicate never wins
		tok := tokens[id]
		m.maxLen = max(m.maxLen, len(tok))
		s := int32(0)
		for i := len(tok) - 1; i >= 0; i-- {
			c := tok[i]
			n := m.step(s, c)
			if n == 0 {
				n = newState(s, c)
				if s == 0 {
					m.root[c] = n
				} else {
					m.next[uint64(s)<<8|uint64(c)] = n
				}
			}
			s = n
		}
		if m.best[s] < 0 {
			m.best[s] = id
		}
	}
	// Failure links breadth first; best inherits along them (a state's own token is longer
	// than any proper suffix's).
	queue := make([]int32, 0, len(m.fail))
	for c := child[0]; c >= 0; c = sibling[c] {
		queue = append(queue, c) // depth 1: fail to the root
	}
	for qi := 0; qi < len(queue); qi++ {
		u := queue[qi]
		if m.best[u] < 0 {
			m.best[u] = m.best[m.fail[u]]
		}
		for v := child[u]; v >= 0; v = sibling[v] {
			f := m.fail[u]
			for f != 0 && m.step(f, label[v]) == 0 {
				f = m.fail[f]
			}
			if t := m.step(f, label[v]); t != v {
				m.fail[v] = t
			}
			queue = append(queue, v)
		}
	}
	return m
}

// step is the trie transition from s on c, 0 when there is none.
func (m *specialMatcher) step(s int32, c byte) int32 {
	if s == 0 {
		return m.root[c]
	}
	return m.next[uint64(s)<<8|uint64(c)]
}

// fill sets out[i-a] to the longest special starting at text[i] for i in [a, a+len(out)), -1
// where none does.
func (m *specialMatcher) fill(out []int32, text string, a int) {
	b := a + len(out)
	s := int32(0)
	for i := min(len(text), b+m.maxLen) - 1; i >= a; i-- {
		c := text[i]
		for {
			if n := m.step(s, c); n != 0 {
				s = n
				break
			}
			if s == 0 {
				break
			}
			s = m.fail[s]
		}
		if i < b {
			out[i-a] = m.best[s]
		}
	}
}

// window is the number of positions fill resolves at a time.
func (m *specialMatcher) window() int { return max(1<<14, 4*m.maxLen) }
