//go:build cuda

package cuda

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"

	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/quant"
)

// An op is one kernel launch of a compiled graph: a node, possibly with the nodes fused into it.
type op struct {
	kind   graph.Op
	node   *graph.Tensor   // the first node (whose Src are the inputs)
	out    *graph.Tensor   // the tensor the launch writes (the last fused node)
	ins    []*graph.Tensor // every tensor the launch reads
	bias   *graph.Tensor   // mul_mat epilogue
	res    *graph.Tensor
	act    int
	second *graph.Tensor // store_kv: a second store of the same rows fused in
	ln     *graph.Tensor // mul_mat: the layer norm of its (single-row) input, computed in the kernel
	pos    *graph.Tensor // get_rows: a second get_rows (float32 rows) added to the first, fused in
	// attention: the K and V rows to store into the caches first (a fused store_kv pair)
	storeK, storeV *graph.Tensor
	// mul_mat with ln: up to two more products of the same normalized row (Llama's K and V
	// after Q), computed by the same launch (mvsln3)
	sibs []op
}

// maxSibs is how many products besides the first one mvsln3 computes (kernels.cu).
const maxSibs = 2

// mvsln3Types are the weight types mvsln3 is compiled for (INSTANTIATE_MVSLN3 in kernels.cu).
var mvsln3Types = map[quant.Type]bool{
	quant.F16: true, quant.BF16: true, quant.Q8_0: true, quant.Q4_0: true, quant.Q4_K: true, quant.Q5_K: true, quant.Q6_K: true,
}

// groupNormSiblings moves the one-row products that normalize the same row themselves (o.ln:
// Llama's Q, K and V) next to the first of them and folds consecutive ones of one weight type
// (of mvsln3Types) and row length into it (op.sibs: one launch, one norm per block instead of
// one per product).
// Moving a product earlier is safe: it reads only the norm's input, weights and a bias, all
// ready before the first product (those with a residual or other epilogue operand stay), and
// nothing between reads its output.
func groupNormSiblings(ops []op) []op {
	out := make([]op, 0, len(ops))
	taken := make([]bool, len(ops))
	for i := range ops {
		if taken[i] {
			continue
		}
		o := ops[i]
		if o.kind == graph.OpMulMat && o.ln != nil && o.res == nil && o.act == 0 && mvsln3Types[o.node.Src[0].Type] {
			w := o.node.Src[0]
			for j := i + 1; j < len(ops) && len(o.sibs) < maxSibs; j++ {
				s := ops[j]
				if taken[j] || s.kind != graph.OpMulMat || s.ln != o.ln || s.res != nil || s.act != 0 {
					continue
				}
				if sw := s.node.Src[0]; sw.Type != w.Type || sw.Nb[1] != w.Nb[1] || sw.Ne[0] != w.Ne[0] {
					continue
				}
				if s.bias != nil && s.bias.Op != graph.OpNone {
					continue
				}
				o.sibs = append(o.sibs, s)
				o.ins = append(append([]*graph.Tensor(nil), o.ins...), s.ins...)
				taken[j] = true
			}
		}
		out = append(out, o)
	}
	return out
}

// chunkAlign is the alignment of weight rows that dq32 (kernels.cu) needs for its loads.
var chunkAlign = map[quant.Type]int{
	quant.F32: 16, quant.F16: 16, quant.Q4_K: 16, quant.Q5_K: 16, quant.Q4_1: 4, quant.Q5_1: 4,
	quant.Q4_0: 2, quant.Q5_0: 2, quant.Q8_0: 2, quant.Q6_K: 2,
	quant.BF16: 16, quant.Q2_K: 4, quant.IQ4_XS: 4, quant.Q3_K: 2, quant.IQ4_NL: 2,
}

// mvsBytes is the longest weight row the staged mat-vec kernels take (MVS_BYTES).
const mvsBytes = 3456

// lnMaxK is the longest row mvsln normalizes (LN_MAXE * 256).
const lnMaxK = 2048

// matVecMaxRows is the most activation rows the mat-vec kernels take in one group (MV_MAXM in
// kernels.cu); decodeMaxRows is the most they take in groups, for the decode step of a batch
// of sequences, so that every sequence's row is computed exactly as when it runs alone (the
// tiled products of prompts round differently).
const (
	matVecMaxRows = 8
	decodeMaxRows = 64
)

