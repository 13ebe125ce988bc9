package tokenizer

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/gorun-dev/gorun/internal/fixtures"
)

// fuzzTokenizer is GPT-2's tokenizer when the fixtures are present, else a
// small synthetic vocabulary.
func fuzzTokenizer(f *testing.F) *BPE {
	if haveFixture("vocab.json") {
		return realTokenizer(f)
	}
	return tinyVocab(f, []string{"h e", "l l", "he ll", "hell o", "Ġ w", "o r", "Ġw or", "Ġ t", "Ġt he", "e r", "i n", "Ġ Ġ"}, EndOfText)
}

func FuzzRoundTrip(f *testing.F) {
	tok := fuzzTokenizer(f)
	for _, s := range []string{
		"", "Hello world", "  hello\n\n\nfoo", "I'm y'all 'LL", "3333333 3.14", "🦙.cpp 😶\u200d🌫\ufe0f",
		"нещо на Български", "我想在apple工作", "<|endoftext|>x<|endoftext|", "a\u00a0\u3000 b\t\n ",
		"cafe\u0301", strings.Repeat("-", 100),
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ids := tok.Encode(s)
		if got := tok.Decode(ids); got != s && utf8.ValidString(s) {
			t.Fatalf("Decode(Encode(%q)) = %q (ids %v)", s, got, ids)
		}
		ord := tok.EncodeOrdinary(s)
		if got := tok.Decode(ord); got != s && utf8.ValidString(s) {
			t.Fatalf("Decode(EncodeOrdinary(%q)) = %q (ids %v)", s, got, ord)
		}
		if !strings.Contains(s, EndOfText) && !slices.Equal(ids, ord) {
			t.Fatalf("Encode and EncodeOrdinary differ on %q: %v vs %v", s, ids, ord)
		}
		// The streaming decoder reproduces valid text exactly.
		if utf8.ValidString(s) {
			d := tok.NewDecoder()
			var sb strings.Builder
			for _, id := range ids {
				sb.WriteString(d.Next(id))
			}
			sb.WriteString(d.Flush())
			if sb.String() != s {
				t.Fatalf("streamed %q, want %q", sb.String(), s)
			}
		}
		// Both merge strategies agree on every pre-token.
		for i := 0; i < len(s); {
			j := pretokenEnd(s, i)
			if w := s[i:j]; len(w) <= smallWord {
				if a, b := tok.bpeSmall(nil, w), tok.bpeHeap(nil, w); !slices.Equal(a, b) {
					t.Fatalf("word %q: scan %v, heap %v", w, a, b)
				}
			}
			i = j
		}
	})
}

// benchText returns a few hundred KB of varied text: the fixture texts when
// present, else synthetic prose.
func benchText(b *testing.B) string {
	var sb strings.Builder
	if data, err := os.ReadFile(fixturePath("hf_cases.json")); err == nil {
		sb.Write(data) // JSON: prose, escapes, digits, punctuation
	} else {
		sb.WriteString("The quick brown fox jumps over the lazy dog; it's 1234 times faster!\n\n  Indented   text\t")
	}
	base := sb.String()
	for sb.Len() < 400<<10 {
		sb.WriteString(base)
	}
	return sb.String()
}

func BenchmarkEncode(b *testing.B) {
	tok := func() *BPE {
		if haveFixture("vocab.json") {
			return realTokenizer(b)
		}
		return tinyVocab(b, []string{"Ġ t", "h e", "Ġt he", "i n", "e r", "o n"}, EndOfText)
	}()
	text := benchText(b)
	dst := make([]int32, 0, len(text))
	b.SetBytes(int64(len(text)))
	b.ReportAllocs()
	for b.Loop() {
		dst = tok.AppendEncode(dst[:0], text)
	}
	b.ReportMetric(float64(len(dst))/float64(len(text)), "tokens/byte")
}

// BenchmarkEncodeCold measures encoding without the word cache's help.
func BenchmarkEncodeCold(b *testing.B) {
	tok := realTokenizer(b)
	text := benchText(b)
	dst := make([]int32, 0, len(text))
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		tok.cache.mu.Lock()
		clear(tok.cache.m)
		tok.cache.mu.Unlock()
		dst = tok.AppendEncode(dst[:0], text)
	}
}

func BenchmarkDecoderNext(b *testing.B) {
	tok := realTokenizer(b)
	ids := tok.Encode(benchText(b))
	d := tok.NewDecoder()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		_ = d.Next(ids[i%len(ids)])
		i++
	}
}

