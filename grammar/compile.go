package grammar

import "strings"

// compile checks the parsed rules (every rule defined, a root, no left recursion) and
// flattens them into a Grammar.
func (p *parser) compile() (*Grammar, error) {
	for id := range p.rules {
		if p.defined[id] < 0 {
			return nil, p.errAt(p.used[id], "undefined rule %q", p.ruleNames[id])
		}
	}
	root, ok := p.names["root"]
	if !ok {
		return nil, &SyntaxError{Msg: `no "root" rule (the rule the text must match)`}
	}
	if err := p.checkLeftRecursion(); err != nil {
		return nil, err
	}
	g := &Grammar{names: p.ruleNames, root: root, alts: make([][]int32, len(p.rules))}
	for id, alts := range p.rules {
		for _, a := range alts {
			g.alts[id] = append(g.alts[id], int32(len(g.elems)))
			for _, s := range a {
				if s.ref >= 0 {
					g.elems = append(g.elems, elem{kind: kindRef, ref: s.ref})
				} else {
					g.elems = append(g.elems, elem{kind: kindChar, neg: s.neg, ranges: s.ranges})
				}
			}
			g.elems = append(g.elems, elem{kind: kindEnd})
		}
	}
	var w walker
	w.g = g
	start, err := w.startStacks(nil, nil)
	if err != nil {
		return nil, err
	}
	g.start = start
	return g, nil
}

// nullable reports, per rule, whether it matches the empty text.
func (p *parser) nullable() []bool {
	null := make([]bool, len(p.rules))
	for changed := true; changed; {
		changed = false
		for id, alts := range p.rules {
			if null[id] {
				continue
			}
			for _, a := range alts {
				if p.prefixNullable(a, len(a), null) {
					null[id], changed = true, true
					break
				}
			}
		}
	}
	return null
}

// prefixNullable reports whether a[:n] can match the empty text.
func (p *parser) prefixNullable(a alternative, n int, null []bool) bool {
	for _, s := range a[:n] {
		if s.ref < 0 || !null[s.ref] {
			return false
		}
	}
	return true
}

// checkLeftRecursion refuses a rule that can reach itself without consuming a character
// (a ::= a "x", or through rules that can be empty): the matcher would expand it forever.
func (p *parser) checkLeftRecursion() error {
	null := p.nullable()
	// left[id]: the rules id can begin with.
	left := make([][]int32, len(p.rules))
	for id, alts := range p.rules {
		for _, a := range alts {
			for i, s := range a {
				if !p.prefixNullable(a, i, null) {
					break
				}
				if s.ref >= 0 {
					left[id] = append(left[id], s.ref)
				}
			}
		}
	}
	const (
		unseen = iota
		open
		done
	)
	state := make([]byte, len(p.rules))
	var path []int32
	var visit func(id int32) error
	visit = func(id int32) error {
		state[id] = open
		path = append(path, id)
		for _, r := range left[id] {
			switch state[r] {
			case open:
				return p.leftRecursionError(path, r)
			case unseen:
				if err := visit(r); err != nil {
					return err
				}
			}
		}
		path = path[:len(path)-1]
		state[id] = done
		return nil
	}
	for id := range p.rules {
		if state[id] == unseen {
			if err := visit(int32(id)); err != nil {
				return err
			}
		}
	}
	return nil
}

func (p *parser) leftRecursionError(path []int32, again int32) error {
	var cycle []string
	for i, id := range path {
		if id == again {
			for _, r := range path[i:] {
				cycle = append(cycle, p.ruleNames[r])
			}
			break
		}
	}
	cycle = append(cycle, p.ruleNames[again])
	// Report the first user-written rule of the cycle (generated ones are named name-N).
	at := p.defined[again]
	return p.errAt(at, "left recursion (not supported): %s can begin with itself without consuming text; a repetition of something that can be empty also does this",
		strings.Join(cycle, " -> "))
}
