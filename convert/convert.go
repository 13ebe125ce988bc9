// Package convert turns a Hugging Face GPT-2 checkpoint (config.json, safetensors weights and
// a tokenizer) into the GGUF file llama.cpp's convert_hf_to_gguf.py writes for it: the same
// metadata keys and values in the same order, the same tensor names, order, shapes and types,
// and the same bytes (float32 to float16 rounded as numpy rounds).
package convert

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"strings"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/quant"
	"github.com/gorun-dev/gorun/quantize"
	"github.com/gorun-dev/gorun/safetensors"
)

// Options configure Convert.
type Options struct {
	// OutType is the output's type: "f32", "f16" (the default, as llama.cpp's), "bf16", "q8_0"
	// (all four written as llama.cpp's converter writes them), "auto" (f16 when the first
	// tensor is F16, else bf16, as llama.cpp chooses), or any other `gorun quantize` recipe
	// (q4_k_m, ...), applied by quantize.File to a float32 conversion.
	OutType string
	// Name sets general.name; empty derives it (and basename, size label, ...) from the
	// config's _name_or_path and the directory's name as llama.cpp does.
	Name string
	// ModelID, when set, stands for the directory's name in deriving the naming metadata: the
	// Hub's "ORG/NAME" for a download (whose directory is named by a commit hash).
	ModelID string
	// Threads quantize (recipes other than f32/f16/bf16); <= 0: one per core.
	Threads int
	// Reference makes the recipes applied by quantize.File use llama.cpp's reference quantizers.
	Reference bool
	// Progress is called after each tensor is written, with bytes done and total.
	Progress func(done, total int64, name string)
	// QuantizeProgress is passed to quantize.File for the quantized recipes.
	QuantizeProgress func(done, total int64, t quantize.TensorReport)
}

// Report says what Convert wrote.
type Report struct {
	OutType   string
	FileType  quantize.FileType
	Tensors   int
	Params    int64 // elements of the written tensors (output.weight's copy included)
	FileBytes int64
	Tokenizer string // the files the vocabulary came from
	Name      string
	Quantize  *quantize.Report
}

// hparams are the config.json values a GPT-2 needs.
type hparams struct {
	nLayer, nEmbd, nHead, nCtx, nPos, nFF, vocab int
	eps                                          float32
	tie                                          bool
	nameOrPath                                   string
}

func loadConfig(dir string) (hparams, map[string]json.RawMessage, error) {
	var h hparams
	path := filepath.Join(dir, "config.json")
	var cfg map[string]json.RawMessage
	if err := readJSON(path, &cfg); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return h, nil, fmt.Errorf("%s has no config.json: not a Hugging Face model directory", dir)
		}
		return h, nil, err
	}
	var archs []string
	_ = json.Unmarshal(cfg["architectures"], &archs)
	if len(archs) == 0 || archs[0] != "GPT2LMHeadModel" {
		return h, nil, fmt.Errorf("%s: architecture %v: gorun converts GPT2LMHeadModel checkpoints only", path, archs)
	}
	geti := func(key string, dst *int, required bool) error {
		raw, ok := cfg[key]
		if !ok || string(raw) == "null" {
			if required {
				return fmt.Errorf("%s: %s is missing", path, key)
			}
			return nil
		}
		var v int64
		if err := json.Unmarshal(raw, &v); err != nil || v <= 0 || v > 1<<31 {
			return fmt.Errorf("%s: %s is %s, want a positive integer", path, key, raw)
		}
		*dst = int(v)
		return nil
	}
	for _, k := range []struct {
		key string
		dst *int
		req bool
	}{{"n_layer", &h.nLayer, true}, {"n_embd", &h.nEmbd, true}, {"n_head", &h.nHead, true},
		{"n_positions", &h.nPos, true}, {"n_ctx", &h.nCtx, false}, {"n_inner", &h.nFF, false}, {"vocab_size", &h.vocab, true}} {
		if err := geti(k.key, k.dst, k.req); err != nil {
			return h, nil, err
		}
	}
	if h.nCtx == 0 {
		h.nCtx = h.nPos
	}
	if h.nFF == 0 {
		h.nFF = 4 * h.nEmbd
	}
	if h.nFF != 4*h.nEmbd {
		return h, nil, fmt.Errorf("%s: n_inner %d: llama.cpp's GPT-2 has a feed-forward width of 4*n_embd (%d)", path, h.nFF, 4*h.nEmbd)
	}
	if h.nEmbd%h.nHead != 0 {
		return h, nil, fmt.Errorf("%s: n_embd %d is not a multiple of n_head %d", path, h.nEmbd, h.nHead)
	}
	h.eps = 1e-5
	if raw, ok := cfg["layer_norm_epsilon"]; ok {
		var e float64
		if err := json.Unmarshal(raw, &e); err != nil || !(e > 0) || math.IsInf(e, 0) {
			return h, nil, fmt.Errorf("%s: layer_norm_epsilon is %s", path, raw)
		}
		h.eps = float32(e)
	}
	h.tie = true
	if raw, ok := cfg["tie_word_embeddings"]; ok {
		_ = json.Unmarshal(raw, &h.tie)
	}
	if raw, ok := cfg["_name_or_path"]; ok {
		_ = json.Unmarshal(raw, &h.nameOrPath)
	}
	return h, cfg, nil
}

