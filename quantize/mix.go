package quantize

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/quant"
)

// TensorPlan is the decision for one tensor of a model being quantized.
type TensorPlan struct {
	Type     quant.Type
	Quantize bool   // false: copied as it is
	Note     string // why the type differs from the recipe's (fallbacks), for the user
}

// MixInfo is what the type rules need to know about the model: llama.cpp's hyperparameters
// and the counts llama-quantize takes over the tensor list before it starts.
type MixInfo struct {
	Arch        string // general.architecture; "falcon" has rules of its own
	NLayer      int
	NHead       int // attention heads of the first layer
	NHeadKV     int // key/value heads of the first layer (NHead when the file does not say)
	NExpert     int // experts per feed-forward layer (0 or 1: not a mixture of experts)
	NAttentionV int // V projections in the file (*attn_v, *attn_qkv, *attn_kv_b): llama.cpp's n_attention_wv
	HasOutput   bool
	// HasImportance: the quantizers get calibration statistics (llama-quantize's imatrix),
	// which changes one rule.
	HasImportance bool
	Pure          bool // every quantized tensor gets the default type, no mixing
}

// MixInfoOf reads the model facts the rules use from a GGUF file, as llama.cpp's loader does.
func MixInfoOf(f *gguf.File) MixInfo {
	var info MixInfo
	info.Arch, _ = f.String("general.architecture")
	info.NLayer = firstInt(f, info.Arch+".block_count")
	info.NHead = firstInt(f, info.Arch+".attention.head_count")
	info.NHeadKV = info.NHead
	if f.Has(info.Arch + ".attention.head_count_kv") {
		info.NHeadKV = firstInt(f, info.Arch+".attention.head_count_kv")
	}
	info.NExpert = firstInt(f, info.Arch+".expert_count")
	for i := range f.Tensors {
		name := f.Tensors[i].Name
		switch {
		case strings.Contains(name, "attn_v.weight"), strings.Contains(name, "attn_qkv.weight"),
			strings.Contains(name, "attn_kv_b.weight"):
			info.NAttentionV++
		case name == "output.weight":
			info.HasOutput = true
		}
	}
	return info
}

// firstInt reads an integer key, or the first element of a per-layer array of them; 0 when
// the key is absent or out of range.
func firstInt(f *gguf.File, key string) int {
	v, ok := f.Get(key)
	if !ok {
		return 0
	}
	if v.Type() == gguf.TypeArray {
		a, err := v.AsInt32s()
		if err != nil || len(a) == 0 || a[0] < 0 {
			return 0
		}
		return int(a[0])
	}
	n, err := v.AsUint()
	if err != nil || n > 1<<30 {
		return 0
	}
	return int(n)
}

// gqa is llama.cpp's n_gqa(): query heads per key/value head (0 without key/value heads).
func (m MixInfo) gqa() int {
	if m.NHeadKV == 0 {
		return 0
	}
	return m.NHead / m.NHeadKV
}

// is70B is llama.cpp's "the model is a 70B" (LLM_TYPE_70B), which gives attn_v more bits:
// 80 layers in the architectures whose loaders name that size (a Llama with as many key/value
// heads as heads, or with 8 experts, is another size).
func (m MixInfo) is70B() bool {
	if m.NLayer != 80 {
		return false
	}
	switch m.Arch {
	case "llama":
		return m.NExpert != 8 && m.NHead != m.NHeadKV
	case "deci", "qwen2", "olmo":
		return true
	}
	return false
}

// Mixer gives each tensor of a model its type under a recipe, with llama-quantize's rules
// (llama_tensor_get_type in llama.cpp's llama-quant.cpp). Some rules count the V projections
// and feed-forward matrices already seen, so ChooseType must be called for the tensors in
// llama-quantize's order (by layer, then name: what File writes) and once per tensor.
type Mixer struct {
	ft                                 FileType
	info                               MixInfo
	iAttnV, iFFNDown, iFFNGate, iFFNUp int
}

// NewMixer starts the choice of types for one model.
func NewMixer(ft FileType, info MixInfo) *Mixer {
	return &Mixer{ft: ft, info: info}
}

// ChooseType decides the type of the next tensor. Only matrices whose name ends in "weight"
// are quantized (not norms, position embeddings, expert routers and the other exceptions of
// llama-quantize); the mixes then give some tensors more bits by name and layer; and a row
// length that is not a whole number of blocks falls back to a type that fits. It fails where
// llama-quantize does: a tensor of a mixture of experts whose layer its name does not tell.
func (m *Mixer) ChooseType(name string, dims []int64, current quant.Type) (TensorPlan, error) {
	if !quantizable(name, dims) {
		return TensorPlan{Type: current}, nil
	}
	t := m.ft.DefaultType()
	if !m.info.Pure && t.Quantized() {
		var err error
		if t, err = m.mixType(t, name, dims[0]); err != nil {
			return TensorPlan{}, err
		}
	}
	var note string
	if dims[0]%int64(t.BlockSize()) != 0 {
		t, note = fallback(t, dims[0])
	}
	if t == current {
		return TensorPlan{Type: t, Note: note}, nil
	}
	return TensorPlan{Type: t, Quantize: true, Note: note}, nil
}

