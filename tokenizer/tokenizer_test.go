package tokenizer

import (
	"slices"
	"strings"
	"sync"
	"testing"
)

// tinyVocab builds a small synthetic GPT-2-style vocabulary: the 256 byte
// tokens (in byte order, so byte b has id b), then the results of merges in
// rank order, then the given specials as control tokens.
func tinyVocab(tb testing.TB, merges []string, specials ...string) *BPE {
	tb.Helper()
	var tokens []string
	for b := range 256 {
		tokens = append(tokens, string(byteToRune[b]))
	}
	for _, m := range merges {
		tokens = append(tokens, strings.Replace(m, " ", "", 1))
	}
	types := make([]int32, len(tokens))
	for i := range types {
		types[i] = TypeNormal
	}
	for _, s := range specials {
		tokens = append(tokens, s)
		types = append(types, TypeControl)
	}
	tok, err := New(tokens, merges, types)
	if err != nil {
		tb.Fatal(err)
	}
	return tok
}

// mustID returns the id of the mapped token for the raw text s.
func mustID(tb testing.TB, tok *BPE, raw string) int32 {
	tb.Helper()
	id, ok := tok.ID(mapBytes(raw))
	if !ok {
		tb.Fatalf("no token for %q", raw)
	}
	return id
}

func TestByteMapping(t *testing.T) {
	seen := map[rune]bool{}
	shifted := 0
	for b := range 256 {
		r := byteToRune[b]
		if seen[r] {
			t.Fatalf("code point %U used twice", r)
		}
		seen[r] = true
		if r >= 256 {
			shifted++
		} else if r != rune(b) {
			t.Errorf("byte %d maps to %U", b, r)
		}
		if runeToByte[r] != int16(b) {
			t.Errorf("inverse of %U is %d, want %d", r, runeToByte[r], b)
		}
	}
	if shifted != 68 {
		t.Errorf("%d shifted bytes, want 68", shifted)
	}
	for b, want := range map[byte]rune{0: 0x100, ' ': 'Ġ', '\n': 'Ċ', '\t': 'ĉ', 127: 0x121, 173: 0x143, '!': '!', 0xFF: 0xFF} {
		if byteToRune[b] != want {
			t.Errorf("byte %#x maps to %U, want %U", b, byteToRune[b], want)
		}
	}
	if got := unmapToken("Ġhello" + "Ċ"); got != " hello\n" {
		t.Errorf("unmapToken = %q", got)
	}
}

func TestBPETinyVocab(t *testing.T) {
	merges := []string{
		"l l",    // rank 0
		"h e",    // 1
		"he ll",  // 2
		"hell o", // 3
		"Ġ w",    // 4
		"o r",    // 5
		"Ġw or",  // 6
		"a a",    // 7
		"b c",    // 8
		"a b",    // 9
		"a bc",   // 10
	}
	tok := tinyVocab(t, merges, EndOfText)
	id := func(s string) int32 { return mustID(t, tok, s) }
	cases := []struct {
		in   string
		want []int32
	}{
		{"hello", []int32{id("hello")}},
		{"hello world", []int32{id("hello"), id(" wor"), 'l', 'd'}},
		{"hellll", []int32{id("hell"), id("ll")}},
		// equal ranks: leftmost first
		{"aaa", []int32{id("aa"), 'a'}},
		{"aaaa", []int32{id("aa"), id("aa")}},
		// lower rank wins over position: "b c" (8) before "a b" (9)
		{"abc", []int32{id("abc")}},
		{"abab", []int32{id("ab"), id("ab")}},
		{"x", []int32{'x'}},
		{"\n", []int32{byteToTokID('\n')}},
		{"é", []int32{0xC3, 0xA9}},
	}
	for _, c := range cases {
		got := tok.EncodeOrdinary(c.in)
		if !slices.Equal(got, c.want) {
			t.Errorf("EncodeOrdinary(%q) = %v, want %v", c.in, got, c.want)
		}
		if tok.Decode(got) != c.in {
			t.Errorf("Decode(Encode(%q)) = %q", c.in, tok.Decode(got))
		}
		// the heap path agrees
		if h := tok.bpeHeap(nil, c.in); len(split(c.in)) == 1 && !slices.Equal(h, c.want) {
			t.Errorf("bpeHeap(%q) = %v, want %v", c.in, h, c.want)
		}
	}
	// A word long enough for the heap path.
	long := strings.Repeat("hello", 20)
	want := slices.Repeat([]int32{id("hello")}, 20)
	if got := tok.Encode(long); !slices.Equal(got, want) {
		t.Errorf("Encode(long) = %v", got)
	}
}

// byteToTokID is the id of byte b in tinyVocab.
func byteToTokID(b byte) int32 { return int32(b) }

