// Package llm is gorun's public API: load a GGUF model, open sessions on it, generate text and
// score text. The gorun command is a thin client of this package.
//
//	m, err := llm.Load("gpt2.gguf", llm.Options{Threads: 4})
//	if err != nil { ... }
//	defer m.Close()
//	s, err := m.NewSession()
//	opts := llm.GenerateOptions{MaxTokens: 32, Sample: llm.DefaultSampling()} // zero Sample: greedy
//	stats, err := s.Generate(ctx, "Hello", opts, func(piece string) error {
//		fmt.Print(piece)
//		return nil
//	})
package llm

import (
	"fmt"
	"sync"
	"time"
	"unsafe"

	"github.com/gorun-dev/gorun/backend"
	"github.com/gorun-dev/gorun/chat"
	"github.com/gorun-dev/gorun/cpu"
	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/grammar"
	"github.com/gorun-dev/gorun/graph"
	"github.com/gorun-dev/gorun/internal/osutil"
	"github.com/gorun-dev/gorun/kvcache"
	"github.com/gorun-dev/gorun/models"
	"github.com/gorun-dev/gorun/quant"
	"github.com/gorun-dev/gorun/tokenizer"
)

// Options configure loading.
type Options struct {
	// Threads is the number of CPU threads (<= 0: one per physical core).
	Threads int
	// ContextLength is the number of tokens a session holds (0: the model's trained context).
	ContextLength int
	// BatchSize is the most prompt tokens evaluated in one graph (0: 512).
	BatchSize int
	// Backend runs the graphs; nil means the device GPULayers chooses (the CPU with Threads
	// threads by default). The model closes a backend it made, not one it was given.
	Backend graph.Backend
	// QuantizedActivations chooses which of the CPU backend's matrix multiplications quantize
	// their activations to 8 bits, as ggml does (integer dot products), instead of keeping
	// them float32. QuantActAuto (the zero value): Q4_0 weights where the CPU has AVX-512
	// VNNI or AVX-VNNI, whose perplexity stays within 0.2% of the float path's; QuantActOn:
	// every weight type with integer kernels (Q8_0, Q4_0), on any CPU; QuantActOff: none.
	// Other weight types and the logits always keep float32 activations; the GPU computes
	// float32 activations whatever this says.
	QuantizedActivations QuantAct
	// GPULayers is the number of layers to run on the GPU (llama.cpp's -ngl): 0 runs on the
	// CPU; the GPU backend runs whole models, so any other value must be at least the model's
	// layer count (99 for all). A binary built without a GPU backend returns ErrNoGPU.
	GPULayers int
	// MemoryLimit bounds the memory the model and a session may need (EstimateMemory), in
	// bytes: 0 means the memory the machine has available (Linux: MemAvailable; elsewhere
	// unchecked), a negative value turns the check off. Load refuses a model and context
	// over it before allocating them.
	MemoryLimit int64
	// ChatTemplate replaces the file's tokenizer.chat_template (llama.cpp's --chat-template):
	// Jinja text, or a built-in name (BuiltinChatTemplates: "chatml", "llama3"). It is
	// compiled when first used (Model.ChatTemplate), so a bad one fails there, naming it.
	ChatTemplate string
	// CacheType is the element type of the sessions' KV caches (llama.cpp's -ctk/-ctv): F32
	// (the zero value: bit-exact references) or F16 (half the memory and the attention's
	// reading, llama.cpp's default).
	CacheType quant.Type
	// KVPool is the number of positions of the paged KV pool every session of the model draws
	// from (rounded up to blocks of 16), on backends that page the cache (the CPU). A session
	// that needs a block when none is free fails its call with ErrKVFull. A backend without the
	// paged ops (CUDA) gives each session a whole-context cache instead, and these options do
	// nothing there.
	KVPool int
	// KVPoolBytes sizes the pool in bytes instead (when KVPool is 0): as many positions as fit
	// (Model.KVBytesPerPosition each).
	KVPoolBytes int64
	// KVContexts sizes the pool when neither is set: that many whole contexts (0: 8), fewer
	// when the memory check leaves room for fewer, never less than one. A server with N slots
	// sets N.
	KVContexts int
	// NoPrefixCache turns prefix caching off: by default, a paged session whose prompt starts
	// like the context of another (running, or finished while its blocks stay cached) takes
	// that context's keys and values from the pool, whole blocks of 16 tokens, instead of
	// computing them again (bit-identical results either way; Session.SetPrefixCache).
	NoPrefixCache bool
}