// fixturePath is the path of a tokenizer fixture, or "" when the fixtures are absent.
func fixturePath(name string) string {
	dir, err := fixtures.Find()
	if err != nil {
		return ""
	}
	return filepath.Join(dir, "tokenizer", name)
}

func haveFixture(name string) bool {
	p := fixturePath(name)
	if p == "" {
		return false
	}
	_, err := os.Stat(p)
	return err == nil
}

// spmFuzzVocab is a small SentencePiece vocabulary with byte fallback: every byte has its
// <0xNN> token, a few merges, and control/user-defined tokens to match.
func spmFuzzVocab(tb testing.TB) *SPM {
	tokens := []string{"<unk>", "<s>", "</s>", "<|im_start|>"}
	types := []int32{TypeUnknown, TypeControl, TypeControl, TypeUserDefined}
	for b := range 256 {
		tokens = append(tokens, fmt.Sprintf("<0x%02X>", b))
		types = append(types, TypeByte)
	}
	words := []string{"▁", "h", "e", "l", "o", "▁h", "he", "ll", "llo", "▁hello", "▁w", "or", "▁wor", "ld", "▁world", "é", "▁▁", "中", "中文"}
	var scores []float32
	for range tokens {
		scores = append(scores, 0)
	}
	for i, w := range words {
		tokens = append(tokens, w)
		types = append(types, TypeNormal)
		scores = append(scores, -float32(i))
	}
	t, err := NewSPM(tokens, scores, types, true)
	if err != nil {
		tb.Fatal(err)
	}
	return t
}

// FuzzSPMRoundTrip: SentencePiece encoding never panics, is lossless for valid UTF-8 without
// a literal "▁" (byte fallback covers every character), and streams as it decodes.
func FuzzSPMRoundTrip(f *testing.F) {
	var tok *SPM
	if haveFixture("ggml-vocab-llama-spm.gguf") {
		tok = ggufTokenizer(f, "ggml-vocab-llama-spm.gguf").(*SPM)
	} else {
		tok = spmFuzzVocab(f)
	}
	for _, s := range []string{"", " ", "hello world", "  hello\n\n", "Führer", "中文 text", "🦙👍🏽", "<s>x</s>",
		"<|im_start|>user", "a\u00a0b", "cafe\u0301", "\x00\xff", "▁", strings.Repeat("ab ", 40)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		ord := tok.EncodeOrdinary(s)
		_ = tok.Encode(s)
		// A user-defined token splits the text, and the text after it gets its own space.
		if !utf8.ValidString(s) || strings.Contains(s, spaceMark) || slices.ContainsFunc(ord, func(id int32) bool { return !tok.isText(id) }) {
			return
		}
		if got := tok.Decode(ord); got != s {
			t.Fatalf("Decode(EncodeOrdinary(%q)) = %q (ids %v)", s, got, ord)
		}
		d := tok.NewDecoder()
		var sb strings.Builder
		for _, id := range ord {
			sb.WriteString(d.Next(id))
		}
		sb.WriteString(d.Flush())
		if want := tok.Decode(ord); sb.String() != " "+want && !(s == "" && sb.String() == "") {
			t.Fatalf("streamed %q, want the space prefix and %q", sb.String(), want)
		}
	})
}

// FuzzPreTokenizers: every pre-tokenizer covers its input exactly, with non-empty pieces, in
// order, and never panics.
func FuzzPreTokenizers(f *testing.F) {
	for _, s := range []string{"", "Hello, y'all! How are you 😁 ?", "3333333 3.14", "  \r\n\t x", "'S 'ſ 'LL",
		"我想在apple工作1314151天～", "a\u00a0\u3000 b\t\n ", "$+<=>^~|` ...", "\xff\xfe'\xc3"} {
		f.Add(s)
	}
	names := supportedPre()
	f.Fuzz(func(t *testing.T, s string) {
		for _, name := range names {
			var sb strings.Builder
			bpePreTokenizers[name].pre.each(s, func(w string) {
				if w == "" {
					t.Fatalf("%s: empty pre-token in %q", name, s)
				}
				sb.WriteString(w)
			})
			if sb.String() != s {
				t.Fatalf("%s: pre-tokens of %q join to %q", name, s, sb.String())
			}
		}
	})
}
