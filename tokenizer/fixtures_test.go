package tokenizer

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gorun-dev/gorun/internal/fixtures"
)

// fixturesDir returns the tokenizer fixtures directory, or skips the test.
func fixturesDir(tb testing.TB) string {
	tb.Helper()
	return filepath.Join(fixtures.Dir(tb), "tokenizer")
}

var (
	realOnce sync.Once
	realTok  *BPE
	realErr  error
)

// realTokenizer returns GPT-2's tokenizer from the fixtures, or skips.
func realTokenizer(tb testing.TB) *BPE {
	tb.Helper()
	dir := fixturesDir(tb)
	vocab, merges := filepath.Join(dir, "vocab.json"), filepath.Join(dir, "merges.txt")
	if _, err := os.Stat(vocab); err != nil {
		tb.Skipf("GPT-2 vocabulary not found at %s (set GORUN_FIXTURES): %v", vocab, err)
	}
	realOnce.Do(func() { realTok, realErr = FromFiles(vocab, merges) })
	if realErr != nil {
		tb.Fatal(realErr)
	}
	return realTok
}

func readFixture(tb testing.TB, name string) []byte {
	tb.Helper()
	p := filepath.Join(fixturesDir(tb), name)
	b, err := os.ReadFile(p)
	if err != nil {
		tb.Skipf("fixture %s not found (set GORUN_FIXTURES): %v", p, err)
	}
	return b
}

type hfCase struct {
	Text string  `json:"text"`
	IDs  []int32 `json:"ids"`
}

func hfCases(tb testing.TB) []hfCase {
	var cases []hfCase
	if err := json.Unmarshal(readFixture(tb, "hf_cases.json"), &cases); err != nil {
		tb.Fatal(err)
	}
	return cases
}

func TestRealVocabShape(t *testing.T) {
	tok := realTokenizer(t)
	if tok.VocabSize() != 50257 {
		t.Errorf("VocabSize = %d, want 50257", tok.VocabSize())
	}
	if tok.EOS() != 50256 {
		t.Errorf("EOS = %d, want 50256", tok.EOS())
	}
	if got := len(tok.merges); got != 50000 {
		t.Errorf("%d usable merges, want 50000", got)
	}
	if id, ok := tok.ID("Ġthe"); !ok || id != 262 || tok.Token(262) != "Ġthe" {
		t.Errorf(`ID("Ġthe") = %d, %v; Token(262) = %q`, id, ok, tok.Token(262))
	}
	if got := string(tok.TokenBytes(262)); got != " the" {
		t.Errorf("TokenBytes(262) = %q", got)
	}
	if got := string(tok.TokenBytes(50256)); got != EndOfText {
		t.Errorf("TokenBytes(EOS) = %q", got)
	}
	for b := range 256 {
		if tok.byteTok[b] < 0 {
			t.Errorf("no token for byte %#x", b)
		}
	}
}

func TestHFCases(t *testing.T) {
	tok := realTokenizer(t)
	cases := hfCases(t)
	pass := 0
	for i, c := range cases {
		got := tok.Encode(c.Text)
		if !slices.Equal(got, c.IDs) {
			t.Errorf("case %d %q:\n got  %v\n want %v", i, c.Text, got, c.IDs)
			continue
		}
		if dec := tok.Decode(got); dec != c.Text {
			t.Errorf("case %d: Decode(Encode(s)) = %q, want %q", i, dec, c.Text)
			continue
		}
		pass++
	}
	t.Logf("%d/%d Hugging Face cases identical", pass, len(cases))
}

// ggmlVocabTests reads llama.cpp's tokenizer test files the way
// tests/test-tokenizer-0.cpp does: inputs are separated (and terminated) by
// "\n__ggml_vocab_test__\n", so the newline before a separator is not part of
// the input; each input has one line of space-separated ids in the .out file.
func ggmlVocabTests(tb testing.TB) (inputs []string, want [][]int32) {
	return ggmlVocabTestsOf(tb, "ggml-vocab-gpt-2.gguf")
}

