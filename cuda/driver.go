//go:build cuda

package cuda

/*
#cgo LDFLAGS: -lcuda
#include <stdint.h>
#include <stddef.h>
#include <stdlib.h>

// The few CUDA driver API declarations gorun uses, written out here so that the package
// compiles (and `go vet -tags cuda` works) on machines without the CUDA headers; only linking
// needs libcuda. Names are the exported symbols of libcuda (the header's #define'd aliases
// resolve to the same _v2 symbols), signatures as in CUDA 12/13's cuda.h.
typedef int CUresult;
typedef int CUdevice;
typedef unsigned long long CUdeviceptr;
typedef struct CUctx_st *CUcontext;
typedef struct CUmod_st *CUmodule;
typedef struct CUfunc_st *CUfunction;
typedef struct CUstream_st *CUstream;
typedef struct CUgraph_st *CUgraph;
typedef struct CUgraphExec_st *CUgraphExec;

CUresult cuInit(unsigned int flags);
CUresult cuDeviceGetCount(int *count);
CUresult cuDeviceGet(CUdevice *device, int ordinal);
CUresult cuDeviceGetName(char *name, int len, CUdevice dev);
CUresult cuDeviceGetAttribute(int *pi, int attrib, CUdevice dev);
CUresult cuDeviceTotalMem_v2(size_t *bytes, CUdevice dev);
CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev);
CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev);
CUresult cuCtxSetCurrent(CUcontext ctx);
CUresult cuCtxSynchronize(void);
CUresult cuMemGetInfo_v2(size_t *free, size_t *total);
CUresult cuMemAlloc_v2(CUdeviceptr *dptr, size_t bytesize);
CUresult cuMemFree_v2(CUdeviceptr dptr);
CUresult cuMemAllocHost_v2(void **pp, size_t bytesize);
CUresult cuMemFreeHost(void *p);
CUresult cuMemcpyHtoD_v2(CUdeviceptr dst, const void *src, size_t n);
CUresult cuMemcpyDtoH_v2(void *dst, CUdeviceptr src, size_t n);
CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dst, const void *src, size_t n, CUstream s);
CUresult cuMemcpyDtoHAsync_v2(void *dst, CUdeviceptr src, size_t n, CUstream s);
CUresult cuMemsetD8_v2(CUdeviceptr dst, unsigned char uc, size_t n);
CUresult cuMemsetD32_v2(CUdeviceptr dst, unsigned int ui, size_t n);
CUresult cuModuleLoadData(CUmodule *module, const void *image);
CUresult cuModuleUnload(CUmodule hmod);
CUresult cuModuleGetFunction(CUfunction *hfunc, CUmodule hmod, const char *name);
CUresult cuFuncSetAttribute(CUfunction hfunc, int attrib, int value);
CUresult cuLaunchKernel(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
	unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared, CUstream s,
	void **params, void **extra);
CUresult cuStreamCreate(CUstream *ph, unsigned int flags);
CUresult cuStreamDestroy_v2(CUstream h);
CUresult cuStreamSynchronize(CUstream h);
CUresult cuStreamBeginCapture_v2(CUstream h, int mode);
CUresult cuStreamEndCapture(CUstream h, CUgraph *g);
CUresult cuGraphInstantiateWithFlags(CUgraphExec *exec, CUgraph g, unsigned long long flags);
CUresult cuGraphLaunch(CUgraphExec exec, CUstream s);
CUresult cuGraphExecDestroy(CUgraphExec exec);
CUresult cuGraphDestroy(CUgraph g);
CUresult cuGetErrorName(CUresult err, const char **s);
CUresult cuGetErrorString(CUresult err, const char **s);

// launch passes the kernel's packed parameters through CU_LAUNCH_PARAM_BUFFER_POINTER, so no
// array of Go pointers ever crosses into C.
static CUresult launch(CUfunction f, unsigned int gx, unsigned int gy, unsigned int gz,
		unsigned int bx, unsigned int by, unsigned int bz, unsigned int shared, CUstream s,
		void *args, size_t size) {
	void *extra[] = {(void *)1, args, (void *)2, &size, (void *)0};
	return cuLaunchKernel(f, gx, gy, gz, bx, by, bz, shared, s, NULL, extra);
}

static const char *errName(CUresult r) {
	const char *s = NULL;
	if (cuGetErrorName(r, &s) != 0 || s == NULL) return "CUDA_ERROR_UNKNOWN";
	return s;
}

static const char *errString(CUresult r) {
	const char *s = NULL;
	if (cuGetErrorString(r, &s) != 0 || s == NULL) return "";
	return s;
}
*/
import "C"