// compile turns a bound graph into fused launches over device memory. Fusions:
//   - mul_mat + bias add [+ GELU | + residual add] into the matrix kernel's epilogue, when the
//     intermediate results have no other reader;
//   - the K and V stores of a layer into one launch.
//
// Intermediate results get addresses in a scratch arena planned over the fused launches (an
// output is placed before the inputs of its launch are freed, so a kernel never writes over
// what it reads). Inputs, outputs and static tensors keep the addresses Bind gave them.
func (b *Backend) compile(g *graph.Graph) (*program, error) {
	idx := map[*graph.Tensor]int{}
	readers := map[*graph.Tensor]int{}
	readerOf := map[*graph.Tensor]*graph.Tensor{}
	readersOf := map[*graph.Tensor][]*graph.Tensor{}
	for i, n := range g.Nodes {
		idx[n] = i
		if n.Buf == nil {
			return nil, fmt.Errorf("cuda: node %q (%v) has no memory: graph not bound", n.Name, n.Op)
		}
		for j, s := range n.Src {
			if s == nil || dupSrc(n, j) {
				continue
			}
			readers[s]++
			readerOf[s] = n
			readersOf[s] = append(readersOf[s], n)
		}
	}
	outputs := map[*graph.Tensor]bool{}
	for _, o := range g.Outputs {
		outputs[o] = true
		outputs[o.Base()] = true
	}
	// ready reports whether t is available before node i runs.
	ready := func(t *graph.Tensor, i int) bool {
		if t.Op == graph.OpNone {
			return true
		}
		j, ok := idx[t]
		return ok && j < i
	}
	// sole returns the only reader of t, when it has exactly one and t is not an output.
	sole := func(t *graph.Tensor) *graph.Tensor {
		if readers[t] != 1 || outputs[t] || t.Flags&graph.FlagOutput != 0 {
			return nil
		}
		return readerOf[t]
	}

	skip := map[*graph.Tensor]bool{}
	// A layer or RMS norm of one row read only by mat-vec products (a decode step's, not the
	// vocabulary-wide output layer's; Llama's Q, K and V products share one) is computed by the
	// blocks of each product (mvsln) instead of by a launch of its own.
	lnOf := map[*graph.Tensor]*graph.Tensor{}
	for _, l := range g.Nodes {
		if (l.Op != graph.OpLayerNorm && l.Op != graph.OpRMSNorm) || l.NRows() != 1 || outputs[l] || l.Flags&graph.FlagOutput != 0 ||
			len(readersOf[l]) == 0 || len(readersOf[l]) != readers[l] {
			continue
		}
		fits := true
		for _, n := range readersOf[l] {
			fits = fits && b.normFusable(n, l)
		}
		if fits {
			for _, n := range readersOf[l] {
				lnOf[n] = l
			}
			skip[l] = true
		}
	}
	// The embedding: get_rows of the token table plus get_rows of float32 position rows, one
	// launch (embed) instead of three.
	embedOf := map[*graph.Tensor][2]*graph.Tensor{}
	for _, n := range g.Nodes {
		if n.Op != graph.OpAdd {
			continue
		}
		t, q := n.Src[0], n.Src[1]
		if t.Op == graph.OpGetRows && q.Op == graph.OpGetRows && t != q && sole(t) == n && sole(q) == n &&
			q.Src[0].Type == quant.F32 && typeSuffix[t.Src[0].Type] != "" && t.Ne == n.Ne && q.Ne == n.Ne &&
			t.Src[1].Contiguous() && q.Src[1].Contiguous() && !skip[t] && !skip[q] {
			embedOf[n] = [2]*graph.Tensor{t, q}
			skip[t], skip[q] = true, true
		}
	}
	var ops []op
	for i, n := range g.Nodes {
		if skip[n] || n.Op == graph.OpView {
			continue
		}
		o := op{kind: n.Op, node: n, out: n}
		if e, ok := embedOf[n]; ok {
			o = op{kind: graph.OpGetRows, node: e[0], out: n, pos: e[1],
				ins: []*graph.Tensor{e[0].Src[0], e[0].Src[1], e[1].Src[0], e[1].Src[1]}}
			ops = append(ops, o)
			continue
		}
		switch n.Op {
		case graph.OpMulMat:
			a := sole(n)
			if a != nil && a.Op == graph.OpAdd && a.Src[0] == n && a.Src[1] != n &&
				a.Src[1].NRows() == 1 && ready(a.Src[1], i) {
				o.bias, o.out = a.Src[1], a
				skip[a] = true
				if r := sole(a); r != nil && r.Op == graph.OpGELU {
					o.act, o.out = 1, r
					skip[r] = true
				} else if r != nil && r.Op == graph.OpAdd && r.Src[1] == a && r.Src[0] != a &&
					r.Src[0].NRows() == a.NRows() && r.Src[0].Ne[0] == a.Ne[0] && ready(r.Src[0], i) {
					o.res, o.out = r.Src[0], r
					skip[r] = true
				}
			} else if other, act, ok := pairedWith(a, n); ok && ready(other, i) {
				// the residual add x + w·h (Llama's), or the SwiGLU of a gate/up pair whose
				// other half is already computed: the epilogue reads the other operand
				o.res, o.act, o.out = other, act, a
				skip[a] = true
			}
			o.ins = []*graph.Tensor{n.Src[0], n.Src[1], o.bias, o.res}
			if l := lnOf[n]; l != nil {
				o.ln = l
				o.ins = []*graph.Tensor{n.Src[0], l.Src[0], l.Src[1], l.Src[2], o.bias, o.res}
			}
		case graph.OpStoreKV:
			o.ins = []*graph.Tensor{n.Src[0], n.Src[1], n.Src[2]}
		default:
			o.ins = n.Src[:]
		}
		ops = append(ops, o)
	}
	if b.mvsln3 {
		ops = groupNormSiblings(ops)
	}
	// Fuse adjacent K and V stores of the same rows. Llama's V product comes between its K and
	// V stores (K's store follows K's RoPE): the K store moves after it, which nothing between
	// reads.
	fused := ops[:0]
	for i := 0; i < len(ops); i++ {
		o := ops[i]
		if o.kind == graph.OpStoreKV && i+2 < len(ops) && ops[i+1].kind != graph.OpStoreKV && ops[i+2].kind == graph.OpStoreKV &&
			ops[i+2].node.Src[2] == o.node.Src[2] && !readsFrom(ops[i+1], o.node) {
			ops[i], ops[i+1] = ops[i+1], ops[i]
			fused = append(fused, ops[i])
			i++
			o = ops[i]
		}
		if o.kind == graph.OpStoreKV && i+1 < len(ops) {
			s := ops[i+1]
			a, c := o.node, s.node
			if s.kind == graph.OpStoreKV && a.Src[2] == c.Src[2] && a.Src[0].Type == quant.F32 && c.Src[0].Type == quant.F32 &&
				a.Src[0].Nb[1] == c.Src[0].Nb[1] && a.Src[0].Ne == c.Src[0].Ne && a.Src[1].Nb[1] == c.Src[1].Nb[1] &&
				a.Src[1].Ne == c.Src[1].Ne {
				o.second = c
				o.ins = append(o.ins, c.Src[0], c.Src[1])
				i++
			}
		}
		fused = append(fused, o)
	}
	ops = fused
	// A decode step's K and V stores go into the attention kernel (one query: each head's block
	// stores its own slice before reading the cache).
	fused = ops[:0]
	for i := 0; i < len(ops); i++ {
		o := ops[i]
		if o.kind == graph.OpStoreKV && o.second != nil && i+1 < len(ops) {
			at := ops[i+1]
			a := at.node
			if at.kind == graph.OpAttention && a.Src[1] == o.node && a.Src[2] == o.second && a.Src[3] == o.node.Src[2] &&
				a.Src[0].NRows() == 1 {
				at.storeK, at.storeV = o.node.Src[1], o.second.Src[1]
				at.ins = append(append([]*graph.Tensor{}, at.ins...), at.storeK, at.storeV)
				fused = append(fused, at)
				i++
				continue
			}
		}
		fused = append(fused, o)
	}
	ops = fused

	// Plan the scratch arena.
	p := &program{version: g.Version(), outputs: outputs}
	for _, n := range g.Nodes {
		p.decodeRows = p.decodeRows || n.Op == graph.OpAttentionRows
	}
	addr := map[*graph.Tensor]DevicePtr{}
	lastUse := map[*graph.Tensor]int{}
	for i, o := range ops {
		for _, s := range o.ins {
			if s != nil {
				lastUse[s.Base()] = i
			}
		}
	}
	inScratch := func(t *graph.Tensor) bool {
		return t.Op != graph.OpNone && t.Op != graph.OpView && t.Op != graph.OpStoreKV && t.Op != graph.OpStoreKVRows && t.Flags&(graph.FlagOutput|graph.FlagInput|graph.FlagStatic) == 0 && !outputs[t]
	}
	var fl graph.FreeList
	for i, o := range ops {
		if inScratch(o.out) {
			addr[o.out] = DevicePtr(fl.Alloc(align(o.out.Bytes())))
		}
		for _, s := range o.sibs {
			if inScratch(s.out) {
				addr[s.out] = DevicePtr(fl.Alloc(align(s.out.Bytes())))
			}
		}
		for j, s := range o.ins {
			if s == nil {
				continue
			}
			bs := s.Base()
			dup := false
			for _, t := range o.ins[:j] {
				if t != nil && t.Base() == bs {
					dup = true
				}
			}
			if !dup && lastUse[bs] == i && inScratch(bs) {
				if _, ok := addr[bs]; ok {
					fl.Free(int(addr[bs]), align(bs.Bytes()))
				}
			}
		}
	}
	p.size = fl.Peak()
	if p.size > 0 {
		var err error
		if p.scratch, err = b.alloc(p.size); err != nil {
			return nil, err
		}
	}
	for t, a := range addr {
		addr[t] = a + p.scratch
	}
	where := func(t *graph.Tensor) (DevicePtr, error) {
		if t == nil {
			return 0, nil
		}
		base := t.Base()
		var a DevicePtr
		if inScratch(base) {
			var ok bool
			if a, ok = addr[base]; !ok {
				return 0, fmt.Errorf("cuda: internal: %q (%v) read before it is computed", base.Name, base.Op)
			}
		} else {
			var err error
			if a, err = devAddr(base); err != nil {
				return 0, err
			}
		}
		return a + DevicePtr(t.Off-base.Off), nil
	}
	for _, t := range g.Outputs {
		if !t.Contiguous() || t.Bytes() > maxOutCopy {
			continue
		}
		dev, err := where(t)
		if err != nil {
			return nil, err
		}
		host, err := b.ctx.HostAlloc(t.Bytes())
		if err != nil {
			break // Read copies it then
		}
		p.outs = append(p.outs, outCopy{t: t, dev: dev, host: host})
	}
	for _, o := range ops {
		l, err := b.emit(p, o, where)
		if err != nil {
			if p.scratch != 0 {
				b.free(p.scratch)
			}
			for _, o := range p.outs {
				b.ctx.HostFree(o.host)
			}
			for _, d := range p.partials {
				b.free(d)
			}
			for _, d := range p.planes {
				b.free(d)
			}
			for _, d := range p.counters {
				b.free(d)
			}
			for _, t := range p.tables {
				b.free(t.dev)
			}
			return nil, err
		}
		p.launches = append(append(p.launches, l.pre...), l)
		if l.then != nil {
			p.launches = append(p.launches, *l.then)
		}
	}
	return p, nil
}

