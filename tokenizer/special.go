package tokenizer

import (
	"slices"
	"sort"
	"strings"
)

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

// specialSet is a vocabulary's special tokens and the means to find them in a text; the BPE
// and SentencePiece kinds share it.
type specialSet struct {
	tokens   []string // the text of every token, by id
	ids      []int32  // the special ids, longest text first
	first    [256]bool
	onlyByte int // the first byte of every special when they share one, -1 if none, -2 if several
	matcher  *specialMatcher
}

// newSpecialSet makes the set of the given ids (non-empty texts) of tokens.
func newSpecialSet(tokens []string, ids []int32) specialSet {
	s := specialSet{tokens: tokens, ids: slices.Clone(ids), onlyByte: -1}
	// Longest special first, so that a longer token wins over its prefix.
	sort.SliceStable(s.ids, func(i, j int) bool { return len(tokens[s.ids[i]]) > len(tokens[s.ids[j]]) })
	for _, id := range s.ids {
		c := tokens[id][0]
		s.first[c] = true
		switch s.onlyByte {
		case -1:
			s.onlyByte = int(c)
		case int(c):
		default:
			s.onlyByte = -2
		}
	}
	if len(s.ids) > 0 {
		s.matcher = newSpecialMatcher(tokens, s.ids)
	}
	return s
}

// appendSplit appends the encoding of text: the special tokens in it, found leftmost and then
// longest, as their ids, and each non-empty stretch of text between them as ordinary encodes it.
func (s *specialSet) appendSplit(dst []int32, text string, ordinary func([]int32, string) []int32) []int32 {
	if len(s.ids) == 0 {
		return ordinary(dst, text)
	}
	// best[i-winStart] is the longest special at i, for i in [winStart, winStart+len(best)).
	var best []int32
	winStart := 0
	start := 0
	for i := 0; i < len(text); {
		if s.onlyByte >= 0 {
			k := strings.IndexByte(text[i:], byte(s.onlyByte))
			if k < 0 {
				break
			}
			i += k
		} else if !s.first[text[i]] {
			i++
			continue
		}
		if i >= winStart+len(best) {
			if best == nil {
				best = make([]int32, min(s.matcher.window(), len(text)))
			}
			winStart = i
			n := min(len(best), len(text)-i)
			best = best[:n]
			s.matcher.fill(best, text, i)
		}
		id := best[i-winStart]
		if id < 0 {
			i++
			continue
		}
		if start < i {
			dst = ordinary(dst, text[start:i])
		}
		dst = append(dst, id)
		i += len(s.tokens[id])
		start = i
	}
	if start < len(text) {
		dst = ordinary(dst, text[start:])
	}
	return dst
}

// match returns the longest special token that text starts with, by trying each: the
// reference the matcher is tested against.
func (s *specialSet) match(text string) (int32, bool) {
	for _, id := range s.ids {
		if strings.HasPrefix(text, s.tokens[id]) {
			return id, true
		}
	}
	return 0, false
}
