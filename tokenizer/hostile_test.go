package tokenizer

import (
	"math/rand/v2"
	"runtime/metrics"
	"slices"
	"strings"
	"testing"
	"time"
)

// refEncode is Encode with the special tokens found by trying every one at every position
// (quadratic, but obviously right): the reference for the matcher.
func refEncode(t *BPE, text string) []int32 {
	var dst []int32
	start := 0
	for i := 0; i < len(text); {
		id, ok := t.matchSpecial(text[i:])
		if !ok {
			i++
			continue
		}
		dst = t.appendOrdinary(dst, text[start:i])
		dst = append(dst, id)
		i += len(t.tokens[id])
		start = i
	}
	return t.appendOrdinary(dst, text[start:])
}

func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// The matcher finds the same special tokens as trying each in turn, on vocabularies of
// overlapping specials over a small alphabet (where leftmost-longest matters).
func TestSpecialMatcherMatchesReference(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	word := func(n int) string {
		b := make([]byte, 1+r.IntN(n))
		for i := range b {
			b[i] = "ab<|>"[r.IntN(5)]
		}
		return string(b)
	}
	for iter := 0; iter < 300; iter++ {
		var tokens []string
		var types []int32
		for b := range 256 {
			tokens = append(tokens, string(byteToRune[b]))
			types = append(types, TypeNormal)
		}
		for range 1 + r.IntN(12) {
			tokens = append(tokens, word(6))
			types = append(types, []int32{TypeControl, TypeUserDefined, TypeNormal}[r.IntN(3)])
		}
		if r.IntN(2) == 0 {
			tokens = append(tokens, EndOfText)
			types = append(types, TypeNormal)
		}
		tok, err := New(tokens, nil, types)
		if err != nil {
			t.Fatal(err)
		}
		for range 20 {
			text := word(200)
			if got, want := tok.Encode(text), refEncode(tok, text); !slices.Equal(got, want) {
				t.Fatalf("vocab %q types %v, text %q:\n got %v\nwant %v", tokens[256:], types[256:], text, got, want)
			}
		}
	}
}

// Issue 8, row 10: tokenizing costs time linear in the text with a small constant, whatever
// the token types. Every token typed CONTROL used to cost a comparison with every token at
// every byte (~90 us per byte with GPT-2's 50k tokens); a long special that almost matches
// everywhere would cost its length at every byte of a trie walk.
func TestHostileVocabulariesLinear(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	var allControl []string
	for b := range 256 {
		allControl = append(allControl, string(byteToRune[b]))
	}
	for len(allControl) < 50000 {
		w := make([]byte, 2+r.IntN(8))
		for i := range w {
			w[i] = byte('a' + r.IntN(26))
		}
		allControl = append(allControl, string(w))
	}
	ctl := make([]int32, len(allControl))
	for i := range ctl {
		ctl[i] = TypeControl
	}
	long := strings.Repeat("a", 4096)
	cases := []struct {
		name   string
		tokens []string
		types  []int32
		text   string
	}{
		{"all control", allControl, ctl, randomLetters(r, 1<<20)},
		{"long near-miss special", []string{"a", long + "b", EndOfText}, []int32{TypeNormal, TypeControl, TypeControl}, strings.Repeat("a", 1<<20)},
		{"many specials sharing a first byte", prefixed(5000), nil, strings.Repeat("<", 1<<20)},
	}
	for _, c := range cases {
		tok, err := New(c.tokens, nil, c.types)
		if err != nil {
			t.Fatal(err)
		}
		start, before := time.Now(), heapAllocs()
		ids := tok.Encode(c.text)
		took, used := time.Since(start), heapAllocs()-before
		if len(ids) == 0 {
			t.Fatalf("%s: no tokens", c.name)
		}
		// Linear: about 0.1 s here on a loaded machine; the old cost was minutes.
		if took > 5*time.Second || used > 64<<20 {
			t.Errorf("%s: 1 MiB took %v and allocated %d bytes", c.name, took, used)
		}
	}
}

func randomLetters(r *rand.Rand, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte('a' + r.IntN(26))
	}
	return string(b)
}

// prefixed is a vocabulary of the byte tokens and n user-defined tokens "<<<...<x" that all
// start like the text "<<<<...".
func prefixed(n int) []string {
	var tokens []string
	for b := range 256 {
		tokens = append(tokens, string(byteToRune[b]))
	}
	for i := 0; i < n; i++ {
		tokens = append(tokens, strings.Repeat("<", 1+i%64)+string(rune('A'+i/64%26))+string(rune('a'+i/64/26)))
	}
	return tokens
}

// FuzzHostileVocab builds a vocabulary from the fuzzer's bytes (tokens split at NUL, a type per
// token, merges between neighbours) and encodes a text with it: no panic, the reference's
// ids, a bounded allocation, and the decoder survives every id.
func FuzzHostileVocab(f *testing.F) {
	f.Add([]byte("a\x00b\x00ab\x00<|endoftext|>\x00<s>"), []byte{1, 1, 3, 3, 4}, "ab<s>a<|endoftext|>b")
	f.Add([]byte("\x00\x00\x00"), []byte{3, 3, 3}, "")
	f.Add([]byte("aaaa\x00aaab\x00a"), []byte{3, 4, 1}, strings.Repeat("a", 100)+"b")
	f.Fuzz(func(t *testing.T, vocab []byte, typeBytes []byte, text string) {
		if len(vocab) > 1<<16 || len(text) > 1<<16 {
			return
		}
		tokens := strings.Split(string(vocab), "\x00")
		types := make([]int32, len(tokens))
		for i := range types {
			types[i] = TypeNormal
			if i < len(typeBytes) {
				types[i] = int32(typeBytes[i] % 8)
			}
		}
		var merges []string
		for i := 0; i+1 < len(tokens) && len(merges) < 256; i++ {
			if tokens[i] != "" && tokens[i+1] != "" && !strings.Contains(tokens[i], " ") {
				merges = append(merges, tokens[i]+" "+tokens[i+1])
			}
		}
		before := heapAllocs()
		tok, err := New(tokens, merges, types)
		if err != nil {
			return
		}
		ids := tok.Encode(text)
		if used := heapAllocs() - before; used > 256*uint64(len(vocab)+len(text))+1<<20 {
			t.Fatalf("%d vocabulary bytes and %d text bytes allocated %d bytes", len(vocab), len(text), used)
		}
		if want := refEncode(tok, text); !slices.Equal(ids, want) {
			t.Fatalf("got %v, want %v", ids, want)
		}
		_ = tok.Decode(ids)
		d := tok.NewDecoder()
		for id := int32(-1); id <= int32(tok.VocabSize()); id++ {
			d.Next(id)
		}
		d.Flush()
	})
}
