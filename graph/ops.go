package graph

import "github.com/gorun-dev/gorun/quant"

// Op is the operation a node computes.
type Op uint8

const (
	OpNone      Op = iota // a leaf
	OpView                // aliases part of Src[0]; computes nothing
	OpGetRows             // Src0 table [K, V] (any type), Src1 ids I32 [N] -> F32 [K, N]
	OpAdd                 // Src0 [K, N] + Src1 [K, N] or [K, 1] (broadcast over rows)
	OpMul                 // Src0 [K, N] * Src1 [K, N] or [K, 1]
	OpLayerNorm           // (x - mean) / sqrt(var + eps) [* Src1 + Src2]; FParams[0] = eps
	OpMulMat              // Src0 W [K, N] (any type) x Src1 X [K, M] F32 -> [N, M]
	OpGELU                // GELU, tanh approximation
	OpScale               // Src0 * FParams[0]
	OpStoreKV             // writes rows of Src1 [D, N] into cache Src0 [D, C] at rows Src2 (positions I32 [N]); the node is a view of the cache
	OpAttention           // causal multi-head attention of Src0 q [E, N] over caches Src1 K, Src2 V [E, C] at positions Src3; IParams[0] = heads, IParams[1] = key/value heads (0: heads), FParams[0] = scale
	OpCopy                // Src0 copied into a packed tensor
	// OpStoreKVRows writes row i of Src0 [D, N] into the cache Caches[i] at row positions[i]
	// (Caches may be rebound, to caches of the same type and shape, between computations of
	// one graph: backends read them at every computation)
	// (Src1, I32 [N]): rows of several sequences, each with its own cache. The node is a view
	// of Src0 whose readers run after the store.
	OpStoreKVRows
	// OpAttentionRows is OpAttention for rows of several sequences: query row i of Src0 [E, N]
	// attends to rows 0..positions[i] (Src3) of the caches Src1.Caches[i] (keys) and
	// Src2.Caches[i] (values), Src1 and Src2 being OpStoreKVRows nodes. IParams[0] = heads,
	// IParams[1] = key/value heads (0: heads), FParams[0] = scale.
	OpAttentionRows
	// OpRMSNorm is x / sqrt(mean(x²) + eps) [* Src1], per row of Src0; FParams[0] = eps.
	OpRMSNorm
	// OpRoPE rotates each head of IParams[0] values of the rows of Src0 by their positions
	// (Src1, I32 [N]): the first IParams[1] values of a head, in pairs (2i, 2i+1) (ggml's
	// normal mode, IParams[2] = RopeNormal) or (i, i+dims/2) (NeoX, IParams[2] = RopeNeoX),
	// by the angle pos * FParams[1] * FParams[0]^(-2i/dims) / Src2[i] (Src2, optional F32
	// [dims/2], are Llama 3.1's frequency factors); the other values are copied.
	OpRoPE
	// OpSwiGLU is silu(Src0) * Src1 elementwise (silu(x) = x / (1 + exp(-x))): the Llama
	// feed-forward's gate applied to its up projection.
	OpSwiGLU
	// OpStoreKVPaged is OpStoreKV into a paged pool: Src0 is one layer's pool tensor [D,
	// blocks*KVBlockSize] (f32/f16), Src1 the values [D, N], Src2 the positions I32 [N], Src3
	// the block tables I32 [T, R]. Row i is the token at logical position p = positions[i] of
	// the sequence whose table is row i of Src3 (R = N: one sequence per row) or row 0 (R = 1:
	// every row is the same sequence's); it goes to pool row table[p/KVBlockSize]*KVBlockSize +
	// p%KVBlockSize. A table entry outside the pool, or a position past T blocks, is an error of
	// the computation. The node is a view of the pool whose readers run after the store.
	OpStoreKVPaged
	// OpAttentionPaged is OpAttention over a paged pool: query row i attends to logical
	// positions 0..positions[i] (Src3) of its sequence, reading keys from Src1 and values from
	// Src2 (OpStoreKVPaged nodes of the same rows) through the block tables of Src1 (its Src3).
	// Scores, softmax and the weighted sum are computed in the same order as over a contiguous
	// cache, block by block, so the results are bit-identical. IParams[0] = heads, IParams[1] =
	// key/value heads (0: heads), FParams[0] = scale.
	OpAttentionPaged
	opCount
)