import (
	"fmt"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"
)

// Error is a failed CUDA driver call: the call, CUDA's error name and its description.
type Error struct {
	Call string
	Code int
	Name string // e.g. "CUDA_ERROR_OUT_OF_MEMORY"
	Desc string
}

func (e *Error) Error() string {
	if e.Desc != "" {
		return fmt.Sprintf("cuda: %s: %s (%s)", e.Call, e.Name, e.Desc)
	}
	return fmt.Sprintf("cuda: %s: %s", e.Call, e.Name)
}

// check turns a CUresult into nil or an *Error.
func check(call string, r C.CUresult) error {
	if r == 0 {
		return nil
	}
	return &Error{Call: call, Code: int(r), Name: C.GoString(C.errName(r)), Desc: C.GoString(C.errString(r))}
}

// CUDA driver constants used here (values from cuda.h).
const (
	attrComputeCapabilityMajor = 75
	attrComputeCapabilityMinor = 76
	attrMultiprocessorCount    = 16
	attrMaxSharedPerBlockOptin = 97
	funcAttrMaxDynamicShared   = 8
	streamNonBlocking          = 1
	captureModeThreadLocal     = 1
)

// Context is a CUDA context bound to one device. CUDA's current context is per OS thread, so
// every driver call of a Context runs on one goroutine locked to its OS thread; Do hands it
// work through a channel.
type Context struct {
	dev    C.CUdevice
	ctx    C.CUcontext
	stream C.CUstream
	work   chan *task
	done   chan struct{}

	Name    string // the GPU's name
	Major   int    // compute capability
	Minor   int
	SMs     int
	MaxSmem int // opt-in shared memory per block, bytes
	Memory  int64

	params unsafe.Pointer // C memory for kernel parameters (used on the context's thread only)
}

const paramBytes = 4096

// NewContext initializes the driver and makes the primary context of device ordinal current on
// a dedicated locked thread.
func NewContext(ordinal int) (*Context, error) {
	c := &Context{work: make(chan *task, 1), done: make(chan struct{})}
	ready := make(chan error)
	go c.loop(ordinal, ready)
	if err := <-ready; err != nil {
		return nil, err
	}
	return c, nil
}

func (c *Context) loop(ordinal int, ready chan<- error) {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	if err := c.init(ordinal); err != nil {
		ready <- err
		return
	}
	ready <- nil
	// Between calls the thread polls for work for a while before it blocks: waking a
	// blocked, locked thread costs some 20 us, more than a whole decode kernel.
	for {
		var t *task
		select {
		case t = <-c.work:
		default:
			spinUntil := time.Now().Add(spinFor)
			for t == nil && time.Now().Before(spinUntil) {
				select {
				case t = <-c.work:
				default:
				}
			}
			if t == nil {
				t = <-c.work
			}
		}
		if t == nil { // closed
			break
		}
		t.err = t.f()
		t.done.Store(true)
		close(t.ch)
	}
	c.release()
	close(c.done)
}

// spinFor is how long the context's thread, and a caller of Do, poll before blocking.
const spinFor = 2 * time.Millisecond

// task is one Do call.
type task struct {
	f    func() error
	err  error
	done atomic.Bool
	ch   chan struct{}
}

func (c *Context) init(ordinal int) error {
	if err := check("cuInit", C.cuInit(0)); err != nil {
		return err
	}
	var n C.int
	if err := check("cuDeviceGetCount", C.cuDeviceGetCount(&n)); err != nil {
		return err
	}
	if ordinal < 0 || ordinal >= int(n) {
		return fmt.Errorf("cuda: device %d requested, %d present", ordinal, int(n))
	}
	if err := check("cuDeviceGet", C.cuDeviceGet(&c.dev, C.int(ordinal))); err != nil {
		return err
	}
	var name [256]C.char
	if err := check("cuDeviceGetName", C.cuDeviceGetName(&name[0], 256, c.dev)); err != nil {
		return err
	}
	c.Name = C.GoString(&name[0])
	attr := func(a int) int {
		var v C.int
		C.cuDeviceGetAttribute(&v, C.int(a), c.dev)
		return int(v)
	}
	c.Major, c.Minor = attr(attrComputeCapabilityMajor), attr(attrComputeCapabilityMinor)
	c.SMs, c.MaxSmem = attr(attrMultiprocessorCount), attr(attrMaxSharedPerBlockOptin)
	var total C.size_t
	C.cuDeviceTotalMem_v2(&total, c.dev)
	c.Memory = int64(total)
	if err := check("cuDevicePrimaryCtxRetain", C.cuDevicePrimaryCtxRetain(&c.ctx, c.dev)); err != nil {
		return err
	}
	if err := check("cuCtxSetCurrent", C.cuCtxSetCurrent(c.ctx)); err != nil {
		C.cuDevicePrimaryCtxRelease_v2(c.dev)
		return err
	}
	if err := check("cuStreamCreate", C.cuStreamCreate(&c.stream, streamNonBlocking)); err != nil {
		C.cuDevicePrimaryCtxRelease_v2(c.dev)
		return err
	}
	c.params = C.malloc(paramBytes)
	return nil
}