// readsFrom reports whether launch o reads t or anything in t's memory (the cache of a store).
func readsFrom(o op, t *graph.Tensor) bool {
	for _, s := range o.ins {
		if s != nil && (s == t || s.Base() == t.Base() || (t.Src[0] != nil && s.Base() == t.Src[0].Base())) {
			return true
		}
	}
	return false
}

// pairedWith reports whether the sole reader a of product n is an elementwise op the product's
// epilogue can compute with a second operand other of n's shape: an add (act 0: other + n, in
// either order) or a SwiGLU (act 2: silu(other) * n, n the up half; act 3: silu(n) * other).
func pairedWith(a, n *graph.Tensor) (other *graph.Tensor, act int, ok bool) {
	if a == nil || (a.Op != graph.OpAdd && a.Op != graph.OpSwiGLU) || a.Src[0] == a.Src[1] {
		return nil, 0, false
	}
	switch n {
	case a.Src[1]:
		other, act = a.Src[0], 2
	case a.Src[0]:
		other, act = a.Src[1], 3
	default:
		return nil, 0, false
	}
	if a.Op == graph.OpAdd {
		act = 0
	}
	if other.Ne[0] != n.Ne[0] || other.NRows() != n.NRows() || other.Type != quant.F32 {
		return nil, 0, false
	}
	return other, act, true
}

// normFusable reports whether product n of the one-row norm l can normalize the row itself
// (mvsln): an output of at most lnMaxN rows (more blocks would each redo the norm), whole
// 32-element chunks, a row short enough for the kernel's registers and staging.
func (b *Backend) normFusable(n, l *graph.Tensor) bool {
	if n.Op != graph.OpMulMat || n.Src[1] != l || n.Src[0] == l {
		return false
	}
	w := n.Src[0]
	K, N := w.Ne[0], w.Ne[1]
	return (N <= b.lnMaxN || b.mvd&mvdLN != 0) && K%32 == 0 && K <= lnMaxK && typeSuffix[w.Type] != "" &&
		w.Nb[1] <= mvsBytes && w.Nb[1]%chunkAlign[w.Type] == 0 && l.Src[0].Ne[0] == K && w.Ne[2]*w.Ne[3] == 1
}

// splitK chooses how many parts the K range of a tiled product is cut into, so that products
// with few output tiles (a 768-wide output of a 512-token batch: 96 tiles on 132
// multiprocessors) still fill the GPU; each part must be whole 32-element chunks.
func (b *Backend) splitK(N, M, K int) int { return b.splitKTiles(N, M, K, 64, 2) }

// splitKTiles is splitK for tiles of tile x tile outputs, perSM blocks resident per SM.
func (b *Backend) splitKTiles(N, M, K, tile, perSM int) int {
	tiles := ((N + tile - 1) / tile) * ((M + tile - 1) / tile)
	s := min(4, (perSM*b.ctx.SMs+tiles-1)/tiles)
	for ; s > 1; s-- {
		if K%(32*s) == 0 {
			return s
		}
	}
	return 1
}

// cacheTable is device memory holding the addresses of the caches of a batch's rows.
type cacheTable struct {
	dev    DevicePtr
	caches []*graph.Tensor // the node's Caches (rebinding them changes what the table must hold)
	host   []byte          // what dev holds
}

// ptrTable uploads the device addresses of the caches of a batch's rows into device memory
// owned by p, for kernels that index them per row; refreshTables keeps it current.
func (b *Backend) ptrTable(p *program, caches []*graph.Tensor) (DevicePtr, error) {
	t := cacheTable{caches: caches, host: make([]byte, 8*len(caches))}
	if err := t.fill(t.host); err != nil {
		return 0, err
	}
	var err error
	if t.dev, err = b.alloc(len(t.host)); err != nil {
		return 0, err
	}
	p.tables = append(p.tables, t)
	return t.dev, b.ctx.CopyHtoD(t.dev, t.host)
}

// fill writes the caches' device addresses into dst.
func (t *cacheTable) fill(dst []byte) error {
	for i, c := range t.caches {
		a, err := devAddr(c)
		if err != nil {
			return err
		}
		binary.LittleEndian.PutUint64(dst[8*i:], uint64(a))
	}
	return nil
}

// refreshTables uploads the tables whose caches were rebound since the last run (checking
// that the new caches have the shape the kernels were compiled for).
func (b *Backend) refreshTables(p *program) error {
	for i := range p.tables {
		t := &p.tables[i]
		if cap(b.tableNow) < len(t.host) {
			b.tableNow = make([]byte, len(t.host))
		}
		cur := b.tableNow[:len(t.host)]
		if err := t.fill(cur); err != nil {
			return err
		}
		if string(cur) == string(t.host) {
			continue
		}
		c0 := t.caches[0]
		for _, c := range t.caches {
			if c.Type != c0.Type || c.Nb[1] != c0.Nb[1] || c.Ne[1] != c0.Ne[1] {
				return fmt.Errorf("cuda: the rows' caches were rebound to caches of another type or shape")
			}
		}
		copy(t.host, cur)
		if err := b.ctx.CopyHtoD(t.dev, t.host); err != nil {
			return err
		}
	}
	return nil
}

// attentionSplits chooses how a decode attention over a cache of C positions with heads
// query heads is split (attention_split): into about 264 blocks per query row (two per SM of an
// H100), at most 32 per head and one per 64 positions, each taking a share of 0..p (at least 64
// positions; at most maxChunk). The split depends on neither the position nor the number of
// rows, so a row gives the same bits alone and in a batch.
func attentionSplits(C, heads int) (splits, maxChunk int) {
	splits = min((264+heads-1)/heads, 32, (C+63)/64)
	return splits, max(64, (C+splits-1)/splits)
}