// notQuantized are the name parts of the matrices llama-quantize leaves as they are: norms,
// expert routers, Mamba's small convolutions, RWKV's time-mix parameters, T5's relative
// position biases.
var notQuantized = []string{"_norm.weight", "ffn_gate_inp.weight", "ssm_conv1d.weight",
	"time_mix_first.weight", "time_mix_w1.weight", "time_mix_w2.weight", "time_mix_decay_w1.weight",
	"time_mix_decay_w2.weight", "time_mix_lerp_fused.weight", "attn_rel_b.weight"}

// quantizable is llama-quantize's test of which tensors it quantizes.
func quantizable(name string, dims []int64) bool {
	if !strings.HasSuffix(name, "weight") || nDims(dims) < 2 ||
		name == "position_embd.weight" || name == "token_types.weight" {
		return false
	}
	for _, s := range notQuantized {
		if strings.Contains(name, s) {
			return false
		}
	}
	return true
}

// nDims is ggml_n_dims: the number of dimensions without trailing ones ([256 1] is a vector).
func nDims(dims []int64) int {
	n := len(dims)
	for n > 1 && dims[n-1] == 1 {
		n--
	}
	return n
}

// mixType applies the recipe's per-tensor rules (llama.cpp's order of tests: the first whose
// name matches decides).
func (m *Mixer) mixType(def quant.Type, name string, ne0 int64) (quant.Type, error) {
	switch {
	case name == "output.weight" || (!m.info.HasOutput && name == "token_embd.weight"):
		// A tied token embedding is also the output matrix, and is quantized as one.
		return m.outputType(def, ne0), nil
	case name == "token_embd.weight":
		return def, nil // only the IQ recipes below 4 bits, which gorun does not make, change it
	case strings.Contains(name, "attn_v.weight"):
		t := m.attnVType(def)
		m.iAttnV++
		return t, nil
	case strings.Contains(name, "attn_k.weight"):
		if m.info.NExpert == 8 {
			return quant.Q8_0, nil // llama.cpp: "bumping this to Q8_0 trades just ~128MB"
		}
		return def, nil
	case strings.Contains(name, "attn_q.weight"):
		return def, nil
	case strings.Contains(name, "ffn_down"):
		i, n, err := m.layer(m.iFFNDown, name)
		if err != nil {
			return 0, err
		}
		m.iFFNDown++
		return m.ffnDownType(def, i, n), nil
	case strings.Contains(name, "attn_output.weight"):
		return m.attnOutputType(def), nil
	case strings.Contains(name, "attn_qkv.weight"):
		return m.attnQKVType(def), nil
	case strings.Contains(name, "ffn_gate"):
		// Only the IQ3_XS recipe changes ffn_gate and ffn_up; the layer is still checked.
		if _, _, err := m.layer(m.iFFNGate, name); err != nil {
			return 0, err
		}
		m.iFFNGate++
	case strings.Contains(name, "ffn_up"):
		if _, _, err := m.layer(m.iFFNUp, name); err != nil {
			return 0, err
		}
		m.iFFNUp++
	}
	return def, nil
}

// outputType: Q6_K for the output matrix (Q8_0 for Falcon, in q8_0, or when its rows are not
// whole blocks of the recipe's type).
func (m *Mixer) outputType(def quant.Type, ne0 int64) quant.Type {
	switch {
	case m.info.Arch == "falcon" || ne0%int64(def.BlockSize()) != 0:
		return quant.Q8_0
	case def != quant.Q8_0:
		return quant.Q6_K
	}
	return def
}

// attnVType gives the V projection more bits: in grouped-query models it is several times
// smaller than the Q projection, so the extra bits cost little.
func (m *Mixer) attnVType(def quant.Type) quant.Type {
	t := def
	switch m.ft {
	case FileQ2_K:
		t = quant.Q3_K
		if m.info.gqa() >= 4 {
			t = quant.Q4_K
		}
	case FileQ3_K_M:
		t = quant.Q4_K
		if m.iAttnV < 2 {
			t = quant.Q5_K
		}
	case FileQ3_K_L:
		t = quant.Q5_K
	case FileQ4_K_M, FileQ5_K_M:
		if useMoreBits(m.iAttnV, m.info.NAttentionV) {
			t = quant.Q6_K
		}
	case FileQ4_K_S:
		if m.iAttnV < 4 {
			t = quant.Q5_K
		}
	case FileIQ4_NL, FileIQ4_XS:
		if m.info.gqa() >= 4 {
			t = quant.Q5_K
		}
	}
	if m.info.is70B() && (t == quant.Q3_K || t == quant.Q4_K) {
		t = quant.Q5_K // 8 query heads share each V head in the 70B
	}
	if m.info.NExpert == 8 {
		t = quant.Q8_0
	}
	return t
}