// outTensor is one tensor of the GGUF: where it comes from and how it is stored.
type outTensor struct {
	name      string
	src       *safetensors.Tensor
	transpose bool // a Conv1D weight, [in, out] in the checkpoint
	ne        []int64
	typ       quant.Type
}

// gguf names of GPT-2's tensors, after "transformer." is removed.
var layerNames = map[string]string{
	"ln_1": "attn_norm", "attn.c_attn": "attn_qkv", "attn.c_proj": "attn_output",
	"ln_2": "ffn_norm", "mlp.c_fc": "ffn_up", "mlp.c_proj": "ffn_down",
}

// mapName returns the GGUF name of a checkpoint tensor, "" for one llama.cpp drops, or an error
// for one it cannot map.
func mapName(hf string, tie bool) (string, bool, error) {
	n := strings.TrimPrefix(hf, "transformer.")
	if strings.HasSuffix(n, ".attn.bias") || strings.HasSuffix(n, ".attn.masked_bias") {
		return "", false, nil // causal-mask buffers of older checkpoints
	}
	if n == "lm_head.weight" && tie {
		return "", false, nil // tied: output.weight is written from wte
	}
	base, suffix, ok := cutLast(n, ".")
	if !ok || (suffix != "weight" && suffix != "bias") {
		return "", false, fmt.Errorf("cannot map tensor %q", hf)
	}
	switch base {
	case "wte":
		return "token_embd." + suffix, false, nil
	case "wpe":
		return "position_embd." + suffix, false, nil
	case "ln_f":
		return "output_norm." + suffix, false, nil
	case "lm_head":
		return "output." + suffix, false, nil
	}
	if rest, ok := strings.CutPrefix(base, "h."); ok {
		layer, part, ok := strings.Cut(rest, ".")
		if g := layerNames[part]; ok && g != "" && isUint(layer) {
			conv := suffix == "weight" && (part == "attn.c_attn" || part == "attn.c_proj" || part == "mlp.c_fc" || part == "mlp.c_proj")
			return "blk." + layer + "." + g + "." + suffix, conv, nil
		}
	}
	return "", false, fmt.Errorf("cannot map tensor %q", hf)
}

func cutLast(s, sep string) (string, string, bool) {
	i := strings.LastIndex(s, sep)
	if i < 0 {
		return s, "", false
	}
	return s[:i], s[i+len(sep):], true
}

func isUint(s string) bool {
	if s == "" || len(s) > 6 || (len(s) > 1 && s[0] == '0') {
		return false
	}
	for _, c := range s {
		if c < '0' || c > '9' {
			return false
		}
	}
	return true
}

// expectedShape is a tensor's shape in the checkpoint (outermost first) given the config.
func (h hparams) expectedShape(gname string) []int64 {
	e, ff := int64(h.nEmbd), int64(h.nFF)
	switch gname {
	case "token_embd.weight", "output.weight":
		return []int64{int64(h.vocab), e}
	case "position_embd.weight":
		return []int64{int64(h.nPos), e}
	case "output_norm.weight", "output_norm.bias":
		return []int64{e}
	}
	_, rest, _ := strings.Cut(strings.TrimPrefix(gname, "blk."), ".")
	switch rest {
	case "attn_norm.weight", "attn_norm.bias", "ffn_norm.weight", "ffn_norm.bias", "attn_output.bias", "ffn_down.bias":
		return []int64{e}
	case "attn_qkv.weight":
		return []int64{e, 3 * e}
	case "attn_qkv.bias":
		return []int64{3 * e}
	case "attn_output.weight":
		return []int64{e, e}
	case "ffn_up.weight":
		return []int64{e, ff}
	case "ffn_up.bias":
		return []int64{ff}
	case "ffn_down.weight":
		return []int64{ff, e}
	}
	return nil
}

