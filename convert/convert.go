// Package convert turns a Hugging Face checkpoint (config.json, safetensors weights and a
// byte-level BPE tokenizer) of GPT2LMHeadModel, LlamaForCausalLM, MistralForCausalLM or
// Qwen2ForCausalLM into the GGUF llama.cpp's convert_hf_to_gguf.py (c392e509) writes for it:
// the same metadata keys and values in the same order (tokenizer.ggml.pre from the same
// fingerprint of the tokenizer), the same tensor names, order, shapes and types, and the same
// bytes (Q/K rows permuted for llama.cpp's RoPE, float32 to float16 rounded as numpy rounds).
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

	// asC392e509 reads RoPE settings only from rope_theta and rope_scaling, as llama.cpp
	// c392e509 does, not from transformers 5's rope_parameters (for the byte-for-byte test).
	asC392e509 bool
}

// Report says what Convert wrote.
type Report struct {
	OutType   string
	FileType  quantize.FileType
	Tensors   int
	Params    int64 // elements of the written tensors (output.weight's copy included)
	FileBytes int64
	Tokenizer string // the files the vocabulary came from
	Pre       string // tokenizer.ggml.pre
	Warnings  []string
	Name      string
	Quantize  *quantize.Report
}

// hparams are the config.json values every checkpoint class has, and how llama.cpp's
// converter treats its tensors.
type hparams struct {
	arch       string // general.architecture
	nLayer     int
	vocab      int
	tie        bool // tie_word_embeddings
	nameOrPath string
	// squeeze drops a tensor's dimensions of size 1, as GPT2Model's numpy path does.
	squeeze bool
	// copyOutput writes output.weight as a copy of token_embd.weight when the checkpoint has
	// no LM head (GPT-2); other classes leave the runtime to reuse token_embd.
	copyOutput bool
	// spacePrefixKey writes tokenizer_config.json's add_prefix_space as
	// tokenizer.ggml.add_space_prefix (LlamaModel.set_vocab).
	spacePrefixKey bool
}

// kv is one metadata entry to write.
type kv struct {
	k string
	v any
}

// tensorMap is where a checkpoint tensor goes in the GGUF.
type tensorMap struct {
	name      string // "" for a tensor llama.cpp drops
	transpose bool   // a Conv1D weight, [in, out] in the checkpoint
	// permuteHeads > 0 reorders the rows of each of that many heads from Hugging Face's
	// rotate-half RoPE layout to llama.cpp's interleaved one (LlamaModel.permute).
	permuteHeads int
}

// extraTensor is a tensor llama.cpp's converter computes rather than reads (rope_freqs).
type extraTensor struct {
	name string
	data []float32
}

// checkpointClass is what differs between the Hugging Face model classes gorun converts.
type checkpointClass interface {
	hp() *hparams
	// mapTensor names a checkpoint tensor in the GGUF (name "" when llama.cpp drops it).
	mapTensor(hf string) (tensorMap, error)
	// expectedShape is a GGUF tensor's shape in the checkpoint (outermost first), nil for a
	// tensor that does not belong to a model of the config.
	expectedShape(gname string) []int64
	// required lists the GGUF tensors the checkpoint must hold.
	required() []string
	// extraTensors are written before the checkpoint's, as llama.cpp's generate_extra_tensors.
	extraTensors() []extraTensor
	// checkTokenizer refuses a tokenizer the class's set_vocab would not read as byte-level
	// BPE (p is nil without tokenizer.json).
	checkTokenizer(dir string, p *hfPipeline) error
	// hparamKVs are set_gguf_parameters' keys, general.file_type where it writes it.
	hparamKVs(ft quantize.FileType) []kv
}

// classes maps config.json's architectures[0] to its converter, as llama.cpp registers them.
var classes = map[string]func(path string, cfg map[string]json.RawMessage, o classOptions) (checkpointClass, error){
	"GPT2LMHeadModel": func(p string, c map[string]json.RawMessage, _ classOptions) (checkpointClass, error) {
		return newGPT2(p, c)
	},
	"LlamaForCausalLM": func(p string, c map[string]json.RawMessage, o classOptions) (checkpointClass, error) {
		return newLlama(p, c, "llama", o)
	},
	"MistralForCausalLM": func(p string, c map[string]json.RawMessage, o classOptions) (checkpointClass, error) {
		return newLlama(p, c, "llama", o)
	},
	"Qwen2ForCausalLM": func(p string, c map[string]json.RawMessage, o classOptions) (checkpointClass, error) {
		return newLlama(p, c, "qwen2", o)
	},
}