// ffnDownType: the feed-forward output matrices of the layers useMoreBits picks (or of the
// first layers) get more bits.
func (m *Mixer) ffnDownType(def quant.Type, i, n int) quant.Type {
	falcon := m.info.Arch == "falcon"
	switch m.ft {
	case FileQ2_K:
		return quant.Q3_K
	case FileQ3_K_M:
		switch {
		case i < n/16:
			return quant.Q5_K
		case !falcon || useMoreBits(i, n):
			return quant.Q4_K
		}
		return quant.Q3_K
	case FileQ3_K_L:
		if falcon {
			return quant.Q4_K
		}
		return quant.Q5_K
	case FileQ4_K_M:
		switch {
		case falcon && i < n/16:
			return quant.Q6_K
		case falcon && useMoreBits(i, n):
			return quant.Q5_K
		case !falcon && useMoreBits(i, n):
			return quant.Q6_K
		}
	case FileQ5_K_M:
		if useMoreBits(i, n) {
			return quant.Q6_K
		}
	case FileQ4_K_S:
		if !falcon && i < n/8 {
			return quant.Q5_K
		}
	case FileIQ4_NL, FileIQ4_XS:
		if i < n/8 && !m.info.HasImportance {
			return quant.Q5_K
		}
	case FileQ4_0, FileQ5_0:
		// llama.cpp guards the first layers against "craziness" with an imatrix only, so that
		// files made without one stay as they were.
		if m.info.HasImportance && i < n/8 {
			if m.ft == FileQ4_0 {
				return quant.Q4_1
			}
			return quant.Q5_1
		}
	}
	return def
}

func (m *Mixer) attnOutputType(def quant.Type) quant.Type {
	if m.info.Arch == "falcon" {
		if m.ft == FileQ3_K_L {
			return quant.Q4_K
		}
		return def
	}
	if m.info.NExpert == 8 {
		switch m.ft {
		case FileQ2_K, FileQ3_K_S, FileQ3_K_M, FileQ4_K_S, FileQ4_K_M, FileIQ4_NL, FileIQ4_XS:
			return quant.Q5_K
		}
		return def
	}
	switch m.ft {
	case FileQ2_K:
		return quant.Q3_K
	case FileQ3_K_M:
		return quant.Q4_K
	case FileQ3_K_L:
		return quant.Q5_K
	}
	return def
}

func (m *Mixer) attnQKVType(def quant.Type) quant.Type {
	switch m.ft {
	case FileQ3_K_M, FileQ3_K_L:
		return quant.Q4_K
	case FileQ4_K_M:
		return quant.Q5_K
	case FileQ5_K_M:
		return quant.Q6_K
	}
	return def
}

// layer returns the layer index and count a feed-forward rule uses: the count of such
// matrices seen so far, or in a mixture of experts (whose expert matrices need not come in
// layer order) the layer its name gives.
func (m *Mixer) layer(seen int, name string) (i, n int, err error) {
	n = m.info.NLayer
	if m.info.NExpert <= 1 {
		return seen, n, nil
	}
	i = LayerOf(name)
	if i < 0 {
		return 0, 0, fmt.Errorf("tensor %q: cannot tell its layer (want blk.N.)", name)
	}
	if i >= n {
		return 0, 0, fmt.Errorf("tensor %q: layer %d, but the model has %d", name, i, n)
	}
	return i, n, nil
}

// useMoreBits picks the layers llama.cpp's mixes favour: the first and last eighth, and every
// third layer in between.
func useMoreBits(i, n int) bool {
	return i < n/8 || i >= 7*n/8 || (i-n/8)%3 == 2
}

// LayerOf returns N of a "blk.N." tensor name, or -1.
func LayerOf(name string) int {
	rest, ok := strings.CutPrefix(name, "blk.")
	if !ok {
		return -1
	}
	num, _, _ := strings.Cut(rest, ".")
	i, err := strconv.Atoi(num)
	if err != nil {
		return -1
	}
	return i
}

// fallback picks a type with a smaller block for rows that K-quant blocks do not divide, as
// llama-quantize does, and says so. Where llama-quantize gives up (rows that no block of the
// recipe's type divides), the tensor stays F16.
func fallback(t quant.Type, ne0 int64) (quant.Type, string) {
	to := quant.F16
	switch t {
	case quant.Q2_K, quant.Q3_K, quant.IQ4_XS:
		to = quant.IQ4_NL
	case quant.Q4_K:
		to = quant.Q5_0
	case quant.Q5_K:
		to = quant.Q5_1
	case quant.Q6_K:
		to = quant.Q8_0
	}
	if ne0%int64(to.BlockSize()) != 0 {
		to = quant.F16
	}
	return to, fmt.Sprintf("rows of %d are not a whole number of %d-element %v blocks: %v instead", ne0, t.BlockSize(), t, to)
}
