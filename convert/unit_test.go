package convert

import (
	"math"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/quant"
)

// numpy's float32 -> float16 equals quant's round-to-nearest-even conversion on every
// non-NaN value (edges, subnormals, overflow, random bits) and keeps NaNs NaN.
func TestF32ToF16(t *testing.T) {
	check := func(x float32) {
		if math.IsNaN(float64(x)) {
			h := f32ToF16(x)
			if h&0x7c00 != 0x7c00 || h&0x3ff == 0 {
				t.Fatalf("NaN %08x -> %04x", math.Float32bits(x), h)
			}
			return
		}
		if g, w := f32ToF16(x), quant.F32ToF16(x); g != w {
			t.Fatalf("%g (%08x): %04x, want %04x", x, math.Float32bits(x), g, w)
		}
	}
	for _, x := range []float32{0, 1, -1, 65504, 65519.99, 65520, 65536, 1e-8, 2.980232e-08, 5.960464e-08, 6.1035156e-05, 6.097555e-05, float32(math.Inf(1)), float32(math.Inf(-1))} {
		check(x)
		check(-x)
	}
	for _, b := range []uint32{0x7f800001, 0x7fc00000, 0xffffffff, 0x7f801fff, 0x33000000, 0x33000001, 0x38000000, 0x387fffff} {
		check(math.Float32frombits(b))
	}
	r := rand.New(rand.NewPCG(1, 2))
	for range 200000 {
		check(math.Float32frombits(r.Uint32()))
	}
	if h := f32ToF16(math.Float32frombits(0x7f800001)); h != 0x7c01 {
		t.Errorf("NaN with a low payload: %04x, numpy gives 7c01", h)
	}
}

func TestMetadataHeuristics(t *testing.T) {
	for _, c := range []struct{ in, want string }{
		{"gpt2-micro", "Gpt2 Micro"}, {"gpt2", "Gpt2"}, {"GPT-2 XL", "GPT 2 XL"}, {"distilgpt2", "Distilgpt2"},
		{"my-model-v1.2", "My Model v1.2"}, {"gpt2x", "Gpt2X"},
	} {
		if got := idToTitle(c.in); got != c.want {
			t.Errorf("idToTitle(%q) = %q, want %q", c.in, got, c.want)
		}
	}
	for _, c := range []struct {
		n    int64
		want string
	}{{6541184, "6.5M"}, {163037184, "163M"}, {1557611200, "1.6B"}, {999, "1.0K"}, {12_000_000_000, "12B"}} {
		if got := roundedCount(c.n, 2); got != c.want {
			t.Errorf("roundedCount(%d) = %q, want %q", c.n, got, c.want)
		}
	}
	for _, c := range []struct {
		id                        string
		params                    int64
		base, ft, ver, size, name string
	}{
		{"gpt2-micro", 6541184, "", "", "", "", "Gpt2 Micro"},
		{"gpt2", 163037184, "", "", "", "", "Gpt2"},
		{"gpt2-medium", 406286336, "gpt2", "", "", "medium", "Gpt2 Medium"},
		{"gpt2-xl", 1557611200, "gpt2", "", "", "xl", "Gpt2 Xl"},
		{"Llama-2-7b-chat-hf", 6738415616, "Llama-2", "chat-hf", "", "7B", "Llama 2 7b Chat Hf"},
	} {
		m := deriveMeta("", c.id, c.params)
		if m.basename != c.base || m.finetune != c.ft || m.version != c.ver || (c.size != "" && m.sizeLabel != c.size) || m.name != c.name {
			t.Errorf("%s: %+v", c.id, m)
		}
	}
}

func TestParseMerges(t *testing.T) {
	for _, c := range []struct {
		in   string
		want []string
	}{
		{`["a b", "Ġ t"]`, []string{"a b", "Ġ t"}},
		{` [ ["a", "b"], ["x y", "z"] ]`, []string{"a b", "xĠy z"}},
		{`[]`, nil},
		{`null`, nil},
	} {
		got, _, err := parseMerges([]byte(c.in))
		if err != nil || !slices.Equal(got, c.want) {
			t.Errorf("%s: %q, %v; want %q", c.in, got, err, c.want)
		}
	}
	for _, bad := range []string{`[["a"]]`, `[1, 2]`, `{"a": 1}`, `[["a", "b"], "c d"]`} {
		if _, _, err := parseMerges([]byte(bad)); err == nil {
			t.Errorf("%s: no error", bad)
		}
	}
}

func TestLoneSurrogate(t *testing.T) {
	for _, c := range []struct {
		in, lit string
	}{
		{`{"a": "\ud83d\ude00"}`, ""},               // a pair
		{`{"a": "\\ud800"}`, ""},                    // an escaped backslash, then text
		{`{"\u00e9\n": "\"\ud800"}`, `"\"\ud800"`},  // after an escaped quote
		{`{"a": "x\ud800"}`, `"x\ud800"`},           // lone high
		{`{"a": "\udc00y"}`, `"\udc00y"`},           // lone low
		{`{"a": "\ud800\u0041"}`, `"\ud800\u0041"`}, // high, then not a low
		{`["\ud800\ud800"]`, `"\ud800\ud800"`},      // two highs
		{`["\\", "\uDFFF"]`, `"\uDFFF"`},            // upper-case hex, after a string ending in a backslash
		{`["\ud800`, `"\ud800`},                     // cut short
	} {
		lit, ok := loneSurrogate([]byte(c.in))
		if ok != (c.lit != "") || lit != c.lit {
			t.Errorf("%s: %q, %v; want %q", c.in, lit, ok, c.lit)
		}
	}
	if err := checkJSONText("f.json", []byte("{\"a\": \"\xff\"}")); err == nil || !strings.Contains(err.Error(), "byte 7 is 0xff") {
		t.Errorf("invalid UTF-8: %v", err)
	}
}
