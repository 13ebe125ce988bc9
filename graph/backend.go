package graph

// Backend executes graphs on one kind of device. The CPU backend computes on host memory; a GPU
// backend keeps tensors in device memory and copies only inputs and outputs.
type Backend interface {
	// Name identifies the backend in logs and benchmarks ("cpu", "cuda").
	Name() string

	// Alloc returns zeroed backend memory of size bytes (an arena or a KV cache).
	Alloc(size int) (*Buffer, error)

	// Weights makes host bytes (typically a read-only file mapping) usable by the backend: the
	// CPU uses them in place, a GPU copies them to device memory.
	Weights(host []byte) (*Buffer, error)

	// Supports reports whether the backend can compute node n: its op with its inputs' types
	// and shapes (ggml's supports_op). nil means it can; an error says what it cannot, naming
	// the input tensor and its type. Models ask it of every node of their graphs at load,
	// before any weight is uploaded, so an unsupported weight is refused there, not at the
	// first token.
	Supports(n *Tensor) error

	// Compute runs every node of g in order. Inputs must be written and the graph bound.
	Compute(g *Graph) error

	// Write copies src into the tensor's memory; Read copies the tensor's memory into dst.
	// Both work on contiguous tensors.
	Write(t *Tensor, src []byte) error
	Read(t *Tensor, dst []byte) error

	// Close releases the backend's threads and memory it owns.
	Close() error
}

// Observable backends can report every node after it is computed.
type Observable interface {
	SetObserver(f func(n *Tensor))
}
