package convert

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/llm"
	"github.com/gorun-dev/gorun/quant"
	"github.com/gorun-dev/gorun/quantize"
	"github.com/gorun-dev/gorun/safetensors"
)

type hfRefs struct {
	Prompts []struct {
		Text       string  `json:"text"`
		IDs        []int32 `json:"ids"`
		Greedy     []int32 `json:"greedy24"`
		GreedyText string  `json:"greedy24_text"`
	} `json:"prompts"`
}

// The converted model (f16 and f32) reproduces Hugging Face's float32 greedy continuations:
// the prompt's token ids, the 24 greedy tokens and their text.
func TestConvertedGreedyMatchesHF(t *testing.T) {
	dir := microDir(t)
	var refs hfRefs
	b, err := os.ReadFile(filepath.Join(dir, "hf_refs.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &refs); err != nil {
		t.Fatal(err)
	}
	for _, ot := range []string{"f16", "f32"} {
		t.Run(ot, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "m.gguf")
			if _, err := Convert(dir, out, Options{OutType: ot}); err != nil {
				t.Fatal(err)
			}
			m, err := llm.Load(out, llm.Options{Threads: 2})
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			for _, p := range refs.Prompts {
				if ids := m.Tokenizer().Encode(p.Text); !slices.Equal(ids, p.IDs) {
					t.Fatalf("%q encodes to %v, HF %v", p.Text, ids, p.IDs)
				}
				s, err := m.NewSession()
				if err != nil {
					t.Fatal(err)
				}
				var text strings.Builder
				_, err = s.Generate(context.Background(), p.Text, llm.GenerateOptions{MaxTokens: len(p.Greedy),
					Sample: llm.SampleOptions{Temperature: 0, RepeatPenalty: 1}}, func(piece string) error {
					text.WriteString(piece)
					return nil
				})
				if err != nil {
					t.Fatal(err)
				}
				if got := s.Tokens()[len(p.IDs):]; !slices.Equal(got, p.Greedy) {
					t.Errorf("%q: greedy %v, HF %v", p.Text, got, p.Greedy)
				}
				if text.String() != p.GreedyText {
					t.Errorf("%q: text %q, HF %q", p.Text, text.String(), p.GreedyText)
				}
				s.Close()
			}
		})
	}
}

// linkTokenizer makes dir/gpt2-micro with links to the fixture's config and tokenizer files
// (never copies) and returns it.
func linkTokenizer(t *testing.T, src, root string, files ...string) string {
	t.Helper()
	dir := filepath.Join(root, "gpt2-micro")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if err := os.Symlink(filepath.Join(src, f), filepath.Join(dir, f)); err != nil {
			t.Skipf("symbolic links: %v", err)
		}
	}
	return dir
}

// rewrite writes the fixture's tensors into dir as safetensors of dtype (values rounded to it),
// in n shards with an index when n > 1.
func rewrite(t *testing.T, src *safetensors.Checkpoint, dir string, dtype safetensors.DType, shards int) {
	t.Helper()
	parts := make([][]safetensors.WriteTensor, shards)
	weightMap := map[string]string{}
	for i, ts := range src.Tensors {
		v := make([]float32, ts.Elements())
		if err := ts.Float32s(v, 0); err != nil {
			t.Fatal(err)
		}
		data := make([]byte, 0, len(v)*dtype.Size())
		for _, x := range v {
			switch dtype {
			case safetensors.F32:
				data = binary.LittleEndian.AppendUint32(data, math.Float32bits(x))
			case safetensors.F16:
				data = binary.LittleEndian.AppendUint16(data, quant.F32ToF16(x))
			case safetensors.BF16:
				data = binary.LittleEndian.AppendUint16(data, quant.F32ToBF16(x))
			}
		}
		k := i * shards / len(src.Tensors)
		parts[k] = append(parts[k], safetensors.WriteTensor{Name: ts.Name, DType: dtype, Shape: ts.Shape, Data: data})
	}
	for k, p := range parts {
		name := "model.safetensors"
		if shards > 1 {
			name = "model-0000" + string(rune('1'+k)) + "-of-0000" + string(rune('0'+shards)) + ".safetensors"
			for _, ts := range p {
				weightMap[ts.Name] = name
			}
		}
		var buf bytes.Buffer
		if err := safetensors.Write(&buf, p, map[string]string{"format": "pt"}); err != nil {
			t.Fatal(err)
		}
		writeNew(t, filepath.Join(dir, name), buf.Bytes())
	}
	if shards > 1 {
		b, _ := json.Marshal(map[string]any{"metadata": map[string]any{}, "weight_map": weightMap})
		writeNew(t, filepath.Join(dir, safetensors.IndexName), b)
	}
}