// KVBlockSize is the number of positions in a block of a paged KV pool.
const KVBlockSize = 16

var opNames = [...]string{
	OpNone: "none", OpView: "view", OpGetRows: "get_rows", OpAdd: "add", OpMul: "mul",
	OpLayerNorm: "layer_norm", OpMulMat: "mul_mat", OpGELU: "gelu", OpScale: "scale",
	OpStoreKV: "store_kv", OpAttention: "attention", OpCopy: "copy",
	OpStoreKVRows: "store_kv_rows", OpAttentionRows: "attention_rows",
	OpRMSNorm: "rms_norm", OpRoPE: "rope", OpSwiGLU: "swiglu",
	OpStoreKVPaged: "store_kv_paged", OpAttentionPaged: "attention_paged",
}

// opNames names every op: the constant index is out of range, a compile error, unless the
// table has exactly opCount entries (an op added without a name, or a name without an op).
var _ = [1]struct{}{}[len(opNames)-int(opCount)]

func (o Op) String() string {
	if int(o) < len(opNames) {
		return opNames[o]
	}
	return "op?"
}

// newNode creates the result tensor of an op.
func (c *Context) newNode(op Op, typ quant.Type, ne []int, src ...*Tensor) *Tensor {
	t := c.NewTensor(typ, ne...)
	t.Op = op
	copy(t.Src[:], src)
	return t
}

func (c *Context) checkF32(op Op, ts ...*Tensor) bool {
	for _, t := range ts {
		if t.Type != quant.F32 {
			c.fail("%v: input %q is %v, want f32", op, t.Name, t.Type)
			return false
		}
	}
	return true
}

// rowsLike returns the shape (Ne[0], rows) of a tensor treated as a matrix.
func rowsLike(t *Tensor) []int { return []int{t.Ne[0], t.NRows()} }

func (c *Context) broadcast(op Op, a, b *Tensor) *Tensor {
	c.checkF32(op, a, b)
	if a.Ne[0] != b.Ne[0] || (b.NRows() != 1 && b.NRows() != a.NRows()) {
		c.fail("%v: shapes %v and %v do not broadcast", op, a.Ne, b.Ne)
	}
	return c.newNode(op, quant.F32, rowsLike(a), a, b)
}

// Add returns a + b; b may be a single row added to every row of a.
func (c *Context) Add(a, b *Tensor) *Tensor { return c.broadcast(OpAdd, a, b) }

// Mul returns a * b elementwise; b may be a single row.
func (c *Context) Mul(a, b *Tensor) *Tensor { return c.broadcast(OpMul, a, b) }

// LayerNorm normalizes each row of x to zero mean and unit variance, then multiplies by w and
// adds b when they are not nil.
func (c *Context) LayerNorm(x, w, b *Tensor, eps float32) *Tensor {
	c.checkF32(OpLayerNorm, x)
	for _, p := range []*Tensor{w, b} {
		if p != nil && (p.Ne[0] != x.Ne[0] || p.NRows() != 1 || !c.checkF32(OpLayerNorm, p)) {
			c.fail("layer_norm: parameter %q %v does not fit rows of %d", p.Name, p.Ne, x.Ne[0])
		}
	}
	t := c.newNode(OpLayerNorm, quant.F32, rowsLike(x), x, w, b)
	t.FParams[0] = eps
	return t
}

// MulMat multiplies every row of x by the matrix w: out[m][n] = dot(w row n, x row m).
func (c *Context) MulMat(w, x *Tensor) *Tensor {
	c.checkF32(OpMulMat, x)
	if w.Ne[0] != x.Ne[0] || w.Ne[2] != 1 || w.Ne[3] != 1 {
		c.fail("mul_mat: %q %v by %q %v", w.Name, w.Ne, x.Name, x.Ne)
	}
	return c.newNode(OpMulMat, quant.F32, []int{w.Ne[1], x.NRows()}, w, x)
}

