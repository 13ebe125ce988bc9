package gguf

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"

	"github.com/gorun-dev/gorun/internal/osutil"
	"github.com/gorun-dev/gorun/quant"
)

// MaxWriteName is the longest tensor name the writer accepts: ggml keeps names in a 64-byte
// buffer with a terminating NUL.
const MaxWriteName = 63

// Writer builds a GGUF v3 file: metadata and tensor descriptions first, then the tensor bytes,
// streamed in the order the tensors were added. The output matches llama.cpp's byte for byte.
type Writer struct {
	align   int
	kv      []KV
	kvIndex map[string]int
	tensors []TensorInfo
	names   map[string]int
}

// NewWriter returns an empty writer with the default alignment of 32.
func NewWriter() *Writer {
	return &Writer{align: DefaultAlignment, kvIndex: map[string]int{}, names: map[string]int{}}
}

// SetAlignment sets the data alignment, a power of two of at most MaxAlignment. A value other
// than 32 is also recorded as general.alignment (uint32), as readers need it.
func (w *Writer) SetAlignment(n int) error {
	if n <= 0 || n&(n-1) != 0 || n > MaxAlignment {
		return fmt.Errorf("gguf: alignment %d is not a power of two of at most %d", n, MaxAlignment)
	}
	if _, had := w.kvIndex[KeyAlignment]; n == DefaultAlignment && !had {
		w.align = n
		w.layout()
		return nil
	}
	return w.Set(KeyAlignment, uint32(n))
}

// Set adds or replaces a metadata entry. v is a Go value ValueOf accepts or a Value (to copy an
// entry from another file). Replacing keeps the key's position.
func (w *Writer) Set(key string, v any) error {
	if key == "" {
		return errors.New("gguf: empty metadata key")
	}
	val, err := ValueOf(v)
	if err != nil {
		return fmt.Errorf("gguf: key %q: %w", key, err)
	}
	if key == KeyAlignment {
		if err := w.applyAlignment(val); err != nil {
			return err
		}
	}
	if i, ok := w.kvIndex[key]; ok {
		w.kv[i].Value = val
		return nil
	}
	w.kvIndex[key] = len(w.kv)
	w.kv = append(w.kv, KV{Key: key, Value: val})
	return nil
}

// applyAlignment validates a general.alignment value and re-lays the tensors out with it.
func (w *Writer) applyAlignment(v Value) error {
	if v.Type() != TypeUint32 || v.bits == 0 || v.bits&(v.bits-1) != 0 || v.bits > MaxAlignment {
		return fmt.Errorf("gguf: %s must be a uint32 power of two of at most %d, got %s %v", KeyAlignment, MaxAlignment, v.Type(), v)
	}
	w.align = int(v.bits)
	w.layout()
	return nil
}

// KV returns the metadata set so far, in order.
func (w *Writer) KV() []KV { return append([]KV(nil), w.kv...) }

// AddTensor declares a tensor; its bytes are supplied later by the data callback of WriteTo or
// WriteFile. Dims are ne0 first and written as given.
func (w *Writer) AddTensor(name string, typ quant.Type, dims []int64) error {
	if err := w.checkTensor(name, typ, dims); err != nil {
		return fmt.Errorf("gguf: tensor %q: %w", name, err)
	}
	size, err := tensorSize(typ, dims)
	if err != nil {
		return fmt.Errorf("gguf: tensor %q: %w", name, err)
	}
	w.names[name] = len(w.tensors)
	w.tensors = append(w.tensors, TensorInfo{Name: name, Type: typ, Dims: append([]int64(nil), dims...), Size: size})
	w.layout()
	return nil
}