// roundTo writes dir/model.safetensors: ck's tensors rounded through dtype, stored as F32.
func roundTo(t *testing.T, src *safetensors.Checkpoint, dir string, dtype safetensors.DType) {
	t.Helper()
	var ts []safetensors.WriteTensor
	for _, s := range src.Tensors {
		v := make([]float32, s.Elements())
		if err := s.Float32s(v, 0); err != nil {
			t.Fatal(err)
		}
		data := make([]byte, 0, 4*len(v))
		for _, x := range v {
			switch dtype {
			case safetensors.F16:
				x = quant.F16ToF32(quant.F32ToF16(x))
			case safetensors.BF16:
				x = quant.BF16ToF32(quant.F32ToBF16(x))
			}
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(x))
		}
		ts = append(ts, safetensors.WriteTensor{Name: s.Name, DType: safetensors.F32, Shape: s.Shape, Data: data})
	}
	var buf bytes.Buffer
	if err := safetensors.Write(&buf, ts, map[string]string{"format": "pt"}); err != nil {
		t.Fatal(err)
	}
	writeNew(t, filepath.Join(dir, "model.safetensors"), buf.Bytes())
}

// writeNew creates a new file: it fails rather than write through an existing name or link
// (the fixtures are linked into test directories, never to be written).
func writeNew(t *testing.T, path string, b []byte) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.Write(b); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
}

