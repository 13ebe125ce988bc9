// Package testmodel writes GPT-2, Llama and Qwen2 GGUF files with random weights, of any shape,
// laid out as llama.cpp's convert_hf_to_gguf.py lays out real ones: the same metadata keys, the
// same tensors in the same order (GPT-2's output.weight a copy of token_embd.weight). Unit
// tests use tiny shapes; benchmarks use real sizes, whose speed does not depend on the values.
//
// Files are deterministic for a seed. Each tensor is drawn from its own random stream, seeded
// from Config.Seed and the tensor's index, and Write streams the data, so even the 1.5B model
// is written without holding a tensor in memory.
package testmodel

import (
	"encoding/binary"
	"fmt"
	"io"
	"math"
	"strconv"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/quant"
)

// Config is the shape and contents of a model.
type Config struct {
	Name   string // general.name
	NVocab int    // vocabulary size (0 with Tokens: len(Tokens))
	NCtx   int    // context length (rows of position_embd)
	NEmbd  int
	NHead  int
	NLayer int
	NFF    int        // feed-forward width
	Type   quant.Type // of the matrices: F32, F16 or BF16; vectors are always F32
	Seed   int64
	// Tokens and Merges give a real vocabulary (it must contain <|endoftext|>). Without
	// Tokens a synthetic byte-level BPE vocabulary of NVocab tokens is made.
	Tokens, Merges []string
	// NoOutput omits output.weight; the model must then use token_embd.weight.
	NoOutput bool

	// Arch is general.architecture: "gpt2" (the default when empty), "llama" or "qwen2".
	Arch string
	// The Llama and Qwen2 fields (ignored for GPT-2):
	NHeadKV   int     // key/value heads (0: NHead); fewer than NHead is grouped-query attention
	RopeBase  float32 // rope.freq_base (0: not written, 10000 for the loader)
	RopeFreqs bool    // write rope_freqs.weight with Llama 3.1's frequency factors (llama only)
	// Chat makes the file a chat model's: its control tokens, template and BOS rule (nil: a
	// plain GPT-2 file, as the converter writes one).
	Chat *Chat
}

// Chat is what a chat model's file adds to GPT-2's: control tokens such as Llama 3's
// <|begin_of_text|> and <|eot_id|>, appended to the vocabulary, which token is BOS and which
// EOS, whether the tokenizer adds BOS, and tokenizer.chat_template.
type Chat struct {
	Control  []string // control tokens (type 3) appended to the vocabulary, which grows by as many
	BOS, EOS string   // tokenizer.ggml.bos_token_id and eos_token_id by text ("": <|endoftext|>)
	AddBOS   bool     // tokenizer.ggml.add_bos_token = true
	Template string   // tokenizer.chat_template ("": none)
}

// Llama3Control are Llama 3's chat control tokens, as its tokenizer has them.
var Llama3Control = []string{"<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>", "<|eot_id|>"}

// Llama3Chat is a chat model's file as Llama 3 Instruct's: its control tokens, BOS
// <|begin_of_text|> added by the tokenizer, EOS <|end_of_text|> (<|eot_id|> ends a turn) and
// template, the Jinja text of its tokenizer_config.json's chat_template.
func Llama3Chat(template string) *Chat {
	return &Chat{Control: Llama3Control, BOS: "<|begin_of_text|>", EOS: "<|end_of_text|>", AddBOS: true, Template: template}
}

var presets = map[string]Config{
	"tiny": {Name: "GPT2 Tiny Random", NVocab: 512, NCtx: 64, NEmbd: 64, NHead: 4, NLayer: 2, NFF: 256},
	"124M": {Name: "GPT2 124M Random", NVocab: 50257, NCtx: 1024, NEmbd: 768, NHead: 12, NLayer: 12, NFF: 3072},
	"355M": {Name: "GPT2 355M Random", NVocab: 50257, NCtx: 1024, NEmbd: 1024, NHead: 16, NLayer: 24, NFF: 4096},
	"774M": {Name: "GPT2 774M Random", NVocab: 50257, NCtx: 1024, NEmbd: 1280, NHead: 20, NLayer: 36, NFF: 5120},
	"1.5B": {Name: "GPT2 1.5B Random", NVocab: 50257, NCtx: 1024, NEmbd: 1600, NHead: 25, NLayer: 48, NFF: 6400},
	// Llama shapes: grouped-query attention, tied output (llama-tiny) or not (llama-tiny-untied).
	"llama-tiny":        {Name: "Llama Tiny Random", Arch: "llama", NVocab: 512, NCtx: 64, NEmbd: 64, NHead: 4, NHeadKV: 2, NLayer: 2, NFF: 192, NoOutput: true},
	"llama-tiny-untied": {Name: "Llama Tiny Random", Arch: "llama", NVocab: 512, NCtx: 64, NEmbd: 64, NHead: 4, NHeadKV: 1, NLayer: 2, NFF: 192, RopeBase: 500000, RopeFreqs: true},
	"qwen2-tiny":        {Name: "Qwen2 Tiny Random", Arch: "qwen2", NVocab: 512, NCtx: 64, NEmbd: 64, NHead: 4, NHeadKV: 2, NLayer: 2, NFF: 192, NoOutput: true, RopeBase: 1000000},
	// Llama 3.2 1B's shape (its context is 131072 with Llama 3's RoPE scaling; 8192 here keeps
	// a session's default KV cache small).
	"llama-3.2-1B": {Name: "Llama 3.2 1B Random", Arch: "llama", NVocab: 128256, NCtx: 8192, NEmbd: 2048, NHead: 32, NHeadKV: 8, NLayer: 16, NFF: 8192, NoOutput: true, RopeBase: 500000, RopeFreqs: true},
}