// Model is a loaded model: mapped weights, tokenizer and backend. It is safe for concurrent use
// by several sessions, one goroutine each: their single-token steps are computed together, as
// the rows of one forward pass per step (continuous batching), and prompts take turns.
type Model struct {
	file   *gguf.File
	path   string
	arch   models.Model
	tok    tokenizer.Tokenizer
	be     graph.Backend
	ownsBe bool
	// onGPU: the backend is a GPU's, so the host is free while a step computes (a grammar's
	// next mask is computed then)
	onGPU bool
	nctx  int
	// cacheType is the sessions' KV cache element type (Options.CacheType)
	cacheType quant.Type
	nbatch    int
	// paged: the device computes the paged graphs, so sessions share pool (Options.KVPool).
	paged    bool
	pool     *kvcache.Pool
	prefix   bool // Options.NoPrefixCache is false
	loadTime time.Duration

	computeMu   sync.Mutex // one computation at a time on the backend
	life        lifecycle  // Close waits for computations and refuses new ones
	batch       batcher    // sessions' single-token steps, computed together
	fingerprint uint64     // identifies the weights in saved sessions (computed on first use)
	fpOnce      sync.Once

	chatOverride string         // Options.ChatTemplate
	chatFile     string         // tokenizer.chat_template
	chatFileErr  error          // reading it
	chatOnce     sync.Once      // compiles the template on first use
	chat         *chat.Template // ChatTemplate's result
	chatErr      error

	gvOnce sync.Once      // builds gv on the first grammar-constrained generation
	gv     *grammar.Vocab // the token texts as a trie, for grammar masks
}

