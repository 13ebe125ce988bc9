package quantize

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"slices"
	"strings"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/internal/osutil"
)

// Importance matrices in llama.cpp's legacy file format (llama-imatrix's imatrix.dat, as
// written and read by llama.cpp c392e509's examples/imatrix/imatrix.cpp and read by
// examples/quantize/quantize.cpp). All integers are little-endian int32, values float32:
//
//	n_entries
//	n_entries times: name_len, name bytes, ncall, nval, nval values
//	last_call                    (optional, with what follows: the number of chunks)
//	dataset_len, dataset bytes   (the calibration text's file name)
//
// An entry's values are, per input column of the weight matrix, the mean of the squared
// activations times ncall (llama-imatrix keeps sum x^2 and a count per column, and stores
// sum/count*ncall, so files of different runs add up); ncall is the number of matrix
// multiplications that were observed (one per chunk when the chunk fits one batch).
// llama-quantize divides the values by ncall: the quantizers weigh each column by its mean
// square activation. That snapshot of llama.cpp has no GGUF imatrix format.

// IMatrix is an importance matrix file's contents.
type IMatrix struct {
	Entries []IMatrixEntry
	Chunks  int    // llama-imatrix's last_call: chunks processed (0: not recorded)
	Dataset string // the calibration text's file name, as llama-imatrix records it
}

// IMatrixEntry is one weight matrix's statistics, as stored.
type IMatrixEntry struct {
	Name   string
	Calls  int       // ncall
	Values []float32 // per input column (times the experts of a 3-D tensor): mean square x Calls
}

// Limits of what ParseIMatrix accepts: ggml's tensor names are at most 63 bytes (GGML_MAX_NAME,
// with room to spare here), and no weight matrix has a billion input columns.
const (
	maxIMatrixName    = 1024
	maxIMatrixDataset = 1 << 20
	maxIMatrixFile    = 4 << 30
)

// Weights returns the per-column mean squares the quantizers take (Options.Importance):
// each entry's values divided by its calls, as llama-quantize does.
func (im *IMatrix) Weights() map[string][]float32 {
	out := make(map[string][]float32, len(im.Entries))
	for _, e := range im.Entries {
		w := slices.Clone(e.Values)
		if e.Calls > 0 {
			for i := range w {
				w[i] /= float32(e.Calls)
			}
		}
		out[e.Name] = w
	}
	return out
}

