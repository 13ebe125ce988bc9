// Package quantize is llama-quantize's policy, as llama.cpp keeps it in llama-quant.cpp
// rather than in ggml: the recipes a model file is made with (FileType, llama_ftype), the type
// each tensor gets under a recipe (ChooseType: llama-quantize's rules for the tensors gorun's
// architectures have), and File, which streams a GGUF model through them into a quantized
// copy. The block formats and the quantizers themselves (the reference ones and the
// error-minimizing search, quant.Search) are quant's. Calibration statistics come in as data
// (Options.Importance, from llm's Model.CollectImportance), so this package, and convert with
// it, does not depend on the runtime.
package quantize

import (
	"cmp"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/internal/osutil"
	"github.com/gorun-dev/gorun/quant"
)

// Options configure File.
type Options struct {
	FileType FileType
	Threads  int  // goroutines quantizing rows (<= 0: one per core)
	Pure     bool // every quantized tensor gets the recipe's default type, no mixing
	// Reference uses the reference quantizers (llama.cpp's bytes exactly) instead of gorun's
	// error-minimizing ones.
	Reference bool
	// Search is the error-minimizing quantizers' search: quant.SearchGrid (the zero value,
	// gorun's default: a grid of candidate scales) or quant.SearchFull (complete sweeps: 2-8x
	// the time for 0.1-0.25% less error; other bytes; see quant/SPEED.md). Either gives the
	// same bytes for any Threads. Ignored with Reference.
	Search quant.Search
	// AllowRequantize lets quantized input tensors be dequantized and quantized again (which
	// compounds the errors). Without it, a quantized input tensor that the plan gives another
	// type is an error; one that keeps its type is copied as it is (llama-quantize's rule).
	AllowRequantize bool
	// OutputTensorType, when set, is output.weight's type (and a tied token_embd.weight's in
	// the mixed recipes): llama-quantize's --output-tensor-type.
	OutputTensorType *quant.Type
	// TokenEmbeddingType, when set, is token_embd.weight's type: --token-embedding-type.
	TokenEmbeddingType *quant.Type
	// LeaveOutputTensor copies output.weight as it is: --leave-output-tensor.
	LeaveOutputTensor bool
	// Importance gives, per tensor name, a weight per input column (the mean square of the
	// activations that multiply it, from a calibration run such as llm's
	// Model.CollectImportance, or an importance matrix file: IMatrix.Weights); the quantizer
	// then minimizes the error where it matters to the output. A 3-D (expert) tensor takes
	// one weight per column of each expert, one after the other, or one set for all. An entry
	// for a tensor the model lacks, or of the wrong size, is an error.
	Importance map[string][]float32
	// Moments, per tensor name, are the second moments of the calibration inputs of a matrix
	// (Moments.Sum = sum x x^T); a matrix that has them is quantized with GPTQ-style error
	// compensation (gptq.go), its blocks' search weighted by the moments' diagonal instead of
	// Importance. Ignored with Reference.
	Moments map[string]*Moments
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

// Report sums up a quantization.
type Report struct {
	Tensors           []TensorReport
	InBytes, OutBytes int64 // tensor data
	FileBytes         int64 // the output file
	Params            int64
}

// File writes a copy of the model in with its tensors quantized by the recipe. The output
// is written to the temporary file gguf.TempPath(out) (out + ".tmp", beside the file a
// symbolic link out points to) and renamed over out only when complete, so a failure leaves no
// partial file; see gguf.Writer.WriteFile for permissions and links. in is never overwritten,
// and an out that cannot be written (a directory) is refused before any work.
func File(in, out string, opts Options) (Report, error) {
	var rep Report
	if err := osutil.CheckThreads(opts.Threads); err != nil {
		return rep, err
	}
	if opts.Search != quant.SearchFull && opts.Search != quant.SearchGrid {
		return rep, fmt.Errorf("unknown quantizer search %v", opts.Search)
	}
	if err := checkOverrides(opts); err != nil {
		return rep, err
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
	if err := checkImportance(f, opts.Importance); err != nil {
		return rep, fmt.Errorf("%s: %w", in, err)
	}
	if err := checkMoments(f, opts.Moments); err != nil {
		return rep, fmt.Errorf("%s: %w", in, err)
	}
	w, order, plans, err := planQuantization(f, opts)
	if err != nil {
		return rep, fmt.Errorf("%s: %w", in, err)
	}
	q := &quantizer{f: f, opts: opts, threads: opts.Threads}
	if q.threads <= 0 {
		q.threads = osutil.DefaultThreads()
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
// Tensors are written in llama-quantize's order (by layer, then name), which is also the order
// its rules count tensors in; order maps each output tensor to its index in f.
func planQuantization(f *gguf.File, opts Options) (w *gguf.Writer, order []int, plans []TensorPlan, err error) {
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
	info := MixInfoOf(f)
	info.Pure, info.HasImportance = opts.Pure, opts.Importance != nil
	mixer := NewMixer(opts.FileType, info)
	order = make([]int, len(f.Tensors))
	for i := range order {
		order[i] = i
	}
	slices.SortStableFunc(order, func(a, b int) int { return compareTensorNames(f.Tensors[a].Name, f.Tensors[b].Name) })
	plans = make([]TensorPlan, len(f.Tensors))
	for i, src := range order {
		ti := &f.Tensors[src]
		p, err := mixer.ChooseType(ti.Name, ti.Dims, ti.Type)
		if err != nil {
			return nil, nil, nil, err
		}
		p = overrideType(p, ti.Name, ti.Dims, ti.Type, opts, info)
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

// compareTensorNames is llama.cpp's order of a model's tensors (weight_name_comparer): by layer
// (tensors outside the blocks first), then by name.
func compareTensorNames(a, b string) int {
	if la, lb := LayerOf(a), LayerOf(b); la != lb {
		return cmp.Compare(la, lb)
	}
	return strings.Compare(a, b)
}
