package llm

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/quant"
)

// QuantizeOptions configure Quantize.
type QuantizeOptions struct {
	FileType quant.FileType
	Threads  int  // goroutines quantizing rows (<= 0: one per core)
	Pure     bool // every quantized tensor gets the recipe's default type, no mixing
	// Reference uses the reference quantizers (llama.cpp's bytes exactly) instead of gorun's
	// error-minimizing ones.
	Reference bool
	// Search is the error-minimizing quantizers' search: quant.SearchFull (the zero value:
	// complete sweeps, gorun's default bytes) or quant.SearchFast (a grid of candidate scales:
	// several times faster, different bytes, nearly the same quality; see quant/SPEED.md).
	// Ignored with Reference.
	Search quant.Search
	// AllowRequantize lets quantized input tensors be dequantized and quantized again (which
	// compounds the errors).
	AllowRequantize bool
	// Importance gives, per tensor name, a weight per input column (the mean square of the
	// activations that multiply it, from a calibration run); the quantizer then minimizes the
	// error where it matters to the output.
	Importance map[string][]float32
	// Progress is called after each tensor.
	Progress func(done, total int64, t TensorReport)
}

// TensorReport says what happened to one tensor.
type TensorReport struct {
	Name      string
	From, To  quant.Type
	InBytes   int64
	OutBytes  int64
	Quantized bool
	Note      string // fallbacks and other remarks
}

// QuantizeReport sums up a quantization.
type QuantizeReport struct {
	Tensors           []TensorReport
	InBytes, OutBytes int64 // tensor data
	FileBytes         int64 // the output file
	Params            int64
}

// Quantize writes a copy of the model in with its tensors quantized by the recipe. The output
// is written to the temporary file gguf.TempPath(out) (out + ".tmp", beside the file a
// symbolic link out points to) and renamed over out only when complete, so a failure leaves no
// partial file; see gguf.Writer.WriteFile for permissions and links. in is never overwritten,
// and an out that cannot be written (a directory) is refused before any work.
func Quantize(in, out string, opts QuantizeOptions) (QuantizeReport, error) {
	var rep QuantizeReport
	if err := checkThreads(opts.Threads); err != nil {
		return rep, err
	}
	if opts.Search != quant.SearchFull && opts.Search != quant.SearchFast {
		return rep, fmt.Errorf("unknown quantizer search %v", opts.Search)
	}
	if err := refuseSameFile(in, out); err != nil {
		return rep, err
	}
	if _, err := gguf.ResolveOutput(out); err != nil {
		return rep, err
	}
	f, err := gguf.Open(in)
	if err != nil {
		return rep, err
	}
	defer f.Close()
	w, order, plans, err := planQuantization(f, opts)
	if err != nil {
		return rep, fmt.Errorf("%s: %w", in, err)
	}
	q := &quantizer{f: f, opts: opts, threads: opts.Threads}
	if q.threads <= 0 {
		q.threads = defaultThreads()
	}
	for i := range f.Tensors {
		rep.InBytes += f.Tensors[i].Size
		rep.Params += f.Tensors[i].Elements()
	}
	var done int64
	err = w.WriteFile(out, func(i int, ti *gguf.TensorInfo) ([]byte, error) {
		data, err := q.tensor(order[i], plans[i])
		if err != nil {
			return nil, fmt.Errorf("tensor %q: %w", ti.Name, err)
		}
		src := &f.Tensors[order[i]]
		tr := TensorReport{Name: ti.Name, From: src.Type, To: ti.Type, InBytes: src.Size, OutBytes: int64(len(data)),
			Quantized: plans[i].Quantize, Note: plans[i].Note}
		rep.Tensors = append(rep.Tensors, tr)
		rep.OutBytes += tr.OutBytes
		done += src.Size
		if opts.Progress != nil {
			opts.Progress(done, rep.InBytes, tr)
		}
		return data, nil
	})
	if err != nil {
		return rep, err
	}
	if st, err := os.Stat(out); err == nil {
		rep.FileBytes = st.Size()
	}
	return rep, nil
}

// refuseSameFile fails when out names the same file as in (directly or through a link).
func refuseSameFile(in, out string) error {
	a, err := os.Stat(in)
	if err != nil {
		return err
	}
	if b, err := os.Stat(out); err == nil && os.SameFile(a, b) {
		return fmt.Errorf("refusing to overwrite the input %s", in)
	}
	if filepath.Clean(in) == filepath.Clean(out) {
		return fmt.Errorf("refusing to overwrite the input %s", in)
	}
	return nil
}

