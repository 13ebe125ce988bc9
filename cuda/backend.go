//go:build cuda

package cuda

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strconv"
	"sync"
	"time"

	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/quant"
)

// The PTX is embedded gzip-compressed (4.9 MB of text, 0.96 MB compressed) and inflated once
// per backend.
//
//go:embed kernels.ptx.gz
var kernelsPTXgz []byte

// embeddedPTX inflates the embedded kernels.
func embeddedPTX() ([]byte, error) {
	zr, err := gzip.NewReader(bytes.NewReader(kernelsPTXgz))
	if err != nil {
		return nil, fmt.Errorf("cuda: embedded kernels: %w", err)
	}
	ptx, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("cuda: embedded kernels: %w", err)
	}
	return ptx, nil
}

var errClosed = errors.New("cuda: the backend is closed")

// Status bits the kernels set on bad input (see kernels.cu).
const (
	stBadID  = 1
	stBadPos = 2
)

// Backend runs graphs on one NVIDIA GPU. Weights are uploaded once; a graph is compiled once
// per version into a list of fused kernel launches over device memory (intermediates in a
// scratch arena of the backend's own, planned after fusion), captured into a CUDA graph on its
// first run and replayed afterwards. A Compute uploads the pending inputs, replays the graph
// and reads back one status word; Read copies an output down.
//
// Only graph inputs and outputs (FlagInput, FlagOutput) and static tensors live where the
// graph's Bind put them; Read of any other tensor is refused.
type Backend struct {
	ctx *Context
	mod *Module
	fns map[string]*Function

	mu         sync.Mutex
	status     DevicePtr
	statusHost []byte // pinned
	staging    []byte // pinned, for inputs written before a Compute
	readback   []byte // pinned, for outputs
	stagingOff int
	pending    []upload
	allocs     map[DevicePtr]int
	progs      map[*graph.Graph]*program
	tick       int
	smemSet    map[*Function]int
	ready      *program // the program whose outs hold the results of the last Compute

	// profile (GORUN_CUDA_PROFILE=1) runs launches one at a time, synchronizing after each, and
	// prints the time per kernel and shape to stderr at Close.
	profile bool
	prof    map[string]*profEntry

	// stats (GORUN_CUDA_STATS=1) prints at Close how long Compute and Read took on average
	// (host wall time: for a replayed graph, its GPU time plus the synchronization).
	stats                  bool
	nCompute, nRead        int
	tCompute, tRead, tCall time.Duration

	// simt (GORUN_CUDA_SIMT=1) uses the float32 SIMT kernels (mm2, attn_tile_f32) instead of the
	// f16 tensor-core ones with split operands (mmf, mmh, attn_mma_f32) for prompt batches: the
	// previous defaults, and the way out for values beyond f16's range.
	simt bool
	// mvd selects which one-row products the decode mat-vec computes (GORUN_CUDA_MVD, bits
	// mvdShort|mvdLong|mvdLN, see compile.go).
	mvd int
	// mvsRows is the number of weight rows a warp of mvs stages for long outputs
	// (GORUN_CUDA_MVS_ROWS, default 4).
	mvsRows int
	// mvsp pipelines the long one-row products (GORUN_CUDA_MVSP=0 turns it off).
	mvsp bool
	// mvqWarps is the warps per multiprocessor the mvq mat-vec aims for (GORUN_CUDA_MVQ; 0 turns
	// mvq off, leaving mvd/mvs/mvsln/mvsp); mvqUnroll the chunks a lane loads at once
	// (GORUN_CUDA_MVQ_U: 1, 2 or 4). Measurement switches.
	mvqWarps, mvqUnroll int
	// mvqMinRow: mvq takes weight rows of at least this many bytes (GORUN_CUDA_MVQ_MINROW;
	// default: those too long for the staged kernels); mvspMinN: mvsp takes outputs of at
	// least this many rows (GORUN_CUDA_MVSP_MINN).
	mvqMinRow, mvspMinN int
	// mmf: prompts' products on f16 planes split before the product (GORUN_CUDA_MMF=0: mmh).
	mmf bool
	// mvsln3: products of one normalized row in one launch (GORUN_CUDA_SIBS=0: one each).
	mvsln3 bool

	// lnMaxN is the longest output of a one-row product that normalizes its input row itself
	// (mvsln): every block redoes the norm (GORUN_CUDA_LN_MAXN, a measurement switch).
	lnMaxN int

	// UseGraphs replays each compiled graph as one CUDA graph (default true; GORUN_CUDA_GRAPHS=0
	// turns it off, for measuring what the capture saves).
	UseGraphs bool
	// tableNow is refreshTables' scratch (no allocation per run)
	tableNow []byte
}