func (w *Writer) checkTensor(name string, typ quant.Type, dims []int64) error {
	switch {
	case name == "":
		return errors.New("empty name")
	case len(name) > MaxWriteName:
		return fmt.Errorf("name is %d bytes, longer than %d", len(name), MaxWriteName)
	case len(dims) < 1 || len(dims) > MaxDims:
		return fmt.Errorf("%d dimensions, want 1 to %d", len(dims), MaxDims)
	case !typ.Known():
		return fmt.Errorf("unknown tensor type %d", uint32(typ))
	}
	if _, dup := w.names[name]; dup {
		return errors.New("duplicate tensor name")
	}
	for j, d := range dims {
		if d < 1 {
			return fmt.Errorf("dimension %d is %d, want at least 1", j, d)
		}
	}
	return nil
}

// layout assigns offsets: each tensor starts where the previous one ends, padded to the
// alignment, as llama.cpp requires. Sizes were checked when added; the running sum is checked
// here because a different alignment changes it.
func (w *Writer) layout() {
	var off int64
	for i := range w.tensors {
		w.tensors[i].Offset = off
		off = saturatingAdd(off, padded(w.tensors[i].Size, int64(w.align)))
	}
}

func padded(n, a int64) int64 {
	if n > math.MaxInt64-a {
		return math.MaxInt64
	}
	return alignUp(n, a)
}

// Tensors returns the declared tensors with their offsets in the data section.
func (w *Writer) Tensors() []TensorInfo {
	out := make([]TensorInfo, len(w.tensors))
	for i, ti := range w.tensors {
		ti.Dims = append([]int64(nil), ti.Dims...)
		out[i] = ti
	}
	return out
}

// WriteTo writes the file to out. data is called once per tensor, in order, and must return
// exactly ti.Size bytes; the slice may be reused by the callback once it is called again.
func (w *Writer) WriteTo(out io.Writer, data func(i int, ti *TensorInfo) ([]byte, error)) (int64, error) {
	return w.WriteStream(out, func(i int, ti *TensorInfo, dst io.Writer) error {
		b, err := data(i, ti)
		if err != nil {
			return err
		}
		if int64(len(b)) != ti.Size {
			return fmt.Errorf("data is %d bytes, want %d", len(b), ti.Size)
		}
		_, err = dst.Write(b)
		return err
	})
}

// WriteStream is WriteTo for producers that generate a tensor piece by piece: data writes the
// tensor's ti.Size bytes to dst in any number of writes, so no tensor need be held whole.
func (w *Writer) WriteStream(out io.Writer, data func(i int, ti *TensorInfo, dst io.Writer) error) (int64, error) {
	cw := &countingWriter{w: out}
	bw := bufio.NewWriterSize(cw, 1<<20)
	err := w.writeAll(bw, data)
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	return cw.n, err
}

func (w *Writer) writeAll(bw *bufio.Writer, data func(i int, ti *TensorInfo, dst io.Writer) error) error {
	if _, err := w.layoutFits(); err != nil {
		return err
	}
	if _, err := bw.Write(w.header()); err != nil {
		return err
	}
	tw := &tensorWriter{w: bw}
	for i := range w.tensors {
		ti := w.tensors[i] // a copy: the callback cannot disturb the layout
		ti.Dims = append([]int64(nil), ti.Dims...)
		tw.left = ti.Size
		if err := data(i, &ti, tw); err != nil {
			return fmt.Errorf("gguf: tensor %q: %w", ti.Name, err)
		}
		if tw.left != 0 {
			return fmt.Errorf("gguf: tensor %q: data is %d bytes, want %d", ti.Name, ti.Size-tw.left, ti.Size)
		}
		if err := writeZeros(bw, padded(ti.Size, int64(w.align))-ti.Size); err != nil {
			return err
		}
	}
	return nil
}

// layoutFits reports the data section's size, failing when the tensors' sizes overflow it.
func (w *Writer) layoutFits() (int64, error) {
	var total int64
	for _, ti := range w.tensors {
		p := padded(ti.Size, int64(w.align))
		if p == math.MaxInt64 || total > math.MaxInt64-p {
			return 0, fmt.Errorf("gguf: tensor data overflows a 64-bit size at %q", ti.Name)
		}
		total += p
	}
	return total, nil
}

