package quantize

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"slices"
	"sync"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/quant"
)

// quantizer converts tensors one at a time, reusing its buffers.
type quantizer struct {
	f       *gguf.File
	opts    Options
	threads int
	f32     []float32
	out     []byte
}

// tensor returns the output bytes of tensor i of the input (valid until the next call).
func (q *quantizer) tensor(i int, p TensorPlan) ([]byte, error) {
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
	// A 3-D tensor's importance may hold one set of columns per expert (llama-imatrix's
	// layout for expert matrices): rows r of expert r/rowsPerExpert take that expert's set.
	rowsPerExpert := rows
	if imp != nil && len(imp) != rowLen {
		if len(ti.Dims) < 3 || int64(len(imp)) != int64(rowLen)*ti.Dims[2] {
			return nil, fmt.Errorf("importance has %d values, the tensor %d columns", len(imp), rowLen)
		}
		rowsPerExpert = int(ti.Dims[1])
	}
	from, _ := quant.FormatOf(ti.Type)
	to, _ := quant.FormatOf(p.Type)
	search := to.QuantizeSearch
	if q.opts.Reference {
		search = nil
	}
	scratch := make([]gptqScratch, q.threads)
	var u []float64 // GPTQ's factor, when the tensor has second moments
	if mo := q.opts.Moments[ti.Name]; mo != nil && search != nil {
		if len(ti.Dims) > 2 {
			return nil, fmt.Errorf("second moments for a %d-D tensor: GPTQ takes matrices", len(ti.Dims))
		}
		if u, imp, err = gptqFactor(mo); err != nil {
			return nil, err
		}
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
				switch {
				case u != nil:
					err = gptqRow(to, dst, buf, u, imp, q.opts.Search, &scratch[t])
				case search != nil:
					err = search(dst, buf, expertImportance(imp, r/rowsPerExpert, rowLen), q.opts.Search)
				default:
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

// maxBlock is the largest block of values a quantized type has (the K-quants' super-block).
const maxBlock = quant.QK_K

// expertImportance is expert e's columns of a tensor's importance (all of it when it holds
// one set).
func expertImportance(imp []float32, e, rowLen int) []float32 {
	if len(imp) <= rowLen {
		return imp
	}
	return imp[e*rowLen : (e+1)*rowLen]
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