func fileSum(t *testing.T, p string) [32]byte {
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

var hfFiles = []string{"config.json", "tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt"}

// A BF16 and an F16 checkpoint (the second one sharded) convert to the same GGUF as a float32
// checkpoint holding the same values.
func TestHalfCheckpointsConvertLikeTheirFloat32Values(t *testing.T) {
	src := microDir(t)
	ck, err := safetensors.OpenDir(src)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	// f32 compares the values exactly, f16 the rounding back to half (one output type each
	// keeps the test fast: every conversion writes and syncs a whole file).
	for _, c := range []struct {
		dtype    safetensors.DType
		shards   int
		outTypes []string
	}{{safetensors.BF16, 1, []string{"f32"}}, {safetensors.F16, 3, []string{"f16"}}} {
		t.Run(string(c.dtype), func(t *testing.T) {
			half := linkTokenizer(t, src, t.TempDir(), hfFiles...)
			rewrite(t, ck, half, c.dtype, c.shards)
			wide := linkTokenizer(t, src, t.TempDir(), hfFiles...)
			roundTo(t, ck, wide, c.dtype)
			for _, ot := range c.outTypes {
				a, b := filepath.Join(t.TempDir(), "a.gguf"), filepath.Join(t.TempDir(), "b.gguf")
				if _, err := Convert(half, a, Options{OutType: ot}); err != nil {
					t.Fatal(err)
				}
				if _, err := Convert(wide, b, Options{OutType: ot}); err != nil {
					t.Fatal(err)
				}
				if fileSum(t, a) != fileSum(t, b) {
					t.Errorf("--outtype %s: %s checkpoint and its float32 values convert differently", ot, c.dtype)
				}
			}
			// auto picks f16 for an F16 checkpoint, else bf16.
			rep, err := Convert(half, filepath.Join(t.TempDir(), "auto.gguf"), Options{OutType: "auto"})
			if want := map[safetensors.DType]string{safetensors.F16: "f16", safetensors.BF16: "bf16"}[c.dtype]; err != nil || rep.OutType != want {
				t.Errorf("auto: %q, %v; want %s", rep.OutType, err, want)
			}
		})
	}
}

// Without tokenizer.json the vocabulary comes from vocab.json and merges.txt: the same tokens,
// types and merges; as in llama.cpp, the unknown token id is then not written (its
// SpecialVocab finds tokenizer_config.json's unk_token only among tokenizer.json's added
// tokens, and config.json has no unk_token_id).
func TestConvertFromVocabJSONAndMerges(t *testing.T) {
	src := microDir(t)
	dir := linkTokenizer(t, src, t.TempDir(), "config.json", "tokenizer_config.json", "vocab.json", "merges.txt", "model.safetensors")
	out := filepath.Join(t.TempDir(), "m.gguf")
	rep, err := Convert(dir, out, Options{OutType: "f16"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.Tokenizer != "vocab.json and merges.txt" {
		t.Errorf("tokenizer from %q", rep.Tokenizer)
	}
	got, _ := describe(t, out)
	want := loadDigests(t)["gpt2-micro-f16.llamacpp.gguf"]
	compare(t, got, want, map[string]bool{"tokenizer.ggml.unknown_token_id": true})
	if _, ok := got.KV["tokenizer.ggml.unknown_token_id"]; ok {
		t.Error("unknown_token_id written")
	}
}

// --outtype q8_0 is written directly, as llama.cpp's converter writes it: its order and
// metadata, matrices Q8_0 with ggml's reference bytes (the same as quantize.File's reference
// Q8_0 of the float32 conversion), the rest F32; the model loads. Another recipe (q4_0) goes
// through quantize.File and leaves no intermediate file.
func TestConvertQ8_0(t *testing.T) {
	dir := microDir(t)
	tmp := t.TempDir()
	out, f32, ref := filepath.Join(tmp, "q.gguf"), filepath.Join(tmp, "f.gguf"), filepath.Join(tmp, "r.gguf")
	rep, err := Convert(dir, out, Options{OutType: "q8_0"})
	if err != nil {
		t.Fatal(err)
	}
	if rep.FileType != quantize.FileQ8_0 || rep.Quantize != nil {
		t.Fatalf("report %+v", rep)
	}
	if _, err := Convert(dir, f32, Options{OutType: "f32"}); err != nil {
		t.Fatal(err)
	}
	if _, err := quantize.File(f32, ref, quantize.Options{FileType: quantize.FileQ8_0, Reference: true, Threads: 2}); err != nil {
		t.Fatal(err)
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r, err := gguf.Open(ref)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if ft, _ := f.Uint("general.file_type"); ft != uint64(quantize.FileQ8_0) {
		t.Errorf("file type %d", ft)
	}
	got, _ := describe(t, out)
	want := loadDigests(t)["gpt2-micro-f16.llamacpp.gguf"]
	if !slices.Equal(got.Order, want.Order) {
		t.Errorf("metadata keys %v", got.Order)
	}
	for i, ti := range f.Tensors {
		if ti.Name != want.Tensors[i].Name {
			t.Errorf("tensor %d is %s, llama.cpp's %s", i, ti.Name, want.Tensors[i].Name)
		}
		want := quant.F32
		if len(ti.Dims) == 2 && ti.Name != "position_embd.weight" {
			want = quant.Q8_0
		}
		rt := r.Tensor(ti.Name)
		if ti.Type != want || rt == nil || rt.Type != ti.Type || !bytes.Equal(f.Data(&f.Tensors[i]), r.Data(rt)) {
			t.Errorf("%s is %v, want %v and quantize.File's bytes", ti.Name, ti.Type, want)
		}
	}
	m, err := llm.Load(out, llm.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	m.Close()

	km := filepath.Join(tmp, "k.gguf")
	rep, err = Convert(dir, km, Options{OutType: "q4_0", Threads: 2, Reference: true})
	if err != nil || rep.Quantize == nil || rep.FileType != quantize.FileQ4_0 {
		t.Fatalf("q4_0: %+v, %v", rep, err)
	}
	if _, err := os.Stat(km + ".f32.tmp"); !os.IsNotExist(err) {
		t.Errorf("intermediate left behind: %v", err)
	}
}

func TestConvertRefusals(t *testing.T) {
	src := microDir(t)
	ck, err := safetensors.OpenDir(src)
	if err != nil {
		t.Fatal(err)
	}
	defer ck.Close()
	write := func(dir string, mutate func([]safetensors.WriteTensor) []safetensors.WriteTensor) {
		var ts []safetensors.WriteTensor
		for _, s := range ck.Tensors {
			ts = append(ts, safetensors.WriteTensor{Name: s.Name, DType: s.DType, Shape: s.Shape, Data: s.Data})
		}
		var buf bytes.Buffer
		if err := safetensors.Write(&buf, mutate(ts), nil); err != nil {
			t.Fatal(err)
		}
		writeNew(t, filepath.Join(dir, "model.safetensors"), buf.Bytes())
	}
	cases := []struct {
		name   string
		setup  func(dir string)
		opts   Options
		want   string
		noOutp bool
	}{
		{"pickle", func(dir string) {
			writeNew(t, filepath.Join(dir, "pytorch_model.bin"), []byte("PK\x03\x04"))
		}, Options{}, "use the model's safetensors", true},
		{"missing tensor", func(dir string) {
			write(dir, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
				return slices.DeleteFunc(ts, func(w safetensors.WriteTensor) bool { return w.Name == "transformer.h.1.mlp.c_fc.bias" })
			})
		}, Options{}, "lacks tensors: blk.1.ffn_up.bias", true},
		{"wrong shape", func(dir string) {
			write(dir, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
				for i := range ts {
					if ts[i].Name == "transformer.h.0.attn.c_proj.weight" {
						ts[i].Shape = []int64{32, 128}
					}
				}
				return ts
			})
		}, Options{}, "has shape [32 128], the config needs [64 64]", true},
		{"unknown tensor", func(dir string) {
			write(dir, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
				return append(ts, safetensors.WriteTensor{Name: "transformer.h.0.adapter.weight", DType: safetensors.F32, Shape: []int64{1}, Data: make([]byte, 4)})
			})
		}, Options{}, `cannot map tensor "transformer.h.0.adapter.weight"`, true},
		{"integer weights", func(dir string) {
			write(dir, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor {
				for i := range ts {
					if ts[i].Name == "transformer.ln_f.bias" {
						ts[i].DType = safetensors.I32
					}
				}
				return ts
			})
		}, Options{}, "is I32", true},
		{"bad outtype", func(dir string) {
			write(dir, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor { return ts })
		}, Options{OutType: "q9_9"}, "--outtype", true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			dir := linkTokenizer(t, src, t.TempDir(), hfFiles...)
			c.setup(dir)
			out := filepath.Join(t.TempDir(), "m.gguf")
			_, err := Convert(dir, out, c.opts)
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("output written: %v", err)
			}
			if _, err := os.Stat(gguf.TempPath(out)); !os.IsNotExist(err) {
				t.Errorf("temporary file left: %v", err)
			}
		})
	}
	t.Run("wrong architecture", func(t *testing.T) {
		dir := t.TempDir()
		writeNew(t, filepath.Join(dir, "config.json"), []byte(`{"architectures":["MixtralForCausalLM"]}`))
		if _, err := Convert(dir, filepath.Join(dir, "m.gguf"), Options{}); err == nil || !strings.Contains(err.Error(), "GPT2LMHeadModel, LlamaForCausalLM, MistralForCausalLM and Qwen2ForCausalLM") {
			t.Fatalf("error %v", err)
		}
	})
	t.Run("output is the input", func(t *testing.T) {
		dir := linkTokenizer(t, src, t.TempDir(), hfFiles...)
		p := filepath.Join(dir, "model.safetensors")
		write(dir, func(ts []safetensors.WriteTensor) []safetensors.WriteTensor { return ts })
		if _, err := Convert(dir, p, Options{}); err == nil || !strings.Contains(err.Error(), "refusing to overwrite") {
			t.Fatalf("error %v", err)
		}
	})
}