// Load maps a GGUF file and prepares its model. Errors name what is wrong with the file.
func Load(path string, opts Options) (*Model, error) {
	start := time.Now()
	f, err := gguf.Open(path)
	if err != nil {
		return nil, openError(err)
	}
	m, err := newModel(f, opts)
	if err != nil {
		f.Close()
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	m.loadTime = time.Since(start)
	m.path = path
	return m, nil
}

func newModel(f *gguf.File, opts Options) (*Model, error) {
	if opts.Backend == nil {
		if err := osutil.CheckThreads(opts.Threads); err != nil {
			return nil, err
		}
	}
	dev, err := chooseDevice(opts)
	if err != nil {
		return nil, err
	}
	if err := checkFile(f); err != nil {
		return nil, classify(err)
	}
	tok, err := tokenizer.FromGGUF(f)
	if err != nil {
		return nil, classify(err)
	}
	// The architecture bound on a backend that allocates nothing: its graphs are checked
	// against the device and sized before any weight is uploaded or memory is taken.
	plan, err := models.Load(f, &sizer{})
	if err != nil {
		return nil, classify(err)
	}
	m := &Model{file: f, tok: tok, arch: plan}
	m.readChatTemplate(opts.ChatTemplate)
	if err := m.configure(plan.Hparams(), opts); err != nil {
		return nil, err
	}
	if err := checkGPULayers(dev, plan.Hparams(), opts); err != nil {
		return nil, err
	}
	if err := m.checkSupport(dev, opts.Backend); err != nil {
		return nil, err
	}
	if opts.KVPool < 0 || opts.KVPoolBytes < 0 || opts.KVContexts < 0 {
		return nil, fmt.Errorf("%w: a KV pool of %d positions, %d bytes or %d contexts", ErrInvalidOption, opts.KVPool, opts.KVPoolBytes, opts.KVContexts)
	}
	spare, err := m.checkMemory(opts.MemoryLimit, scratchThreads(dev, opts), m.givenPool(opts))
	if err != nil {
		return nil, err
	}
	if err := m.open(dev, opts); err != nil {
		return nil, err
	}
	if m.arch, err = models.Load(f, m.be); err != nil {
		m.closeBackend()
		return nil, classify(err)
	}
	if m.paged {
		m.prefix = !opts.NoPrefixCache
		if err := m.openPool(m.poolPositions(opts, spare)); err != nil {
			m.closeBackend()
			return nil, err
		}
	}
	return m, nil
}

// CacheType is the element type of the sessions' KV caches (Options.CacheType).
func (m *Model) CacheType() quant.Type { return m.cacheType }

// configure checks the model against its tokenizer and sets the context and batch lengths.
func (m *Model) configure(hp models.Hparams, opts Options) error {
	if hp.NVocab != m.tok.VocabSize() {
		return fmt.Errorf("%w: the tokenizer has %d tokens but the model %d", ErrBadFile, m.tok.VocabSize(), hp.NVocab)
	}
	m.nctx = hp.NCtx
	if opts.ContextLength > 0 {
		if opts.ContextLength > hp.NCtx {
			return fmt.Errorf("%w: context length %d exceeds the %d positions this %s model was trained for", ErrInvalidOption, opts.ContextLength, hp.NCtx, hp.Arch)
		}
		m.nctx = opts.ContextLength
	}
	m.nbatch = 512
	if opts.BatchSize > 0 {
		m.nbatch = opts.BatchSize
	}
	m.nbatch = min(m.nbatch, m.nctx)
	switch opts.CacheType {
	case quant.F32, quant.F16:
		m.cacheType = opts.CacheType
	default:
		return fmt.Errorf("%w: KV cache type %v (gorun's caches are f32 or f16)", ErrInvalidOption, opts.CacheType)
	}
	if opts.QuantizedActivations > QuantActOn {
		return fmt.Errorf("%w: quantized activations %v (want QuantActAuto, QuantActOff or QuantActOn)", ErrInvalidOption, opts.QuantizedActivations)
	}
	return nil
}

// open starts the backend: the one the options give (not owned), or the chosen device's.
func (m *Model) open(dev backend.Device, opts Options) error {
	if opts.Backend != nil {
		m.be = opts.Backend
		return nil
	}
	be, err := dev.Open(backend.Config{Threads: opts.Threads, QuantizedActivations: opts.QuantizedActivations})
	if err != nil {
		if dev.GPU {
			return fmt.Errorf("no usable %s GPU: %w (check the driver with nvidia-smi, or load without GPU layers)", dev.Name, err)
		}
		return err
	}
	m.be, m.ownsBe, m.onGPU = be, true, dev.GPU
	return nil
}

func (m *Model) closeBackend() {
	if m.ownsBe {
		m.be.Close()
	}
}

// Path is the file the model was loaded from.
func (m *Model) Path() string { return m.path }

// Tokenizer returns the model's tokenizer.
func (m *Model) Tokenizer() tokenizer.Tokenizer { return m.tok }

// Hparams returns the model's shape.
func (m *Model) Hparams() models.Hparams { return m.arch.Hparams() }

// Tokenize encodes text as llama.cpp's tokenizer does with add_special: BOS first and EOS last
// when atStart (the text begins a context) and the file's metadata asks for them
// (tokenizer.ggml.add_bos_token, add_eos_token); special tokens written in the text are parsed.
func (m *Model) Tokenize(text string, atStart bool) []int32 {
	sp := m.tok.Special()
	var ids []int32
	if atStart && sp.AddBOS && sp.BOS >= 0 {
		ids = append(ids, sp.BOS)
	}
	ids = m.tok.AppendEncode(ids, text)
	if atStart && sp.AddEOS && sp.EOS >= 0 {
		ids = append(ids, sp.EOS)
	}
	return ids
}

// StartToken is what an empty prompt begins a context with: BOS, or EOS where the vocabulary
// has no BOS (GPT-2 starts unconditional text at end-of-text, as Hugging Face does).
func (m *Model) StartToken() int32 {
	if bos := m.tok.Special().BOS; bos >= 0 {
		return bos
	}
	return m.tok.EOS()
}

// ContextLength is the number of tokens a session holds.
func (m *Model) ContextLength() int { return m.nctx }

// LoadTime is how long Load took.
func (m *Model) LoadTime() time.Duration { return m.loadTime }

// Backend returns the backend running the model.
func (m *Model) Backend() graph.Backend { return m.be }

// File returns the model's GGUF file (its metadata and tensor table).
func (m *Model) File() *gguf.File { return m.file }

func i32Bytes(v []int32) []byte {
	if len(v) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))
}

func errPromptTooLong(n, pos, size int) error {
	return fmt.Errorf("%w: the prompt has %d tokens, %d are in use, and the context holds %d (leave room for at least one generated token; raise -c up to the model's limit or shorten the prompt)", ErrContextFull, n, pos, size)
}

// LoadTokenizer reads only the tokenizer of a GGUF model.
func LoadTokenizer(path string) (tokenizer.Tokenizer, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if err := checkVocabulary(f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	t, err := tokenizer.FromGGUF(f)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return t, nil
}

// Threads is the number of CPU threads of the model's backend (0 if not a CPU backend).
func (m *Model) Threads() int {
	if t, ok := m.be.(interface{ Threads() int }); ok {
		return t.Threads()
	}
	return 0
}

func defaultThreads() int { return cpu.DefaultThreads() }