// ReadIMatrix reads an importance matrix file.
func ReadIMatrix(path string) (*IMatrix, error) {
	f, err := osutil.OpenRegular(path) // a FIFO or device is refused without blocking
	if err != nil {
		return nil, fmt.Errorf("imatrix: %w", err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if st.Size() > maxIMatrixFile {
		return nil, fmt.Errorf("imatrix %s: %d bytes, more than any importance matrix (%d)", path, st.Size(), int64(maxIMatrixFile))
	}
	b, err := io.ReadAll(io.LimitReader(f, maxIMatrixFile+1))
	if err != nil {
		return nil, err
	}
	im, err := ParseIMatrix(b)
	if err != nil {
		return nil, fmt.Errorf("imatrix %s: %w", path, err)
	}
	return im, nil
}

// imatrixReader reads the format's fields, failing on the first short read.
type imatrixReader struct {
	b   []byte
	off int
	err error
}

func (r *imatrixReader) int32(what string) int {
	if r.err != nil {
		return 0
	}
	if len(r.b)-r.off < 4 {
		r.err = fmt.Errorf("truncated at byte %d: want the %s (4 bytes), %d left", r.off, what, len(r.b)-r.off)
		return 0
	}
	v := int32(binary.LittleEndian.Uint32(r.b[r.off:]))
	r.off += 4
	return int(v)
}

// bytes returns the next n bytes, n checked against what is left before anything is allocated.
func (r *imatrixReader) bytes(n, max int, what string) []byte {
	if r.err != nil {
		return nil
	}
	switch {
	case n < 0 || n > max:
		r.err = fmt.Errorf("%s of %d bytes at byte %d: want 0..%d", what, n, r.off, max)
	case len(r.b)-r.off < n:
		r.err = fmt.Errorf("truncated at byte %d: the %s needs %d bytes, %d left", r.off, what, n, len(r.b)-r.off)
	default:
		r.off += n
		return r.b[r.off-n : r.off]
	}
	return nil
}

// ParseIMatrix decodes an importance matrix file, checking every count against the bytes
// there are: a truncated or hostile file is an error naming what is wrong, never a panic or
// an allocation larger than the file.
func ParseIMatrix(b []byte) (*IMatrix, error) {
	r := &imatrixReader{b: b}
	n := r.int32("entry count")
	switch {
	case r.err != nil:
		return nil, r.err
	case n < 1:
		return nil, fmt.Errorf("entry count %d: want at least 1", n)
	case n > len(b)/17: // an entry takes at least 17 bytes
		return nil, fmt.Errorf("entry count %d, but a file of %d bytes holds at most %d entries (truncated?)", n, len(b), len(b)/17)
	}
	im := &IMatrix{Entries: make([]IMatrixEntry, 0, max(n, 0))}
	seen := map[string]bool{}
	for i := 0; i < n && r.err == nil; i++ {
		e, err := r.entry(i)
		if err != nil {
			return nil, err
		}
		if seen[e.Name] {
			return nil, fmt.Errorf("entry %d: %q appears twice", i, e.Name)
		}
		seen[e.Name] = true
		im.Entries = append(im.Entries, e)
	}
	if r.err == nil && r.off < len(b) { // the newer files' trailer
		im.Chunks = r.int32("chunk count")
		im.Dataset = string(r.bytes(r.int32("dataset name length"), maxIMatrixDataset, "dataset name"))
		if r.err == nil && im.Chunks < 0 {
			return nil, fmt.Errorf("chunk count %d is negative", im.Chunks)
		}
		if r.err == nil && r.off != len(b) {
			return nil, fmt.Errorf("%d bytes after the end of the data", len(b)-r.off)
		}
	}
	if r.err != nil {
		return nil, r.err
	}
	return im, nil
}

func (r *imatrixReader) entry(i int) (IMatrixEntry, error) {
	var e IMatrixEntry
	name := r.bytes(r.int32("name length"), maxIMatrixName, "name")
	e.Calls = r.int32("call count")
	nval := r.int32("value count")
	if r.err != nil {
		return e, fmt.Errorf("entry %d: %w", i, r.err)
	}
	e.Name = string(name)
	switch {
	case e.Name == "" || strings.ContainsRune(e.Name, 0):
		return e, fmt.Errorf("entry %d: empty name or a name with a NUL byte", i)
	case e.Calls < 0:
		return e, fmt.Errorf("entry %d (%s): call count %d is negative", i, e.Name, e.Calls)
	case nval < 1 || nval > (len(r.b)-r.off)/4:
		return e, fmt.Errorf("entry %d (%s): %d values, but %d bytes are left", i, e.Name, nval, len(r.b)-r.off)
	}
	raw := r.bytes(4*nval, len(r.b), "values")
	e.Values = make([]float32, nval)
	for j := range e.Values {
		v := math.Float32frombits(binary.LittleEndian.Uint32(raw[4*j:]))
		if !(v >= 0) || math.IsInf(float64(v), 0) {
			return e, fmt.Errorf("entry %d (%s): value %d is %v; mean squares are finite and non-negative", i, e.Name, j, v)
		}
		e.Values[j] = v
	}
	return e, nil
}

// Encode writes the file in llama-imatrix's layout, entries in the order given, with the
// trailer (chunks and dataset name).
func (im *IMatrix) Encode() ([]byte, error) {
	var buf bytes.Buffer
	put := func(v int) { binary.Write(&buf, binary.LittleEndian, int32(v)) }
	if len(im.Entries) == 0 {
		return nil, fmt.Errorf("an importance matrix needs at least one entry")
	}
	put(len(im.Entries))
	for _, e := range im.Entries {
		if e.Name == "" || len(e.Name) > maxIMatrixName || len(e.Values) == 0 || len(e.Values) > math.MaxInt32 || e.Calls < 0 || e.Calls > math.MaxInt32 {
			return nil, fmt.Errorf("imatrix entry %q: bad name, calls (%d) or value count (%d)", e.Name, e.Calls, len(e.Values))
		}
		put(len(e.Name))
		buf.WriteString(e.Name)
		put(e.Calls)
		put(len(e.Values))
		binary.Write(&buf, binary.LittleEndian, e.Values)
	}
	if im.Chunks < 0 || im.Chunks > math.MaxInt32 || len(im.Dataset) > maxIMatrixDataset {
		return nil, fmt.Errorf("imatrix: bad chunk count %d or dataset name of %d bytes", im.Chunks, len(im.Dataset))
	}
	put(im.Chunks)
	put(len(im.Dataset))
	buf.WriteString(im.Dataset)
	return buf.Bytes(), nil
}

// checkImportance compares an importance matrix's entries with the model's tensors: every entry
// must name a matrix of the model and have one value per input column (times the experts of
// a 3-D tensor), so that a file made for another model is refused rather than silently
// misapplied.
func checkImportance(f *gguf.File, imp map[string][]float32) error {
	names := make([]string, 0, len(imp))
	for name := range imp {
		names = append(names, name)
	}
	slices.Sort(names)
	for _, name := range names {
		ti := f.Tensor(name)
		if ti == nil || len(ti.Dims) < 2 {
			return fmt.Errorf("importance for %q, which is not a matrix of this model (made for another model?)", name)
		}
		want := ti.Dims[0]
		if len(ti.Dims) >= 3 {
			want *= ti.Dims[2]
		}
		if int64(len(imp[name])) != want && int64(len(imp[name])) != ti.Dims[0] {
			return fmt.Errorf("importance for %q has %d values; the tensor %v has %d input columns (made for another model?)", name, len(imp[name]), ti.Dims, want)
		}
	}
	return nil
}

// checkMoments rejects second moments for a tensor the model lacks or whose size does not fit
// the tensor's rows.
func checkMoments(f *gguf.File, mom map[string]*Moments) error {
	for name, m := range mom {
		ti := f.Tensor(name)
		if ti == nil {
			return fmt.Errorf("second moments for %s, which the model does not have", name)
		}
		if m == nil || int64(m.Cols) != ti.Dims[0] || len(m.Sum) != m.Cols*m.Cols {
			return fmt.Errorf("second moments for %s do not fit its %d columns", name, ti.Dims[0])
		}
	}
	return nil
}
