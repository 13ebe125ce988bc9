package graph

import (
	"fmt"
	"sync/atomic"
)

// Graph is the list of nodes that compute some outputs, in an order where every node comes
// after its inputs. Leaves (weights, inputs, caches) are listed apart.
type Graph struct {
	Nodes   []*Tensor
	Leaves  []*Tensor
	Outputs []*Tensor
	planned []*Tensor // tensors whose memory lives in the arena (set by Plan)
	arena   int       // arena bytes the plan needs
	version uint64    // changes whenever the nodes or their memory change
}

// versions hands out graph versions, unique across all graphs of the process.
var versions atomic.Uint64

// Version identifies the graph's current nodes and memory: Build and Bind change it, so a
// backend can check a graph once and then run it again and again.
func (g *Graph) Version() uint64 { return g.version }

// NewGraph makes a graph with room for maxNodes nodes and leaves without growing.
func NewGraph(maxNodes int) *Graph {
	return &Graph{
		Nodes:   make([]*Tensor, 0, maxNodes),
		Leaves:  make([]*Tensor, 0, maxNodes),
		Outputs: make([]*Tensor, 0, 8),
		planned: make([]*Tensor, 0, maxNodes),
	}
}

// Build collects every tensor the outputs depend on. It replaces what the graph held before.
// Outputs are flagged so the planner keeps their memory to the end.
func (g *Graph) Build(outputs ...*Tensor) error {
	g.Nodes, g.Leaves, g.Outputs = g.Nodes[:0], g.Leaves[:0], g.Outputs[:0]
	g.planned = g.planned[:0]
	g.version = versions.Add(1)
	for _, o := range outputs {
		o.Flags |= FlagOutput
		o.Base().Flags |= FlagOutput
		g.Outputs = append(g.Outputs, o)
	}
	seen := map[*Tensor]bool{} // building happens once per graph, not per token
	for _, o := range outputs {
		if err := g.visit(o, seen, 0); err != nil {
			return err
		}
	}
	return nil
}

// visit appends t after everything it depends on (depth-first, post-order).
func (g *Graph) visit(t *Tensor, seen map[*Tensor]bool, depth int) error {
	if seen[t] {
		return nil
	}
	if depth > 100000 {
		return fmt.Errorf("graph: too deep at %q", t.Name)
	}
	seen[t] = true
	for _, s := range t.Src {
		if s != nil {
			if err := g.visit(s, seen, depth+1); err != nil {
				return err
			}
		}
	}
	if t.Op == OpNone {
		g.Leaves = append(g.Leaves, t)
	} else {
		g.Nodes = append(g.Nodes, t)
	}
	return nil
}