// PresetNames lists the presets, for usage messages.
const PresetNames = "tiny, 124M, 355M, 774M, 1.5B (GPT-2); llama-tiny, llama-tiny-untied, qwen2-tiny, llama-3.2-1B"

// Preset returns a named configuration (PresetNames): "tiny", the GPT-2 sizes "124M", "355M",
// "774M" and "1.5B", tiny Llama and Qwen2 models, and Llama 3.2 1B's shape; matrices F16,
// seed 1, synthetic vocabulary.
func Preset(name string) (Config, error) {
	c, ok := presets[name]
	if !ok {
		return Config{}, fmt.Errorf("testmodel: no preset %q (have %s)", name, PresetNames)
	}
	c.Type = quant.F16
	c.Seed = 1
	return c, nil
}

func (c *Config) check() error {
	switch {
	case c.NCtx < 1 || c.NEmbd < 1 || c.NHead < 1 || c.NLayer < 1 || c.NFF < 1:
		return fmt.Errorf("testmodel: sizes must be positive: ctx %d, embd %d, head %d, layer %d, ff %d",
			c.NCtx, c.NEmbd, c.NHead, c.NLayer, c.NFF)
	case c.NEmbd%c.NHead != 0:
		return fmt.Errorf("testmodel: n_embd %d is not a multiple of n_head %d", c.NEmbd, c.NHead)
	case c.Type != quant.F32 && c.Type != quant.F16 && c.Type != quant.BF16:
		return fmt.Errorf("testmodel: matrices must be f32, f16 or bf16, not %v (quantize the file instead)", c.Type)
	case c.Tokens != nil && c.NVocab != 0 && c.NVocab != len(c.Tokens):
		return fmt.Errorf("testmodel: NVocab %d but %d tokens given", c.NVocab, len(c.Tokens))
	case c.arch() != "gpt2" && c.arch() != "llama" && c.arch() != "qwen2":
		return fmt.Errorf("testmodel: architecture %q (want gpt2, llama or qwen2)", c.Arch)
	case c.arch() != "gpt2" && (c.NHeadKV < 0 || c.NHead%c.kvHeads() != 0 || (c.NEmbd/c.NHead)%2 != 0):
		return fmt.Errorf("testmodel: %d heads over %d key/value heads of %d values", c.NHead, c.NHeadKV, c.NEmbd/c.NHead)
	case c.RopeFreqs && c.arch() != "llama":
		return fmt.Errorf("testmodel: rope_freqs.weight is Llama's")
	}
	return nil
}

func (c *Config) arch() string {
	if c.Arch == "" {
		return "gpt2"
	}
	return c.Arch
}

func (c *Config) kvHeads() int {
	if c.NHeadKV == 0 {
		return c.NHead
	}
	return c.NHeadKV
}

// fileType is general.file_type (llama_ftype) for the matrix type.
func fileType(t quant.Type) uint32 {
	switch t {
	case quant.F16:
		return 1
	case quant.BF16:
		return 32
	}
	return 0
}

// tensorPlan is one tensor: its description, its distribution and its random stream.
type tensorPlan struct {
	name   string
	typ    quant.Type
	dims   []int64
	d      dist
	stream uint64    // output.weight shares token_embd's stream, which makes it a copy
	values []float32 // fixed F32 values instead of random ones (rope_freqs.weight)
}

// plan lists the tensors of the architecture in the converter's order.
func plan(c *Config, nVocab int) []tensorPlan {
	if c.arch() != "gpt2" {
		return planLlama(c, nVocab)
	}
	return planGPT2(c, nVocab)
}