// GetRows gathers rows of table (any type, dequantized to f32) by the int32 ids.
func (c *Context) GetRows(table, ids *Tensor) *Tensor {
	if ids.Type != quant.I32 {
		c.fail("get_rows: ids are %v", ids.Type)
	}
	return c.newNode(OpGetRows, quant.F32, []int{table.Ne[0], ids.NElements()}, table, ids)
}

// GELU applies the tanh approximation of GELU elementwise.
func (c *Context) GELU(x *Tensor) *Tensor {
	c.checkF32(OpGELU, x)
	return c.newNode(OpGELU, quant.F32, rowsLike(x), x)
}

// Scale multiplies by a constant.
func (c *Context) Scale(x *Tensor, s float32) *Tensor {
	c.checkF32(OpScale, x)
	t := c.newNode(OpScale, quant.F32, rowsLike(x), x)
	t.FParams[0] = s
	return t
}

// Copy makes a packed copy of a (possibly strided) f32 tensor.
func (c *Context) Copy(x *Tensor) *Tensor {
	c.checkF32(OpCopy, x)
	return c.newNode(OpCopy, quant.F32, rowsLike(x), x)
}

// View2D returns a view of ne1 rows of ne0 elements of src, rows nb1 bytes apart, starting
// offset bytes into src.
func (c *Context) View2D(src *Tensor, ne0, ne1, nb1, offset int) *Tensor {
	t := c.alloc()
	t.setShape(src.Type, []int{ne0, ne1})
	t.Nb[1] = nb1
	t.Nb[2] = nb1 * ne1
	t.Nb[3] = t.Nb[2]
	t.Op = OpView
	t.Src[0] = src
	t.viewOf = src
	t.IParams[0] = offset
	if offset < 0 || offset+t.Bytes() > src.Bytes() {
		c.fail("view [%d, %d) outside %q of %d bytes", offset, offset+t.Bytes(), src.Name, src.Bytes())
	}
	return t
}

// Rows returns a view of rows [first, first+n) of a 2-D tensor.
func (c *Context) Rows(src *Tensor, first, n int) *Tensor {
	return c.View2D(src, src.Ne[0], n, src.Nb[1], first*src.Nb[1])
}

// StoreKV writes the rows of v into cache at the rows named by positions and returns the cache
// (as a view), so that readers of the result run after the store.
func (c *Context) StoreKV(cache, v, positions *Tensor) *Tensor {
	c.checkF32(OpStoreKV, v)
	if cache.Type != quant.F32 && cache.Type != quant.F16 {
		c.fail("store_kv: cache %q is %v", cache.Name, cache.Type)
	}
	if cache.Ne[0] != v.Ne[0] || positions.NElements() != v.NRows() || positions.Type != quant.I32 {
		c.fail("store_kv: cache %v, values %v, positions %v", cache.Ne, v.Ne, positions.Ne)
	}
	t := c.alloc()
	*t = Tensor{Type: cache.Type, Ne: cache.Ne, Nb: cache.Nb, Op: OpStoreKV, viewOf: cache}
	t.Src[0], t.Src[1], t.Src[2] = cache, v, positions
	t.Name = cache.Name
	return t
}

// Attention computes causal multi-head attention: each query row i (at position positions[i])
// attends to cache rows 0..positions[i] of k and v, per head of E/heads elements.
func (c *Context) Attention(q, k, v, positions *Tensor, heads int, scale float32) *Tensor {
	return c.AttentionGQA(q, k, v, positions, heads, 0, scale)
}

