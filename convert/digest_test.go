package convert

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/internal/fixtures"
	"github.com/gorun-dev/gorun/safetensors"
)

// digest is llamacpp_digests.json's description of one GGUF.
type digest struct {
	KV      map[string]map[string]any `json:"kv"`
	Order   []string                  `json:"-"`
	Tensors []struct {
		Name   string  `json:"name"`
		Type   string  `json:"type"`
		Ne     []int64 `json:"ne"`
		SHA256 string  `json:"sha256"`
	} `json:"tensors"`
	Size int64 `json:"size"`
}

func loadDigests(t *testing.T) map[string]*digest {
	t.Helper()
	p := fixtures.Path(t, "hf/llamacpp_digests.json")
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	var d map[string]*digest
	if err := json.Unmarshal(b, &d); err != nil {
		t.Fatal(err)
	}
	// The key order: decode the kv objects again as ordered token streams.
	var raw map[string]struct {
		KV json.RawMessage `json:"kv"`
	}
	if err := json.Unmarshal(b, &raw); err != nil {
		t.Fatal(err)
	}
	for name, r := range raw {
		dec := json.NewDecoder(bytesReader(r.KV))
		dec.Token()
		for dec.More() {
			k, _ := dec.Token()
			d[name].Order = append(d[name].Order, k.(string))
			var skip json.RawMessage
			dec.Decode(&skip)
		}
	}
	return d
}

// describe renders a GGUF as the digest does: each key's value (arrays by element type, length
// and sha256 of their raw elements), each tensor's name, type, ne and data sha256.
func describe(t *testing.T, path string) (*digest, []byte) {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	d := &digest{KV: map[string]map[string]any{}}
	for _, kv := range f.KV {
		d.Order = append(d.Order, kv.Key)
		v := kv.Value
		switch v.Type() {
		case gguf.TypeString:
			s, _ := v.AsString()
			d.KV[kv.Key] = map[string]any{"string": s}
		case gguf.TypeArray:
			h := sha256.New()
			var elem string
			switch v.ElemType() {
			case gguf.TypeString:
				elem = "STRING"
				ss, _ := v.AsStrings()
				for _, s := range ss {
					h.Write([]byte(s))
				}
			case gguf.TypeInt32:
				elem = "INT32"
				is, _ := v.AsInt32s()
				for _, x := range is {
					binary.Write(h, binary.LittleEndian, x)
				}
			default:
				t.Fatalf("%s: array of %v", kv.Key, v.ElemType())
			}
			d.KV[kv.Key] = map[string]any{"array_of": elem, "len": float64(v.Len()), "sha256": hex.EncodeToString(h.Sum(nil))}
		case gguf.TypeUint32:
			u, _ := v.AsUint()
			d.KV[kv.Key] = map[string]any{"uint32": []any{float64(u)}}
		case gguf.TypeFloat32:
			x, _ := v.AsFloat()
			d.KV[kv.Key] = map[string]any{"float32": []any{x}}
		default:
			d.KV[kv.Key] = map[string]any{v.Type().String(): v.String()}
		}
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		sum := sha256.Sum256(f.Data(ti))
		d.Tensors = append(d.Tensors, struct {
			Name   string  `json:"name"`
			Type   string  `json:"type"`
			Ne     []int64 `json:"ne"`
			SHA256 string  `json:"sha256"`
		}{ti.Name, ti.Type.String(), ti.Dims, hex.EncodeToString(sum[:])})
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	d.Size = int64(len(b))
	return d, b
}

// compare reports every difference between a converted file's description and llama.cpp's.
func compare(t *testing.T, got, want *digest, skipKeys map[string]bool) {
	t.Helper()
	var gotOrder, wantOrder []string
	for _, k := range got.Order {
		if !skipKeys[k] {
			gotOrder = append(gotOrder, k)
		}
	}
	for _, k := range want.Order {
		if !skipKeys[k] {
			wantOrder = append(wantOrder, k)
		}
	}
	if !reflect.DeepEqual(gotOrder, wantOrder) {
		t.Errorf("metadata keys:\n got %v\nwant %v", gotOrder, wantOrder)
	}
	for _, k := range wantOrder {
		g, w := fmt.Sprint(got.KV[k]), fmt.Sprint(want.KV[k])
		if g != w {
			t.Errorf("%s: got %s, want %s", k, g, w)
		}
	}
	if len(got.Tensors) != len(want.Tensors) {
		t.Fatalf("%d tensors, want %d", len(got.Tensors), len(want.Tensors))
	}
	for i, w := range want.Tensors {
		g := got.Tensors[i]
		if g.Name != w.Name || !strings.EqualFold(g.Type, w.Type) || !reflect.DeepEqual(g.Ne, w.Ne) || g.SHA256 != w.SHA256 {
			t.Errorf("tensor %d: got %s %s %v %s, want %s %s %v %s", i, g.Name, g.Type, g.Ne, g.SHA256[:12], w.Name, w.Type, w.Ne, w.SHA256[:12])
		}
	}
}

func microDir(t *testing.T) string {
	return filepath.Dir(fixtures.Path(t, "hf/gpt2-micro/model.safetensors"))
}

var _ = math.Inf

// TestConvertMatchesLlamaCpp converts gpt2-micro to f16 and f32 and compares every metadata key
// and value (in order) and every tensor's name, type, shape and bytes with llama.cpp's
// conversions. Nothing differs: general.name is derived from the directory name as llama.cpp
// derives it. The f16 file is also byte-identical to llama.cpp's.
func TestConvertMatchesLlamaCpp(t *testing.T) {
	dir := microDir(t)
	digests := loadDigests(t)
	for _, ot := range []string{"f16", "f32"} {
		t.Run(ot, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out.gguf")
			rep, err := Convert(dir, out, Options{OutType: ot})
			if err != nil {
				t.Fatal(err)
			}
			got, b := describe(t, out)
			want := digests["gpt2-micro-"+ot+".llamacpp.gguf"]
			compare(t, got, want, nil)
			if got.Size != want.Size || rep.FileBytes != want.Size {
				t.Errorf("file is %d bytes (report %d), llama.cpp's %d", got.Size, rep.FileBytes, want.Size)
			}
			if ot == "f16" {
				ref, err := os.ReadFile(fixtures.Path(t, "hf/gpt2-micro-f16.llamacpp.gguf"))
				if err != nil {
					t.Fatal(err)
				}
				if sha256.Sum256(ref) != sha256.Sum256(b) {
					t.Errorf("the f16 file differs from llama.cpp's bytes")
				}
			}
		})
	}
}