// Hostile tokenizer and config files get errors naming the problem.
func TestConvertHostileTokenizerAndConfig(t *testing.T) {
	src := microDir(t)
	cfg, err := os.ReadFile(filepath.Join(src, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name  string
		files map[string]string
		want  string
	}{
		{"token id out of range", map[string]string{"vocab.json": `{"a": 0, "b": 60000}`, "merges.txt": "a b\n"}, "outside the model's vocabulary"},
		{"duplicate id", map[string]string{"vocab.json": `{"a": 1, "b": 1}`, "merges.txt": "a b\n"}, "both have id 1"},
		{"bad tokenizer.json", map[string]string{"tokenizer.json": `{"model": {"vocab": [1]}}`}, "tokenizer.json"},
		{"not BPE", map[string]string{"tokenizer.json": `{"model": {"type": "Unigram", "vocab": {}}}`}, "needs BPE"},
		{"no merges", map[string]string{"vocab.json": `{"a": 0}`}, "no BPE merges"},
		{"no tokenizer", map[string]string{}, "has no tokenizer"},
		{"bad merges", map[string]string{"tokenizer.json": `{"model": {"vocab": {"a": 0}, "merges": [["a"]]}}`}, "merge 0 has 1 parts"},
		{"huge n_layer", map[string]string{"config.json": strings.Replace(string(cfg), `"n_layer": 2`, `"n_layer": 2000000000`, 1)}, "n_layer 2000000000"},
		{"bad n_embd", map[string]string{"config.json": strings.Replace(string(cfg), `"n_embd": 64`, `"n_embd": -64`, 1)}, "n_embd is -64"},
		{"bad epsilon", map[string]string{"config.json": strings.Replace(string(cfg), `"layer_norm_epsilon": 1e-05`, `"layer_norm_epsilon": "x"`, 1)}, "layer_norm_epsilon"},
		{"bad JSON", map[string]string{"config.json": `{"architectures": [`}, "config.json"},
	} {
		t.Run(c.name, func(t *testing.T) {
			links := []string{"model.safetensors"}
			if _, ok := c.files["config.json"]; !ok {
				links = append(links, "config.json")
			}
			dir := linkTokenizer(t, src, t.TempDir(), links...)
			for name, body := range c.files {
				writeNew(t, filepath.Join(dir, name), []byte(body))
			}
			out := filepath.Join(t.TempDir(), "m.gguf")
			if _, err := Convert(dir, out, Options{}); err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("error %v, want one containing %q", err, c.want)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Errorf("output written: %v", err)
			}
		})
	}
}
