package llm

import (
	"fmt"
	"math"
	"math/bits"

	"github.com/gorun-dev/gorun/grammar"
)

// ErrGrammarBlocked: the grammar allows no token of the vocabulary here (it needs a
// character no token begins with, or it is complete and end-of-generation tokens are
// ignored).
var ErrGrammarBlocked = fmt.Errorf("%w: the grammar allows no token of the vocabulary at this point", ErrInvalidOption)

// grammarStage is the grammar's link of the sampler chain: it removes the tokens the grammar
// refuses before top-k and advances the grammar over the chosen token.
type grammarStage struct {
	m        *grammar.Matcher
	v        *grammar.Vocab
	allowEOG bool
	// prep and prepDone talk to the goroutine that computes the next state's allowed tokens
	// while a GPU computes the next step (startPrepare), so that the sampling after it finds
	// them ready: a mask walk costs about as much as a GPU step of a small model.
	prep     chan struct{}
	prepDone chan struct{}
	// wide is the fork walking a wide state in the background (walkWide), nil when none;
	// wideDone hands it back when its walk is done
	wide     *grammar.Matcher
	wideDone chan *grammar.Matcher
}

// prepareNodes bounds the trie walk done during a step: a state allowing few tokens (after
// "{" or "," in JSON) is walked in well under a GPU step; one allowing most of them (inside a
// string) would take longer than the step, and sampling there finds allowed tokens among the
// most likely ones without a walk.
const prepareNodes = 4096

// startPrepare has the state's allowed tokens computed in the background; waitPrepare must
// follow before the matcher is used again.
func (g *grammarStage) startPrepare() {
	if g.prep == nil {
		g.prep, g.prepDone = make(chan struct{}), make(chan struct{})
		go func(prep <-chan struct{}, done chan<- struct{}) {
			for range prep {
				// An error comes again when sampling asks.
				if ok, err := g.m.PrepareBounded(g.v, g.allowEOG, prepareNodes); !ok && err == nil && g.wide == nil {
					g.walkWide()
				}
				done <- struct{}{}
			}
		}(g.prep, g.prepDone)
	}
	select { // a wide state's walk finished: its set joins the matcher's cache
	case f := <-g.wideDone:
		g.m.Adopt(f)
		g.wide = nil
	default:
	}
	g.prep <- struct{}{}
}

// walkWide walks a state that allows many tokens (PrepareBounded gave up on it) on a fork
// of the matcher, on its own goroutine, over as many steps as it takes: generation goes on
// checking likely tokens one by one meanwhile, and a state that recurs (each token inside a
// JSON string leads back to the same one) then finds its set cached.
func (g *grammarStage) walkWide() {
	if g.wideDone == nil {
		g.wideDone = make(chan *grammar.Matcher, 1)
	}
	f := g.m.Fork()
	g.wide = f
	go func() {
		f.Prepare(g.v, g.allowEOG)
		g.wideDone <- f
	}()
}

func (g *grammarStage) waitPrepare() { <-g.prepDone }

// stop ends the background goroutine, if there is one.
func (g *grammarStage) stop() {
	if g.prep != nil {
		close(g.prep)
		g.prep = nil
	}
}

// grammarVocab is the vocabulary's token texts as a grammar.Vocab, built on first use.
func (m *Model) grammarVocab() *grammar.Vocab {
	m.gvOnce.Do(func() {
		n := m.tok.VocabSize()
		tokens := make([][]byte, n)
		var eog []int32
		for id := range int32(n) {
			tokens[id] = m.tok.TokenBytes(id)
			if m.tok.IsEOG(id) {
				eog = append(eog, id)
			}
		}
		m.gv = grammar.NewVocab(tokens, eog)
	})
	return m.gv
}

// NewSampler makes a sampler for the model's vocabulary that applies every option,
// SampleOptions.Grammar included (end-of-generation tokens allowed where the grammar may end).
func (m *Model) NewSampler(opts SampleOptions) *Sampler {
	s := NewSampler(opts, m.arch.Hparams().NVocab)
	if opts.Grammar != nil {
		s.useGrammar(m.grammarVocab(), true)
	}
	return s
}

// useGrammar makes the sampler apply opts.Grammar over the vocabulary v; allowEOG false bans
// end-of-generation tokens (IgnoreEOS).
func (s *Sampler) useGrammar(v *grammar.Vocab, allowEOG bool) {
	s.gram = &grammarStage{m: s.opts.Grammar.NewMatcher(), v: v, allowEOG: allowEOG}
}

// grammarDone reports whether the grammar is complete and allows nothing more.
func (s *Sampler) grammarDone() bool { return s.gram != nil && s.gram.m.Done() }