// AttentionGQA is Attention with grouped-query attention: the heads query heads share kvHeads
// key/value heads (query head h reads key/value head h / (heads/kvHeads)), so the caches have
// rows of kvHeads x head_dim values and q rows of heads x head_dim. kvHeads 0 (or heads) is
// multi-head attention, and then the node is the one Attention makes.
func (c *Context) AttentionGQA(q, k, v, positions *Tensor, heads, kvHeads int, scale float32) *Tensor {
	c.checkF32(OpAttention, q)
	if !c.checkHeads(q, k, v, heads, kvHeads) || k.Ne[1] != v.Ne[1] {
		c.fail("attention: q %v k %v v %v heads %d/%d", q.Ne, k.Ne, v.Ne, heads, kvHeads)
	}
	if positions.NElements() != q.NRows() || positions.Type != quant.I32 {
		c.fail("attention: %d positions for %d queries", positions.NElements(), q.NRows())
	}
	t := c.newNode(OpAttention, quant.F32, rowsLike(q), q, k, v, positions)
	t.IParams[0] = heads
	t.IParams[1] = gqaHeads(heads, kvHeads)
	t.FParams[0] = scale
	return t
}

// gqaHeads is IParams[1] of an attention node: the key/value heads, or 0 for multi-head
// attention (so that a multi-head node is the same whichever constructor made it, and a
// backend that knows only multi-head attention computes it).
func gqaHeads(heads, kvHeads int) int {
	if kvHeads == heads {
		return 0
	}
	return kvHeads
}

// checkHeads checks that q rows hold heads heads and k, v rows kvHeads heads (heads if 0) of
// the same size, and that the query heads share the key/value heads evenly.
func (c *Context) checkHeads(q, k, v *Tensor, heads, kvHeads int) bool {
	if kvHeads == 0 {
		kvHeads = heads
	}
	if heads < 1 || kvHeads < 1 || heads%kvHeads != 0 || q.Ne[0]%heads != 0 {
		return false
	}
	d := q.Ne[0] / heads
	return k.Ne[0] == kvHeads*d && v.Ne[0] == kvHeads*d
}

// StoreKVRows writes row i of v into caches[i] at the row positions[i] names, for a batch of rows
// from several sequences (a cache may appear for several rows). It returns a node to pass to
// AttentionRows, which then runs after the store. caches is kept by the node, not copied.
func (c *Context) StoreKVRows(caches []*Tensor, v, positions *Tensor) *Tensor {
	c.checkF32(OpStoreKVRows, v)
	if len(caches) != v.NRows() || positions.NElements() != v.NRows() || positions.Type != quant.I32 {
		c.fail("store_kv_rows: %d caches, values %v, positions %v", len(caches), v.Ne, positions.Ne)
	}
	for _, k := range caches {
		if k == nil || (k.Type != quant.F32 && k.Type != quant.F16) || k.Ne[0] != v.Ne[0] || k.NRows() != k.Ne[1] || !k.Contiguous() {
			c.fail("store_kv_rows: cache %v does not hold rows of %d f32/f16 values", k, v.Ne[0])
			break
		}
	}
	t := c.alloc()
	*t = Tensor{Type: v.Type, Ne: v.Ne, Nb: v.Nb, Op: OpStoreKVRows, viewOf: v, Caches: caches}
	t.Src[0], t.Src[1] = v, positions
	t.Name = "store_kv_rows"
	return t
}

// AttentionRows is Attention for a batch of rows from several sequences: query row i attends
// to rows 0..positions[i] of its own caches, those StoreKVRows gave k and v (which must come
// from StoreKVRows over the same rows). Each row is computed exactly as Attention computes it.
func (c *Context) AttentionRows(q, k, v, positions *Tensor, heads int, scale float32) *Tensor {
	return c.AttentionRowsGQA(q, k, v, positions, heads, 0, scale)
}

