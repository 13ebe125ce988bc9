package testmodel

import (
	"bytes"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/internal/fixtures"
	"github.com/gorun-dev/gorun/quant"
)

func writeTiny(t *testing.T, edit func(c *Config)) (string, Config) {
	t.Helper()
	c, err := Preset("tiny")
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(&c)
	}
	path := filepath.Join(t.TempDir(), "tiny.gguf")
	if err := Write(path, c); err != nil {
		t.Fatal(err)
	}
	return path, c
}

func open(t *testing.T, path string) *gguf.File {
	t.Helper()
	f, err := gguf.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	return f
}

func TestTinyMetadata(t *testing.T) {
	path, c := writeTiny(t, nil)
	f := open(t, path)
	var keys []string
	for _, kv := range f.KV {
		keys = append(keys, kv.Key)
	}
	wantKeys := []string{
		"general.architecture", "general.type", "general.name", "general.size_label",
		"gpt2.block_count", "gpt2.context_length", "gpt2.embedding_length", "gpt2.feed_forward_length",
		"gpt2.attention.head_count", "gpt2.attention.layer_norm_epsilon", "general.file_type",
		"tokenizer.ggml.model", "tokenizer.ggml.pre", "tokenizer.ggml.tokens", "tokenizer.ggml.token_type",
		"tokenizer.ggml.merges", "tokenizer.ggml.bos_token_id", "tokenizer.ggml.eos_token_id",
		"tokenizer.ggml.unknown_token_id", "general.quantization_version",
	}
	if !reflect.DeepEqual(keys, wantKeys) {
		t.Fatalf("keys:\n%q\nwant\n%q", keys, wantKeys)
	}
	strs := map[string]string{
		"general.architecture": "gpt2", "general.type": "model", "general.name": "GPT2 Tiny Random",
		"general.size_label": "170K", "tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "gpt-2",
	}
	for k, want := range strs {
		if got, err := f.String(k); got != want || err != nil {
			t.Errorf("%s = %q, %v; want %q", k, got, err, want)
		}
	}
	u32s := map[string]int{
		"gpt2.block_count": 2, "gpt2.context_length": 64, "gpt2.embedding_length": 64,
		"gpt2.feed_forward_length": 256, "gpt2.attention.head_count": 4, "general.file_type": 1,
		"tokenizer.ggml.bos_token_id": 511, "tokenizer.ggml.eos_token_id": 511,
		"tokenizer.ggml.unknown_token_id": 511, "general.quantization_version": 2,
	}
	for k, want := range u32s {
		v, _ := f.Get(k)
		if v.Type() != gguf.TypeUint32 || v.Interface() != uint32(want) {
			t.Errorf("%s = %s %v, want uint32 %d", k, v.Type(), v, want)
		}
	}
	if v, _ := f.Get("gpt2.attention.layer_norm_epsilon"); v.Interface() != float32(1e-5) {
		t.Errorf("eps %s %v", v.Type(), v)
	}
	tokens, _ := f.Strings("tokenizer.ggml.tokens")
	types, _ := f.Int32s("tokenizer.ggml.token_type")
	merges, _ := f.Strings("tokenizer.ggml.merges")
	if len(tokens) != c.NVocab || len(types) != c.NVocab || len(merges) != c.NVocab-257 {
		t.Fatalf("%d tokens, %d types, %d merges", len(tokens), len(types), len(merges))
	}
	checkVocab(t, tokens, types, merges)
}

// checkVocab checks a byte-level BPE vocabulary: byte tokens first in GPT-2's order, each merge
// made of earlier tokens and creating the next token, <|endoftext|> last and the only control
// token, no duplicates.
func checkVocab(t *testing.T, tokens []string, types []int32, merges []string) {
	t.Helper()
	bt := ByteTokens()
	if !reflect.DeepEqual(tokens[:256], bt[:]) {
		t.Fatal("byte tokens differ from ByteTokens")
	}
	id := map[string]int{}
	for i, tok := range tokens {
		if _, dup := id[tok]; dup {
			t.Fatalf("token %d %q is a duplicate", i, tok)
		}
		id[tok] = i
	}
	for i, m := range merges {
		l, r, ok := strings.Cut(m, " ")
		if !ok || strings.Contains(r, " ") {
			t.Fatalf("merge %d %q is not two tokens", i, m)
		}
		li, lok := id[l]
		ri, rok := id[r]
		if !lok || !rok || li >= 256+i || ri >= 256+i {
			t.Fatalf("merge %d %q uses a token not made before it", i, m)
		}
		if tokens[256+i] != l+r {
			t.Fatalf("merge %d %q does not make token %d %q", i, m, 256+i, tokens[256+i])
		}
	}
	last := len(tokens) - 1
	if tokens[last] != EndOfText || types[last] != 3 {
		t.Errorf("last token %q type %d", tokens[last], types[last])
	}
	for i, ty := range types[:last] {
		if ty != 1 {
			t.Fatalf("token %d has type %d", i, ty)
		}
	}
}

