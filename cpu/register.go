package cpu

import (
	"github.com/gorun-dev/gorun/backend"
	"github.com/gorun-dev/gorun/graph"
)

func init() {
	backend.Register(backend.Device{
		Name:     "cpu",
		Supports: supports,
		Open: func(c backend.Config) (graph.Backend, error) {
			b := New(c.Threads)
			b.SetQuantizedActivations(c.QuantizedActivations)
			return b, nil
		},
	})
}