type profEntry struct {
	calls int
	total time.Duration
}

type upload struct {
	dst    DevicePtr
	off, n int
}

// program is a graph compiled for the GPU.
type program struct {
	version  uint64
	launches []launch
	scratch  DevicePtr
	size     int
	exec     *Graph
	used     int // tick of last use, for eviction
	outputs  map[*graph.Tensor]bool
	// partials hold split-K partial sums (partialSize: the size of the last one)
	partials    []DevicePtr
	partialSize int
	// planes hold activations split into f16 planes for mmf; planesOf is the tensor whose
	// split the last of them holds (consecutive products of one input share it)
	planes     []DevicePtr
	planesSize int
	planesOf   *graph.Tensor
	// counters: the split attention kernels' per-(head, row) tickets (zero between runs)
	counters []DevicePtr
	// tables hold the cache addresses of batched rows (store_kv_rows, attention_rows),
	// refreshed before every run: the caches of a graph's rows may be rebound between runs
	tables []cacheTable
	// decodeRows: the graph is a batched decode step (it has attention_rows); its products
	// take the mat-vec kernels for up to decodeMaxRows rows
	decodeRows bool
	// outs are copied to page-locked memory at the end of every Compute, so that Read of
	// them (the logits, every token) needs no further round trip to the GPU.
	outs []outCopy
}

type outCopy struct {
	t    *graph.Tensor
	dev  DevicePtr
	host []byte
}

// maxOutCopy bounds the outputs copied down with each Compute.
const maxOutCopy = 16 << 20

type launch struct {
	fn          *Function
	grid, block Dim3
	shm         int
	args        []byte
	then        *launch  // a second launch belonging to the same op (split-K reduction)
	pre         []launch // launches of the same op that run first (mmf's operand splits)
}

// New opens device ordinal (0 for the first GPU), loads the kernels and returns a backend.
func New(ordinal int) (*Backend, error) {
	ctx, err := NewContext(ordinal)
	if err != nil {
		return nil, err
	}
	b := &Backend{ctx: ctx, fns: map[string]*Function{}, allocs: map[DevicePtr]int{}, progs: map[*graph.Graph]*program{},
		smemSet: map[*Function]int{}, UseGraphs: os.Getenv("GORUN_CUDA_GRAPHS") != "0",
		profile: os.Getenv("GORUN_CUDA_PROFILE") == "1", prof: map[string]*profEntry{},
		stats: os.Getenv("GORUN_CUDA_STATS") == "1",
		simt:  os.Getenv("GORUN_CUDA_SIMT") == "1", mvd: envLevel("GORUN_CUDA_MVD", 1),
		mvsRows: max(1, envLevel("GORUN_CUDA_MVS_ROWS", 4)),
		lnMaxN:  envLevel("GORUN_CUDA_LN_MAXN", 16384),
		mvsp:    os.Getenv("GORUN_CUDA_MVSP") != "0", mvqWarps: envLevel("GORUN_CUDA_MVQ", 32),
		mvqUnroll: min(4, max(1, envLevel("GORUN_CUDA_MVQ_U", 2))), mvqMinRow: envLevel("GORUN_CUDA_MVQ_MINROW", mvsBytes+1),
		mvspMinN: envLevel("GORUN_CUDA_MVSP_MINN", 16384), mmf: os.Getenv("GORUN_CUDA_MMF") != "0",
		mvsln3: os.Getenv("GORUN_CUDA_SIBS") != "0"}
	var ptx []byte
	if f := os.Getenv("GORUN_CUDA_PTX"); f != "" { // kernel development: PTX from nvcc, no rebuild
		ptx, err = os.ReadFile(f)
	} else {
		ptx, err = embeddedPTX()
	}
	if err != nil {
		ctx.Close()
		return nil, err
	}
	err = ctx.Do(func() error {
		if b.mod, err = ctx.LoadModule(ptx); err != nil {
			return fmt.Errorf("loading the kernels (PTX for compute capability 8.0+) on %s (%d.%d): %w", ctx.Name, ctx.Major, ctx.Minor, err)
		}
		if b.status, err = ctx.MemAlloc(4); err != nil {
			return err
		}
		if err = ctx.Memset32(b.status, 0, 1); err != nil {
			return err
		}
		if b.statusHost, err = ctx.HostAlloc(4); err != nil {
			return err
		}
		b.staging, err = ctx.HostAlloc(1 << 16)
		return err
	})
	if err != nil {
		b.Close()
		return nil, err
	}
	return b, nil
}

