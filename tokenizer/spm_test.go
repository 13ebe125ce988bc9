package tokenizer

import (
	"slices"
	"strings"
	"testing"
)

// The SentencePiece merge, byte fallback, space prefix, special tokens and decoding rules on
// a vocabulary small enough to check by hand (spmFuzzVocab: 0 <unk>, 1 <s>, 2 </s>,
// 3 <|im_start|> (user-defined), 4+b the byte b, then 260 "▁", 261 "h", 262 "e", 263 "l",
// 264 "o", 265 "▁h", 266 "he", 267 "ll", 268 "llo", ..., 275 "é", 276 "▁▁", 277 "中",
// 278 "中文", scores falling with the id).
func TestSPMSmallVocab(t *testing.T) {
	tok := spmFuzzVocab(t)
	for _, c := range []struct {
		text string
		want []int32
	}{
		{"", nil},
		{"hello", []int32{265, 262, 268}}, // "▁h" first, so "he" never forms; "ll" then "llo"
		{"  ", []int32{276, 260}},         // equal scores: the leftmost pair
		{"Z", []int32{260, 4 + 'Z'}},      // byte fallback
		{"é中文", []int32{260, 275, 278}},
		{"ÿ", []int32{260, 4 + 0xC3, 4 + 0xBF}},
		{"<s>Z", []int32{1, 260, 4 + 'Z'}}, // after a special, the space prefix again
		{"Z<|im_start|>", []int32{260, 4 + 'Z', 3}},
		{"<unk>", []int32{0}},
	} {
		if got := tok.Encode(c.text); !slices.Equal(got, c.want) {
			t.Errorf("Encode(%q) = %v, want %v", c.text, got, c.want)
		}
	}
	if got, want := tok.EncodeOrdinary("<s><|im_start|>"), []int32{260, 4 + '<', 4 + 's', 4 + '>', 3}; !slices.Equal(got, want) {
		t.Errorf("EncodeOrdinary = %v, want %v (control text as bytes, user-defined matched)", got, want)
	}
	for _, c := range []struct {
		ids  []int32
		want string
	}{
		{[]int32{265, 262, 268}, "hello"},       // the prefix space dropped
		{[]int32{276, 260}, "  "},               // one of three dropped
		{[]int32{1, 265}, "<s> h"},              // not after a leading special (llama.cpp)
		{[]int32{260, 4 + 0xC3, 4 + 0xBF}, "ÿ"}, // bytes joined
	} {
		if got := tok.Decode(c.ids); got != c.want {
			t.Errorf("Decode(%v) = %q, want %q", c.ids, got, c.want)
		}
	}
	if tok.Piece(265) != " h" || tok.Token(265) != "▁h" || tok.Piece(4+'A') != "A" || tok.Piece(-1) != "" {
		t.Errorf("pieces %q %q %q", tok.Piece(265), tok.Token(265), tok.Piece(4+'A'))
	}
	// The streaming decoder keeps the leading space (a continuation's first word) and does
	// not allocate for whole characters.
	d := tok.NewDecoder()
	var sb strings.Builder
	for _, id := range []int32{265, 262, 268, 260, 4 + 0xC3, 4 + 0xBF} {
		sb.WriteString(d.Next(id))
	}
	if sb.String() != " hello ÿ" {
		t.Errorf("streamed %q", sb.String())
	}
	if n := testing.AllocsPerRun(100, func() { _ = d.Next(265) }); n != 0 {
		t.Errorf("Decoder.Next allocates %v times per token", n)
	}
}

// A "llama" GGUF builds an SPM with llama.cpp's defaults: BOS added, space prefix on unless
// tokenizer.ggml.add_space_prefix says otherwise; a llama3 BPE adds BOS by default too.
func TestFromGGUFKinds(t *testing.T) {
	tokens := []string{"<unk>", "<s>", "</s>", "▁", "a", "▁a"}
	kv := [][2]any{
		{"tokenizer.ggml.model", "llama"},
		{"tokenizer.ggml.tokens", tokens},
		{"tokenizer.ggml.scores", []float32{0, 0, 0, -1, -2, -3}},
		{"tokenizer.ggml.token_type", []int32{2, 3, 3, 1, 1, 1}},
		{"tokenizer.ggml.bos_token_id", uint32(1)},
		{"tokenizer.ggml.eos_token_id", uint32(2)},
	}
	tok, err := FromGGUF(metaFile(t, kv))
	if err != nil {
		t.Fatal(err)
	}
	sp := tok.Special()
	if !sp.AddBOS || sp.AddEOS || sp.BOS != 1 || sp.UNK != 0 || !tok.IsEOG(2) || tok.IsEOG(1) {
		t.Errorf("special %+v", sp)
	}
	if got := tok.Encode("a a"); !slices.Equal(got, []int32{5, 5}) {
		t.Errorf("Encode = %v", got)
	}
	tok, err = FromGGUF(metaFile(t, append(kv, [2]any{"tokenizer.ggml.add_space_prefix", false})))
	if err != nil {
		t.Fatal(err)
	}
	if got := tok.Encode("a a"); !slices.Equal(got, []int32{4, 5}) {
		t.Errorf("without the space prefix: Encode = %v", got)
	}

	bpe := [][2]any{
		{"tokenizer.ggml.model", "gpt2"},
		{"tokenizer.ggml.tokens", []string{"a", "b", "ab", "<|begin_of_text|>"}},
		{"tokenizer.ggml.merges", []string{"a b"}},
		{"tokenizer.ggml.token_type", []int32{1, 1, 1, 3}},
	}
	for _, c := range []struct {
		pre    string
		addBOS bool
	}{{"llama-bpe", true}, {"qwen2", false}, {"smollm", false}, {"default", false}} {
		tok, err := FromGGUF(metaFile(t, append(bpe, [2]any{"tokenizer.ggml.pre", c.pre})))
		if err != nil {
			t.Fatalf("%s: %v", c.pre, err)
		}
		if tok.Special().AddBOS != c.addBOS {
			t.Errorf("%s: AddBOS %v", c.pre, tok.Special().AddBOS)
		}
		if got := tok.Encode("ab<|begin_of_text|>"); !slices.Equal(got, []int32{2, 3}) {
			t.Errorf("%s: Encode = %v", c.pre, got)
		}
	}
}