// header encodes everything before the data section, padding included.
func (w *Writer) header() []byte {
	b := make([]byte, 0, 64<<10)
	b = append(b, "GGUF"...)
	b = binary.LittleEndian.AppendUint32(b, 3)
	b = binary.LittleEndian.AppendUint64(b, uint64(len(w.tensors)))
	b = binary.LittleEndian.AppendUint64(b, uint64(len(w.kv)))
	for _, kv := range w.kv {
		b = appendString(b, kv.Key)
		b = appendTypedValue(b, kv.Value)
	}
	for _, ti := range w.tensors {
		b = appendString(b, ti.Name)
		b = binary.LittleEndian.AppendUint32(b, uint32(len(ti.Dims)))
		for _, d := range ti.Dims {
			b = binary.LittleEndian.AppendUint64(b, uint64(d))
		}
		b = binary.LittleEndian.AppendUint32(b, uint32(ti.Type))
		b = binary.LittleEndian.AppendUint64(b, uint64(ti.Offset))
	}
	return append(b, make([]byte, alignUp(int64(len(b)), int64(w.align))-int64(len(b)))...)
}

func appendString(b []byte, s string) []byte {
	b = binary.LittleEndian.AppendUint64(b, uint64(len(s)))
	return append(b, s...)
}

func appendTypedValue(b []byte, v Value) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(v.typ))
	if v.typ == TypeArray {
		return appendArray(b, v)
	}
	return appendScalar(b, v)
}

func appendScalar(b []byte, v Value) []byte {
	switch v.typ.fixedSize() {
	case 1:
		return append(b, byte(v.bits))
	case 2:
		return binary.LittleEndian.AppendUint16(b, uint16(v.bits))
	case 4:
		return binary.LittleEndian.AppendUint32(b, uint32(v.bits))
	case 8:
		return binary.LittleEndian.AppendUint64(b, v.bits)
	}
	return appendString(b, v.str)
}

// appendArray writes element type, count and elements (the array tag itself is already out).
func appendArray(b []byte, v Value) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(v.elem))
	b = binary.LittleEndian.AppendUint64(b, uint64(v.Len()))
	switch a := v.arr.(type) {
	case []string:
		for _, s := range a {
			b = appendString(b, s)
		}
	case packedStrings:
		b = append(b, a.raw...) // already in the file's encoding
	case []Value:
		for _, e := range a {
			b = appendArray(b, e)
		}
	default:
		// Fixed-size elements, bools included (one byte, 0 or 1).
		b, _ = binary.Append(b, binary.LittleEndian, a)
	}
	return b
}

// zeros is padding, written in large pieces.
var zeros [64 << 10]byte

func writeZeros(w io.Writer, n int64) error {
	for n > 0 {
		k := min(n, int64(len(zeros)))
		if _, err := w.Write(zeros[:k]); err != nil {
			return err
		}
		n -= k
	}
	return nil
}

// WriteFile writes the file to path atomically: into the temporary file TempPath(path) in the
// same directory, synced, renamed over path, and the directory synced. On any error the
// temporary file is removed and path is left as it was. Where path is a symbolic link, the
// file it points to is replaced (the link stays); an existing file keeps its permissions,
// a new one gets 0666 less the umask. A directory or other non-regular path is refused
// (ResolveOutput) before anything is written.
func (w *Writer) WriteFile(path string, data func(i int, ti *TensorInfo) ([]byte, error)) error {
	return w.writeFile(path, func(out io.Writer) error {
		_, err := w.WriteTo(out, data)
		return err
	})
}

// WriteFileStream is WriteFile with a streaming data callback, as WriteStream.
func (w *Writer) WriteFileStream(path string, data func(i int, ti *TensorInfo, dst io.Writer) error) error {
	return w.writeFile(path, func(out io.Writer) error {
		_, err := w.WriteStream(out, data)
		return err
	})
}