// Name is "cuda".
func (b *Backend) Name() string { return "cuda" }

// Device describes the GPU, e.g. "NVIDIA H100 80GB HBM3 (sm_90, 132 SMs, 79.2 GiB)".
func (b *Backend) Device() string {
	c := b.ctx
	return fmt.Sprintf("%s (sm_%d%d, %d SMs, %.1f GiB)", c.Name, c.Major, c.Minor, c.SMs, float64(c.Memory)/(1<<30))
}

// fn returns a kernel by name, looked up once.
func (b *Backend) fn(name string) (*Function, error) {
	if f := b.fns[name]; f != nil {
		return f, nil
	}
	f, err := b.mod.Function(name)
	if err != nil {
		return nil, err
	}
	b.fns[name] = f
	return f, nil
}

func (b *Backend) alloc(size int) (DevicePtr, error) {
	p, err := b.ctx.MemAlloc(size)
	if err != nil {
		free, total, _ := b.ctx.MemInfo()
		return 0, fmt.Errorf("%w: %d MiB wanted, %d of %d MiB free on %s (use a smaller model or context, or fewer GPU layers)", err, size>>20, free>>20, total>>20, b.ctx.Name)
	}
	b.allocs[p] = size
	return p, nil
}

func (b *Backend) free(p DevicePtr) {
	if _, ok := b.allocs[p]; ok {
		delete(b.allocs, p)
		b.ctx.MemFree(p)
	}
}

func (b *Backend) buffer(p DevicePtr, size int) *graph.Buffer {
	return &graph.Buffer{Dev: uintptr(p), Size: size, Release: func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if b.ctx != nil { // after Close everything is freed already
			b.ctx.Do(func() error { b.free(p); return nil })
		}
	}}
}