// required lists every GGUF tensor a GPT-2 of the config needs from the checkpoint.
func (h hparams) required() []string {
	names := []string{"token_embd.weight", "position_embd.weight", "output_norm.weight", "output_norm.bias"}
	for i := range h.nLayer {
		for _, g := range []string{"attn_norm", "attn_qkv", "attn_output", "ffn_norm", "ffn_up", "ffn_down"} {
			names = append(names, fmt.Sprintf("blk.%d.%s.weight", i, g), fmt.Sprintf("blk.%d.%s.bias", i, g))
		}
	}
	return names
}

// plan maps the checkpoint's tensors to the GGUF's, in llama.cpp's order, checking every
// shape against the config and that nothing is missing.
func plan(h hparams, ck *safetensors.Checkpoint) ([]outTensor, error) {
	var out []outTensor
	seen := map[string]string{}
	for _, t := range ck.Tensors {
		gname, conv, err := mapName(t.Name, h.tie)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Base(t.File), err)
		}
		if gname == "" {
			continue
		}
		if prev, dup := seen[gname]; dup {
			return nil, fmt.Errorf("tensors %q and %q both map to %s", prev, t.Name, gname)
		}
		seen[gname] = t.Name
		want := h.expectedShape(gname)
		if want == nil || !equalShape(t.Shape, want) {
			if want == nil {
				return nil, fmt.Errorf("tensor %q (%s) does not belong to a GPT-2 of %d layers", t.Name, gname, h.nLayer)
			}
			return nil, fmt.Errorf("tensor %q has shape %v, the config needs %v", t.Name, t.Shape, want)
		}
		if !t.DType.Float() {
			return nil, fmt.Errorf("tensor %q is %s; gorun converts F32, F16 and BF16 weights", t.Name, t.DType)
		}
		// numpy's shape after the transpose and squeeze, reversed into ggml's ne.
		shape := append([]int64(nil), t.Shape...)
		if conv {
			shape[0], shape[1] = shape[1], shape[0]
		}
		var ne []int64
		for i := len(shape) - 1; i >= 0; i-- {
			if shape[i] != 1 {
				ne = append(ne, shape[i])
			}
		}
		if len(ne) == 0 {
			ne = []int64{1}
		}
		out = append(out, outTensor{name: gname, src: t, transpose: conv, ne: ne})
		if gname == "token_embd.weight" {
			// GPT-2's output is tied to the token embedding: llama.cpp writes a copy.
			if _, has := seen["output.weight"]; !has {
				out = append(out, outTensor{name: "output.weight", src: t, ne: ne})
				seen["output.weight"] = t.Name
			}
		}
	}
	var missing []string
	for _, n := range h.required() {
		if _, ok := seen[n]; !ok {
			missing = append(missing, n)
		}
	}
	if _, ok := seen["output.weight"]; !ok && !h.tie {
		missing = append(missing, "output.weight (lm_head.weight; tie_word_embeddings is false)")
	}
	if len(missing) > 0 {
		if len(missing) > 6 {
			missing = append(missing[:6], fmt.Sprintf("... (%d more)", len(missing)-6))
		}
		return nil, fmt.Errorf("the checkpoint lacks tensors: %s", strings.Join(missing, ", "))
	}
	return out, nil
}