// planQuantization copies the metadata, sets the recipe's keys, and decides every tensor's type.
// Tensors are written in llama-quantize's order (by layer, then name); order maps each output
// tensor to its index in f.
func planQuantization(f *gguf.File, opts QuantizeOptions) (w *gguf.Writer, order []int, plans []quant.TensorPlan, err error) {
	w = gguf.NewWriter()
	if f.Alignment != gguf.DefaultAlignment {
		if err := w.SetAlignment(f.Alignment); err != nil {
			return nil, nil, nil, err
		}
	}
	// The recipe's keys go last, where llama-quantize puts them.
	for _, kv := range f.KV {
		if kv.Key == "general.quantization_version" || kv.Key == "general.file_type" {
			continue
		}
		if err := w.Set(kv.Key, kv.Value); err != nil {
			return nil, nil, nil, err
		}
	}
	if err := w.Set("general.quantization_version", uint32(2)); err != nil {
		return nil, nil, nil, err
	}
	if err := w.Set("general.file_type", uint32(opts.FileType)); err != nil {
		return nil, nil, nil, err
	}
	info := quant.MixInfo{HasOutput: f.Tensor("output.weight") != nil, Pure: opts.Pure}
	if arch, err := f.String("general.architecture"); err == nil {
		if n, err := f.Uint(arch + ".block_count"); err == nil && n < 1<<16 {
			info.NLayer = int(n)
		}
	}
	order = make([]int, len(f.Tensors))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int {
		na, nb := f.Tensors[a].Name, f.Tensors[b].Name
		if la, lb := quant.LayerOf(na), quant.LayerOf(nb); la != lb {
			return cmp.Compare(la, lb)
		}
		return strings.Compare(na, nb)
	})
	plans = make([]quant.TensorPlan, len(f.Tensors))
	for i, src := range order {
		ti := &f.Tensors[src]
		p := quant.ChooseType(opts.FileType, ti.Name, ti.Dims, ti.Type, info)
		if p.Quantize {
			if ti.Type.Quantized() && !opts.AllowRequantize {
				return nil, nil, nil, fmt.Errorf("tensor %q is already %v; requantizing compounds the error (allow it with --allow-requantize, or start from an f16/f32 file)", ti.Name, ti.Type)
			}
			if fm, err := quant.FormatOf(p.Type); err != nil || fm.Quantize == nil {
				return nil, nil, nil, fmt.Errorf("tensor %q: cannot quantize to %v", ti.Name, p.Type)
			}
			if fm, err := quant.FormatOf(ti.Type); err != nil || fm.Dequantize == nil {
				return nil, nil, nil, fmt.Errorf("tensor %q: cannot read type %v", ti.Name, ti.Type)
			}
		}
		plans[i] = p
		if err := w.AddTensor(ti.Name, p.Type, ti.Dims); err != nil {
			return nil, nil, nil, err
		}
	}
	return w, order, plans, nil
}

// quantizer converts tensors one at a time, reusing its buffers.
type quantizer struct {
	f       *gguf.File
	opts    QuantizeOptions
	threads int
	f32     []float32
	out     []byte
}

// tensor returns the output bytes of tensor i of the input (valid until the next call).
func (q *quantizer) tensor(i int, p quant.TensorPlan) ([]byte, error) {
	ti := &q.f.Tensors[i]
	src := q.f.Data(ti)
	if !p.Quantize {
		return src, nil
	}
	n := int(ti.Elements())
	rowLen := int(ti.Dims[0])
	rows := n / rowLen
	rowOut, err := p.Type.RowSize(int64(rowLen))
	if err != nil {
		return nil, err
	}
	rowIn, _ := ti.Type.RowSize(int64(rowLen))
	q.out = grow(q.out, rows*int(rowOut))
	q.f32 = growF32(q.f32, q.threads*rowLen)
	imp := q.importance(ti)
	if imp != nil && len(imp) != rowLen {
		return nil, fmt.Errorf("importance has %d columns, the tensor %d", len(imp), rowLen)
	}
	from, _ := quant.FormatOf(ti.Type)
	to, _ := quant.FormatOf(p.Type)
	better := to.Quantizer(q.opts.Search)
	if q.opts.Reference {
		better = nil
	}
	var wg sync.WaitGroup
	errs := make([]error, q.threads)
	for t := 0; t < q.threads; t++ {
		wg.Add(1)
		go func(t int) {
			defer wg.Done()
			buf := q.f32[t*rowLen : (t+1)*rowLen]
			for r := t; r < rows; r += q.threads {
				from.Dequantize(buf, src[r*int(rowIn):(r+1)*int(rowIn)])
				dst := q.out[r*int(rowOut) : (r+1)*int(rowOut)]
				var err error
				if better != nil {
					err = better(dst, buf, imp)
				} else {
					err = to.Quantize(dst, buf)
				}
				if err == nil {
					err = checkStored(to, dst, buf)
				}
				if err != nil {
					errs[t] = fmt.Errorf("row %d: %w", r, err)
					return
				}
			}
		}(t)
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return q.out, nil
}

func grow(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}

func growF32(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

// checkStored reads a quantized row back and fails if a value came out infinite: a value
// beyond what the format's float16 scales can express.
func checkStored(f *quant.Format, stored []byte, scratch []float32) error {
	if finite, known := quant.ScalesFinite(f.Type, stored); known {
		if !finite {
			return fmt.Errorf("values too large for %v (its scales are float16)", f.Type)
		}
		return nil
	}
	f.Dequantize(scratch, stored)
	for _, v := range scratch {
		if math.IsInf(float64(v), 0) || math.IsNaN(float64(v)) {
			return fmt.Errorf("values too large for %v (its scales are float16)", f.Type)
		}
	}
	return nil
}

// importance returns the calibration statistics of a tensor. A tensor that is a byte-for-byte
// copy of another (GPT-2's tied embeddings: llama.cpp's converter stores the one matrix as
// token_embd.weight and as output.weight, and only the output copy meets activations) shares
// the copy's statistics: they describe the same columns. Measured on the tiny model's q4_k_m:
// KL from f16 0.010904 -> 0.010734 (quant/QUALITY.md).
func (q *quantizer) importance(ti *gguf.TensorInfo) []float32 {
	if imp, ok := q.opts.Importance[ti.Name]; ok || q.opts.Importance == nil {
		return imp
	}
	for i := range q.f.Tensors {
		o := &q.f.Tensors[i]
		imp, ok := q.opts.Importance[o.Name]
		if ok && o != ti && o.Type == ti.Type && slices.Equal(o.Dims, ti.Dims) && bytes.Equal(q.f.Data(o), q.f.Data(ti)) {
			return imp
		}
	}
	return nil
}