// splitAttention turns l, a decode attention launch whose arguments a holds, into the split
// kernel's: a grid of S splits per (head, row), the partials' memory and the per-(head, row)
// counters the last block of each uses (zeroed here; the kernel leaves them zero).
func (b *Backend) splitAttention(p *program, l *launch, a *args, heads, rows, D, S, chunk int) error {
	part, err := b.partial(p, rows*heads*S*(D+2)*4)
	if err != nil {
		return err
	}
	count, err := b.alloc(rows * heads * 4)
	if err != nil {
		return err
	}
	p.counters = append(p.counters, count)
	if err := b.ctx.Memset32(count, 0, rows*heads); err != nil {
		return err
	}
	a.ptr(part).ptr(count).i32(chunk)
	l.grid = Dim3{heads, rows, S}
	l.shm = (D + chunk + 128) * 4
	return nil
}

// partial returns device memory of at least n bytes for split-K partial sums, owned by p.
func (b *Backend) partial(p *program, n int) (DevicePtr, error) {
	if n <= p.partialSize && len(p.partials) > 0 {
		return p.partials[len(p.partials)-1], nil
	}
	d, err := b.alloc(n)
	if err != nil {
		return 0, err
	}
	p.partials = append(p.partials, d) // earlier launches keep the smaller ones
	p.partialSize = n
	return d, nil
}

// dupSrc reports whether n.Src[j] appeared earlier in n.Src.
func dupSrc(n *graph.Tensor, j int) bool {
	for _, s := range n.Src[:j] {
		if s == n.Src[j] {
			return true
		}
	}
	return false
}

func align(n int) int { return (n + 255) &^ 255 }

// args packs kernel parameters as the kernel's C parameter list lays them out.
type args struct{ b []byte }

func (a *args) pad(n int) {
	for len(a.b)%n != 0 {
		a.b = append(a.b, 0)
	}
}
func (a *args) ptr(p DevicePtr) *args {
	a.pad(8)
	a.b = binary.LittleEndian.AppendUint64(a.b, uint64(p))
	return a
}
func (a *args) i32(v int) *args {
	a.pad(4)
	a.b = binary.LittleEndian.AppendUint32(a.b, uint32(int32(v)))
	return a
}
func (a *args) f32(v float32) *args {
	a.pad(4)
	a.b = binary.LittleEndian.AppendUint32(a.b, math.Float32bits(v))
	return a
}

// rowStride returns the distance between rows of a float (elemBytes) tensor, in elements,
// checking that the tensor is addressable as rows.
func rowStride(t *graph.Tensor, elemBytes int) (int, error) {
	if t.Ne[2]*t.Ne[3] != 1 && !t.Contiguous() {
		return 0, fmt.Errorf("cuda: %q %v: non-contiguous tensors of more than 2 dimensions are not supported", t.Name, t.Ne)
	}
	if t.Nb[1]%elemBytes != 0 {
		return 0, fmt.Errorf("cuda: %q: row stride %d is not a multiple of %d", t.Name, t.Nb[1], elemBytes)
	}
	if t.Ne[1]*t.Ne[2]*t.Ne[3] == 1 {
		return t.Ne[0], nil
	}
	return t.Nb[1] / elemBytes, nil
}

func gridFor(total, block int) int {
	g := (total + block - 1) / block
	return max(1, min(g, 65535*8))
}