// planGPT2 lists GPT-2's tensors in the converter's order (Hugging Face's parameter order per
// block).
func planGPT2(c *Config, nVocab int) []tensorPlan {
	E, F, V := int64(c.NEmbd), int64(c.NFF), int64(nVocab)
	// GPT-2 scales the residual projections by 1/sqrt(2*n_layer).
	std, proj := 0.02, 0.02/math.Sqrt(2*float64(c.NLayer))
	bias, norm := dist{0, 0.01}, dist{1, 0.02}
	var p []tensorPlan
	add := func(name string, matrix bool, d dist, dims ...int64) {
		typ := quant.F32
		if matrix {
			typ = c.Type
		}
		p = append(p, tensorPlan{name: name, typ: typ, dims: dims, d: d, stream: uint64(len(p))})
	}
	for i := 0; i < c.NLayer; i++ {
		blk := "blk." + strconv.Itoa(i) + "."
		add(blk+"attn_qkv.bias", false, bias, 3*E)
		add(blk+"attn_qkv.weight", true, dist{0, std}, E, 3*E)
		add(blk+"attn_output.bias", false, bias, E)
		add(blk+"attn_output.weight", true, dist{0, proj}, E, E)
		add(blk+"attn_norm.bias", false, bias, E)
		add(blk+"attn_norm.weight", false, norm, E)
		add(blk+"ffn_norm.bias", false, bias, E)
		add(blk+"ffn_norm.weight", false, norm, E)
		add(blk+"ffn_up.bias", false, bias, F)
		add(blk+"ffn_up.weight", true, dist{0, std}, E, F)
		add(blk+"ffn_down.bias", false, bias, E)
		add(blk+"ffn_down.weight", true, dist{0, proj}, F, E)
	}
	add("output_norm.bias", false, bias, E)
	add("output_norm.weight", false, norm, E)
	add("position_embd.weight", false, dist{0, 0.01}, E, int64(c.NCtx))
	add("token_embd.weight", true, dist{0, std}, E, V)
	if !c.NoOutput {
		add("output.weight", true, dist{0, std}, E, V)
		p[len(p)-1].stream = p[len(p)-2].stream
	}
	return p
}

// model is a configuration turned into metadata and a tensor plan.
type model struct {
	w       *gguf.Writer
	tensors []tensorPlan
	sizes   []int64 // bytes of each tensor
}

func build(c Config) (*model, error) {
	if err := c.check(); err != nil {
		return nil, err
	}
	var v *vocab
	var err error
	if c.Tokens != nil {
		v, err = givenVocab(c.Tokens, c.Merges)
	} else {
		v, err = syntheticVocab(c.NVocab, c.Seed)
	}
	if err != nil {
		return nil, err
	}
	if c.Chat != nil {
		v.addControl(c.Chat.Control)
	}
	m := &model{w: gguf.NewWriter(), tensors: plan(&c, len(v.tokens))}
	for _, t := range m.tensors {
		if err := m.w.AddTensor(t.name, t.typ, t.dims); err != nil {
			return nil, err
		}
	}
	for _, ti := range m.w.Tensors() {
		m.sizes = append(m.sizes, ti.Size)
	}
	if err := m.setMetadata(&c, v); err != nil {
		return nil, err
	}
	return m, nil
}

// setMetadata writes the KVs in the order convert_hf_to_gguf.py writes them.
func (m *model) setMetadata(c *Config, v *vocab) error {
	kvs := m.gpt2Metadata(c)
	if c.arch() != "gpt2" {
		kvs = m.llamaMetadata(c, v)
	}
	tk, err := tokenizerMetadata(c, v)
	if err != nil {
		return err
	}
	for _, e := range append(kvs, tk...) {
		if err := m.w.Set(e.Key, e.Value); err != nil {
			return err
		}
	}
	return nil
}

// tokenizerMetadata is the vocabulary's part of the metadata, as the converter writes it for
// GPT-2's byte-level BPE.
func tokenizerMetadata(c *Config, v *vocab) ([]gguf.KV, error) {
	eot := uint32(v.eot)
	bos, eos := eot, eot
	if c.Chat != nil {
		var err error
		if bos, err = v.idOr(c.Chat.BOS, eot); err != nil {
			return nil, err
		}
		if eos, err = v.idOr(c.Chat.EOS, eot); err != nil {
			return nil, err
		}
	}
	kvs := []gguf.KV{
		kv("tokenizer.ggml.model", "gpt2"),
		kv("tokenizer.ggml.pre", "gpt-2"),
		kv("tokenizer.ggml.tokens", v.tokens),
		kv("tokenizer.ggml.token_type", v.types),
		kv("tokenizer.ggml.merges", v.merges),
		kv("tokenizer.ggml.bos_token_id", bos),
		kv("tokenizer.ggml.eos_token_id", eos),
		kv("tokenizer.ggml.unknown_token_id", eot),
	}
	if c.Chat != nil && c.Chat.AddBOS {
		kvs = append(kvs, kv("tokenizer.ggml.add_bos_token", true))
	}
	if c.Chat != nil && c.Chat.Template != "" {
		kvs = append(kvs, kv("tokenizer.chat_template", c.Chat.Template))
	}
	return append(kvs, kv("general.quantization_version", uint32(2))), nil
}