func classNames() string {
	return "GPT2LMHeadModel, LlamaForCausalLM, MistralForCausalLM and Qwen2ForCausalLM"
}

func loadConfig(dir string, o classOptions) (checkpointClass, map[string]json.RawMessage, error) {
	path := filepath.Join(dir, "config.json")
	var cfg map[string]json.RawMessage
	if err := readJSON(path, &cfg); err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return nil, nil, fmt.Errorf("%s has no config.json: not a Hugging Face model directory", dir)
		}
		return nil, nil, err
	}
	var archs []string
	_ = json.Unmarshal(cfg["architectures"], &archs)
	if len(archs) == 0 || classes[archs[0]] == nil {
		return nil, nil, fmt.Errorf("%s: architecture %v: gorun converts %s checkpoints", path, archs, classNames())
	}
	c, err := classes[archs[0]](path, cfg, o)
	if err != nil {
		return nil, nil, err
	}
	if raw, ok := cfg["_name_or_path"]; ok {
		_ = json.Unmarshal(raw, &c.hp().nameOrPath)
	}
	return c, cfg, nil
}

// configInt sets *dst from the first of keys config.json has (find_hparam's rule: a key that is
// there wins even when null, which counts as absent). It reports whether a value was set.
func configInt(path string, cfg map[string]json.RawMessage, dst *int, required bool, keys ...string) (bool, error) {
	for _, key := range keys {
		raw, ok := cfg[key]
		if !ok {
			continue
		}
		if string(raw) == "null" {
			break
		}
		var v int64
		if err := json.Unmarshal(raw, &v); err != nil || v <= 0 || v > 1<<31 {
			return false, fmt.Errorf("%s: %s is %s, want a positive integer", path, key, raw)
		}
		*dst = int(v)
		return true, nil
	}
	if required {
		return false, fmt.Errorf("%s: %s is missing", path, strings.Join(keys, " or "))
	}
	return false, nil
}

// configFloat reads a positive, finite number; ok is false when the key is absent or null.
func configFloat(path string, cfg map[string]json.RawMessage, key string) (float64, bool, error) {
	raw, ok := cfg[key]
	if !ok || string(raw) == "null" {
		return 0, false, nil
	}
	var v float64
	if err := json.Unmarshal(raw, &v); err != nil || !(v > 0) || math.IsInf(v, 0) {
		return 0, false, fmt.Errorf("%s: %s is %s, want a positive number", path, key, raw)
	}
	return v, true, nil
}

// outTensor is one tensor of the GGUF: where it comes from and how it is stored.
type outTensor struct {
	name string
	src  *safetensors.Tensor // nil for a computed tensor
	data []float32           // a computed tensor's values
	tmap tensorMap
	ne   []int64
	typ  quant.Type
}