func (b *Backend) emit(p *program, o op, where func(*graph.Tensor) (DevicePtr, error)) (launch, error) {
	var l launch
	var a args
	var err error
	ptrs := make(map[*graph.Tensor]DevicePtr)
	get := func(t *graph.Tensor) DevicePtr {
		if t == nil || err != nil {
			return 0
		}
		if p, ok := ptrs[t]; ok {
			return p
		}
		var p DevicePtr
		p, err = where(t)
		ptrs[t] = p
		return p
	}
	ld := func(t *graph.Tensor, elem int) int {
		if err != nil {
			return 0
		}
		var s int
		s, err = rowStride(t, elem)
		return s
	}
	n := o.node
	out := get(o.out)
	name := ""
	switch o.kind {
	case graph.OpMulMat:
		w, x := n.Src[0], n.Src[1]
		suf, ok := typeSuffix[w.Type]
		if !ok {
			return l, fmt.Errorf("cuda: mul_mat of %q: tensor type %v is not supported on the GPU", w.Name, w.Type)
		}
		if len(o.sibs) == 0 && b.mvqLaunch(p, o, &a, &l, get, ld) {
			name = "mvq_" + suf
			break
		}
		if len(o.sibs) == 0 && (o.ln != nil || (b.mvd > 0 && x.NRows() == 1)) {
			if b.mvdLaunch(o, &a, &l, get, ld) {
				name = "mvd_" + suf
				break
			}
		}
		if ln := o.ln; ln != nil && len(o.sibs) > 0 {
			name = "mvsln3_" + suf
			stride := (w.Nb[1] + 15) &^ 15
			total := 0
			for _, s := range append([]op{o}, o.sibs...) {
				sw := s.node.Src[0]
				a.ptr(get(sw)).ptr(get(s.out)).ptr(get(s.bias)).i32(sw.Ne[1]).pad(8) // an LnProd (32 bytes)
				total += sw.Ne[1]
			}
			for range maxSibs - len(o.sibs) {
				a.ptr(0).ptr(0).ptr(0).i32(0).pad(8)
			}
			a.i32(w.Nb[1]).ptr(get(ln.Src[0])).i32(w.Ne[0]).i32(stride).ptr(get(ln.Src[1])).ptr(get(ln.Src[2])).
				f32(ln.FParams[0]).i32(isRMS(ln))
			l.block = Dim3{256, 1, 1}
			l.grid = Dim3{(total + 7) / 8, 1, 1}
			l.shm = 8*stride + (w.Ne[0]+w.Ne[0]/8)*4
			break
		}
		if ln := o.ln; ln != nil {
			N := w.Ne[1]
			stride := (w.Nb[1] + 15) &^ 15
			name = "mvsln_" + suf
			a.ptr(get(w)).i32(w.Nb[1]).ptr(get(ln.Src[0])).ptr(out).i32(N).i32(w.Ne[0]).ptr(get(o.bias)).ptr(get(o.res)).
				i32(o.act).i32(stride).ptr(get(ln.Src[1])).ptr(get(ln.Src[2])).f32(ln.FParams[0]).i32(isRMS(ln))
			l.block = Dim3{256, 1, 1}
			l.grid = Dim3{(N + 7) / 8, 1, 1}
			l.shm = 8*stride + (w.Ne[0]+w.Ne[0]/8)*4
			break
		}
		K, N, M := w.Ne[0], w.Ne[1], x.NRows()
		if w.Ne[2]*w.Ne[3] != 1 {
			return l, fmt.Errorf("cuda: mul_mat of %q: 3-D weights are not supported", w.Name)
		}
		ldres := 0
		if o.res != nil {
			ldres = ld(o.res, 4)
		}
		a.ptr(get(w)).i32(w.Nb[1]).ptr(get(x)).i32(ld(x, 4)).ptr(out).i32(ld(o.out, 4)).i32(N).i32(M).i32(K).
			ptr(get(o.bias)).ptr(get(o.res)).i32(ldres).i32(o.act)
		// The chunked kernels read whole 32-element chunks with 16-byte loads.
		wide := K%32 == 0 && w.Nb[1]%chunkAlign[w.Type] == 0 && ld(x, 4)%4 == 0 && get(x)%16 == 0
		if M <= matVecMaxRows || (p.decodeRows && M <= decodeMaxRows) {
			switch {
			case wide && M == 1 && N >= b.mvspMinN && K <= 4096 && b.mvsp && asyncUnit(get(w), mvspRows(w.Nb[1])*w.Nb[1]) > 0 &&
				w.Nb[1] <= mvsBytes:
				name = "mvsp_" + suf
				R := mvspRows(w.Nb[1])
				const wpb = 8
				stride := (R*w.Nb[1] + 15) &^ 15
				groups := (N + R - 1) / R
				a = args{}
				a.ptr(get(w)).i32(w.Nb[1]).ptr(get(x)).ptr(out).i32(N).i32(K).ptr(get(o.bias)).ptr(get(o.res)).i32(o.act).
					i32(R).i32(stride).i32(asyncUnit(get(w), R*w.Nb[1]))
				l.grid = Dim3{min((groups+wpb-1)/wpb, mvspBlocksPerSM*b.ctx.SMs), 1, 1}
				l.block = Dim3{32 * wpb, 1, 1}
				l.shm = wpb*2*stride + (K+K/8)*4
			case wide && w.Nb[1] <= mvsBytes:
				name = "mvs_" + suf
				R := 1
				if r := b.mvsRows; N >= 16384 && r*w.Nb[1] <= mvsBytes {
					R = r // long outputs (the vocabulary): more bytes in flight per warp
				}
				const wpb = 8 // warps per block
				stride := (R*w.Nb[1] + 15) &^ 15
				xsm := 0
				if M == 1 && K <= 4096 {
					xsm = 1 // the activation row goes through shared memory
				}
				a.i32(R).i32(stride).i32(xsm)
				l.grid = Dim3{(N + wpb*R - 1) / (wpb * R), 1, 1}
				l.block = Dim3{32 * wpb, 1, 1}
				l.shm = wpb*stride + xsm*(K+K/8)*4
			case wide:
				name = "mv_" + suf
				l.grid = Dim3{(N*32 + 255) / 256, 1, 1}
			default:
				name = "mv1_" + suf
				l.grid = Dim3{(N*32 + 255) / 256, 1, 1}
			}
			if l.block.X == 0 {
				l.block = Dim3{256, 1, 1}
			}
		} else {
			if wide && b.mmf && !b.simt {
				var ok bool
				if name, ok, err = b.mmfLaunch(p, o, &a, &l, get, ld, suf); ok || err != nil {
					break
				}
			}
			switch {
			case wide:
				name = "mmh_" + suf
				if b.simt {
					name = "mm2_" + suf
				}
				if S := b.splitK(N, M, K); S > 1 {
					// Partial sums of S slices of K, then one pass adding them with the epilogue.
					Kc := K / S
					part, perr := b.partial(p, S*M*N*4)
					if perr != nil {
						return l, perr
					}
					var r args
					r.ptr(part).i32(S).i32(M).i32(N).ptr(out).i32(ld(o.out, 4)).ptr(get(o.bias)).ptr(get(o.res)).i32(ldres).i32(o.act)
					red, ferr := b.fn("splitk_reduce")
					if ferr != nil {
						return l, ferr
					}
					l.then = &launch{fn: red, grid: Dim3{gridFor(M*N, 256), 1, 1}, block: Dim3{256, 1, 1}, args: r.b}
					a = args{}
					a.ptr(get(w)).i32(w.Nb[1]).ptr(get(x)).i32(ld(x, 4)).ptr(part).i32(N).i32(N).i32(M).i32(K).
						ptr(0).ptr(0).i32(0).i32(0).i32(Kc)
					l.grid = Dim3{(N + 63) / 64, (M + 63) / 64, S}
				} else {
					a.i32(K)
				}
			default:
				name = "mm_" + suf
			}
			l.block = Dim3{256, 1, 1}
			if l.grid.X == 0 {
				l.grid = Dim3{(N + 63) / 64, (M + 63) / 64, 1}
			}
			if l.grid.Y > 65535 {
				return l, fmt.Errorf("cuda: mul_mat of %d rows", M)
			}
		}
	case graph.OpGetRows:
		t, ids := n.Src[0], n.Src[1]
		suf, ok := typeSuffix[t.Type]
		if !ok {
			return l, fmt.Errorf("cuda: get_rows of %q: tensor type %v is not supported on the GPU", t.Name, t.Type)
		}
		if !ids.Contiguous() {
			return l, fmt.Errorf("cuda: get_rows: ids %q are not contiguous", ids.Name)
		}
		name = "getrows_" + suf
		a.ptr(get(t)).i32(t.Nb[1]).i32(t.NRows()).ptr(get(ids)).ptr(out).i32(ld(o.out, 4)).i32(t.Ne[0]).ptr(b.status)
		if q := o.pos; q != nil {
			name = "embed_" + suf
			a.ptr(get(q.Src[0])).i32(ld(q.Src[0], 4)).i32(q.Src[0].NRows()).ptr(get(q.Src[1]))
		}
		l.grid = Dim3{ids.NElements(), 1, 1}
		l.block = Dim3{128, 1, 1}
	case graph.OpAdd, graph.OpMul:
		x, y := n.Src[0], n.Src[1]
		ldb := 0
		if y.NRows() != 1 {
			ldb = ld(y, 4)
		}
		name = "binary"
		opc := 0
		if o.kind == graph.OpMul {
			opc = 1
		}
		K, rows := n.Ne[0], n.NRows()
		a.ptr(get(x)).i32(ld(x, 4)).ptr(get(y)).i32(ldb).ptr(out).i32(ld(o.out, 4)).i32(K).i32(rows).i32(opc)
		l.block = Dim3{256, 1, 1}
		l.grid = Dim3{gridFor(K*rows, 256), 1, 1}
	case graph.OpGELU, graph.OpScale, graph.OpCopy:
		x := n.Src[0]
		opc := map[graph.Op]int{graph.OpCopy: 0, graph.OpGELU: 1, graph.OpScale: 2}[o.kind]
		K, rows := n.Ne[0], n.NRows()
		name = "unary"
		a.ptr(get(x)).i32(ld(x, 4)).ptr(out).i32(ld(o.out, 4)).i32(K).i32(rows).i32(opc).f32(n.FParams[0])
		l.block = Dim3{256, 1, 1}
		l.grid = Dim3{gridFor(K*rows, 256), 1, 1}
	case graph.OpLayerNorm:
		x := n.Src[0]
		name = "layer_norm"
		a.ptr(get(x)).i32(ld(x, 4)).ptr(out).i32(ld(o.out, 4)).i32(n.Ne[0]).ptr(get(n.Src[1])).ptr(get(n.Src[2])).f32(n.FParams[0])
		l.grid = Dim3{n.NRows(), 1, 1}
		l.block = Dim3{256, 1, 1}
	case graph.OpRMSNorm:
		x := n.Src[0]
		name = "rms_norm"
		a.ptr(get(x)).i32(ld(x, 4)).ptr(out).i32(ld(o.out, 4)).i32(n.Ne[0]).ptr(get(n.Src[1])).f32(n.FParams[0])
		l.grid = Dim3{n.NRows(), 1, 1}
		l.block = Dim3{256, 1, 1}
	case graph.OpRoPE:
		x, pos := n.Src[0], n.Src[1]
		if err := ropeFits(n); err != nil {
			return l, err
		}
		name = "rope"
		a.ptr(get(x)).i32(ld(x, 4)).ptr(out).i32(ld(o.out, 4)).i32(n.Ne[0]).ptr(get(pos)).i32(n.IParams[0]).i32(n.IParams[1]).
			i32(boolInt(n.IParams[2] == graph.RopeNeoX)).f32(n.FParams[0]).f32(n.FParams[1]).ptr(get(n.Src[2]))
		l.grid = Dim3{n.NRows(), 1, 1}
		l.block = Dim3{min(256, (n.Ne[0]+31)&^31), 1, 1}
	case graph.OpSwiGLU:
		g, u := n.Src[0], n.Src[1]
		K, rows := n.Ne[0], n.NRows()
		name = "swiglu"
		a.ptr(get(g)).i32(ld(g, 4)).ptr(get(u)).i32(ld(u, 4)).ptr(out).i32(ld(o.out, 4)).i32(K).i32(rows)
		l.block = Dim3{256, 1, 1}
		l.grid = Dim3{gridFor(K*rows, 256), 1, 1}
	case graph.OpStoreKV:
		cache, v, pos := n.Src[0], n.Src[1], n.Src[2]
		es := 4
		suf := "f32"
		if cache.Type == quant.F16 {
			es, suf = 2, "f16"
		} else if cache.Type != quant.F32 {
			return l, fmt.Errorf("cuda: store_kv: cache type %v", cache.Type)
		}
		if !pos.Contiguous() {
			return l, fmt.Errorf("cuda: store_kv: positions are not contiguous")
		}
		l.block = Dim3{256, 1, 1}
		if c := o.second; c != nil {
			name = "store_kv2_f32"
			a.ptr(get(cache)).ptr(get(c.Src[0])).i32(ld(cache, 4)).i32(cache.Ne[1]).ptr(get(v)).ptr(get(c.Src[1])).i32(ld(v, 4)).
				ptr(get(pos)).i32(v.Ne[0]).ptr(b.status)
			l.grid = Dim3{v.NRows(), 2, 1}
		} else {
			name = "store_kv_" + suf
			a.ptr(get(cache)).i32(ld(cache, es)).i32(cache.Ne[1]).ptr(get(v)).i32(ld(v, 4)).ptr(get(pos)).i32(v.Ne[0]).ptr(b.status)
			l.grid = Dim3{v.NRows(), 1, 1}
		}
	case graph.OpStoreKVRows:
		v, pos := n.Src[0], n.Src[1]
		es, suf, cerr := rowCaches(n.Op, n.Caches)
		if cerr != nil {
			return l, cerr
		}
		table, terr := b.ptrTable(p, n.Caches)
		if terr != nil {
			return l, terr
		}
		c0 := n.Caches[0]
		name = "store_kv_rows_" + suf
		a.ptr(table).i32(ld(c0, es)).i32(c0.Ne[1]).ptr(get(v)).i32(ld(v, 4)).ptr(get(pos)).i32(v.Ne[0]).ptr(b.status)
		l.grid = Dim3{v.NRows(), 1, 1}
		l.block = Dim3{256, 1, 1}
	case graph.OpAttentionRows:
		q, k, v, pos := n.Src[0], n.Src[1], n.Src[2], n.Src[3]
		heads := n.IParams[0]
		group, gerr := queryGroup(n)
		if gerr != nil {
			return l, gerr
		}
		es, suf, cerr := rowCaches(n.Op, append(append([]*graph.Tensor{}, k.Caches...), v.Caches...))
		if cerr != nil {
			return l, cerr
		}
		kt, kerr := b.ptrTable(p, k.Caches)
		vt, verr := b.ptrTable(p, v.Caches)
		if kerr != nil || verr != nil {
			return l, fmt.Errorf("cuda: attention_rows: %v", errors.Join(kerr, verr))
		}
		c0 := k.Caches[0]
		D, C := q.Ne[0]/heads, c0.Ne[1]
		name = "attention_rows_" + suf
		a.ptr(get(q)).i32(ld(q, 4)).ptr(kt).ptr(vt).i32(ld(c0, es)).i32(C).ptr(get(pos)).ptr(out).i32(ld(o.out, 4)).
			i32(D).f32(n.FParams[0]).ptr(b.status).i32(group)
		l.grid = Dim3{heads, q.NRows(), 1}
		l.block = Dim3{128, 1, 1}
		l.shm = (D + C + 128) * 4
		if S, chunk := attentionSplits(C, heads); S > 1 {
			if err = b.splitAttention(p, &l, &a, heads, q.NRows(), D, S, chunk); err == nil {
				name = "attention_rows_split_" + suf
			}
		}
	case graph.OpAttention:
		q, k, v, pos := n.Src[0], n.Src[1], n.Src[2], n.Src[3]
		heads := n.IParams[0]
		group, gerr := queryGroup(n)
		if gerr != nil {
			return l, gerr
		}
		if k.Type != v.Type || k.Nb[1] != v.Nb[1] {
			return l, fmt.Errorf("cuda: attention: K and V caches differ in type or layout")
		}
		es, suf := 4, "f32"
		if k.Type == quant.F16 {
			es, suf = 2, "f16"
		} else if k.Type != quant.F32 {
			return l, fmt.Errorf("cuda: attention: cache type %v", k.Type)
		}
		D, C := q.Ne[0]/heads, k.Ne[1]
		if nq := q.NRows(); nq > 4 && D == 64 && suf == "f32" && ld(q, 4)%4 == 0 && ld(k, 4)%4 == 0 {
			name = "attn_tile_f32"
			a.ptr(get(q)).i32(ld(q, 4)).ptr(get(k)).ptr(get(v)).i32(ld(k, 4)).i32(C).ptr(get(pos)).i32(nq).ptr(out).i32(ld(o.out, 4)).
				f32(n.FParams[0]).ptr(b.status).i32(group)
			l.grid = Dim3{heads, (nq + 31) / 32, 1}
			l.block = Dim3{256, 1, 1}
			// The tensor-core form reads Q and writes the output 16 bytes at a time.
			if !b.simt && get(q)%16 == 0 && get(k)%16 == 0 && get(v)%16 == 0 && out%16 == 0 && ld(o.out, 4)%4 == 0 {
				name = "attn_mma_f32"
				l.block = Dim3{128, 1, 1}
			}
			break
		}
		name = "attention_" + suf
		a.ptr(get(q)).i32(ld(q, 4)).ptr(get(k)).ptr(get(v)).i32(ld(k, es)).i32(C).ptr(get(pos)).ptr(out).i32(ld(o.out, 4)).
			i32(D).f32(n.FParams[0]).ptr(b.status)
		if o.storeK != nil {
			if ld(o.storeK, 4) != ld(o.storeV, 4) {
				return l, fmt.Errorf("cuda: attention: K and V rows differ in layout")
			}
			a.ptr(get(o.storeK)).ptr(get(o.storeV)).i32(ld(o.storeK, 4))
		} else {
			a.ptr(0).ptr(0).i32(0)
		}
		a.i32(group)
		l.grid = Dim3{heads, q.NRows(), 1}
		l.block = Dim3{128, 1, 1}
		l.shm = (D + C + 128) * 4
		if S, chunk := attentionSplits(C, heads); S > 1 {
			if err = b.splitAttention(p, &l, &a, heads, q.NRows(), D, S, chunk); err == nil {
				name = "attention_split_" + suf
			}
		}
	default:
		return l, fmt.Errorf("cuda: op %v is not supported", o.kind)
	}
	if err != nil {
		return l, err
	}
	if l.fn, err = b.fn(name); err != nil {
		return l, err
	}
	if l.shm > 48<<10 && b.smemSet[l.fn] < l.shm {
		if l.shm > b.ctx.MaxSmem {
			return l, fmt.Errorf("cuda: %v needs %d bytes of shared memory (context too long for this kernel; %d available)", o.kind, l.shm, b.ctx.MaxSmem)
		}
		if err := l.fn.SetMaxDynamicShared(l.shm); err != nil {
			return l, err
		}
		b.smemSet[l.fn] = l.shm
	}
	l.args = a.b
	return l, nil
}