// ggmlVocabTestsOf reads the .inp and .out files of the named vocabulary.
func ggmlVocabTestsOf(tb testing.TB, vocab string) (inputs []string, want [][]int32) {
	raw := string(readFixture(tb, vocab+".inp"))
	out := string(readFixture(tb, vocab+".out"))
	const sep = "\n__ggml_vocab_test__\n"
	for pos := 0; pos < len(raw); {
		k := strings.Index(raw[pos:], sep)
		if k < 0 {
			inputs = append(inputs, raw[pos:])
			break
		}
		inputs = append(inputs, raw[pos:pos+k])
		pos += k + len(sep)
	}
	lines := strings.Split(out, "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if len(lines) != len(inputs) {
		tb.Fatalf("%d inputs but %d output lines", len(inputs), len(lines))
	}
	for _, l := range lines {
		ids := []int32{}
		for f := range strings.FieldsSeq(l) {
			v, err := strconv.ParseInt(f, 10, 32)
			if err != nil {
				tb.Fatal(err)
			}
			ids = append(ids, int32(v))
		}
		want = append(want, ids)
	}
	return inputs, want
}

func TestGGMLVocabCases(t *testing.T) {
	tok := realTokenizer(t)
	inputs, want := ggmlVocabTests(t)
	pass := 0
	for i, in := range inputs {
		// llama.cpp's test tokenizes without parsing special tokens.
		got := tok.EncodeOrdinary(in)
		if !slices.Equal(got, want[i]) {
			t.Errorf("input %d %q:\n got  %v\n want %v", i, in, got, want[i])
			continue
		}
		if got2 := tok.Encode(in); !slices.Equal(got2, got) {
			t.Errorf("input %d: Encode differs from EncodeOrdinary", i)
		}
		if dec := tok.Decode(got); dec != in {
			t.Errorf("input %d: Decode(Encode(s)) = %q, want %q", i, dec, in)
			continue
		}
		pass++
	}
	t.Logf("%d/%d llama.cpp ggml-vocab-gpt-2 inputs identical", pass, len(inputs))
}

func TestRealSpecialTokens(t *testing.T) {
	tok := realTokenizer(t)
	s := "Hello<|endoftext|> world<|endoftext|><|endoftext|>"
	got := tok.Encode(s)
	want := []int32{15496, 50256, 995, 50256, 50256}
	if !slices.Equal(got, want) {
		t.Errorf("Encode(%q) = %v, want %v", s, got, want)
	}
	ord := tok.EncodeOrdinary(EndOfText)
	if slices.Contains(ord, 50256) || len(ord) < 2 {
		t.Errorf("EncodeOrdinary(%q) = %v", EndOfText, ord)
	}
	if tok.Decode(ord) != EndOfText || tok.Decode(got) != s {
		t.Error("special round trip failed")
	}
	// A partial special token is plain text.
	if got := tok.Encode("<|endoftext|"); slices.Contains(got, 50256) {
		t.Errorf("partial special matched: %v", got)
	}
}

// The heap merge must agree with the scan merge on every word.
func TestHeapMatchesSmall(t *testing.T) {
	tok := realTokenizer(t)
	var words []string
	for _, c := range hfCases(t) {
		for i := 0; i < len(c.Text); {
			j := pretokenEnd(c.Text, i)
			words = append(words, c.Text[i:j])
			i = j
		}
	}
	in, _ := ggmlVocabTests(t)
	words = append(words, in...)
	words = append(words, "supercalifragilisticexpialidocious", strings.Repeat("ab", 20),
		" antidisestablishmentarianism", "😶‍🌫️😶‍🌫️😶‍🌫️")
	for _, w := range words {
		if len(w) > smallWord {
			continue
		}
		a := tok.bpeSmall(nil, w)
		b := tok.bpeHeap(nil, w)
		if !slices.Equal(a, b) {
			t.Errorf("word %q: scan %v, heap %v", w, a, b)
		}
	}
}

// Long pre-tokens (digit runs, punctuation runs, whitespace runs, long words)
// take the heap path; they must still round-trip and be stable.
func TestRealLongWords(t *testing.T) {
	tok := realTokenizer(t)
	for _, s := range []string{
		strings.Repeat("3", 1000),
		strings.Repeat("-", 333) + "=",
		strings.Repeat(" ", 500) + "x",
		strings.Repeat("\n", 200),
		strings.Repeat("a", 777),
		strings.Repeat("é", 100),
		strings.Repeat("🦙", 100),
	} {
		ids := tok.Encode(s)
		if tok.Decode(ids) != s {
			t.Errorf("round trip failed for %q...", s[:10])
		}
		if again := tok.Encode(s); !slices.Equal(ids, again) {
			t.Errorf("cached/uncached mismatch for %q...", s[:10])
		}
	}
	// GPT-2 does not split digit runs: "333333333" is one pre-token.
	if got := tok.Encode(strings.Repeat("3", 9)); !slices.Equal(got, []int32{24840, 2091, 20370}) {
		t.Errorf("333333333 = %v", got)
	}
}
