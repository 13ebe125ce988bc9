package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"strings"

	"github.com/gorun-dev/gorun/hub"
	"github.com/gorun-dev/gorun/llm"
	"github.com/gorun-dev/gorun/quant"
)

// modelFlags are the options every command that loads a model shares.
type modelFlags struct {
	model   string
	threads int
	ctx     int
	batch   int
	ngl     int
	qact    quantActFlag
	mem     memLimit
	// kv is --kv-budget: the paged KV pool's size (0: the default)
	kv kvBudget
	// llama.cpp's options typed by habit: -ub caps -b; the others change nothing here (their
	// help says why).
	ubatch, threadsBatch int
	flashAttn            onOffAuto
	mlock, noWarmup      bool
	noMmap               bool
	// cacheK, cacheV: llama.cpp's -ctk/-ctv (gorun's caches hold one type for both)
	cacheK, cacheV string
	// kvContexts is how many whole contexts the default KV pool holds (serve: its slots)
	kvContexts int
	// chat is --chat-template / --chat-template-file, for the commands that chat (run,
	// serve): they register it with registerChatTemplate.
	chat chatTemplateFlags
}

// chatTemplateFlags are llama.cpp's --chat-template (Jinja text or a built-in name) and
// --chat-template-file.
type chatTemplateFlags struct {
	text, file string
}

func (c *chatTemplateFlags) register(fs interface {
	StringVar(*string, string, string, string)
}) {
	fs.StringVar(&c.text, "chat-template", "", "chat `TEMPLATE` replacing the model's tokenizer.chat_template: Jinja text or a built-in name ("+strings.Join(llm.BuiltinChatTemplates(), ", ")+")")
	fs.StringVar(&c.file, "chat-template-file", "", "read the Jinja chat template from `FILE`")
}

// source is the template given, or "" (the model's own).
func (c *chatTemplateFlags) source() (string, error) {
	if c.file == "" {
		return c.text, nil
	}
	if c.text != "" {
		return "", fmt.Errorf("--chat-template and --chat-template-file contradict each other")
	}
	b, err := readInput("--chat-template-file", c.file, 1<<20)
	if err != nil {
		return "", err
	}
	if len(b) == 0 {
		return "", fmt.Errorf("--chat-template-file %s is empty", c.file)
	}
	return string(b), nil
}

func (m *modelFlags) register(fs interface {
	Var(flag.Value, string, string)
	StringVar(*string, string, string, string)
	IntVar(*int, string, int, string)
	BoolVar(*bool, string, bool, string)
}) {
	fs.Var(modelPath{&m.model}, "m", "model `FILE` (GGUF)")
	fs.Var(modelPath{&m.model}, "model", "same as -m")
	fs.Var(hfRef{&m.model}, "hf", "model `ORG/NAME[:QUANT]` of the Hugging Face Hub, pulled if not in the cache (as gorun pull)")
	fs.Var(hfRef{&m.model}, "hf-repo", "same as -hf")
	fs.IntVar(&m.threads, "t", 0, "CPU `threads` (default: one per physical core)")
	fs.IntVar(&m.threads, "threads", 0, "same as -t")
	fs.IntVar(&m.ctx, "c", 0, "context length in tokens (default: the model's)")
	fs.IntVar(&m.ctx, "ctx-size", 0, "same as -c")
	fs.IntVar(&m.batch, "b", 512, "prompt tokens per graph evaluation")
	fs.IntVar(&m.batch, "batch-size", 512, "same as -b")
	fs.IntVar(&m.ngl, "ngl", 0, "layers to offload to the GPU (a CUDA build offloads all or none: 99 for all)")
	fs.IntVar(&m.ngl, "n-gpu-layers", 0, "same as -ngl")
	fs.Var(&m.qact, "quantized-activations", quantActHelp)
	fs.Var(&m.kv, "kv-budget", "size of the KV pool every session draws from: `SIZE` in positions (32768) or bytes with a unit (512M, 2G); default: -c x the sessions (serve: --parallel; others: 8), within the memory check")
	fs.Var(&m.mem, "mem-limit", "refuse a model and context needing more than `SIZE` (512M, 8G, ...; auto: the memory available; off)")
	fs.IntVar(&m.ubatch, "ub", 512, "physical batch: the most prompt tokens evaluated at once (-b larger than it is cut to it)")
	fs.IntVar(&m.ubatch, "ubatch-size", 512, "same as -ub")
	fs.IntVar(&m.threadsBatch, "tb", 0, "threads for prompts: accepted for llama.cpp's command lines; gorun evaluates prompts with the -t threads")
	fs.IntVar(&m.threadsBatch, "threads-batch", 0, "same as -tb")
	fs.Var(&m.flashAttn, "fa", "flash attention: on, off or auto; accepted for llama.cpp's command lines: gorun's attention is always one fused kernel (no effect)")
	fs.Var(&m.flashAttn, "flash-attn", "same as -fa")
	fs.BoolVar(&m.mlock, "mlock", false, "accepted for llama.cpp's command lines; no effect (the model stays mapped from its file)")
	fs.BoolVar(&m.noWarmup, "no-warmup", false, "accepted for llama.cpp's command lines; no effect (gorun runs no warm-up)")
	fs.StringVar(&m.cacheK, "ctk", "f32", "KV cache `TYPE` of the keys: f32 (bit-exact references) or f16 (half the memory; llama.cpp's default); -ctv must match")
	fs.StringVar(&m.cacheK, "cache-type-k", "f32", "same as -ctk")
	fs.StringVar(&m.cacheV, "ctv", "f32", "KV cache `TYPE` of the values: f32 or f16, as -ctk")
	fs.StringVar(&m.cacheV, "cache-type-v", "f32", "same as -ctv")
	fs.BoolVar(&m.noMmap, "no-mmap", false, "accepted for llama.cpp's command lines; no effect (gorun maps the model as it always does)")
}