// isRMS is 1 for an RMS norm, 0 for a layer norm (the rms flag of mvsln and mvd).
func isRMS(n *graph.Tensor) int { return boolInt(n.Op == graph.OpRMSNorm) }

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// queryGroup returns how many query heads of attention node n share a key/value head (1 for
// multi-head attention), checking that the heads divide evenly.
func queryGroup(n *graph.Tensor) (int, error) {
	heads, kv := n.IParams[0], n.IParams[1]
	if kv == 0 {
		kv = heads
	}
	if heads <= 0 || kv <= 0 || heads%kv != 0 || n.Src[0].Ne[0]%heads != 0 {
		return 0, fmt.Errorf("cuda: %v: %d query heads over %d key/value heads of rows of %d", n.Op, heads, kv, n.Src[0].Ne[0])
	}
	D := n.Src[0].Ne[0] / heads
	if n.Src[1].Ne[0] < kv*D {
		return 0, fmt.Errorf("cuda: %v: cache rows of %d hold fewer than %d key/value heads of %d", n.Op, n.Src[1].Ne[0], kv, D)
	}
	return heads / kv, nil
}

// ropeFits checks that RoPE node n rotates no more pairs per head than the kernel's table of
// angles holds (ROPE_MAXP in kernels.cu).
func ropeFits(n *graph.Tensor) error {
	if n.IParams[1]/2 > ropeMaxPairs {
		return fmt.Errorf("cuda: rope of %d dimensions: the GPU kernel rotates at most %d", n.IParams[1], 2*ropeMaxPairs)
	}
	return nil
}

