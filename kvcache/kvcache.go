// Package kvcache holds the keys and values of a sequence's past tokens: one K and one V matrix
// per layer, each row the n_head_kv x head_dim values of one position. The cache belongs to the
// session (and to batching and persistence), not to a model architecture: a model only reads
// and writes the rows of the layers it computes.
package kvcache

import (
	"fmt"

	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/quant"
)

// Shape is what a model needs of a cache: how many layers, and the width of a K or V row
// (n_head_kv x head_dim; GPT-2's is n_embd, a grouped-query model's is smaller).
type Shape struct {
	Layers int
	Width  int
}

// Cache holds the keys and values of every layer for a context of Size positions.
type Cache struct {
	K, V  []*graph.Tensor // [Width, Size] per layer
	Size  int
	Shape Shape
	buf   *graph.Buffer
}

// New allocates on be a cache of nctx positions of the given shape, with elements of type typ.
func New(be graph.Backend, shape Shape, nctx int, typ quant.Type) (*Cache, error) {
	if shape.Layers < 1 || shape.Width < 1 || nctx < 1 {
		return nil, fmt.Errorf("KV cache of %d layers x %d values x %d positions", shape.Layers, shape.Width, nctx)
	}
	row, err := typ.RowSize(int64(shape.Width))
	if err != nil {
		return nil, err
	}
	per := int(row) * nctx
	buf, err := be.Alloc(2 * shape.Layers * per)
	if err != nil {
		return nil, fmt.Errorf("allocating the KV cache: %w", err)
	}
	c := &Cache{Size: nctx, Shape: shape, buf: buf}
	ctx := graph.NewContext(2 * shape.Layers)
	for l := 0; l < shape.Layers; l++ {
		c.K = append(c.K, ctx.NewStatic(fmt.Sprintf("cache_k.%d", l), typ, buf, (2*l)*per, shape.Width, nctx))
		c.V = append(c.V, ctx.NewStatic(fmt.Sprintf("cache_v.%d", l), typ, buf, (2*l+1)*per, shape.Width, nctx))
	}
	return c, ctx.Err()
}

// Fits reports whether the cache has the shape a model needs.
func (c *Cache) Fits(shape Shape) bool {
	return c != nil && c.Shape == shape && len(c.K) == shape.Layers
}

// Type is the element type of the keys and values.
func (c *Cache) Type() quant.Type { return c.K[0].Type }

// Bytes is the memory the cache holds.
func (c *Cache) Bytes() int { return c.buf.Size }

// HostRows returns the bytes of the first n rows of layer l's keys (v false) or values (v
// true), or nil when the cache is not in host memory.
func (c *Cache) HostRows(l int, v bool, n int) []byte {
	t := c.K[l]
	if v {
		t = c.V[l]
	}
	if t.Buf == nil || t.Buf.Host == nil || n < 0 || n > t.Ne[1] {
		return nil
	}
	return t.Buf.Host[t.Off : t.Off+n*t.Nb[1]]
}