// TestConvertLlama3MatchesLlamaCpp converts llama3-micro (bfloat16 LlamaForCausalLM, Llama 3's
// tokenizer) and compares it with llama.cpp's f16 conversion: every key and value in order
// (tokenizer.ggml.pre "smaug-bpe" from the fingerprint of gorun's tokenizer), every tensor's
// name, type, shape and bytes (Q/K permuted, bf16 rounded to f16 as numpy), and the file size.
//
// llama.cpp c392e509 reads rope_theta only at the top of config.json, where transformers 5
// writes rope_parameters.rope_theta instead: its file has no llama.rope.freq_base (its runtime
// then uses 10000, not the model's 500000). asC392e509 reproduces that byte for byte; by
// default gorun reads rope_parameters, and the file differs by that one key alone.
func TestConvertLlama3MatchesLlamaCpp(t *testing.T) {
	dir := filepath.Dir(fixtures.Path(t, "hf/llama3-micro/model.safetensors"))
	want := loadDigests(t)["llama3-micro-f16.llamacpp.gguf"]
	t.Run("as c392e509", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "out.gguf")
		rep, err := Convert(dir, out, Options{OutType: "f16", asC392e509: true})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := describe(t, out)
		compare(t, got, want, nil)
		const size = 24422240 // hf/README.md (the digest has no size for this file)
		if got.Size != size || rep.FileBytes != size {
			t.Errorf("file is %d bytes (report %d), llama.cpp's %d", got.Size, rep.FileBytes, size)
		}
		if rep.Pre != "smaug-bpe" || len(rep.Warnings) != 0 {
			t.Errorf("pre-tokenizer %q, warnings %q", rep.Pre, rep.Warnings)
		}
	})
	t.Run("sharded", func(t *testing.T) {
		// The same weights in 3 BF16 shards with an index convert to the same tensors.
		src, err := safetensors.OpenDir(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer src.Close()
		sharded := filepath.Join(t.TempDir(), "llama3-micro")
		if err := os.Mkdir(sharded, 0o755); err != nil {
			t.Fatal(err)
		}
		for _, f := range []string{"config.json", "tokenizer.json", "tokenizer_config.json"} {
			if err := os.Symlink(filepath.Join(dir, f), filepath.Join(sharded, f)); err != nil {
				t.Skipf("symbolic links: %v", err)
			}
		}
		rewrite(t, src, sharded, safetensors.BF16, 3)
		out := filepath.Join(t.TempDir(), "out.gguf")
		if _, err := Convert(sharded, out, Options{OutType: "f16", asC392e509: true}); err != nil {
			t.Fatal(err)
		}
		got, _ := describe(t, out)
		compare(t, got, want, nil)
	})
	t.Run("default", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "out.gguf")
		if _, err := Convert(dir, out, Options{OutType: "f16"}); err != nil {
			t.Fatal(err)
		}
		got, _ := describe(t, out)
		const theta = "llama.rope.freq_base"
		compare(t, got, want, map[string]bool{theta: true})
		if fmt.Sprint(got.KV[theta]) != fmt.Sprint(map[string]any{"float32": []any{500000.0}}) {
			t.Errorf("%s = %v, want 500000", theta, got.KV[theta])
		}
		i := slices.Index(got.Order, theta)
		if i < 1 || got.Order[i-1] != "llama.attention.head_count_kv" {
			t.Errorf("%s at %d in %v, want it after head_count_kv as llama.cpp writes rope_theta", theta, i, got.Order)
		}
	})
}

func bytesReader(b []byte) *bytesR { return &bytesR{b: b} }

type bytesR struct{ b []byte }

func (r *bytesR) Read(p []byte) (int, error) {
	if len(r.b) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.b)
	r.b = r.b[n:]
	return n, nil
}