// mvqAlign lists the weight types the mvq kernels take (kernels.cu), with the alignment their
// loads need of a row's length in bytes and of the weights' address.
var mvqAlign = map[quant.Type]int{quant.F32: 16, quant.F16: 16, quant.BF16: 16, quant.Q8_0: 2, quant.Q4_0: 2}

// mvqLaunch sets up mvq (kernels.cu) for a product of up to matVecMaxRows activation rows (up
// to decodeMaxRows in a batched decode step) whose weight rows are too long for the staged
// kernels (mvqMinRow bytes and more), and reports whether it applies. WR, the warps per
// weight row, depends only on the weights' shape, never on the number of rows: a row's bits
// do not depend on its batch.
func (b *Backend) mvqLaunch(p *program, o op, a *args, l *launch, get func(*graph.Tensor) DevicePtr, ld func(*graph.Tensor, int) int) bool {
	n := o.node
	w, x := n.Src[0], n.Src[1]
	al := mvqAlign[w.Type]
	K, N, M := w.Ne[0], w.Ne[1], x.NRows()
	if b.mvqWarps <= 0 || al == 0 || o.ln != nil || w.Nb[1] < b.mvqMinRow || K%32 != 0 || w.Nb[1]%al != 0 ||
		int(get(w))%al != 0 || w.Ne[2]*w.Ne[3] != 1 {
		return false
	}
	if M > matVecMaxRows && !(p.decodeRows && M <= decodeMaxRows) {
		return false
	}
	ldx := ld(x, 4)
	if ldx%4 != 0 || get(x)%16 != 0 {
		return false
	}
	wr := mvqWarpsPerRow(N, K/32, b.mvqWarps*b.ctx.SMs)
	ldres := 0
	if o.res != nil {
		ldres = ld(o.res, 4)
	}
	a.ptr(get(w)).i32(w.Nb[1]).ptr(get(x)).i32(ldx).ptr(get(o.out)).i32(ld(o.out, 4)).i32(N).i32(M).i32(K).
		ptr(get(o.bias)).ptr(get(o.res)).i32(ldres).i32(o.act).i32(wr).i32(b.mvqUnroll)
	l.block = Dim3{256, 1, 1}
	l.grid = Dim3{(N + 8/wr - 1) / (8 / wr), 1, 1}
	return true
}

// mvqWarpsPerRow is the number of warps (1, 2, 4 or 8) that share a weight row of C chunks in
// mvq: the fewest that give the N rows at least target warps in all (bytes in flight on every
// multiprocessor), as long as each warp keeps a step of 8 whole chunks.
func mvqWarpsPerRow(N, C, target int) int {
	wr := 1
	for wr < 8 && N*wr < target && C/(2*wr) >= 8 {
		wr *= 2
	}
	return wr
}

// mmfTile and mmfStages are MF_T and MF_STAGES (kernels.cu); mmfShm is the staging memory of
// an mmf block (MF_STAGES x 4 arrays of MF_T x MF_LD halves).
const (
	mmfTile   = 128
	mmfStages = 3
	mmfShm    = mmfStages * 4 * mmfTile * 40 * 2
	// mmfMaxSplit bounds the weights (elements) mmf splits into f16 planes before a product:
	// 128 MiB of planes; larger quantized matrices (a prompt's full vocabulary of logits) use mmh.
	mmfMaxSplit = 1 << 25
	// mmfMinSplit: smaller quantized matrices stay on mmh, where splitting them first did not
	// pay (H100, pp512: 124M q4_0 171k -> 157k t/s, q8_0 154k -> 158k; Llama-1B's 2048 x 2048
	// and larger gained 1.5-2x).
	mmfMinSplit = 1 << 22
)