func TestByteTokens(t *testing.T) {
	bt := ByteTokens()
	want := map[int]string{0: "!", 93: "~", 94: "¡", 105: "¬", 106: "®", 187: "ÿ", 188: "Ā", 220: "Ġ", 255: "Ń"}
	for i, s := range want {
		if bt[i] != s {
			t.Errorf("byte token %d = %q, want %q", i, bt[i], s)
		}
	}
	seen := map[string]bool{}
	for _, s := range bt {
		seen[s] = true
	}
	if len(seen) != 256 {
		t.Errorf("%d distinct byte tokens", len(seen))
	}
}

// The real GPT-2 vocabulary starts with the same 256 tokens.
func TestByteTokensMatchGPT2(t *testing.T) {
	f, err := gguf.Open(fixtures.Path(t, "gpt2-tiny-f16.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	tokens, _ := f.Strings("tokenizer.ggml.tokens")
	bt := ByteTokens()
	if len(tokens) < 256 || !reflect.DeepEqual(tokens[:256], bt[:]) {
		t.Fatal("ByteTokens differ from GPT-2's first 256 tokens")
	}
}

func TestSyntheticVocabSizes(t *testing.T) {
	for _, n := range []int{257, 258, 300, 5000, 50257} {
		v, err := syntheticVocab(n, 7)
		if err != nil {
			t.Fatal(err)
		}
		if len(v.tokens) != n || v.eot != n-1 {
			t.Fatalf("n=%d: %d tokens, eot %d", n, len(v.tokens), v.eot)
		}
		checkVocab(t, v.tokens, v.types, v.merges)
		if n > 300 && v.merges[0] != "Ġ t" {
			t.Errorf("first merge %q", v.merges[0])
		}
	}
	if _, err := syntheticVocab(256, 1); err == nil {
		t.Error("256-token vocabulary accepted")
	}
}

func TestTinyTensors(t *testing.T) {
	path, c := writeTiny(t, nil)
	f := open(t, path)
	E, F, V := int64(c.NEmbd), int64(c.NFF), int64(c.NVocab)
	type want struct {
		name string
		typ  quant.Type
		dims []int64
	}
	var ws []want
	for i := 0; i < c.NLayer; i++ {
		b := "blk." + strconv.Itoa(i) + "."
		ws = append(ws,
			want{b + "attn_qkv.bias", quant.F32, []int64{3 * E}},
			want{b + "attn_qkv.weight", quant.F16, []int64{E, 3 * E}},
			want{b + "attn_output.bias", quant.F32, []int64{E}},
			want{b + "attn_output.weight", quant.F16, []int64{E, E}},
			want{b + "attn_norm.bias", quant.F32, []int64{E}},
			want{b + "attn_norm.weight", quant.F32, []int64{E}},
			want{b + "ffn_norm.bias", quant.F32, []int64{E}},
			want{b + "ffn_norm.weight", quant.F32, []int64{E}},
			want{b + "ffn_up.bias", quant.F32, []int64{F}},
			want{b + "ffn_up.weight", quant.F16, []int64{E, F}},
			want{b + "ffn_down.bias", quant.F32, []int64{E}},
			want{b + "ffn_down.weight", quant.F16, []int64{F, E}},
		)
	}
	ws = append(ws,
		want{"output_norm.bias", quant.F32, []int64{E}},
		want{"output_norm.weight", quant.F32, []int64{E}},
		want{"position_embd.weight", quant.F32, []int64{E, int64(c.NCtx)}},
		want{"token_embd.weight", quant.F16, []int64{E, V}},
		want{"output.weight", quant.F16, []int64{E, V}},
	)
	if len(f.Tensors) != len(ws) {
		t.Fatalf("%d tensors, want %d", len(f.Tensors), len(ws))
	}
	var off int64
	for i, w := range ws {
		ti := &f.Tensors[i]
		size, _ := w.typ.RowSize(w.dims[0])
		for _, d := range w.dims[1:] {
			size *= d
		}
		if ti.Name != w.name || ti.Type != w.typ || !reflect.DeepEqual(ti.Dims, w.dims) || ti.Offset != off || ti.Size != size {
			t.Errorf("tensor %d: %+v, want %+v at offset %d", i, *ti, w, off)
		}
		off += (size + 31) &^ 31
	}
	if !bytes.Equal(f.Data(f.Tensor("output.weight")), f.Data(f.Tensor("token_embd.weight"))) {
		t.Error("output.weight is not a copy of token_embd.weight")
	}
	st, _ := os.Stat(path)
	if f.DataOffset+off != st.Size() {
		t.Errorf("file is %d bytes, layout ends at %d", st.Size(), f.DataOffset+off)
	}
}

// The weights follow the intended distributions: mean and spread within 4 standard errors.
func TestTinyWeights(t *testing.T) {
	path, c := writeTiny(t, func(c *Config) { c.Type = quant.F32; c.NEmbd = 128 })
	f := open(t, path)
	proj := 0.02 / math.Sqrt(2*float64(c.NLayer))
	cases := []struct {
		name      string
		mean, std float64
	}{
		{"blk.0.attn_qkv.weight", 0, 0.02},
		{"blk.1.ffn_down.weight", 0, proj},
		{"blk.0.attn_output.weight", 0, proj},
		{"blk.0.ffn_up.bias", 0, 0.01},
		{"blk.1.attn_norm.weight", 1, 0.02},
		{"position_embd.weight", 0, 0.01},
		{"token_embd.weight", 0, 0.02},
	}
	for _, cs := range cases {
		x := quant.AsF32(f.Data(f.Tensor(cs.name)))
		var s, s2 float64
		for _, v := range x {
			s += float64(v)
			s2 += float64(v) * float64(v)
		}
		n := float64(len(x))
		mean := s / n
		std := math.Sqrt(s2/n - mean*mean)
		if math.Abs(mean-cs.mean) > 4*cs.std/math.Sqrt(n) || math.Abs(std/cs.std-1) > 4/math.Sqrt(2*n) {
			t.Errorf("%s: mean %.5f std %.5f, want %g and %g", cs.name, mean, std, cs.mean, cs.std)
		}
	}
	if v, _ := f.Uint("general.file_type"); v != 0 {
		t.Errorf("file type %d for f32", v)
	}
}

func TestDeterministic(t *testing.T) {
	p1, _ := writeTiny(t, nil)
	p2, _ := writeTiny(t, nil)
	p3, _ := writeTiny(t, func(c *Config) { c.Seed = 2 })
	b1, _ := os.ReadFile(p1)
	b2, _ := os.ReadFile(p2)
	b3, _ := os.ReadFile(p3)
	if !bytes.Equal(b1, b2) {
		t.Error("two writes with one seed differ")
	}
	if bytes.Equal(b1, b3) {
		t.Error("different seeds give the same file")
	}
	// Writer's whole-tensor callback produces the same file as Write's streaming.
	c, _ := Preset("tiny")
	w, data, err := Writer(c)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if _, err := w.WriteTo(&buf, data); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(buf.Bytes(), b1) {
		t.Error("Writer and Write differ")
	}
}

func TestNoOutput(t *testing.T) {
	path, _ := writeTiny(t, func(c *Config) { c.NoOutput = true })
	f := open(t, path)
	if f.Tensor("output.weight") != nil || f.Tensor("token_embd.weight") == nil {
		t.Error("output.weight present with NoOutput")
	}
	if len(f.Tensors) != 2*12+4 {
		t.Errorf("%d tensors", len(f.Tensors))
	}
}

func TestTypes(t *testing.T) {
	for _, ty := range []quant.Type{quant.F32, quant.BF16} {
		path, _ := writeTiny(t, func(c *Config) { c.Type = ty })
		f := open(t, path)
		if got := f.Tensor("blk.0.ffn_up.weight").Type; got != ty {
			t.Errorf("matrix type %v, want %v", got, ty)
		}
		if got := f.Tensor("blk.0.ffn_up.bias").Type; got != quant.F32 {
			t.Errorf("bias type %v", got)
		}
	}
	for _, edit := range []func(c *Config){
		func(c *Config) { c.Type = quant.Q8_0 },
		func(c *Config) { c.NHead = 3 },
		func(c *Config) { c.NLayer = 0 },
		func(c *Config) { c.NVocab = 100 },
		func(c *Config) { c.Tokens = []string{"a", "b"} },
		func(c *Config) { c.Tokens = []string{"a", "b"}; c.NVocab = 0 },
	} {
		c, _ := Preset("tiny")
		edit(&c)
		if err := Write(filepath.Join(t.TempDir(), "x.gguf"), c); err == nil {
			t.Errorf("bad config accepted: %+v", c)
		}
	}
	if _, err := Preset("7B"); err == nil {
		t.Error("unknown preset accepted")
	}
}

// A real vocabulary passes through unchanged.
func TestGivenVocab(t *testing.T) {
	bt := ByteTokens()
	tokens := append(bt[:], "Ġt", EndOfText)
	c, _ := Preset("tiny")
	c.Tokens, c.Merges, c.NVocab = tokens, []string{"Ġ t"}, 0
	path := filepath.Join(t.TempDir(), "v.gguf")
	if err := Write(path, c); err != nil {
		t.Fatal(err)
	}
	f := open(t, path)
	got, _ := f.Strings("tokenizer.ggml.tokens")
	types, _ := f.Int32s("tokenizer.ggml.token_type")
	merges, _ := f.Strings("tokenizer.ggml.merges")
	if !reflect.DeepEqual(got, tokens) || !reflect.DeepEqual(merges, c.Merges) || types[257] != 3 {
		t.Fatalf("vocabulary changed: %d tokens, merges %q", len(got), merges)
	}
	checkVocab(t, got, types, merges)
	if dims := f.Tensor("token_embd.weight").Dims; dims[1] != 258 {
		t.Errorf("token_embd dims %v", dims)
	}
	if id, _ := f.Uint("tokenizer.ggml.eos_token_id"); id != 257 {
		t.Errorf("eos %d", id)
	}
}

func TestParamCount124M(t *testing.T) {
	c, _ := Preset("124M")
	w, _, err := Writer(c)
	if err != nil {
		t.Fatal(err)
	}
	var n, out int64
	for _, ti := range w.Tensors() {
		n += ti.Elements()
		if ti.Name == "output.weight" {
			out = ti.Elements()
		}
	}
	if n != 163_037_184 || out != 38_597_376 {
		t.Errorf("%d parameters (output %d), want 163,037,184 (38,597,376)", n, out)
	}
	for _, kv := range w.KV() {
		if kv.Key == "general.size_label" && kv.Value.Interface() != "163M" {
			t.Errorf("size label %v", kv.Value)
		}
	}
}

func TestSizeLabel(t *testing.T) {
	cases := map[int64]string{
		32_181_248: "32M", 163_037_184: "163M", 1_557_611_200: "1.6B", 181_760: "182K",
		124_439_808: "124M", 999: "1.0K", 400: "0.40K", 2_500_000: "2.5M",
	}
	for n, want := range cases {
		if got := sizeLabel(n); got != want {
			t.Errorf("sizeLabel(%d) = %q, want %q", n, got, want)
		}
	}
}

func BenchmarkWrite124M(b *testing.B) {
	c, _ := Preset("124M")
	dir := b.TempDir()
	b.SetBytes(2 * 163_037_184)
	for b.Loop() {
		if err := Write(filepath.Join(dir, "m.gguf"), c); err != nil {
			b.Fatal(err)
		}
	}
}

// Given the fixture's shape, name and vocabulary, the generator writes the fixture's header
// byte for byte: the same metadata in the same order and the same tensor table. Only the
// weights differ.
func TestHeaderMatchesConverter(t *testing.T) {
	fx, err := gguf.Open(fixtures.Path(t, "gpt2-tiny-f16.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	defer fx.Close()
	c := Config{Name: "Hf Tiny", NCtx: 512, NEmbd: 256, NHead: 4, NLayer: 8, NFF: 1024, Type: quant.F16, Seed: 3}
	if c.Tokens, err = fx.Strings("tokenizer.ggml.tokens"); err != nil {
		t.Fatal(err)
	}
	if c.Merges, err = fx.Strings("tokenizer.ggml.merges"); err != nil {
		t.Fatal(err)
	}
	w, _, err := Writer(c)
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	_, err = w.WriteStream(&buf, func(int, *gguf.TensorInfo, io.Writer) error { return errStop })
	if !errors.Is(err, errStop) {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(fixtures.Path(t, "gpt2-tiny-f16.gguf"))
	if err != nil {
		t.Fatal(err)
	}
	header := raw[:fx.DataOffset]
	if !bytes.Equal(buf.Bytes(), header) {
		n := 0
		for n < min(buf.Len(), len(header)) && buf.Bytes()[n] == header[n] {
			n++
		}
		t.Fatalf("header differs from the converter's at byte %d (%d vs %d bytes)", n, buf.Len(), len(header))
	}
}

var errStop = errors.New("stop after the header")