// AttentionRowsGQA is AttentionRows with kvHeads key/value heads (see AttentionGQA); each row
// is computed exactly as AttentionGQA computes it.
func (c *Context) AttentionRowsGQA(q, k, v, positions *Tensor, heads, kvHeads int, scale float32) *Tensor {
	c.checkF32(OpAttentionRows, q)
	if k.Op != OpStoreKVRows || v.Op != OpStoreKVRows || len(k.Caches) != q.NRows() || len(v.Caches) != q.NRows() {
		c.fail("attention_rows: keys and values must be store_kv_rows nodes of %d rows", q.NRows())
		return c.newNode(OpAttentionRows, quant.F32, rowsLike(q), q, k, v, positions)
	}
	if !c.checkHeads(q, k, v, heads, kvHeads) {
		c.fail("attention_rows: q %v k %v v %v heads %d/%d", q.Ne, k.Ne, v.Ne, heads, kvHeads)
	}
	for i := range k.Caches {
		if k.Caches[i].Ne[1] != v.Caches[i].Ne[1] {
			c.fail("attention_rows: row %d: key and value caches of %d and %d rows", i, k.Caches[i].Ne[1], v.Caches[i].Ne[1])
			break
		}
	}
	if positions.NElements() != q.NRows() || positions.Type != quant.I32 {
		c.fail("attention_rows: %d positions for %d queries", positions.NElements(), q.NRows())
	}
	t := c.newNode(OpAttentionRows, quant.F32, rowsLike(q), q, k, v, positions)
	t.IParams[0] = heads
	t.IParams[1] = gqaHeads(heads, kvHeads)
	t.FParams[0] = scale
	return t
}

// RMSNorm divides each row of x by the root mean square of its values (plus eps under the
// root), then multiplies by w when it is not nil.
func (c *Context) RMSNorm(x, w *Tensor, eps float32) *Tensor {
	c.checkF32(OpRMSNorm, x)
	if w != nil && (w.Ne[0] != x.Ne[0] || w.NRows() != 1 || !c.checkF32(OpRMSNorm, w)) {
		c.fail("rms_norm: weight %q %v does not fit rows of %d", w.Name, w.Ne, x.Ne[0])
	}
	t := c.newNode(OpRMSNorm, quant.F32, rowsLike(x), x, w)
	t.FParams[0] = eps
	return t
}

// RoPE modes: how the rotated values of a head pair up (ggml's GGML_ROPE_TYPE_*).
const (
	RopeNormal = 0 // pairs (2i, 2i+1): Llama, on the Q/K rows llama.cpp's converter permutes
	RopeNeoX   = 2 // pairs (i, i+dims/2): GPT-NeoX, Qwen2
)

// Rope is how RoPE rotates the heads of a tensor.
type Rope struct {
	HeadDim   int     // values per head
	Dims      int     // rotated values at the start of each head (even, <= HeadDim)
	Mode      int     // RopeNormal or RopeNeoX
	FreqBase  float32 // base of the frequencies (rope.freq_base)
	FreqScale float32 // positions are multiplied by it (1, or 1/factor for linear scaling)
	// Factors (optional, F32 [Dims/2]) divide the angles of each pair (Llama 3.1's
	// rope_freqs.weight).
	Factors *Tensor
}

// RoPE rotates every head of the rows of x by the positions (I32, one per row) as r says.
func (c *Context) RoPE(x, positions *Tensor, r Rope) *Tensor {
	c.checkF32(OpRoPE, x)
	switch {
	case r.HeadDim < 2 || x.Ne[0]%r.HeadDim != 0 || r.Dims < 2 || r.Dims%2 != 0 || r.Dims > r.HeadDim:
		c.fail("rope: rows of %d, heads of %d, %d rotated dims", x.Ne[0], r.HeadDim, r.Dims)
	case r.Mode != RopeNormal && r.Mode != RopeNeoX:
		c.fail("rope: mode %d", r.Mode)
	case !(r.FreqBase > 0) || !(r.FreqScale > 0):
		c.fail("rope: frequency base %v, scale %v", r.FreqBase, r.FreqScale)
	case positions.NElements() != x.NRows() || positions.Type != quant.I32:
		c.fail("rope: %d positions for %d rows", positions.NElements(), x.NRows())
	case r.Factors != nil && (r.Factors.NElements() != r.Dims/2 || !c.checkF32(OpRoPE, r.Factors)):
		c.fail("rope: %d frequency factors for %d rotated dims", r.Factors.NElements(), r.Dims)
	}
	t := c.newNode(OpRoPE, quant.F32, rowsLike(x), x, positions, r.Factors)
	t.IParams[0], t.IParams[1], t.IParams[2] = r.HeadDim, r.Dims, r.Mode
	t.FParams[0], t.FParams[1] = r.FreqBase, r.FreqScale
	return t
}