// Alloc returns zeroed device memory.
func (b *Backend) Alloc(size int) (*graph.Buffer, error) {
	if size < 0 {
		return nil, fmt.Errorf("cuda: negative allocation %d", size)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctx == nil {
		return nil, errClosed
	}
	var p DevicePtr
	err := b.ctx.Do(func() error {
		var err error
		if p, err = b.alloc(size); err != nil {
			return err
		}
		return b.ctx.Memset8(p, 0, max(size, 1))
	})
	if err != nil {
		return nil, err
	}
	return b.buffer(p, size), nil
}

// Weights copies host bytes (a tensor of the mapped file) to device memory.
func (b *Backend) Weights(host []byte) (*graph.Buffer, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctx == nil {
		return nil, errClosed
	}
	var p DevicePtr
	err := b.ctx.Do(func() error {
		var err error
		if p, err = b.alloc(len(host)); err != nil {
			return err
		}
		return b.ctx.CopyHtoD(p, host)
	})
	if err != nil {
		return nil, err
	}
	return b.buffer(p, len(host)), nil
}

// envLevel reads a small integer switch from the environment (def when unset or not a number).
func envLevel(name string, def int) int {
	v, err := strconv.Atoi(os.Getenv(name))
	if err != nil {
		return def
	}
	return v
}

func devAddr(t *graph.Tensor) (DevicePtr, error) {
	if t.Buf == nil || t.Buf.Dev == 0 {
		return 0, fmt.Errorf("cuda: tensor %q has no device memory", t.Name)
	}
	return DevicePtr(t.Buf.Dev) + DevicePtr(t.Off), nil
}

// Write stages src for the tensor; the copy is issued, in order, before the next Compute or
// Read.
func (b *Backend) Write(t *graph.Tensor, src []byte) error {
	if !t.Contiguous() || len(src) != t.Bytes() {
		return fmt.Errorf("cuda: write of %d bytes to %q (%d bytes)", len(src), t.Name, t.Bytes())
	}
	dst, err := devAddr(t)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctx == nil {
		return errClosed
	}
	if b.stagingOff+len(src) > len(b.staging) {
		// Flush what is staged, then grow the staging memory if one write needs more.
		err := b.ctx.Do(func() error {
			if err := b.flush(); err != nil {
				return err
			}
			if err := b.ctx.Sync(); err != nil {
				return err
			}
			b.stagingOff = 0
			if len(src) > len(b.staging) {
				b.ctx.HostFree(b.staging)
				var err error
				b.staging, err = b.ctx.HostAlloc(max(len(src), 2*len(b.staging)))
				return err
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	copy(b.staging[b.stagingOff:], src)
	b.pending = append(b.pending, upload{dst: dst, off: b.stagingOff, n: len(src)})
	b.stagingOff += (len(src) + 15) &^ 15
	return nil
}

// flush enqueues the staged uploads (on the context's thread). The staging memory is reused
// only after the stream has been synchronized (every Compute and Read ends with a sync).
func (b *Backend) flush() error {
	for _, u := range b.pending {
		if err := b.ctx.CopyHtoDAsync(u.dst, b.staging[u.off:u.off+u.n]); err != nil {
			return err
		}
	}
	b.pending = b.pending[:0]
	return nil
}

// Read copies an output tensor of the last Compute into dst.
func (b *Backend) Read(t *graph.Tensor, dst []byte) error {
	if !t.Contiguous() || len(dst) != t.Bytes() {
		return fmt.Errorf("cuda: read of %d bytes from %q (%d bytes)", len(dst), t.Name, t.Bytes())
	}
	src, err := devAddr(t)
	if err != nil {
		return err
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctx == nil {
		return errClosed
	}
	if b.stats {
		defer func(t0 time.Time) { b.nRead++; b.tRead += time.Since(t0) }(time.Now())
	}
	if p := b.ready; p != nil && len(b.pending) == 0 {
		for _, o := range p.outs {
			if o.t == t && len(o.host) == len(dst) {
				copy(dst, o.host)
				return nil
			}
		}
	}
	return b.ctx.Do(func() error {
		if err := b.flush(); err != nil {
			return err
		}
		defer func() { b.stagingOff = 0 }()
		if len(dst) > len(b.readback) { // outputs come down through page-locked memory
			if b.readback != nil {
				b.ctx.HostFree(b.readback)
				b.readback = nil
			}
			rb, err := b.ctx.HostAlloc(len(dst))
			if err != nil {
				return b.ctx.CopyDtoH(dst, src)
			}
			b.readback = rb
		}
		if err := b.ctx.CopyDtoHAsync(b.readback[:len(dst)], src); err != nil {
			return err
		}
		if err := b.ctx.Sync(); err != nil {
			return err
		}
		copy(dst, b.readback)
		return nil
	})
}

// Compute runs the graph: compiled and captured on the first call for its version, replayed
// afterwards.
func (b *Backend) Compute(g *graph.Graph) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctx == nil {
		return errClosed
	}
	if b.stats {
		t0 := time.Now()
		defer func() { b.nCompute++; b.tCompute += time.Since(t0) }()
	}
	return b.ctx.Do(func() error {
		p, err := b.program(g)
		if err != nil {
			return err
		}
		b.tick++
		p.used = b.tick
		b.ready = nil
		if err := b.flush(); err != nil {
			return err
		}
		if err := b.refreshTables(p); err != nil {
			return err
		}
		if b.profile {
			if err := b.profileRun(p); err != nil {
				return err
			}
		} else if b.UseGraphs && p.exec == nil {
			if err := b.capture(p); err != nil {
				return err
			}
		}
		if b.profile {
		} else if p.exec != nil {
			if err := b.ctx.LaunchGraph(p.exec); err != nil {
				return err
			}
		} else {
			for i := range p.launches {
				l := &p.launches[i]
				if err := b.ctx.Launch(l.fn, l.grid, l.block, l.shm, l.args); err != nil {
					return err
				}
			}
		}
		for _, o := range p.outs {
			if err := b.ctx.CopyDtoHAsync(o.host, o.dev); err != nil {
				return err
			}
		}
		if err := b.ctx.CopyDtoHAsync(b.statusHost, b.status); err != nil {
			return err
		}
		if err := b.ctx.Sync(); err != nil {
			return err
		}
		b.stagingOff = 0
		if st := uint32(b.statusHost[0]) | uint32(b.statusHost[1])<<8; st != 0 {
			b.ctx.Memset32(b.status, 0, 1)
			switch {
			case st&stBadID != 0:
				return fmt.Errorf("cuda: get_rows: an id is outside its table")
			default:
				return fmt.Errorf("cuda: a position is outside the KV cache")
			}
		}
		b.ready = p
		return nil
	})
}

// Prepare compiles g ahead of its first Compute.
func (b *Backend) Prepare(g *graph.Graph) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctx == nil {
		return errClosed
	}
	return b.ctx.Do(func() error {
		_, err := b.program(g)
		return err
	})
}

func (b *Backend) profileRun(p *program) error {
	if err := b.ctx.Sync(); err != nil {
		return err
	}
	for i := range p.launches {
		l := &p.launches[i]
		t0 := time.Now()
		if err := b.ctx.Launch(l.fn, l.grid, l.block, l.shm, l.args); err != nil {
			return err
		}
		if err := b.ctx.Sync(); err != nil {
			return err
		}
		key := fmt.Sprintf("%-16s grid %5d x %4d", l.fn.Name, l.grid.X, l.grid.Y)
		e := b.prof[key]
		if e == nil {
			e = &profEntry{}
			b.prof[key] = e
		}
		e.calls++
		e.total += time.Since(t0)
	}
	return nil
}

// emptyDo measures a round trip to the context's thread.
func (b *Backend) emptyDo() float64 {
	t0 := time.Now()
	for i := 0; i < 100; i++ {
		b.ctx.Do(func() error { return nil })
	}
	return float64(time.Since(t0).Nanoseconds()) / 1e3 / 100
}

func (b *Backend) printProfile() {
	keys := make([]string, 0, len(b.prof))
	var sum time.Duration
	for k, e := range b.prof {
		keys = append(keys, k)
		sum += e.total
	}
	sort.Slice(keys, func(i, j int) bool { return b.prof[keys[i]].total > b.prof[keys[j]].total })
	fmt.Fprintf(os.Stderr, "cuda profile (each launch synchronized; times include launch overhead), total %v\n", sum)
	for _, k := range keys {
		e := b.prof[k]
		fmt.Fprintf(os.Stderr, "  %s  %8d calls  %10.1f us/call  %5.1f%%\n", k, e.calls, float64(e.total.Microseconds())/float64(e.calls), 100*float64(e.total)/float64(sum))
	}
}

func (b *Backend) capture(p *program) error {
	if err := b.ctx.BeginCapture(); err != nil {
		return err
	}
	for i := range p.launches {
		l := &p.launches[i]
		if err := b.ctx.Launch(l.fn, l.grid, l.block, l.shm, l.args); err != nil {
			b.ctx.EndCapture()
			return err
		}
	}
	exec, err := b.ctx.EndCapture()
	if err != nil {
		return err
	}
	p.exec = exec
	return nil
}

// program returns the compiled form of g, compiling it when g changed.
func (b *Backend) program(g *graph.Graph) (*program, error) {
	if p := b.progs[g]; p != nil && p.version == g.Version() {
		return p, nil
	}
	if p := b.progs[g]; p != nil {
		b.dropProgram(g, p)
	}
	if len(b.progs) >= 16 { // sessions come and go: keep the most recently used graphs
		var oldest *graph.Graph
		for k, v := range b.progs {
			if oldest == nil || v.used < b.progs[oldest].used {
				oldest = k
			}
		}
		b.dropProgram(oldest, b.progs[oldest])
	}
	p, err := b.compile(g)
	if err != nil {
		return nil, err
	}
	b.progs[g] = p
	return p, nil
}

func (b *Backend) dropProgram(g *graph.Graph, p *program) {
	if p.exec != nil {
		p.exec.Destroy()
	}
	for _, o := range p.outs {
		b.ctx.HostFree(o.host)
	}
	if b.ready == p {
		b.ready = nil
	}
	if p.scratch != 0 {
		b.free(p.scratch)
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
	delete(b.progs, g)
}

// Close frees everything the backend allocated and releases the GPU.
func (b *Backend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ctx == nil {
		return nil
	}
	if b.profile && len(b.prof) > 0 {
		b.printProfile()
	}
	if b.stats && b.nCompute > 0 {
		fmt.Fprintf(os.Stderr, "cuda stats: %d computes, %.1f us each; %d reads, %.1f us each; an empty Do round trip %.1f us\n",
			b.nCompute, float64(b.tCompute.Nanoseconds())/1e3/float64(b.nCompute), b.nRead,
			float64(b.tRead.Nanoseconds())/1e3/float64(max(b.nRead, 1)), b.emptyDo())
	}
	b.ctx.Do(func() error {
		for g, p := range b.progs {
			b.dropProgram(g, p)
		}
		ptrs := make([]DevicePtr, 0, len(b.allocs))
		for p := range b.allocs {
			ptrs = append(ptrs, p)
		}
		sort.Slice(ptrs, func(i, j int) bool { return ptrs[i] < ptrs[j] })
		for _, p := range ptrs {
			b.free(p)
		}
		if b.status != 0 {
			b.ctx.MemFree(b.status)
		}
		if b.statusHost != nil {
			b.ctx.HostFree(b.statusHost)
		}
		if b.staging != nil {
			b.ctx.HostFree(b.staging)
		}
		if b.readback != nil {
			b.ctx.HostFree(b.readback)
		}
		if b.mod != nil {
			b.mod.Unload()
		}
		return nil
	})
	b.ctx.Close()
	b.ctx = nil
	return nil
}

// fill sets n 32-bit words of device memory (tests poison outputs with NaN through it).
func (b *Backend) fill(buf *graph.Buffer, word uint32) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.ctx.Do(func() error {
		if err := b.ctx.Memset32(DevicePtr(buf.Dev), word, buf.Size/4); err != nil {
			return err
		}
		for _, p := range b.progs {
			if p.scratch != 0 {
				if err := b.ctx.Memset32(p.scratch, word, p.size/4); err != nil {
					return err
				}
			}
		}
		return nil
	})
}

// typeSuffix names the kernels of each supported weight type.
var typeSuffix = map[quant.Type]string{
	quant.F32: "f32", quant.F16: "f16", quant.Q4_0: "q4_0", quant.Q4_1: "q4_1", quant.Q5_0: "q5_0",
	quant.Q5_1: "q5_1", quant.Q8_0: "q8_0", quant.Q4_K: "q4_K", quant.Q5_K: "q5_K", quant.Q6_K: "q6_K",
	quant.BF16: "bf16", quant.Q2_K: "q2_K", quant.Q3_K: "q3_K", quant.IQ4_NL: "iq4_nl", quant.IQ4_XS: "iq4_xs",
}
