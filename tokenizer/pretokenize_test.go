package tokenizer

import (
	"math/rand"
	"regexp"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

func split(s string) []string {
	var out []string
	for i := 0; i < len(s); {
		j := pretokenEnd(s, i)
		out = append(out, s[i:j])
		i = j
	}
	return out
}

func TestPretokenizeCases(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{"", nil},
		{"Hello world", []string{"Hello", " world"}},
		{"  hello", []string{" ", " hello"}},
		{"   hello", []string{"  ", " hello"}},
		{"hello  ", []string{"hello", "  "}},
		{"hello ", []string{"hello", " "}},
		{"hi \n", []string{"hi", " \n"}},
		{"\n\n\nfoo", []string{"\n\n", "\n", "foo"}},
		{"a\n\n b", []string{"a", "\n\n", " b"}},
		{"a \n b", []string{"a", " \n", " b"}},
		{"\t\n", []string{"\t\n"}},
		{" ", []string{" "}},
		{"x\ty", []string{"x", "\t", "y"}},
		// contractions: lowercase only, matched wherever an apostrophe starts
		{"I'm here, you're 'll they've she'd it's can't", []string{"I", "'m", " here", ",", " you", "'re", " '", "ll", " they", "'ve", " she", "'d", " it", "'s", " can", "'t"}},
		{"'s'S", []string{"'s", "'", "S"}},
		{"Don'T WE'LL", []string{"Don", "'", "T", " WE", "'", "LL"}},
		{"''s", []string{"''", "s"}},
		{"!'s", []string{"!'", "s"}},
		{"'sa", []string{"'s", "a"}},
		{"'", []string{"'"}},
		{"'l", []string{"'", "l"}},
		{"'r", []string{"'", "r"}},
		// digits are one run, no splitting; letters and digits separate
		{"123 4567 w048", []string{"123", " 4567", " w", "048"}},
		{"3.14", []string{"3", ".", "14"}},
		{"½٣Ⅻ", []string{"½٣Ⅻ"}}, // No, Nd, Nl
		// punctuation runs
		{"hello!!! ...? --==", []string{"hello", "!!!", " ...?", " --=="}},
		{"@#$%^&*()", []string{"@#$%^&*()"}},
		{" (", []string{" ("}},
		{"\n =", []string{"\n", " ="}},
		// emoji are "other"; ZWJ and variation selectors too
		{"🦙🦙 x", []string{"🦙🦙", " x"}},
		{"😶\u200d🌫\ufe0f (", []string{"😶\u200d🌫\ufe0f", " ("}},
		// CJK ideographs and Hangul are letters
		{"我想在apple工作1314151天～", []string{"我想在apple工作", "1314151", "天", "～"}},
		{"한국어 텍스트", []string{"한국어", " 텍스트"}},
		// combining marks (Mn) are neither letters nor numbers
		{"cafe\u0301 na\u0308ive", []string{"cafe", "\u0301", " na", "\u0308", "ive"}},
		{"café", []string{"café"}},
		// \s is White_Space: NBSP and U+3000 are spaces, U+200B and U+001C are not
		{"x\u00a0y", []string{"x", "\u00a0", "y"}},
		{"x \u00a0y", []string{"x", " ", "\u00a0", "y"}},
		{"x\u3000\u3000", []string{"x", "\u3000\u3000"}},
		{"x\u200bzero", []string{"x", "\u200b", "zero"}},
		{"a\x1cb", []string{"a", "\x1c", "b"}},
		{"a\u0085b", []string{"a", "\u0085", "b"}},
		// invalid UTF-8 bytes are "other" characters
		{"a\xffb\xfe\xfd c", []string{"a", "\xff", "b", "\xfe\xfd", " c"}},
	}
	for _, c := range cases {
		got := split(c.in)
		if !slices.Equal(got, c.want) {
			t.Errorf("split(%q) = %q, want %q", c.in, got, c.want)
		}
	}
}

// A reference splitter built on Go's regexp, which (like a backtracking
// engine) prefers the leftmost alternative. The lookahead alternative is
// emulated after the fact: a pure-whitespace match followed by a non-space
// character gives back its last character when it has more than one.
var refRE = regexp.MustCompile(`^(?:'s|'t|'re|'ve|'m|'ll|'d| ?\pL+| ?\pN+| ?[^` + wsClass + `\pL\pN]+|[` + wsClass + `]+)`)

const wsClass = `\t\n\v\f\r \x{85}\x{A0}\x{1680}\x{2000}-\x{200A}\x{2028}\x{2029}\x{202F}\x{205F}\x{3000}`

var refWS = regexp.MustCompile(`^[` + wsClass + `]+$`)

func refSplit(s string) []string {
	var out []string
	for len(s) > 0 {
		m := refRE.FindString(s)
		if m == "" {
			panic("reference regexp did not match " + s)
		}
		if refWS.MatchString(m) && len(m) < len(s) && utf8.RuneCountInString(m) > 1 {
			_, n := utf8.DecodeLastRuneInString(m)
			m = m[:len(m)-n]
		}
		out = append(out, m)
		s = s[len(m):]
	}
	return out
}

var pretokAlphabet = []rune("aZé1٣½ '\t\n\r\v\f\u0085\u00a0\u1680\u2000\u2028\u3000\u200b\x1c\u0301!?.-😀我ⅫsStrevmldL")

func TestPretokenizeMatchesRegexp(t *testing.T) {
	rng := rand.New(rand.NewSource(7))
	for range 50000 {
		rs := make([]rune, rng.Intn(14))
		for i := range rs {
			rs[i] = pretokAlphabet[rng.Intn(len(pretokAlphabet))]
		}
		s := string(rs)
		if got, want := split(s), refSplit(s); !slices.Equal(got, want) {
			t.Fatalf("split(%q) = %q, reference %q", s, got, want)
		}
	}
}

func FuzzPretokenize(f *testing.F) {
	for _, s := range []string{"Hello world", "  hello", "\n\n\nfoo", "I'm 'll", "a\u00a0 b", "x\xff y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		got := split(s)
		if strings.Join(got, "") != s {
			t.Fatalf("pieces of %q do not concatenate back: %q", s, got)
		}
		if utf8.ValidString(s) {
			if want := refSplit(s); !slices.Equal(got, want) {
				t.Fatalf("split(%q) = %q, reference %q", s, got, want)
			}
		}
	})
}
