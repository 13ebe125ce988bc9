// Package graph is gorun's tensor and compute-graph layer, after ggml's design.
//
// A Context owns a fixed pool of tensor headers, so building a graph allocates nothing on the
// heap. Operations (Add, MulMat, Attention, ...) create nodes that record their inputs; no
// arithmetic happens until a Backend computes the Graph. A Planner assigns every intermediate
// tensor an offset in one arena, reusing memory whose contents are no longer needed, and the
// arena is allocated once, up front.
//
// Graphs are static: per-step inputs (token ids, positions) are ordinary input tensors that the
// caller writes before each Compute. Ops that depend on the step, such as writing the KV cache or
// attending over it, read the positions from such a tensor at run time. The decode graph is
// therefore built once and re-executed for every generated token.
//
// Tensors follow ggml's conventions: Ne[0] is the innermost (contiguous) dimension, Nb[i] is the
// stride of dimension i in bytes, and a matrix of N rows of K elements has Ne = {K, N}.
package graph
