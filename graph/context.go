package graph

import (
	"fmt"

	"github.com/gorun-dev/gorun/quant"
)

// Context hands out tensor headers from a pool sized up front, so building graphs does not
// touch the heap. Reset makes the whole pool available again.
type Context struct {
	pool []Tensor
	used int
	err  error // first error met while building (pool exhausted, bad shapes)
}

// NewContext makes a context able to hold maxTensors tensors.
func NewContext(maxTensors int) *Context {
	return &Context{pool: make([]Tensor, maxTensors)}
}

// Reset forgets every tensor of the context (their headers are reused).
func (c *Context) Reset() {
	clear(c.pool[:c.used])
	c.used = 0
	c.err = nil
}

// Err returns the first error met while building with this context. Op constructors do not
// return errors (so graph code reads like the math); check Err once after building.
func (c *Context) Err() error { return c.err }

// Used is the number of tensors handed out.
func (c *Context) Used() int { return c.used }

func (c *Context) fail(format string, args ...any) {
	if c.err == nil {
		c.err = fmt.Errorf("graph: "+format, args...)
	}
}

// alloc returns a fresh header; when the pool is exhausted it records an error and returns a
// scratch header so building can continue to the Err check.
func (c *Context) alloc() *Tensor {
	if c.used == len(c.pool) {
		c.fail("context full (%d tensors)", len(c.pool))
		return &Tensor{}
	}
	t := &c.pool[c.used]
	c.used++
	return t
}

// NewTensor creates a leaf tensor with packed strides and no memory yet.
func (c *Context) NewTensor(typ quant.Type, ne ...int) *Tensor {
	t := c.alloc()
	if len(ne) == 0 || len(ne) > MaxDims {
		c.fail("tensor with %d dimensions", len(ne))
		ne = []int{1}
	}
	for _, n := range ne {
		if n < 1 {
			c.fail("tensor with dimension %d", n)
			return t
		}
	}
	if ne[0]%typ.BlockSize() != 0 {
		c.fail("%d elements per row is not a whole number of %v blocks", ne[0], typ)
	}
	t.setShape(typ, ne)
	return t
}

// NewInput creates a tensor the caller fills before each Compute (token ids, positions).
func (c *Context) NewInput(name string, typ quant.Type, ne ...int) *Tensor {
	t := c.NewTensor(typ, ne...)
	t.Name = name
	t.Flags |= FlagInput
	return t
}

// NewStatic creates a tensor over memory it does not own (a weight in a mapped file, a cache).
func (c *Context) NewStatic(name string, typ quant.Type, buf *Buffer, off int, ne ...int) *Tensor {
	t := c.NewTensor(typ, ne...)
	t.Name = name
	t.Flags |= FlagStatic
	t.Buf = buf
	t.Off = off
	if buf != nil && off+t.Bytes() > buf.Size {
		c.fail("tensor %q [%d, %d) exceeds its buffer of %d bytes", name, off, off+t.Bytes(), buf.Size)
	}
	return t
}
