package convert

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"testing"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/llm"
	"github.com/gorun-dev/gorun/safetensors"
)

const fuzzConfig = `{"architectures": ["GPT2LMHeadModel"], "n_layer": 1, "n_embd": 8, "n_head": 2, "n_positions": 8, "vocab_size": 6, "eos_token_id": 5}`

const fuzzTokenizer = `{"added_tokens": [{"id": 5, "content": "<|endoftext|>", "special": true}],
 "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": true, "use_regex": true},
 "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "c": 3, "Ġ": 4, "<|endoftext|>": 5}, "merges": [["a", "b"]]}}`

// FuzzConvert converts a checkpoint directory made from the fuzz input: config.json,
// tokenizer.json, tokenizer_config.json, vocab.json, merges.txt (each left out when empty) and
// model.safetensors (the fuzz bytes, or, when they are empty, tensors of the shapes the config
// asks for if it is small). Convert must return an error or write a GGUF that opens, whose
// tokenizer has vocab_size tokens and merges of tokens it has, and that llm.Load loads.
func FuzzConvert(f *testing.F) {
	f.Add([]byte(fuzzConfig), fuzzTokenizer, "", "", "", []byte(nil), uint8(0))
	f.Add([]byte(fuzzConfig), "", `{"a": 0, "b": 1, "ab": 2, "c": 3, "Ġ": 4, "<|endoftext|>": 5}`, "#version: 0.2\na b\n", `{"eos_token": "<|endoftext|>", "add_bos_token": false}`, []byte(nil), uint8(1))
	f.Add([]byte(fuzzConfig), "", `{"a": 0, "b": 1}`, "a b\nab c\n", "", []byte(nil), uint8(2))
	f.Add([]byte(fuzzConfig), `{"model": {"vocab": {"\ud800": 0}, "merges": []}}`, "", "", "", []byte(nil), uint8(3))
	f.Add([]byte(`{"architectures": ["GPT2LMHeadModel"], "n_layer": 1, "n_embd": 8, "n_head": 2, "n_positions": 8, "vocab_size": 200}`), fuzzTokenizer, "", "", "", []byte(nil), uint8(4))
	f.Add([]byte(fuzzConfig), fuzzTokenizer, "", "", "", []byte("\x10\x00\x00\x00\x00\x00\x00\x00{\"a\":{}}        "), uint8(0))
	f.Fuzz(func(t *testing.T, config []byte, tokenizer, vocab, merges, tokCfg string, st []byte, mode uint8) {
		dir := filepath.Join(t.TempDir(), "ckpt")
		if err := os.Mkdir(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		for name, body := range map[string][]byte{"config.json": config, "tokenizer.json": []byte(tokenizer),
			"vocab.json": []byte(vocab), "merges.txt": []byte(merges), "tokenizer_config.json": []byte(tokCfg)} {
			if len(body) > 0 {
				writeNew(t, filepath.Join(dir, name), body)
			}
		}
		if len(st) == 0 {
			st = checkpointFor(config, mode)
		}
		if st != nil {
			writeNew(t, filepath.Join(dir, "model.safetensors"), st)
		}
		out := filepath.Join(t.TempDir(), "m.gguf")
		outType := []string{"f16", "f32", "bf16", "q8_0", "auto"}[int(mode)%5]
		if _, err := Convert(dir, out, Options{OutType: outType, Threads: 1}); err != nil {
			if _, serr := os.Stat(out); serr == nil {
				t.Fatalf("Convert failed (%v) but wrote %s", err, out)
			}
			return
		}
		checkConverted(t, out, config)
	})
}

// checkConverted fails unless out is a GGUF whose tokenizer matches config.json's vocab_size
// and whose merges name its tokens, and which llm.Load loads.
func checkConverted(t *testing.T, out string, config []byte) {
	t.Helper()
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatalf("Convert succeeded but its output does not open: %v", err)
	}
	var cfg struct {
		Vocab int `json:"vocab_size"`
	}
	json.Unmarshal(config, &cfg)
	tokens, _ := f.Strings("tokenizer.ggml.tokens")
	if len(tokens) != cfg.Vocab {
		t.Fatalf("%d tokens, vocab_size %d", len(tokens), cfg.Vocab)
	}
	have := map[string]bool{}
	for _, tok := range tokens {
		have[tok] = true
	}
	merges, _ := f.Strings("tokenizer.ggml.merges")
	for _, m := range merges {
		a, b, ok := bytes.Cut([]byte(m), []byte(" "))
		if !ok || !have[string(a)] || !have[string(b)] || !have[string(a)+string(b)] {
			t.Fatalf("merge %q names a token the vocabulary lacks", m)
		}
	}
	f.Close()
	m, err := llm.Load(out, llm.Options{Threads: 1, ContextLength: 8, BatchSize: 8, MemoryLimit: 256 << 20})
	if err != nil {
		t.Fatalf("Convert succeeded but llm.Load refuses its output: %v", err)
	}
	m.Close()
}

// checkpointFor makes a model.safetensors with every tensor a GPT-2 of the config needs, when
// the config is small enough (nil otherwise); mode seeds the values.
func checkpointFor(config []byte, mode uint8) []byte {
	var c struct {
		Layer, Embd, Pos, Vocab int64
	}
	var raw map[string]json.RawMessage
	if json.Unmarshal(config, &raw) != nil {
		return nil
	}
	for key, dst := range map[string]*int64{"n_layer": &c.Layer, "n_embd": &c.Embd, "n_positions": &c.Pos, "vocab_size": &c.Vocab} {
		if json.Unmarshal(raw[key], dst) != nil || *dst <= 0 || *dst > 512 {
			return nil
		}
	}
	if c.Layer > 2 || c.Embd > 64 {
		return nil
	}
	e := c.Embd
	shapes := map[string][]int64{"transformer.wte.weight": {c.Vocab, e}, "transformer.wpe.weight": {c.Pos, e},
		"transformer.ln_f.weight": {e}, "transformer.ln_f.bias": {e}}
	for i := range c.Layer {
		for name, shape := range map[string][]int64{"ln_1.weight": {e}, "ln_1.bias": {e}, "ln_2.weight": {e}, "ln_2.bias": {e},
			"attn.c_attn.weight": {e, 3 * e}, "attn.c_attn.bias": {3 * e}, "attn.c_proj.weight": {e, e}, "attn.c_proj.bias": {e},
			"mlp.c_fc.weight": {e, 4 * e}, "mlp.c_fc.bias": {4 * e}, "mlp.c_proj.weight": {4 * e, e}, "mlp.c_proj.bias": {e}} {
			shapes[fmt.Sprintf("transformer.h.%d.%s", i, name)] = shape
		}
	}
	var ts []safetensors.WriteTensor
	for name, shape := range shapes {
		n := int64(1)
		for _, d := range shape {
			n *= d
		}
		data := make([]byte, 0, 4*n)
		for k := range n {
			data = binary.LittleEndian.AppendUint32(data, math.Float32bits(float32((k*int64(mode+1))%13-6)/64))
		}
		ts = append(ts, safetensors.WriteTensor{Name: name, DType: safetensors.F32, Shape: shape, Data: data})
	}
	var buf bytes.Buffer
	if safetensors.Write(&buf, ts, map[string]string{"format": "pt"}) != nil {
		return nil
	}
	return buf.Bytes()
}