func (c *Context) release() {
	C.cuStreamSynchronize(c.stream)
	C.cuStreamDestroy_v2(c.stream)
	C.free(c.params)
	C.cuDevicePrimaryCtxRelease_v2(c.dev)
}

// Do runs f on the context's thread and returns its error.
func (c *Context) Do(f func() error) error {
	t := &task{f: f, ch: make(chan struct{})}
	c.work <- t
	spinUntil := time.Now().Add(spinFor)
	for !t.done.Load() && time.Now().Before(spinUntil) {
	}
	<-t.ch
	return t.err
}

// Close synchronizes, releases the context and stops its thread. Memory, modules and graphs
// must be freed before.
func (c *Context) Close() {
	close(c.work)
	<-c.done
}

// The methods below must run on the context's thread (inside Do).

// DevicePtr is a device address.
type DevicePtr uint64

// MemAlloc allocates device memory.
func (c *Context) MemAlloc(n int) (DevicePtr, error) {
	var p C.CUdeviceptr
	if n == 0 {
		n = 1
	}
	if err := check(fmt.Sprintf("cuMemAlloc(%d bytes)", n), C.cuMemAlloc_v2(&p, C.size_t(n))); err != nil {
		return 0, err
	}
	return DevicePtr(p), nil
}

// MemFree frees device memory.
func (c *Context) MemFree(p DevicePtr) error {
	return check("cuMemFree", C.cuMemFree_v2(C.CUdeviceptr(p)))
}

// MemInfo returns free and total device memory.
func (c *Context) MemInfo() (free, total int64, err error) {
	var f, t C.size_t
	err = check("cuMemGetInfo", C.cuMemGetInfo_v2(&f, &t))
	return int64(f), int64(t), err
}

// HostAlloc allocates page-locked host memory (fast, asynchronous copies).
func (c *Context) HostAlloc(n int) ([]byte, error) {
	var p unsafe.Pointer
	if err := check("cuMemAllocHost", C.cuMemAllocHost_v2(&p, C.size_t(max(n, 1)))); err != nil {
		return nil, err
	}
	return unsafe.Slice((*byte)(p), n), nil
}

// HostFree frees memory from HostAlloc.
func (c *Context) HostFree(b []byte) error {
	return check("cuMemFreeHost", C.cuMemFreeHost(unsafe.Pointer(unsafe.SliceData(b))))
}

// CopyHtoD copies host bytes to the device synchronously.
func (c *Context) CopyHtoD(dst DevicePtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return check("cuMemcpyHtoD", C.cuMemcpyHtoD_v2(C.CUdeviceptr(dst), unsafe.Pointer(&src[0]), C.size_t(len(src))))
}

// CopyDtoH copies device bytes to the host synchronously (after the stream's work: the
// context's stream is non-blocking, so it is synchronized first).
func (c *Context) CopyDtoH(dst []byte, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	if err := c.Sync(); err != nil {
		return err
	}
	return check("cuMemcpyDtoH", C.cuMemcpyDtoH_v2(unsafe.Pointer(&dst[0]), C.CUdeviceptr(src), C.size_t(len(dst))))
}

// CopyHtoDAsync enqueues a copy on the stream; src must be page-locked (HostAlloc) and stay
// unchanged until the stream reaches the copy.
func (c *Context) CopyHtoDAsync(dst DevicePtr, src []byte) error {
	if len(src) == 0 {
		return nil
	}
	return check("cuMemcpyHtoDAsync", C.cuMemcpyHtoDAsync_v2(C.CUdeviceptr(dst), unsafe.Pointer(&src[0]), C.size_t(len(src)), c.stream))
}

// CopyDtoHAsync enqueues a copy to page-locked host memory on the stream.
func (c *Context) CopyDtoHAsync(dst []byte, src DevicePtr) error {
	if len(dst) == 0 {
		return nil
	}
	return check("cuMemcpyDtoHAsync", C.cuMemcpyDtoHAsync_v2(unsafe.Pointer(&dst[0]), C.CUdeviceptr(src), C.size_t(len(dst)), c.stream))
}