func (t *outTensor) elements() int64 {
	if t.src == nil {
		return int64(len(t.data))
	}
	return t.src.Elements()
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

// plan maps the checkpoint's tensors to the GGUF's, in llama.cpp's order (computed tensors
// first, then the checkpoint's), checking every shape against the config and that nothing is
// missing.
func plan(c checkpointClass, ck *safetensors.Checkpoint) ([]outTensor, error) {
	h := c.hp()
	var out []outTensor
	seen := map[string]string{}
	for _, t := range ck.Tensors {
		m, err := c.mapTensor(t.Name)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", filepath.Base(t.File), err)
		}
		if m.name == "" {
			continue
		}
		if prev, dup := seen[m.name]; dup {
			return nil, fmt.Errorf("tensors %q and %q both map to %s", prev, t.Name, m.name)
		}
		seen[m.name] = t.Name
		want := c.expectedShape(m.name)
		if want == nil {
			return nil, fmt.Errorf("tensor %q (%s) does not belong to a %s of %d layers", t.Name, m.name, h.arch, h.nLayer)
		}
		if !equalShape(t.Shape, want) {
			return nil, fmt.Errorf("tensor %q has shape %v, the config needs %v", t.Name, t.Shape, want)
		}
		if !t.DType.Float() {
			return nil, fmt.Errorf("tensor %q is %s; gorun converts F32, F16 and BF16 weights", t.Name, t.DType)
		}
		ne := ggmlDims(t.Shape, m.transpose, h.squeeze)
		out = append(out, outTensor{name: m.name, src: t, tmap: m, ne: ne})
		if m.name == "token_embd.weight" && h.copyOutput {
			// GPT-2's output is tied to the token embedding: llama.cpp writes a copy.
			if _, has := seen["output.weight"]; !has {
				out = append(out, outTensor{name: "output.weight", src: t, ne: ne})
				seen["output.weight"] = t.Name
			}
		}
	}
	var missing []string
	for _, n := range c.required() {
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
	// Computed only now that the checkpoint's shapes bound the config's sizes.
	var extra []outTensor
	for _, x := range c.extraTensors() {
		if _, dup := seen[x.name]; dup {
			return nil, fmt.Errorf("the checkpoint holds %s, which llama.cpp computes", x.name)
		}
		extra = append(extra, outTensor{name: x.name, data: x.data, ne: []int64{int64(len(x.data))}})
	}
	return append(extra, out...), nil
}

// ggmlDims is numpy's shape after the transpose (and, for GPT-2, the squeeze), reversed into
// ggml's ne (fastest dimension first).
func ggmlDims(shape []int64, transpose, squeeze bool) []int64 {
	s := append([]int64(nil), shape...)
	if transpose {
		s[0], s[1] = s[1], s[0]
	}
	var ne []int64
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] != 1 || !squeeze {
			ne = append(ne, s[i])
		}
	}
	if len(ne) == 0 {
		ne = []int64{1}
	}
	return ne
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
	c, cfg, err := loadConfig(dir, classOptions{ropeParameters: !opts.asC392e509})
	if err != nil {
		return rep, err
	}
	h := c.hp()
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
	tensors, err := plan(c, ck)
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
	if err := c.checkTokenizer(dir, nil); err != nil {
		return rep, err
	}
	v, err := loadVocab(dir, h.vocab, cfg)
	if err != nil {
		return rep, err
	}
	if err := c.checkTokenizer(dir, v.pipeline); err != nil {
		return rep, err
	}
	rep.Tokenizer = v.source
	if rep.Pre, err = preTokenizer(v, &rep.Warnings); err != nil {
		return rep, err
	}

	w := gguf.NewWriter()
	var total int64
	for i := range tensors {
		t := &tensors[i]
		t.typ = storedType(t, direct)
		if err := w.AddTensor(t.name, t.typ, t.ne); err != nil {
			return rep, err
		}
		rep.Params += t.elements()
		total += t.elements()
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
	if err := setMetadata(w, c, meta, v, rep.Pre, fileType); err != nil {
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
		done += t.elements()
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
func setMetadata(w *gguf.Writer, c checkpointClass, m modelMeta, v *vocab, pre string, ft quantize.FileType) error {
	h := c.hp()
	kvs := []kv{{"general.architecture", h.arch}, {"general.type", "model"}, {"general.name", m.name}}
	for _, o := range []kv{{"general.version", m.version}, {"general.organization", m.organization},
		{"general.finetune", m.finetune}, {"general.basename", m.basename}, {"general.size_label", m.sizeLabel}} {
		if o.v.(string) != "" {
			kvs = append(kvs, o)
		}
	}
	kvs = append(kvs, c.hparamKVs(ft)...)
	kvs = append(kvs,
		kv{"tokenizer.ggml.model", "gpt2"},
		kv{"tokenizer.ggml.pre", pre},
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
	if h.spacePrefixKey && v.addSpacePrefix != nil {
		kvs = append(kvs, kv{"tokenizer.ggml.add_space_prefix", *v.addSpacePrefix})
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
	if t.src == nil {
		return c.encode(out, t.data, t.typ)
	}
	n := t.src.Elements()
	if h := t.tmap.permuteHeads; h > 0 {
		// Rows are reordered within heads: the whole matrix is needed at once.
		src := make([]float32, n)
		if err := t.src.Float32s(src, 0); err != nil {
			return err
		}
		c.f32 = growF32(c.f32, int(n))
		permuteRoPE(c.f32, src, t.src.Shape[0], n/t.src.Shape[0], int64(h))
		return c.encode(out, c.f32[:n], t.typ)
	}
	if t.tmap.transpose {
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

// permuteRoPE is LlamaModel.permute: within each of heads heads of rows rows (cols values each),
// the two halves of the head (Hugging Face's rotate-half RoPE pairs i and i+d/2) are
// interleaved (llama.cpp's pairs 2i and 2i+1): row h*d + 2j + k of dst is row h*d + k*d/2 + j
// of src, the numpy reshape(heads, 2, d/2, cols).swapaxes(1, 2).
func permuteRoPE(dst, src []float32, rows, cols, heads int64) {
	d := rows / heads
	for h := range heads {
		for j := range d / 2 {
			for k := range int64(2) {
				to, from := (h*d+2*j+k)*cols, (h*d+k*d/2+j)*cols
				copy(dst[to:to+cols], src[from:from+cols])
			}
		}
	}
}