// gpt2Metadata is GPT-2's metadata in the converter's order.
func (m *model) gpt2Metadata(c *Config) []gguf.KV {
	u32 := func(n int) uint32 { return uint32(n) }
	kvs := []gguf.KV{
		kv("general.architecture", "gpt2"),
		kv("general.type", "model"),
		kv("general.name", c.Name),
		kv("general.size_label", sizeLabel(m.paramCount())),
		kv("gpt2.block_count", u32(c.NLayer)),
		kv("gpt2.context_length", u32(c.NCtx)),
		kv("gpt2.embedding_length", u32(c.NEmbd)),
		kv("gpt2.feed_forward_length", u32(c.NFF)),
		kv("gpt2.attention.head_count", u32(c.NHead)),
		kv("gpt2.attention.layer_norm_epsilon", float32(1e-5)),
		kv("general.file_type", fileType(c.Type)),
	}
	return kvs
}

// kv builds an entry from a value of a type ValueOf always accepts.
func kv(key string, x any) gguf.KV {
	v, err := gguf.ValueOf(x)
	if err != nil {
		panic(err)
	}
	return gguf.KV{Key: key, Value: v}
}

func (m *model) paramCount() int64 {
	var n int64
	for _, ti := range m.w.Tensors() {
		n += ti.Elements()
	}
	return n
}

// sizeLabel is general.size_label as gguf-py computes it: the parameter count (output copy
// included) in K, M, B or T with at least two significant digits, e.g. "124M", "1.6B", "32M".
func sizeLabel(n int64) string {
	x, unit := float64(n), "K"
	switch {
	case x > 1e12:
		x, unit = x*1e-12, "T"
	case x > 1e9:
		x, unit = x*1e-9, "B"
	case x > 1e6:
		x, unit = x*1e-6, "M"
	default:
		x *= 1e-3
	}
	digits := len(strconv.FormatFloat(math.RoundToEven(x), 'f', 0, 64))
	if math.RoundToEven(x) == 0 {
		digits = 0 // Python strips the leading zero before counting
	}
	return strconv.FormatFloat(x, 'f', max(2-digits, 0), 64) + unit
}

// Writer returns the file's writer, metadata and tensors declared, and a data callback that
// generates tensor i whole (into a buffer reused across calls, as gguf.Writer allows).
func Writer(c Config) (*gguf.Writer, func(i int, ti *gguf.TensorInfo) ([]byte, error), error) {
	m, err := build(c)
	if err != nil {
		return nil, nil, err
	}
	var buf []byte
	s := new(sampler)
	data := func(i int, ti *gguf.TensorInfo) ([]byte, error) {
		if i < 0 || i >= len(m.tensors) || ti.Size != m.sizes[i] {
			return nil, fmt.Errorf("testmodel: no tensor %d of %d bytes", i, ti.Size)
		}
		if int64(cap(buf)) < ti.Size {
			buf = make([]byte, ti.Size)
		}
		buf = buf[:ti.Size]
		if v := m.tensors[i].values; v != nil {
			return f32Bytes(buf, v), nil
		}
		r := m.start(i, c.Seed, s)
		s.fill(buf, &r)
		return buf, nil
	}
	return m.w, data, nil
}

// start prepares the sampler and random stream of tensor i.
func (m *model) start(i int, seed int64, s *sampler) rng {
	t := &m.tensors[i]
	s.reset(t.typ, t.d)
	return newRNG(seed, t.stream)
}

// chunkSize bounds the memory Write uses for tensor data.
const chunkSize = 1 << 20

// Write writes the model to path (atomically, see gguf.Writer.WriteFile), generating the
// tensor data in chunks.
func Write(path string, c Config) error {
	m, err := build(c)
	if err != nil {
		return err
	}
	buf := make([]byte, chunkSize)
	s := new(sampler)
	return m.w.WriteFileStream(path, func(i int, ti *gguf.TensorInfo, dst io.Writer) error {
		if v := m.tensors[i].values; v != nil {
			_, err := dst.Write(f32Bytes(buf, v))
			return err
		}
		r := m.start(i, c.Seed, s)
		for left := ti.Size; left > 0; {
			n := min(left, chunkSize) // a multiple of four elements of every type
			s.fill(buf[:n], &r)
			if _, err := dst.Write(buf[:n]); err != nil {
				return err
			}
			left -= n
		}
		return nil
	})
}

// f32Bytes encodes v little-endian into the start of buf (which must be large enough).
func f32Bytes(buf []byte, v []float32) []byte {
	for i, x := range v {
		binary.LittleEndian.PutUint32(buf[4*i:], math.Float32bits(x))
	}
	return buf[:4*len(v)]
}
