package tokenizer

import (
	"slices"
	"testing"
)

// Pre-tokens by hand from the expressions of llama.cpp's llama-vocab.cpp.
func TestPreTokenizers(t *testing.T) {
	for _, c := range []struct {
		pre, text string
		want      []string
	}{
		{"llama-bpe", "Hello, y'all! 12345", []string{"Hello", ",", " y", "'all", "!", " ", "123", "45"}},
		{"llama-bpe", "a  \n\n b", []string{"a", "  \n\n", " b"}},
		{"llama-bpe", "I'M x'ſ", []string{"I", "'M", " x", "'ſ"}}, // (?i:) folds ſ to s, as Hugging Face does
		{"llama-bpe", "a   b\t", []string{"a", "  ", " b", "\t"}},
		{"llama-bpe", "!!\r\n\nx", []string{"!!\r\n\n", "x"}},
		{"qwen2", "x12345", []string{"x", "1", "2", "3", "4", "5"}},
		{"smollm", "a 123 b", []string{"a", " ", "1", "2", "3", " b"}},
		{"default", "a+=b 12345", []string{"a", "+=", "b", " ", "123", "45"}},
		{"falcon", "x`y 1234", []string{"x", "`", "y", " ", "123", "4"}},
		{"deepseek-coder", "ab 12\ncd", []string{"ab", " ", "1", "2", "\n", "cd"}},
		{"gpt-2", "it's  ok", []string{"it", "'s", " ", " ok"}},
	} {
		var got []string
		bpePreTokenizers[c.pre].pre.each(c.text, func(w string) { got = append(got, w) })
		if !slices.Equal(got, c.want) {
			t.Errorf("%s %q: %q, want %q", c.pre, c.text, got, c.want)
		}
	}
}