func (w *Writer) writeFile(path string, write func(io.Writer) error) (err error) {
	target, err := ResolveOutput(path)
	if err != nil {
		return err
	}
	perm := os.FileMode(0o666) // less the umask, applied by the system
	keep := false
	if st, err := os.Stat(target); err == nil {
		perm, keep = st.Mode().Perm(), true
	}
	tmpPath := TempPath(target)
	// A previous run that was killed may have left the temporary file: replace it. O_EXCL then
	// guarantees the file written is a new one (never a link someone planted at that name).
	if err := os.Remove(tmpPath); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("gguf: removing the leftover %s: %w", tmpPath, err)
	}
	tmp, err := os.OpenFile(tmpPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, perm)
	if err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	defer func() {
		if err != nil {
			tmp.Close()
			os.Remove(tmpPath)
		}
	}()
	if err = write(tmp); err != nil {
		return err
	}
	if keep { // the creation mode was reduced by the umask; an existing file keeps its own
		if err = tmp.Chmod(perm); err != nil {
			return fmt.Errorf("gguf: %w", err)
		}
	}
	if err = tmp.Sync(); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if err = tmp.Close(); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if err = os.Rename(tmpPath, target); err != nil {
		return fmt.Errorf("gguf: %w", err)
	}
	if err := osutil.SyncDir(filepath.Dir(target)); err != nil {
		return fmt.Errorf("gguf: syncing the directory of %s: %w", target, err)
	}
	return nil
}

// TempPath is the temporary file WriteFile writes before renaming it to path: path + ".tmp".
// The name is predictable so that a run that was killed leaves at most one, which the next
// run replaces, and so that a signal handler can remove it.
func TempPath(path string) string { return path + ".tmp" }

// ResolveOutput returns the file WriteFile will write for path: path itself, or, when path is
// a symbolic link (even a dangling one), the file it points to. It fails when that is a
// directory or another non-regular file, or when its directory does not exist, so that a
// caller can check an output before doing the work that produces it.
func ResolveOutput(path string) (string, error) {
	target := path
	for hops := 0; ; hops++ {
		st, err := os.Lstat(target)
		if errors.Is(err, os.ErrNotExist) {
			break
		}
		if err != nil {
			return "", fmt.Errorf("gguf: %w", err)
		}
		if st.Mode()&os.ModeSymlink == 0 {
			if !st.Mode().IsRegular() {
				return "", fmt.Errorf("gguf: output %s is not a regular file", path)
			}
			break
		}
		if hops == 40 {
			return "", fmt.Errorf("gguf: output %s: too many levels of symbolic links", path)
		}
		link, err := os.Readlink(target)
		if err != nil {
			return "", fmt.Errorf("gguf: %w", err)
		}
		if !filepath.IsAbs(link) {
			link = filepath.Join(filepath.Dir(target), link)
		}
		target = link
	}
	if st, err := os.Stat(filepath.Dir(target)); err != nil {
		return "", fmt.Errorf("gguf: output directory: %w", err)
	} else if !st.IsDir() {
		return "", fmt.Errorf("gguf: output %s: %s is not a directory", path, filepath.Dir(target))
	}
	return target, nil
}

// countingWriter counts the bytes that reach the destination.
type countingWriter struct {
	w io.Writer
	n int64
}

func (c *countingWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// tensorWriter passes one tensor's bytes through and refuses more than its size.
type tensorWriter struct {
	w    io.Writer
	left int64
}

func (t *tensorWriter) Write(p []byte) (int, error) {
	if int64(len(p)) > t.left {
		return 0, fmt.Errorf("data is longer than the tensor's %d remaining bytes", t.left)
	}
	n, err := t.w.Write(p)
	t.left -= int64(n)
	return n, err
}