// sample is the chain with the grammar first: the candidates are the k most likely tokens
// the grammar allows (k is 1 for greedy decoding, TopK, or all), then top-p, min-p,
// temperature and the draw as without a grammar. It equals masking every refused token
// first, but checks tokens one by one from the most likely down, and walks the whole
// vocabulary (the trie) only when the most likely tokens are mostly refused.
func (g *grammarStage) sample(s *Sampler, logits []float32, pos uint64) (int32, error) {
	o := &s.opts
	k := len(logits)
	switch {
	case o.Temperature <= 0:
		k = 1
	case o.TopK > 0 && o.TopK < k:
		k = o.TopK
	}
	c, err := g.topAllowed(s.cand[:len(logits)], s.indexes(), logits, k)
	if err != nil {
		return -1, err
	}
	if len(c) == 0 {
		return -1, ErrGrammarBlocked
	}
	var next int32
	if o.Temperature <= 0 {
		if math.IsInf(float64(c[0].logit), -1) {
			return -1, errAllBanned
		}
		next = c[0].id
	} else if next, err = s.draw(c, pos); err != nil {
		return -1, err
	}
	if err := g.m.AcceptToken(g.v, next); err != nil {
		return -1, err
	}
	return next, nil
}

// topAllowed returns, sorted most likely first, the k most likely tokens the grammar allows
// (fewer when fewer are allowed), in c's memory. Three ways, all exact:
//   - the state's allowed tokens are known (computed at a recent step in the same state):
//     choose among them;
//   - the first k allowed among the 4k+64 most likely tokens are the first k allowed of all
//     (the order is total: by logit, then id); inside a JSON string they are found there;
//   - otherwise a walk of the vocabulary's trie lists the allowed tokens (cheap where few
//     are allowed, which is where the most likely ones are refused).
func (g *grammarStage) topAllowed(c []candidate, idx []int32, logits []float32, k int) ([]candidate, error) {
	n := len(logits)
	if n != g.v.Size() {
		return nil, fmt.Errorf("%w: %d logits for a grammar over %d tokens", ErrInvalidOption, n, g.v.Size())
	}
	if set, allowed, ok := g.m.CachedAllowedSet(g.v, g.allowEOG); ok {
		return topKOfAllowed(c, idx, logits, k, set, allowed), nil
	}
	if look := 4*k + 64; look < n/2 {
		kept, err := g.firstAllowed(topKOf(c, idx, logits, look), k)
		if err != nil || len(kept) == k {
			return kept, err
		}
		// Many of the most likely are allowed (inside a string, say): the allowed set is
		// large and a walk would visit most of the trie, so look further down the order.
		if wide := 16*k + 1024; len(kept)*8 >= look && wide < n/2 {
			if kept, err = g.firstAllowed(topKOf(c, idx, logits, wide), k); err != nil || len(kept) == k {
				return kept, err
			}
		}
	}
	ids, err := g.m.Allowed(g.v, g.allowEOG)
	if err != nil {
		return nil, err
	}
	return selectTop(c, logits, ids, k), nil
}

// topKOfAllowed returns, sorted, the k most likely of the allowed tokens logits (the set bits
// of set, allowed of them), in c's memory: for greedy decoding the most likely token when it is
// allowed; else, where the allowed tokens are many, topKOf's threshold over the allowed ones
// (exact for the same reason); else every allowed token.
func topKOfAllowed(c []candidate, idx []int32, logits []float32, k int, set []uint64, allowed int) []candidate {
	in := func(id int) bool { return set[id>>6]&(1<<(id&63)) != 0 }
	if k == 1 {
		if best := argmax(logits); in(int(best)) {
			c[0] = candidate{id: best, logit: logits[best]}
			return c[:1]
		}
	}
	n := len(logits)
	if n >= 4096 && k*16 <= allowed {
		if w := aboveThreshold(c, idx, logits, k, allowed, set); w >= k {
			return topK(c[:w], k)
		}
	}
	w := 0
	for wi, word := range set {
		for ; word != 0; word &= word - 1 {
			id := wi*64 + bits.TrailingZeros64(word)
			c[w] = candidate{id: int32(id), logit: logits[id]}
			w++
		}
	}
	return selectSorted(c[:w], k)
}

// selectSorted returns the k first of c (in id order) in the sampler's order, all of them
// when there are not more.
func selectSorted(c []candidate, k int) []candidate {
	if len(c) == 0 {
		return c
	}
	if k < len(c) {
		return topK(c, k)
	}
	sortDesc(c)
	return c
}

// selectTop returns the k most likely of the tokens ids (ascending), sorted, in c's memory.
func selectTop(c []candidate, logits []float32, ids []int32, k int) []candidate {
	kept := c[:len(ids)]
	for i, id := range ids {
		kept[i] = candidate{id: id, logit: logits[id]}
	}
	return selectSorted(kept, k)
}

// firstAllowed keeps, in order and in top's memory, the first k candidates of top the grammar
// allows (fewer if there are not k). It gives up early, with what it has, when fewer than one
// in eight of the first 32 are allowed: there the allowed set is small and walking the trie
// costs less than checking the rest one by one.
func (g *grammarStage) firstAllowed(top []candidate, k int) ([]candidate, error) {
	kept := top[:0]
	for i, cand := range top {
		if i == 32 && len(kept) < 4 && k > len(kept) {
			break
		}
		ok, err := g.m.AllowsToken(g.v, cand.id, g.allowEOG)
		if err != nil {
			return nil, err
		}
		if ok {
			kept = append(kept, cand)
			if len(kept) == k {
				break
			}
		}
	}
	return kept, nil
}