func TestSpecialTokens(t *testing.T) {
	tok := tinyVocab(t, []string{"h i"}, EndOfText, "<|end|>", "<|endoftext|>x")
	eos := tok.EOS()
	if eos < 0 || tok.Token(eos) != EndOfText {
		t.Fatalf("EOS = %d", eos)
	}
	hi := mustID(t, tok, "hi")
	endID, _ := tok.ID("<|end|>")
	longID, _ := tok.ID("<|endoftext|>x")
	cases := []struct {
		in   string
		want []int32
	}{
		{"<|endoftext|>", []int32{eos}},
		{"hi<|endoftext|>hi", []int32{hi, eos, hi}},
		{"<|endoftext|><|endoftext|>", []int32{eos, eos}},
		{"<|end|>hi", []int32{endID, hi}},
		// longest match wins
		{"<|endoftext|>xhi", []int32{longID, hi}},
		// the text around a special token is pre-tokenized separately
		{" <|endoftext|> ", []int32{' ', eos, ' '}},
		{"<|endof", []int32{'<', '|', 'e', 'n', 'd', 'o', 'f'}},
		{"<<|end|>", []int32{'<', endID}},
	}
	for _, c := range cases {
		got := tok.Encode(c.in)
		if !slices.Equal(got, c.want) {
			t.Errorf("Encode(%q) = %v, want %v", c.in, got, c.want)
		}
		if tok.Decode(got) != c.in {
			t.Errorf("Decode(Encode(%q)) = %q", c.in, tok.Decode(got))
		}
		if got := tok.AppendEncode([]int32{-7}, c.in); !slices.Equal(got, append([]int32{-7}, c.want...)) {
			t.Errorf("AppendEncode(%q) = %v", c.in, got)
		}
	}
	ord := tok.EncodeOrdinary("<|endoftext|>")
	if slices.Contains(ord, eos) || tok.Decode(ord) != EndOfText {
		t.Errorf("EncodeOrdinary matched the special token: %v", ord)
	}
	if got := string(tok.TokenBytes(eos)); got != EndOfText {
		t.Errorf("TokenBytes(eos) = %q", got)
	}
}

// With types == nil every token is normal, but <|endoftext|> is still EOS
// and still special.
func TestNilTypes(t *testing.T) {
	var tokens []string
	for b := range 256 {
		tokens = append(tokens, string(byteToRune[b]))
	}
	tokens = append(tokens, "ab", EndOfText)
	tok, err := New(tokens, []string{"a b"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if tok.EOS() != 257 || tok.VocabSize() != 258 {
		t.Fatalf("EOS %d, size %d", tok.EOS(), tok.VocabSize())
	}
	if got := tok.Encode("ab<|endoftext|>"); !slices.Equal(got, []int32{256, 257}) {
		t.Errorf("Encode = %v", got)
	}
	if tok.Token(-1) != "" || tok.Token(258) != "" || tok.TokenBytes(999) != nil {
		t.Error("out-of-range ids")
	}
	if got := tok.Decode([]int32{97, -1, 1000, 98}); got != "ab" {
		t.Errorf("Decode skipping bad ids = %q", got)
	}
}

func TestNewErrors(t *testing.T) {
	if _, err := New(nil, nil, nil); err == nil {
		t.Error("empty vocabulary accepted")
	}
	if _, err := New([]string{"a"}, nil, []int32{1, 1}); err == nil {
		t.Error("types of the wrong length accepted")
	}
	if _, err := New([]string{"a", "b"}, []string{"ab"}, nil); err == nil {
		t.Error("malformed merge accepted")
	}
	// merges whose parts are not in the vocabulary are ignored
	tok, err := New([]string{"a", "b"}, []string{"a b", "x y"}, nil)
	if err != nil || len(tok.merges) != 0 {
		t.Errorf("New with unusable merges: %v, %d merges", err, len(tok.merges))
	}
}

func TestConcurrentEncode(t *testing.T) {
	tok := tinyVocab(t, []string{"h e", "l l", "he ll", "hell o"}, EndOfText)
	text := strings.Repeat("hello yellow fellow <|endoftext|> mellow ", 200)
	want := tok.Encode(text)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 20 {
				if got := tok.Encode(text); !slices.Equal(got, want) {
					t.Error("concurrent Encode differs")
					return
				}
			}
		})
	}
	wg.Wait()
}

func TestCacheBounded(t *testing.T) {
	tok := tinyVocab(t, []string{"a b"})
	var sb strings.Builder
	for i := range maxCacheEntries + 100 {
		sb.WriteString(" ab")
		for x := i; x > 0; x /= 26 {
			sb.WriteByte(byte('a' + x%26))
		}
	}
	s := sb.String()
	if tok.Decode(tok.Encode(s)) != s {
		t.Fatal("round trip failed")
	}
	tok.cache.mu.RLock()
	n := len(tok.cache.m)
	tok.cache.mu.RUnlock()
	if n > maxCacheEntries {
		t.Errorf("cache holds %d words, limit %d", n, maxCacheEntries)
	}
}