// mmfLaunch sets up mmf (kernels.cu) for a product of many activation rows, with the launches
// that split its operands into f16 planes first (the activations always, the weights unless
// they are f16 already), and a split-K reduction when the output has fewer tiles than SMs.
// It returns the kernel's name, or ok = false when mmf does not apply.
func (b *Backend) mmfLaunch(p *program, o op, a *args, l *launch, get func(*graph.Tensor) DevicePtr, ld func(*graph.Tensor, int) int,
	suf string) (name string, ok bool, err error) {
	w, x := o.node.Src[0], o.node.Src[1]
	K, N, M := w.Ne[0], w.Ne[1], x.NRows()
	direct := w.Type == quant.F16 && w.Nb[1]%16 == 0 && get(w)%16 == 0
	if K%32 != 0 || (!direct && (N*K > mmfMaxSplit || N*K < mmfMinSplit)) {
		return "", false, nil
	}
	S := b.splitKTiles(N, M, K, mmfTile, 1)
	wb, pb := 0, 0
	if !direct {
		wb = align(4 * N * K)
	}
	if S > 1 {
		pb = S * M * N * 4
	}
	var base DevicePtr
	if wb+pb > 0 {
		if base, err = b.partial(p, wb+pb); err != nil {
			return "", false, err
		}
	}
	xh, fresh, err := b.planesFor(p, x, 4*M*K)
	if err != nil {
		return "", false, err
	}
	xl := xh + DevicePtr(2*M*K)
	wh, wl := get(w), DevicePtr(0)
	if fresh {
		split, err := b.fn("split_rows")
		if err != nil {
			return "", false, err
		}
		var sa args
		sa.ptr(get(x)).i32(ld(x, 4)).i32(M).i32(K).ptr(xh).ptr(xl)
		l.pre = append(l.pre, launch{fn: split, grid: Dim3{gridFor(M*K/8, 256), 1, 1}, block: Dim3{256, 1, 1}, args: sa.b})
	}
	name = "mmf1"
	if !direct {
		name = "mmf2"
		wh = base
		wl = wh + DevicePtr(2*N*K)
		sw, err := b.fn("splitw_" + suf)
		if err != nil {
			return "", false, err
		}
		var wa args
		wa.ptr(get(w)).i32(w.Nb[1]).i32(N).i32(K).ptr(wh).ptr(wl)
		l.pre = append(l.pre, launch{fn: sw, grid: Dim3{gridFor(N*K/32, 256), 1, 1}, block: Dim3{256, 1, 1}, args: wa.b})
	}
	ldres := 0
	if o.res != nil {
		ldres = ld(o.res, 4)
	}
	a.b = a.b[:0]
	a.ptr(xh).ptr(xl).i32(M).ptr(wh).ptr(wl).i32(N).i32(K)
	if S > 1 {
		part := base + DevicePtr(wb)
		red, err := b.fn("splitk_reduce")
		if err != nil {
			return "", false, err
		}
		var r args
		r.ptr(part).i32(S).i32(M).i32(N).ptr(get(o.out)).i32(ld(o.out, 4)).ptr(get(o.bias)).ptr(get(o.res)).i32(ldres).i32(o.act)
		l.then = &launch{fn: red, grid: Dim3{gridFor(M*N, 256), 1, 1}, block: Dim3{256, 1, 1}, args: r.b}
		a.ptr(part).i32(N).ptr(0).ptr(0).i32(0).i32(0).i32(K / S)
	} else {
		a.ptr(get(o.out)).i32(ld(o.out, 4)).ptr(get(o.bias)).ptr(get(o.res)).i32(ldres).i32(o.act).i32(K)
	}
	l.grid = Dim3{(N + mmfTile - 1) / mmfTile, (M + mmfTile - 1) / mmfTile, S}
	l.block = Dim3{256, 1, 1}
	l.shm = mmfShm
	return name, true, nil
}

// planesFor returns where mmf finds the f16 planes of the activations x (bytes long), and
// whether they must be split there first: not when the last split of this program was of x
// (q, k and v, or gate and up, read one normalized row set; the launches between them write
// neither x nor the planes, which only mmf's splits write).
// One buffer serves every split (grown when a larger one is needed; earlier launches keep the
// smaller one).
func (b *Backend) planesFor(p *program, x *graph.Tensor, bytes int) (DevicePtr, bool, error) {
	if n := len(p.planes); n > 0 && p.planesOf == x {
		return p.planes[n-1], false, nil
	}
	if len(p.planes) == 0 || p.planesSize < bytes {
		d, err := b.alloc(bytes)
		if err != nil {
			return 0, false, err
		}
		p.planes, p.planesSize = append(p.planes, d), bytes
	}
	p.planesOf = x
	return p.planes[len(p.planes)-1], true, nil
}

// ropeMaxPairs is ROPE_MAXP (kernels.cu).
const ropeMaxPairs = 256

// mvdLaunch sets up the decode mat-vec (mvd, kernels.cu) for a one-row product, with the layer
// norm of its input fused when o.ln is set, and reports whether it applies. The grid gives
// every lane one 32-element chunk where it can (WR warps per row for long rows) and has at
// least two blocks per SM where the output allows it (fewer rows per block for short outputs).
func (b *Backend) mvdLaunch(o op, a *args, l *launch, get func(*graph.Tensor) DevicePtr, ld func(*graph.Tensor, int) int) bool {
	n := o.node
	w, x := n.Src[0], n.Src[1]
	if o.ln != nil {
		x = o.ln.Src[0]
	}
	K, N := w.Ne[0], w.Ne[1]
	long := N > mvdMaxN
	if (long && b.mvd&mvdLong == 0) || (!long && b.mvd&mvdShort == 0) || (o.ln != nil && b.mvd&mvdLN == 0) || x.NRows() != 1 || K%32 != 0 ||
		w.Nb[1]%chunkAlign[w.Type] != 0 || get(x)%16 != 0 || w.Ne[2]*w.Ne[3] != 1 {
		return false
	}
	C := K / 32
	wr := min(8, (C+31)/32)
	rpb := 8 / wr
	for rpb > 1 && (N+rpb-1)/rpb < 2*b.ctx.SMs {
		rpb /= 2
	}
	ln, lnw, lnb, eps, rms := 0, DevicePtr(0), DevicePtr(0), float32(0), 0
	if o.ln != nil {
		// every thread normalizes at most LN_MAXE elements of the row
		for rpb*wr*32*lnMaxE < K && rpb*wr < 8 {
			rpb *= 2
		}
		if rpb*wr*32*lnMaxE < K {
			return false
		}
		ln, lnw, lnb, eps, rms = 1, get(o.ln.Src[1]), get(o.ln.Src[2]), o.ln.FParams[0], isRMS(o.ln)
		l.shm = (K + K/8) * 4
	}
	a.ptr(get(w)).i32(w.Nb[1]).ptr(get(x)).ptr(get(o.out)).i32(N).i32(K).ptr(get(o.bias)).ptr(get(o.res)).
		i32(o.act).i32(wr).i32(ln).ptr(lnw).ptr(lnb).f32(eps).i32(rms)
	l.block = Dim3{32 * wr * rpb, 1, 1}
	l.grid = Dim3{(N + rpb - 1) / rpb, 1, 1}
	return true
}

// Which one-row products mvd computes (GORUN_CUDA_MVD, a sum of these bits; default mvdShort):
// outputs of up to mvdMaxN rows, longer ones (the vocabulary), and those with a fused layer
// norm. The others go to mvs (four staged rows per warp for long outputs) and mvsln.
const (
	mvdShort = 1
	mvdLong  = 2
	mvdLN    = 4
	mvdMaxN  = 16384
)

// mvspRows is the number of rows mvsp stages per group (4, or fewer for long rows).
func mvspRows(wrow int) int {
	r := 4
	for r > 1 && r*wrow > mvsBytes {
		r /= 2
	}
	return r
}

// asyncUnit is the copy unit of mvsp (16, 8 or 4 bytes) for weights at addr in groups of
// group bytes, or 0 when they are not even 4-byte aligned.
func asyncUnit(addr DevicePtr, group int) int {
	for _, u := range []int{16, 8, 4} {
		if int(addr)%u == 0 && group%u == 0 {
			return u
		}
	}
	return 0
}

// mvspBlocksPerSM bounds mvsp's grid: enough blocks to fill every SM, few enough that each
// warp walks several row groups (the pipeline pays off from the second).
const mvspBlocksPerSM = 3

// lnMaxE is LN_MAXE (kernels.cu): the row elements one thread of a fused layer norm holds.
const lnMaxE = 8
