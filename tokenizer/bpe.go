package tokenizer

import (
	"math"
	"slices"
	"strings"
	"sync"
)

const (
	// Words up to smallWord bytes are merged with a plain scan over the
	// pair ranks (no allocation); longer ones use a heap.
	smallWord = 48
	// Words up to maxCachedWord bytes are cached.
	maxCachedWord = 64
	// The cache is emptied when it reaches this many words.
	maxCacheEntries = 1 << 16

	noMerge = math.MaxUint64
)

// wordCache maps a pre-token to its ids. It is bounded and safe for
// concurrent use.
type wordCache struct {
	mu sync.RWMutex
	m  map[string][]int32
}

func (c *wordCache) get(w string) ([]int32, bool) {
	c.mu.RLock()
	ids, ok := c.m[w]
	c.mu.RUnlock()
	return ids, ok
}

func (c *wordCache) put(w string, ids []int32) {
	// Copies, so that the cache neither pins the caller's text nor shares
	// the caller's slice.
	k, v := strings.Clone(w), slices.Clone(ids)
	c.mu.Lock()
	if len(c.m) >= maxCacheEntries {
		clear(c.m)
	}
	c.m[k] = v
	c.mu.Unlock()
}

// pairRank returns rank<<32 | merged id for the pair (a, b), or noMerge.
func (t *BPE) pairRank(a, b int32) uint64 {
	if v, ok := t.merges[pairKey(a, b)]; ok {
		return v
	}
	return noMerge
}

// appendWord appends the BPE encoding of pre-token w (raw bytes) to dst.
func (t *BPE) appendWord(dst []int32, w string) []int32 {
	if len(w) == 1 {
		if id := t.byteTok[w[0]]; id >= 0 {
			dst = append(dst, id)
		}
		return dst
	}
	cacheable := len(w) <= maxCachedWord
	if cacheable {
		if ids, ok := t.cache.get(w); ok {
			return append(dst, ids...)
		}
	}
	start := len(dst)
	if id, ok := t.wholeToken(w); ok {
		dst = append(dst, id)
	} else if len(w) <= smallWord {
		dst = t.bpeSmall(dst, w)
	} else {
		dst = t.bpeHeap(dst, w)
	}
	if cacheable {
		t.cache.put(w, dst[start:])
	}
	return dst
}

// wholeToken returns the normal token that is all of w when the vocabulary ignores merges for
// such pre-tokens (Llama 3's ignore_merges: merges need not rebuild every token).
func (t *BPE) wholeToken(w string) (int32, bool) {
	if !t.ignoreMerges {
		return 0, false
	}
	id, ok := t.vocab[mapBytes(w)]
	if !ok || t.types[id] == TypeControl || t.types[id] == TypeUserDefined {
		return 0, false
	}
	return id, true
}

// bpeSmall merges a short word: at each step the adjacent pair with the lowest
// rank (leftmost among equals) is merged. Only the two ranks next to a merge
// change, so each step costs one scan of the rank array and two lookups.
func (t *BPE) bpeSmall(dst []int32, w string) []int32 {
	var symBuf [smallWord]int32
	var rankBuf [smallWord]uint64
	syms := symBuf[:0]
	for i := 0; i < len(w); i++ {
		if id := t.byteTok[w[i]]; id >= 0 {
			syms = append(syms, id)
		}
	}
	if len(syms) < 2 {
		return append(dst, syms...)
	}
	ranks := rankBuf[:len(syms)-1]
	for i := range ranks {
		ranks[i] = t.pairRank(syms[i], syms[i+1])
	}
	for {
		best, bestRank := -1, uint64(noMerge)
		for i, r := range ranks {
			if r < bestRank {
				best, bestRank = i, r
			}
		}
		if best < 0 {
			break
		}
		syms[best] = int32(uint32(bestRank))
		syms = append(syms[:best+1], syms[best+2:]...)
		ranks = append(ranks[:best], ranks[best+1:]...)
		if best > 0 {
			ranks[best-1] = t.pairRank(syms[best-1], syms[best])
		}
		if best < len(ranks) {
			ranks[best] = t.pairRank(syms[best], syms[best+1])
		}
	}
	return append(dst, syms...)
}

// mergeCand is a candidate merge of the symbol at pos with its right
// neighbour; it is stale unless both symbols still have the ids it records.
type mergeCand struct {
	key         uint64 // rank<<32 | pos: lowest rank first, then leftmost
	left, right int32
	merged      int32
}

// bpeHeap merges a long word in O(n log n) with a linked list of symbols and
// a min-heap of candidate merges, with the same result as bpeSmall.
func (t *BPE) bpeHeap(dst []int32, w string) []int32 {
	n := len(w)
	ids := make([]int32, 0, n)
	for i := 0; i < n; i++ {
		if id := t.byteTok[w[i]]; id >= 0 {
			ids = append(ids, id)
		}
	}
	n = len(ids)
	next := make([]int32, n) // index of the next live symbol, or -1
	prev := make([]int32, n) // index of the previous live symbol, or -1
	for i := range n {
		next[i] = int32(i + 1)
		prev[i] = int32(i - 1)
	}
	if n > 0 {
		next[n-1] = -1
	}
	h := make(candHeap, 0, n)
	push := func(pos int32) {
		r := next[pos]
		if r < 0 {
			return
		}
		v := t.pairRank(ids[pos], ids[r])
		if v == noMerge {
			return
		}
		h.push(mergeCand{key: v&^0xffffffff | uint64(uint32(pos)), left: ids[pos], right: ids[r], merged: int32(uint32(v))})
	}
	for i := 0; i+1 < n; i++ {
		push(int32(i))
	}
	for len(h) > 0 {
		c := h.pop()
		pos := int32(uint32(c.key))
		r := next[pos]
		if ids[pos] != c.left || r < 0 || ids[r] != c.right {
			continue // stale
		}
		ids[pos] = c.merged
		ids[r] = -1
		nr := next[r]
		next[pos] = nr
		if nr >= 0 {
			prev[nr] = pos
		}
		if p := prev[pos]; p >= 0 {
			push(p)
		}
		push(pos)
	}
	for i := int32(0); n > 0 && i >= 0; i = next[i] {
		dst = append(dst, ids[i])
	}
	return dst
}

type candHeap []mergeCand

func (h *candHeap) push(c mergeCand) {
	*h = append(*h, c)
	s := *h
	i := len(s) - 1
	for i > 0 {
		p := (i - 1) / 2
		if s[p].key <= c.key {
			break
		}
		s[i] = s[p]
		i = p
	}
	s[i] = c
}

func (h *candHeap) pop() mergeCand {
	s := *h
	top := s[0]
	last := s[len(s)-1]
	s = s[:len(s)-1]
	*h = s
	if len(s) == 0 {
		return top
	}
	i := 0
	for {
		l := 2*i + 1
		if l >= len(s) {
			break
		}
		if r := l + 1; r < len(s) && s[r].key < s[l].key {
			l = r
		}
		if last.key <= s[l].key {
			break
		}
		s[i] = s[l]
		i = l
	}
	s[i] = last
	return top
}
