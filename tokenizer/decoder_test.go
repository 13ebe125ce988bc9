package tokenizer

import (
	"math/rand"
	"strings"
	"testing"
	"unicode/utf8"
)

// stream feeds ids through a fresh decoder and returns each Next result and
// the Flush result.
func stream(tok *BPE, ids []int32) (parts []string, flush string) {
	d := tok.NewDecoder()
	for _, id := range ids {
		parts = append(parts, d.Next(id))
	}
	return parts, d.Flush()
}

func TestDecoderSplitCharacter(t *testing.T) {
	tok := tinyVocab(t, []string{"h i"}, EndOfText)
	hi := mustID(t, tok, "hi")
	// 🦙 is F0 9F A6 99; in tinyVocab byte b is token b.
	parts, flush := stream(tok, []int32{hi, 0xF0, 0x9F, 0xA6, 0x99, '!'})
	want := []string{"hi", "", "", "", "🦙", "!"}
	if strings.Join(parts, "|") != strings.Join(want, "|") || flush != "" {
		t.Errorf("got %q flush %q, want %q", parts, flush, want)
	}
	// Held bytes are emitted together with what completes them.
	parts, _ = stream(tok, []int32{0xC3, 0xA9, tok.EOS()})
	if parts[0] != "" || parts[1] != "é" || parts[2] != EndOfText {
		t.Errorf("got %q", parts)
	}
}

func TestDecoderInvalid(t *testing.T) {
	tok := tinyVocab(t, nil)
	cases := []struct {
		ids   []int32
		parts []string
		flush string
	}{
		// a byte that can never start a character
		{[]int32{0xFF, 'a'}, []string{"\uFFFD", "a"}, ""},
		{[]int32{0x80}, []string{"\uFFFD"}, ""},
		// a valid prefix interrupted: one U+FFFD for the whole prefix
		{[]int32{0xE2, 0x82, 'A'}, []string{"", "", "\uFFFDA"}, ""},
		{[]int32{0xF0, 0x9F, 0xA6, 0xF0, 0x9F, 0xA6, 0x99}, []string{"", "", "", "\uFFFD", "", "", "🦙"}, ""},
		// E0 80: E0 needs A0..BF next, so two separate replacements
		{[]int32{0xE0, 0x80}, []string{"", "\uFFFD\uFFFD"}, ""},
		// surrogates (ED A0..BF) are invalid
		{[]int32{0xED, 0xA0, 0x80}, []string{"", "\uFFFD\uFFFD", "\uFFFD"}, ""},
		// an incomplete character at the end is flushed as U+FFFD
		{[]int32{'x', 0xE6, 0x88}, []string{"x", "", ""}, "\uFFFD"},
		{[]int32{0xC0, 0xAF}, []string{"\uFFFD", "\uFFFD"}, ""},
		{[]int32{0xF5}, []string{"\uFFFD"}, ""},
	}
	for _, c := range cases {
		parts, flush := stream(tok, c.ids)
		if strings.Join(parts, "|") != strings.Join(c.parts, "|") || flush != c.flush {
			t.Errorf("ids % x: got %q flush %q, want %q flush %q", c.ids, parts, flush, c.parts, c.flush)
		}
	}
	// The decoder is reusable after Flush.
	d := tok.NewDecoder()
	d.Next(0xE6)
	d.Flush()
	if got := d.Next('z'); got != "z" {
		t.Errorf("after Flush: %q", got)
	}
}

// Multi-byte pieces: a token whose bytes end in the middle of a character.
func TestDecoderMultiBytePieces(t *testing.T) {
	tok := tinyVocab(t, []string{
		mapBytes("\xe6") + " " + mapBytes("\x88"),     // first two bytes of 我
		mapBytes("\x91") + " " + mapBytes("\xe6"),     // last byte of 我 + first of 想
		mapBytes("\xe6\x88") + " " + mapBytes("\x91"), // 我
	})
	a := mustID(t, tok, "\xe6\x88")
	b := mustID(t, tok, "\x91\xe6")
	parts, flush := stream(tok, []int32{a, b, 0x83, 0xB3, a})
	want := []string{"", "我", "", "想", ""}
	if strings.Join(parts, "|") != strings.Join(want, "|") || flush != "\uFFFD" {
		t.Errorf("got %q flush %q, want %q", parts, flush, want)
	}
}

// For any id sequence, the streamed text is valid UTF-8, and equals Decode
// whenever Decode is valid UTF-8.
func TestDecoderRandom(t *testing.T) {
	tok := tinyVocab(t, []string{mapBytes("\xe6") + " " + mapBytes("\x88"), "Ġ a"}, EndOfText)
	rng := rand.New(rand.NewSource(3))
	pool := []int32{'a', ' ', 0xE6, 0x88, 0x91, 0xF0, 0x9F, 0xA6, 0x99, 0xC3, 0xA9, 0xFF, 0x80, 256, 257, 258}
	for range 20000 {
		ids := make([]int32, rng.Intn(10))
		for i := range ids {
			ids[i] = pool[rng.Intn(len(pool))]
		}
		parts, flush := stream(tok, ids)
		got := strings.Join(parts, "") + flush
		if !utf8.ValidString(got) {
			t.Fatalf("ids %v: invalid UTF-8 %q", ids, got)
		}
		if dec := tok.Decode(ids); utf8.ValidString(dec) && got != dec {
			t.Fatalf("ids %v: streamed %q, Decode %q", ids, got, dec)
		}
	}
}

func TestDecoderNoAllocs(t *testing.T) {
	tok := tinyVocab(t, []string{"h e", "l l", "he ll", "hell o"})
	id := mustID(t, tok, "hello")
	d := tok.NewDecoder()
	if n := testing.AllocsPerRun(1000, func() { d.Next(id) }); n != 0 {
		t.Errorf("Next allocates %v times per call for a whole-character token", n)
	}
	// A split character: only the returned string may allocate.
	if n := testing.AllocsPerRun(1000, func() { d.Next(0xC3); d.Next(0xA9) }); n > 1 {
		t.Errorf("split character: %v allocations", n)
	}
}
