package convert

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// convertWith converts the fixture's weights and config with the given tokenizer files (body
// by name; a file linked from the fixture when its body is "=") and returns Convert's error,
// checking that a failed conversion leaves no output.
func convertWith(t *testing.T, files map[string]string) error {
	t.Helper()
	src := microDir(t)
	links := []string{"model.safetensors", "config.json"}
	for name, body := range files {
		if body == "=" {
			links = append(links, name)
		}
	}
	dir := linkTokenizer(t, src, t.TempDir(), links...)
	for name, body := range files {
		if body != "=" {
			writeNew(t, filepath.Join(dir, name), []byte(body))
		}
	}
	out := filepath.Join(t.TempDir(), "m.gguf")
	_, err := Convert(dir, out, Options{})
	if err != nil {
		if _, serr := os.Stat(out); !os.IsNotExist(serr) {
			t.Errorf("output written: %v", serr)
		}
	}
	return err
}

// Issue 17 item 8: a vocab.json of two tokens with GPT-2's full merges.txt (and config.json's
// vocab_size 50257) used to convert, padded with 50,255 [PAD] tokens and merges naming tokens
// that do not exist. HF's tokenizers refuses such merges (MergeTokenOutOfVocabulary).
func TestMergesNamingMissingTokensRefused(t *testing.T) {
	err := convertWith(t, map[string]string{"vocab.json": `{"Ġ": 0, "t": 1, "Ġt": 2}`, "merges.txt": "="})
	if err == nil || !strings.Contains(err.Error(), `merge 2 ("Ġ a")`) || !strings.Contains(err.Error(), `"a"`) || !strings.Contains(err.Error(), "merges.txt") {
		t.Fatalf("error %v, want one naming the merge and its missing token", err)
	}
}

// Issue 17 item 8: a consistent tokenizer far smaller than config.json's vocab_size is not the
// model's tokenizer: refused, where a few padding tokens (a vocabulary rounded up) are not.
func TestVocabularyFarSmallerThanVocabSizeRefused(t *testing.T) {
	err := convertWith(t, map[string]string{"vocab.json": `{"a": 0, "b": 1, "ab": 2}`, "merges.txt": "a b\n"})
	if err == nil || !strings.Contains(err.Error(), "vocab_size 50257") || !strings.Contains(err.Error(), "3 tokens") {
		t.Fatalf("error %v, want one comparing the tokenizer's 3 tokens with vocab_size 50257", err)
	}
}

// A vocabulary a few tokens short of vocab_size (rounded up, as some checkpoints do) is padded
// with [PADn] tokens, as llama.cpp pads it.
func TestVocabularyPaddedToVocabSize(t *testing.T) {
	vocab, merges := padVocab(t, 100)
	if err := convertWith(t, map[string]string{"vocab.json": vocab, "merges.txt": merges}); err != nil {
		t.Fatalf("100 padding tokens: %v", err)
	}
}

// padVocab is the fixture's vocab.json without its last n tokens (ids from 50257-n), and its
// merges.txt without the merges naming them.
func padVocab(t *testing.T, n int) (vocab, merges string) {
	t.Helper()
	var ids map[string]int64
	if err := readJSON(filepath.Join(microDir(t), "vocab.json"), &ids); err != nil {
		t.Fatal(err)
	}
	kept := map[string]int64{}
	for tok, id := range ids {
		if id < int64(50257-n) {
			kept[tok] = id
		}
	}
	b, err := json.Marshal(kept)
	if err != nil {
		t.Fatal(err)
	}
	_, pairs, err := readMergesTxt(filepath.Join(microDir(t), "merges.txt"))
	if err != nil {
		t.Fatal(err)
	}
	var m strings.Builder
	for _, p := range pairs {
		_, a := kept[p[0]]
		_, b := kept[p[1]]
		_, ab := kept[p[0]+p[1]]
		if a && b && ab {
			m.WriteString(p[0] + " " + p[1] + "\n")
		}
	}
	return string(b), m.String()
}

// Issue 17 item 8: a tokenizer.json that is a device (here a link to /dev/null) used to be
// skipped silently for vocab.json; it is an error naming it.
func TestTokenizerJSONNotARegularFile(t *testing.T) {
	if _, err := os.Stat("/dev/null"); err != nil {
		t.Skip("no /dev/null")
	}
	src := microDir(t)
	dir := linkTokenizer(t, src, t.TempDir(), "model.safetensors", "config.json", "vocab.json", "merges.txt", "tokenizer_config.json")
	if err := os.Symlink("/dev/null", filepath.Join(dir, "tokenizer.json")); err != nil {
		t.Skip(err)
	}
	_, err := Convert(dir, filepath.Join(t.TempDir(), "m.gguf"), Options{})
	if err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "tokenizer.json")) || !strings.Contains(err.Error(), "not a regular file") {
		t.Fatalf("error %v, want one naming tokenizer.json", err)
	}
}

// Issue 17 item 8: a lone surrogate (\ud800) in tokenizer.json used to become U+FFFD without a
// word; HF's tokenizers cannot read the file (serde_json refuses it): an error naming the token.
func TestLoneSurrogateRefused(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(microDir(t), "tokenizer.json"))
	if err != nil {
		t.Fatal(err)
	}
	tj := strings.Replace(string(b), `      "!": 0,`, `      "\ud800!": 0,`, 1)
	if tj == string(b) {
		t.Fatal("fixture changed")
	}
	err = convertWith(t, map[string]string{"tokenizer.json": tj, "vocab.json": "=", "merges.txt": "="})
	if err == nil || !strings.Contains(err.Error(), `"\ud800!"`) || !strings.Contains(err.Error(), "surrogate") {
		t.Fatalf("error %v, want one naming the token with the lone surrogate", err)
	}
}
