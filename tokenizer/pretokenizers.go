package tokenizer

import (
	"unicode"
	"unicode/utf8"
)

// A BPE vocabulary's pre-tokenizer (tokenizer.ggml.pre) is, in llama.cpp, a list of regular
// expressions applied in turn: the first splits the text into its matches and the stretches
// between them, each later one splits every piece the same way (a lookahead such as (?!\S)
// sees only the end of its piece). Go's regexp has no lookahead, so each expression is a
// hand-written scanner with the expression's backtracking semantics (see pretokenize.go).
//
// Where llama.cpp rewrites an expression the model's tokenizer.json states (Llama 3's and
// Qwen2's (?i:'s|...) becomes '[sS]|...), the scanner follows the original, which is what
// Hugging Face runs: 'ſ (U+017F, whose case folding is s) is a contraction.

// A stage finds the first match of its expression in s at or after i: [a, b) with b > a, or
// a == len(s) when there is none.
type stage func(s string, i int) (a, b int)

// preTokenizer is a list of stages; nil is GPT-2's single expression.
type preTokenizer []stage

// each calls emit with the pre-tokens of s, in order.
func (p preTokenizer) each(s string, emit func(string)) {
	if len(p) == 0 {
		for i := 0; i < len(s); {
			j := pretokenEnd(s, i)
			emit(s[i:j])
			i = j
		}
		return
	}
	p.split(s, 0, emit)
}

func (p preTokenizer) split(s string, k int, emit func(string)) {
	if k == len(p) {
		emit(s)
		return
	}
	for i := 0; i < len(s); {
		a, b := p[k](s, i)
		if a > i {
			p.split(s[i:a], k+1, emit)
		}
		if a >= len(s) {
			break
		}
		p.split(s[a:b], k+1, emit)
		i = b
	}
}

// total makes a stage of a scanner whose expression matches at every position.
func total(end func(s string, i int) int) stage {
	return func(s string, i int) (int, int) { return i, end(s, i) }
}

// runOf makes the stage [class]+ (every == false: [class] alone, one character a match).
func runOf(in func(r rune) bool, every bool) stage {
	return func(s string, i int) (int, int) {
		for a := i; a < len(s); {
			r, n := utf8.DecodeRuneInString(s[a:])
			if !in(r) {
				a += n
				continue
			}
			b := a + n
			for every && b < len(s) {
				r, n := utf8.DecodeRuneInString(s[b:])
				if !in(r) {
					break
				}
				b += n
			}
			return a, b
		}
		return len(s), len(s)
	}
}

// threeDigits is the stage [0-9][0-9][0-9].
func threeDigits(s string, i int) (int, int) {
	run := 0
	for a := i; a < len(s); a++ {
		if s[a] < '0' || s[a] > '9' {
			run = 0
			continue
		}
		if run++; run == 3 {
			return a - 2, a + 1
		}
	}
	return len(s), len(s)
}

// isPunctOr returns the class [\p{P}extra].
func isPunctOr(extra string) func(r rune) bool {
	return func(r rune) bool {
		if r < utf8.RuneSelf {
			for i := 0; i < len(extra); i++ {
				if rune(extra[i]) == r {
					return true
				}
			}
		}
		return unicode.IsPunct(r)
	}
}

// spaceThen makes the stage \s?[class]+ (for a class without spaces).
func spaceThen(in func(r rune) bool) stage {
	run := func(s string, b int) int {
		for b < len(s) {
			r, n := utf8.DecodeRuneInString(s[b:])
			if !in(r) {
				break
			}
			b += n
		}
		return b
	}
	return func(s string, i int) (int, int) {
		for a := i; a < len(s); {
			r, n := utf8.DecodeRuneInString(s[a:])
			if in(r) {
				return a, run(s, a)
			}
			if unicode.IsSpace(r) && a+n < len(s) {
				if r2, _ := utf8.DecodeRuneInString(s[a+n:]); in(r2) {
					return a, run(s, a+n)
				}
			}
			a += n
		}
		return len(s), len(s)
	}
}

func isNewline(r rune) bool { return r == '\r' || r == '\n' }

// isCJK is deepseek-coder's [一-龥ࠀ-一가-퟿].
func isCJK(r rune) bool {
	return (r >= 0x4E00 && r <= 0x9FA5) || (r >= 0x0800 && r <= 0x4E00) || (r >= 0xAC00 && r <= 0xD7FF)
}

// The pre-tokenizers by tokenizer.ggml.pre, as llama.cpp's llama-vocab.cpp defines them.
var (
	preGPT2      preTokenizer // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)
	preLlama3    = preTokenizer{total(func(s string, i int) int { return llama3End(s, i, 3) })}
	preQwen2     = preTokenizer{total(func(s string, i int) int { return llama3End(s, i, 1) })}
	preStarcoder = preTokenizer{runOf(unicode.IsNumber, false), total(pretokenEnd)}
	preDefault   = preTokenizer{runOf(isPunctOr("$+<=>^~|"), true), total(pretokenEnd), runOf(unicode.IsNumber, true), threeDigits}
	preFalcon    = preTokenizer{runOf(isPunctOr("$+<=>^~|`"), true), total(pretokenEnd), threeDigits}
	preDSCoder   = preTokenizer{runOf(isNewline, false), spaceThen(unicode.IsLetter), spaceThen(unicode.IsPunct), runOf(isCJK, true), runOf(unicode.IsNumber, false)}
)

