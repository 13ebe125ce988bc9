package tokenizer

import (
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