// Memset8 sets n bytes at dst to v (synchronous with respect to the host).
func (c *Context) Memset8(dst DevicePtr, v byte, n int) error {
	if err := c.Sync(); err != nil {
		return err
	}
	return check("cuMemsetD8", C.cuMemsetD8_v2(C.CUdeviceptr(dst), C.uchar(v), C.size_t(n)))
}

// Memset32 sets n 32-bit words at dst to v.
func (c *Context) Memset32(dst DevicePtr, v uint32, n int) error {
	if err := c.Sync(); err != nil {
		return err
	}
	return check("cuMemsetD32", C.cuMemsetD32_v2(C.CUdeviceptr(dst), C.uint(v), C.size_t(n)))
}

// Sync waits for the context's stream.
func (c *Context) Sync() error {
	return check("cuStreamSynchronize", C.cuStreamSynchronize(c.stream))
}

// Module is a loaded PTX or cubin image.
type Module struct{ m C.CUmodule }

// LoadModule loads a PTX (NUL-terminated text) or cubin image; PTX is compiled by the driver
// for this GPU (and cached by it).
func (c *Context) LoadModule(image []byte) (*Module, error) {
	img := C.CBytes(append(append([]byte(nil), image...), 0))
	defer C.free(img)
	var m C.CUmodule
	if err := check("cuModuleLoadData", C.cuModuleLoadData(&m, img)); err != nil {
		return nil, err
	}
	return &Module{m}, nil
}

// Unload frees the module.
func (m *Module) Unload() error { return check("cuModuleUnload", C.cuModuleUnload(m.m)) }

// Function is a kernel of a module.
type Function struct {
	f    C.CUfunction
	Name string
}

// Function looks up a kernel by its (extern "C") name.
func (m *Module) Function(name string) (*Function, error) {
	cs := C.CString(name)
	defer C.free(unsafe.Pointer(cs))
	var f C.CUfunction
	if err := check("cuModuleGetFunction("+name+")", C.cuModuleGetFunction(&f, m.m, cs)); err != nil {
		return nil, err
	}
	return &Function{f: f, Name: name}, nil
}

// SetMaxDynamicShared allows launches of f with up to n bytes of dynamic shared memory.
func (f *Function) SetMaxDynamicShared(n int) error {
	return check("cuFuncSetAttribute("+f.Name+")", C.cuFuncSetAttribute(f.f, funcAttrMaxDynamicShared, C.int(n)))
}

// Dim3 is a grid or block shape.
type Dim3 struct{ X, Y, Z int }

// Launch enqueues f on the context's stream with parameters packed as the kernel's C
// parameter list (see Args).
func (c *Context) Launch(f *Function, grid, block Dim3, shared int, args []byte) error {
	if len(args) > paramBytes {
		return fmt.Errorf("cuda: %s: %d bytes of parameters", f.Name, len(args))
	}
	p := unsafe.Slice((*byte)(c.params), paramBytes)
	copy(p, args)
	d := func(v int) C.uint { return C.uint(max(v, 1)) }
	return check("cuLaunchKernel("+f.Name+")", C.launch(f.f, d(grid.X), d(grid.Y), d(grid.Z), d(block.X), d(block.Y), d(block.Z),
		C.uint(shared), c.stream, c.params, C.size_t(len(args))))
}

// BeginCapture starts recording the stream's work into a CUDA graph.
func (c *Context) BeginCapture() error {
	return check("cuStreamBeginCapture", C.cuStreamBeginCapture_v2(c.stream, captureModeThreadLocal))
}

// Graph is an instantiated CUDA graph.
type Graph struct {
	g    C.CUgraph
	exec C.CUgraphExec
}

// EndCapture stops recording and instantiates the graph.
func (c *Context) EndCapture() (*Graph, error) {
	var g C.CUgraph
	if err := check("cuStreamEndCapture", C.cuStreamEndCapture(c.stream, &g)); err != nil {
		return nil, err
	}
	var e C.CUgraphExec
	if err := check("cuGraphInstantiate", C.cuGraphInstantiateWithFlags(&e, g, 0)); err != nil {
		C.cuGraphDestroy(g)
		return nil, err
	}
	return &Graph{g: g, exec: e}, nil
}

// LaunchGraph enqueues a replay of the graph on the stream.
func (c *Context) LaunchGraph(g *Graph) error {
	return check("cuGraphLaunch", C.cuGraphLaunch(g.exec, c.stream))
}

// Destroy frees the graph.
func (g *Graph) Destroy() {
	C.cuGraphExecDestroy(g.exec)
	C.cuGraphDestroy(g.g)
}