func equalShape(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// storedType is the type llama.cpp's converter gives a tensor for an output type: F32 for
// vectors, norms, biases and position embeddings, else the output type.
func storedType(t *outTensor, ftype quant.Type) quant.Type {
	if len(t.ne) <= 1 || strings.HasSuffix(t.name, "_norm.weight") || !strings.HasSuffix(t.name, ".weight") ||
		t.name == "position_embd.weight" {
		return quant.F32
	}
	if ftype.Quantized() && t.ne[0]%int64(ftype.BlockSize()) != 0 {
		return quant.F16 // llama.cpp's fallback when rows are not whole blocks
	}
	return ftype
}

// Convert writes the GGUF of the checkpoint in dir to out, atomically (out + ".tmp", renamed
// when complete; see gguf.Writer.WriteFile).
func Convert(dir, out string, opts Options) (Report, error) {
	rep := Report{}
	outType := strings.ToLower(opts.OutType)
	if outType == "" {
		outType = "f16"
	}
	var direct quant.Type
	var recipe quantize.FileType
	quantized := false
	switch outType {
	case "f32":
		direct, recipe = quant.F32, quantize.FileAllF32
	case "f16":
		direct, recipe = quant.F16, quantize.FileF16
	case "bf16":
		direct, recipe = quant.BF16, quantize.FileBF16
	case "q8_0": // written directly, as llama.cpp's converter does (its numpy Q8_0 is ggml's reference)
		direct, recipe = quant.Q8_0, quantize.FileQ8_0
	case "auto":
	default:
		ft, err := quantize.ParseFileType(outType)
		if err != nil {
			return rep, fmt.Errorf("--outtype %q: want f32, f16, bf16, auto or a quantize recipe (%s)", opts.OutType, strings.Join(quantize.FileTypeNames(), ", "))
		}
		recipe, quantized = ft, true
		direct = quant.F32 // quantized from an exact float32 intermediate
	}
	target, err := gguf.ResolveOutput(out)
	if err != nil {
		return rep, err
	}
	h, cfg, err := loadConfig(dir)
	if err != nil {
		return rep, err
	}
	ck, err := safetensors.OpenDir(dir)
	if err != nil {
		return rep, err
	}
	defer ck.Close()
	if st, err := os.Stat(target); err == nil {
		for _, f := range ck.Files {
			if fst, err := os.Stat(f.Path); err == nil && os.SameFile(st, fst) {
				return rep, fmt.Errorf("refusing to overwrite the input %s", f.Path)
			}
		}
	}
	if h.nLayer > len(ck.Tensors) {
		return rep, fmt.Errorf("%s: config.json's n_layer %d is more than the checkpoint's %d tensors", dir, h.nLayer, len(ck.Tensors))
	}
	tensors, err := plan(h, ck)
	if err != nil {
		return rep, fmt.Errorf("%s: %w", dir, err)
	}
	if outType == "auto" {
		if ck.Tensors[0].DType == safetensors.F16 { // the first tensor read, as llama.cpp looks
			outType, direct, recipe = "f16", quant.F16, quantize.FileF16
		} else {
			outType, direct, recipe = "bf16", quant.BF16, quantize.FileBF16
		}
	}
	rep.OutType, rep.FileType = outType, recipe
	v, err := loadVocab(dir, h.vocab, cfg)
	if err != nil {
		return rep, err
	}
	rep.Tokenizer = v.source

	w := gguf.NewWriter()
	var total int64
	for i := range tensors {
		t := &tensors[i]
		t.typ = storedType(t, direct)
		if err := w.AddTensor(t.name, t.typ, t.ne); err != nil {
			return rep, err
		}
		rep.Params += t.src.Elements()
		total += t.src.Elements()
	}
	rep.Tensors = len(tensors)
	id := opts.ModelID
	if id == "" {
		id = filepath.Base(filepath.Clean(dir))
	}
	meta := deriveMeta(h.nameOrPath, id, rep.Params)
	if opts.Name != "" {
		meta.name = opts.Name
	}
	rep.Name = meta.name
	fileType := recipe
	if quantized {
		fileType = quantize.FileAllF32
	}
	if err := setMetadata(w, h, meta, v, fileType); err != nil {
		return rep, err
	}

	dst := target
	if quantized {
		dst = target + ".f32.tmp"
		defer os.Remove(dst)
	}
	var done int64
	conv := &converter{}
	err = w.WriteFileStream(dst, func(i int, ti *gguf.TensorInfo, out io.Writer) error {
		t := &tensors[i]
		if err := conv.write(out, t); err != nil {
			return err
		}
		done += t.src.Elements()
		if opts.Progress != nil {
			opts.Progress(done, total, t.name)
		}
		return nil
	})
	if err != nil {
		return rep, err
	}
	if quantized {
		ck.Close()
		qr, err := quantize.File(dst, out, quantize.Options{FileType: recipe, Threads: opts.Threads,
			Reference: opts.Reference, Progress: opts.QuantizeProgress})
		if err != nil {
			return rep, err
		}
		rep.Quantize = &qr
	}
	if st, err := os.Stat(target); err == nil {
		rep.FileBytes = st.Size()
	}
	return rep, nil
}

// setMetadata writes the keys in llama.cpp's order: general.*, the hyperparameters, the
// tokenizer, and general.quantization_version last.
func setMetadata(w *gguf.Writer, h hparams, m modelMeta, v *vocab, ft quantize.FileType) error {
	type kv struct {
		k string
		v any
	}
	kvs := []kv{{"general.architecture", "gpt2"}, {"general.type", "model"}, {"general.name", m.name}}
	for _, o := range []kv{{"general.version", m.version}, {"general.organization", m.organization},
		{"general.finetune", m.finetune}, {"general.basename", m.basename}, {"general.size_label", m.sizeLabel}} {
		if o.v.(string) != "" {
			kvs = append(kvs, o)
		}
	}
	kvs = append(kvs,
		kv{"gpt2.block_count", uint32(h.nLayer)},
		kv{"gpt2.context_length", uint32(h.nCtx)},
		kv{"gpt2.embedding_length", uint32(h.nEmbd)},
		kv{"gpt2.feed_forward_length", uint32(4 * h.nEmbd)},
		kv{"gpt2.attention.head_count", uint32(h.nHead)},
		kv{"gpt2.attention.layer_norm_epsilon", h.eps},
		kv{"general.file_type", uint32(ft)},
		kv{"tokenizer.ggml.model", "gpt2"},
		kv{"tokenizer.ggml.pre", "gpt-2"},
		kv{"tokenizer.ggml.tokens", v.tokens},
		kv{"tokenizer.ggml.token_type", v.types},
	)
	if len(v.merges) > 0 {
		kvs = append(kvs, kv{"tokenizer.ggml.merges", v.merges})
	}
	for _, s := range v.special {
		kvs = append(kvs, kv{specialKeys[s.typ], s.id})
	}
	if v.addBOS != nil {
		kvs = append(kvs, kv{"tokenizer.ggml.add_bos_token", *v.addBOS})
	}
	if v.addEOS != nil {
		kvs = append(kvs, kv{"tokenizer.ggml.add_eos_token", *v.addEOS})
	}
	if v.chat != "" {
		kvs = append(kvs, kv{"tokenizer.chat_template", v.chat})
	}
	kvs = append(kvs, kv{"general.quantization_version", uint32(2)})
	for _, e := range kvs {
		if err := w.Set(e.k, e.v); err != nil {
			return err
		}
	}
	return nil
}

// converter turns checkpoint tensors into GGUF bytes, reusing its buffers.
type converter struct {
	f32 []float32
	out []byte
}

const chunk = 1 << 16 // elements converted at a time

func (c *converter) write(out io.Writer, t *outTensor) error {
	n := t.src.Elements()
	if t.transpose {
		// A Conv1D weight [in, out] becomes [out, in]: the whole matrix is needed at once.
		rows, cols := t.src.Shape[0], t.src.Shape[1]
		src := make([]float32, n)
		if err := t.src.Float32s(src, 0); err != nil {
			return err
		}
		c.f32 = growF32(c.f32, int(n))
		for r := range rows {
			for k := range cols {
				c.f32[k*rows+r] = src[r*cols+k]
			}
		}
		return c.encode(out, c.f32[:n], t.typ)
	}
	for from := int64(0); from < n; from += chunk {
		m := min(chunk, n-from)
		c.f32 = growF32(c.f32, int(m))
		if err := t.src.Float32s(c.f32[:m], from); err != nil {
			return err
		}
		if err := c.encode(out, c.f32[:m], t.typ); err != nil {
			return err
		}
	}
	return nil
}

func (c *converter) encode(out io.Writer, v []float32, typ quant.Type) error {
	switch typ {
	case quant.F32:
		c.out = growBytes(c.out, 4*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint32(c.out[4*i:], math.Float32bits(x))
		}
	case quant.F16:
		c.out = growBytes(c.out, 2*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint16(c.out[2*i:], f32ToF16(x))
		}
	case quant.BF16:
		c.out = growBytes(c.out, 2*len(v))
		for i, x := range v {
			binary.LittleEndian.PutUint16(c.out[2*i:], quant.F32ToBF16(x))
		}
	case quant.Q8_0:
		// Rows are whole blocks (storedType) and chunks are multiples of 32 elements, so no
		// block straddles two calls.
		fm, err := quant.FormatOf(quant.Q8_0)
		if err != nil {
			return err
		}
		n, _ := typ.RowSize(int64(len(v)))
		c.out = growBytes(c.out, int(n))
		if err := fm.Quantize(c.out, v); err != nil {
			return err
		}
		_, err = out.Write(c.out[:n])
		return err
	default:
		return fmt.Errorf("cannot write type %v", typ)
	}
	_, err := out.Write(c.out[:len(v)*typ.TypeSize()])
	return err
}

func growF32(b []float32, n int) []float32 {
	if cap(b) < n {
		return make([]float32, n)
	}
	return b[:n]
}

func growBytes(b []byte, n int) []byte {
	if cap(b) < n {
		return make([]byte, n)
	}
	return b[:n]
}