// SwiGLU returns silu(gate) * up elementwise.
func (c *Context) SwiGLU(gate, up *Tensor) *Tensor {
	c.checkF32(OpSwiGLU, gate, up)
	if gate.Ne[0] != up.Ne[0] || gate.NRows() != up.NRows() {
		c.fail("swiglu: gate %v and up %v differ", gate.Ne, up.Ne)
	}
	return c.newNode(OpSwiGLU, quant.F32, rowsLike(gate), gate, up)
}

// StoreKVPaged writes the rows of v into the paged pool tensor pool at the logical positions
// named by positions, through the block tables (I32 [T, 1] for rows of one sequence, [T, N] for
// one sequence per row; see OpStoreKVPaged), and returns the pool (as a view) for
// AttentionPaged.
func (c *Context) StoreKVPaged(pool, v, positions, tables *Tensor) *Tensor {
	c.checkF32(OpStoreKVPaged, v)
	if pool.Type != quant.F32 && pool.Type != quant.F16 {
		c.fail("store_kv_paged: pool %q is %v", pool.Name, pool.Type)
	}
	switch {
	case pool.Ne[0] != v.Ne[0] || pool.Ne[1]%KVBlockSize != 0 || pool.NRows() != pool.Ne[1] || !pool.Contiguous():
		c.fail("store_kv_paged: pool %v does not hold blocks of rows of %d values", pool.Ne, v.Ne[0])
	case positions.NElements() != v.NRows() || positions.Type != quant.I32:
		c.fail("store_kv_paged: %d positions for %d rows", positions.NElements(), v.NRows())
	case tables.Type != quant.I32 || tables.Ne[0] < 1 || (tables.Ne[1] != 1 && tables.Ne[1] != v.NRows()) || tables.Ne[2] != 1 || tables.Ne[3] != 1:
		c.fail("store_kv_paged: block tables %v for %d rows", tables.Ne, v.NRows())
	}
	t := c.alloc()
	*t = Tensor{Type: pool.Type, Ne: pool.Ne, Nb: pool.Nb, Op: OpStoreKVPaged, viewOf: pool}
	t.Src[0], t.Src[1], t.Src[2], t.Src[3] = pool, v, positions, tables
	t.Name = pool.Name
	return t
}

// AttentionPaged is AttentionGQA over a paged pool: k and v are StoreKVPaged nodes of the same
// rows and tables; query row i attends to logical positions 0..positions[i] of its sequence.
// Each row is computed exactly as AttentionGQA computes it over a contiguous cache holding the
// same rows.
func (c *Context) AttentionPaged(q, k, v, positions *Tensor, heads, kvHeads int, scale float32) *Tensor {
	c.checkF32(OpAttentionPaged, q)
	if k.Op != OpStoreKVPaged || v.Op != OpStoreKVPaged || k.Src[3] != v.Src[3] || k.Src[2] != positions || v.Src[2] != positions {
		c.fail("attention_paged: keys and values must be store_kv_paged nodes of the same positions and tables")
		return c.newNode(OpAttentionPaged, quant.F32, rowsLike(q), q, k, v, positions)
	}
	if !c.checkHeads(q, k, v, heads, kvHeads) || k.Ne[1] != v.Ne[1] {
		c.fail("attention_paged: q %v k %v v %v heads %d/%d", q.Ne, k.Ne, v.Ne, heads, kvHeads)
	}
	if positions.NElements() != q.NRows() {
		c.fail("attention_paged: %d positions for %d queries", positions.NElements(), q.NRows())
	}
	t := c.newNode(OpAttentionPaged, quant.F32, rowsLike(q), q, k, v, positions)
	t.IParams[0] = heads
	t.IParams[1] = gqaHeads(heads, kvHeads)
	t.FParams[0] = scale
	return t
}
