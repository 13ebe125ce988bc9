package kvcache

import (
	"testing"

	"github.com/gorun-dev/gorun/cpu"
	"github.com/gorun-dev/gorun/quant"
)

// A cache holds a K and a V matrix per layer of Width x Size values, in host memory on the CPU.
func TestCacheShape(t *testing.T) {
	be := cpu.New(1)
	defer be.Close()
	shape := Shape{Layers: 3, Width: 2 * 16} // 2 KV heads of 16
	c, err := New(be, shape, 10, quant.F32)
	if err != nil {
		t.Fatal(err)
	}
	if c.Bytes() != 2*3*32*10*4 || len(c.K) != 3 || len(c.V) != 3 || c.K[2].Ne[0] != 32 || c.V[0].Ne[1] != 10 {
		t.Fatalf("bytes %d, layers %d/%d, K[2] %v", c.Bytes(), len(c.K), len(c.V), c.K[2].Ne)
	}
	if !c.Fits(shape) || c.Fits(Shape{Layers: 3, Width: 64}) {
		t.Error("Fits")
	}
	if rows := c.HostRows(1, true, 4); len(rows) != 4*32*4 {
		t.Errorf("HostRows: %d bytes", len(rows))
	}
	if c.HostRows(0, false, 11) != nil {
		t.Error("HostRows past the cache")
	}
	for _, bad := range []Shape{{0, 32}, {3, 0}} {
		if _, err := New(be, bad, 10, quant.F32); err == nil {
			t.Errorf("shape %+v accepted", bad)
		}
	}
}