// bpePre is a supported tokenizer.ggml.pre value: its pre-tokenizer, whether a pre-token
// that is itself a token skips the merges (Hugging Face's ignore_merges), and llama.cpp's
// default for add_bos_token.
type bpePre struct {
	pre          preTokenizer
	ignoreMerges bool
	addBOS       bool
}

// bpePreTokenizers maps tokenizer.ggml.pre to the pre-tokenizer (llama.cpp's names). Absent
// means GPT-2's, as in files gorun's converter writes (llama.cpp would use "default").
var bpePreTokenizers = map[string]bpePre{
	"": {pre: preGPT2}, "gpt-2": {pre: preGPT2}, "phi-2": {pre: preGPT2}, "mpt": {pre: preGPT2},
	"olmo": {pre: preGPT2}, "jais": {pre: preGPT2}, "roberta-bpe": {pre: preGPT2}, "gigachat": {pre: preGPT2},
	"jina-es": {pre: preGPT2}, "jina-de": {pre: preGPT2}, "jina-v1-en": {pre: preGPT2},
	"jina-v2-es": {pre: preGPT2}, "jina-v2-de": {pre: preGPT2}, "jina-v2-code": {pre: preGPT2},

	"llama3": {preLlama3, true, true}, "llama-v3": {preLlama3, true, true},
	"llama-bpe": {preLlama3, true, true}, "falcon3": {preLlama3, true, true},
	"dbrx": {pre: preLlama3}, "smaug-bpe": {pre: preLlama3},

	"qwen2": {pre: preQwen2}, "deepseek-r1-qwen": {pre: preQwen2}, "megrez": {pre: preQwen2},
	"stablelm2": {pre: preQwen2},

	"starcoder": {pre: preStarcoder}, "refact": {pre: preStarcoder}, "command-r": {pre: preStarcoder},
	"smollm": {pre: preStarcoder}, "codeshell": {pre: preStarcoder}, "exaone": {pre: preStarcoder},
	"minerva-7b": {pre: preStarcoder},

	"default":        {pre: preDefault},
	"falcon":         {pre: preFalcon},
	"deepseek-coder": {pre: preDSCoder},
}

// foldsTo reports whether r matches c (a lower-case ASCII letter) case-insensitively, as
// Unicode simple case folding has it.
func foldsTo(r rune, c byte) bool {
	switch {
	case r == rune(c) || r == rune(c-'a'+'A'):
		return true
	case c == 's':
		return r == 0x17F // ſ
	}
	return false
}

// contractionEnd returns the end of (?i:'s|'t|'re|'ve|'m|'ll|'d) at s[i], or i.
func contractionEnd(s string, i int) int {
	if s[i] != '\'' || i+1 >= len(s) {
		return i
	}
	r1, n1 := utf8.DecodeRuneInString(s[i+1:])
	for _, c := range []byte{'s', 't', 'm', 'd'} {
		if foldsTo(r1, c) {
			return i + 1 + n1
		}
	}
	j := i + 1 + n1
	if j >= len(s) {
		return i
	}
	r2, n2 := utf8.DecodeRuneInString(s[j:])
	for _, p := range [][2]byte{{'r', 'e'}, {'v', 'e'}, {'l', 'l'}} {
		if foldsTo(r1, p[0]) && foldsTo(r2, p[1]) {
			return j + n2
		}
	}
	return i
}

// llama3End returns the end of the pre-token at s[i] under Llama 3's expression (maxDigits 3)
// or Qwen2's (maxDigits 1):
//
//	(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
func llama3End(s string, i, maxDigits int) int {
	if j := contractionEnd(s, i); j > i {
		return j
	}
	k, n := classAt(s, i)
	// [^\r\n\p{L}\p{N}]?\p{L}+
	if k == classLetter {
		return runEnd(s, i+n, classLetter)
	}
	if k != classNumber && s[i] != '\r' && s[i] != '\n' && i+n < len(s) {
		if k2, n2 := classAt(s, i+n); k2 == classLetter {
			return runEnd(s, i+n+n2, classLetter)
		}
	}
	// \p{N}{1,3}
	if k == classNumber {
		j := i + n
		for d := 1; d < maxDigits && j < len(s); d++ {
			kj, nj := classAt(s, j)
			if kj != classNumber {
				break
			}
			j += nj
		}
		return j
	}
	// ' ?[^\s\p{L}\p{N}]+[\r\n]*'
	start := -1
	if k == classOther {
		start = i
	} else if s[i] == ' ' && i+1 < len(s) {
		if k2, _ := classAt(s, i+1); k2 == classOther {
			start = i + 1
		}
	}
	if start >= 0 {
		j := runEnd(s, start, classOther)
		for j < len(s) && (s[j] == '\r' || s[j] == '\n') {
			j++
		}
		return j
	}
	// k is classSpace: \s*[\r\n]+ ends after the run's last newline; else \s+(?!\S) leaves the
	// run's last character to the next pre-token when a non-space follows; else \s+.
	j, last, afterNewline := i, i, -1
	for j < len(s) {
		kj, nj := classAt(s, j)
		if kj != classSpace {
			break
		}
		if s[j] == '\r' || s[j] == '\n' {
			afterNewline = j + 1
		}
		last = j
		j += nj
	}
	switch {
	case afterNewline > 0:
		return afterNewline
	case j < len(s) && last > i:
		return last
	}
	return j
}