// modelPath is -m FILE, refused after -hf (one model).
type modelPath struct{ model *string }

func (p modelPath) String() string {
	if p.model == nil {
		return ""
	}
	return *p.model
}

func (p modelPath) Set(s string) error {
	if strings.HasPrefix(*p.model, "hf://") {
		return fmt.Errorf("-hf %s names the model already", strings.TrimPrefix(*p.model, "hf://"))
	}
	*p.model = s
	return nil
}

// hfRef is llama.cpp's -hf ORG/NAME[:QUANT]: it sets the model to hf://ORG/NAME[:QUANT],
// which the commands resolve from the Hub cache or by pulling (resolveModel).
type hfRef struct{ model *string }

func (h hfRef) String() string {
	if h.model == nil {
		return ""
	}
	return strings.TrimPrefix(*h.model, "hf://")
}

func (h hfRef) Set(s string) error {
	if *h.model != "" && !strings.HasPrefix(*h.model, "hf://") {
		return fmt.Errorf("-m %s names the model already", *h.model)
	}
	if _, _, err := hub.ParseRef(s); err != nil {
		return err
	}
	*h.model = "hf://" + s
	return nil
}

// onOffAuto is llama.cpp's -fa: on, off, auto, or alone (on).
type onOffAuto string

func (v *onOffAuto) String() string   { return string(*v) }
func (v *onOffAuto) IsBoolFlag() bool { return true }
func (v *onOffAuto) Set(s string) error {
	switch strings.ToLower(s) {
	case "on", "true", "1":
		*v = "on"
	case "off", "false", "0":
		*v = "off"
	case "auto":
		*v = "auto"
	default:
		return fmt.Errorf("want on, off or auto")
	}
	return nil
}

// quantActFlag is --quantized-activations: auto, true (alone) or false (llm.QuantAct).
type quantActFlag llm.QuantAct

const quantActHelp = "8-bit activations and integer dot products (ggml's path) for quantized weights: " +
	"auto (the default): Q4_0 weights where the CPU has AVX-512 VNNI or AVX-VNNI, within 0.2% of the float path's perplexity; " +
	"true (or the option alone): Q8_0 and Q4_0 weights on any CPU; false: float32 activations everywhere. " +
	"Other types, the logits and the GPU keep float32"

func (v *quantActFlag) String() string   { return llm.QuantAct(*v).String() }
func (v *quantActFlag) IsBoolFlag() bool { return true }
func (v *quantActFlag) Set(s string) error {
	q, err := llm.ParseQuantAct(s)
	if err != nil {
		return fmt.Errorf("want auto, true or false")
	}
	*v = quantActFlag(q)
	return nil
}

func (m *modelFlags) load(stderr io.Writer) (*llm.Model, error) {
	if m.threads < 0 || m.ctx < 0 || m.batch < 1 || m.ubatch < 1 || m.threadsBatch < 0 {
		return nil, fmt.Errorf("-t, -tb, -c must be >= 0 and -b, -ub >= 1")
	}
	if m.ngl < 0 {
		return nil, fmt.Errorf("-ngl %d: the layer count must be >= 0", m.ngl)
	}
	tmpl, err := m.chat.source()
	if err != nil {
		return nil, err
	}
	ct, err := m.cacheType()
	if err != nil {
		return nil, err
	}
	opts := llm.Options{Threads: m.threads, ContextLength: m.ctx, BatchSize: min(m.batch, m.ubatch), QuantizedActivations: llm.QuantAct(m.qact),
		MemoryLimit: int64(m.mem), GPULayers: m.ngl, ChatTemplate: tmpl, CacheType: ct,
		KVPool: m.kv.positions, KVPoolBytes: m.kv.bytes, KVContexts: m.kvContexts}
	return loadOnDevice(m.model, opts, stderr)
}

// cacheType reads -ctk and -ctv: f32 or f16, the same for both.
func (m *modelFlags) cacheType() (quant.Type, error) {
	k, v := strings.ToLower(m.cacheK), strings.ToLower(m.cacheV)
	if k == "" {
		k = "f32"
	}
	if v == "" {
		v = "f32"
	}
	if k != v {
		return 0, fmt.Errorf("-ctk %s -ctv %s: gorun's KV caches hold one type for keys and values", m.cacheK, m.cacheV)
	}
	switch k {
	case "f32":
		return quant.F32, nil
	case "f16":
		return quant.F16, nil
	}
	return 0, fmt.Errorf("-ctk/-ctv %s: KV cache types are f32 and f16 (llama.cpp's quantized caches are not supported)", m.cacheK)
}

// loadOnDevice loads a model on the device the options ask for. Like llama-cli, a build
// without GPU support warns and runs on the CPU; a GPU in use is named on stderr.
func loadOnDevice(path string, opts llm.Options, stderr io.Writer) (*llm.Model, error) {
	md, err := llm.Load(path, opts)
	if opts.GPULayers != 0 && errors.Is(err, llm.ErrNoGPU) {
		fmt.Fprintf(stderr, "warning: -ngl %d: %v; running on the CPU\n", opts.GPULayers, err)
		opts.GPULayers = 0
		return llm.Load(path, opts)
	}
	if err == nil && opts.GPULayers != 0 {
		if d, ok := md.Backend().(interface{ Device() string }); ok {
			fmt.Fprintf(stderr, "gpu: %s\n", d.Device())
		}
	}
	return md, err
}
