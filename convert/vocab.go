package convert

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/gorun-dev/gorun/internal/osutil"
)

// maxTokenizerFile bounds each tokenizer or config file read into memory.
const maxTokenizerFile = 256 << 20

// Token types, as gguf-py numbers them.
const (
	tokNormal      int32 = 1
	tokUnused      int32 = 5
	tokControl     int32 = 3
	tokUserDefined int32 = 4
)

// vocab is what the GGUF's tokenizer.* keys hold.
type vocab struct {
	tokens  []string
	types   []int32
	merges  []string
	special []specialID // in the order llama.cpp's SpecialVocab sets them
	addBOS  *bool
	addEOS  *bool
	chat    string
	source  string // the files it came from, for messages
}

type specialID struct {
	typ string // bos, eos, unk, sep, pad, cls, mask
	id  uint32
}

// specialTypes is SpecialVocab's order.
var specialTypes = []string{"bos", "eos", "unk", "sep", "pad", "cls", "mask"}

// specialKeys are the GGUF keys of the special token ids (llama.cpp's spelling, "seperator"
// included).
var specialKeys = map[string]string{
	"bos": "tokenizer.ggml.bos_token_id", "eos": "tokenizer.ggml.eos_token_id",
	"unk": "tokenizer.ggml.unknown_token_id", "sep": "tokenizer.ggml.seperator_token_id",
	"pad": "tokenizer.ggml.padding_token_id", "cls": "tokenizer.ggml.cls_token_id",
	"mask": "tokenizer.ggml.mask_token_id",
}

type addedToken struct {
	ID         *int64 `json:"id"`
	Content    string `json:"content"`
	Special    bool   `json:"special"`
	Normalized *bool  `json:"normalized"`
}

func readJSON(path string, v any) error {
	b, err := osutil.ReadFile(path, maxTokenizerFile)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

func exists(p string) bool {
	st, err := os.Stat(p)
	return err == nil && st.Mode().IsRegular()
}

// loadVocab reads the tokenizer as llama.cpp's _set_vocab_gpt2 does: the tokens and their
// types from tokenizer.json (or vocab.json with the special tokens tokenizer_config.json
// names), merges from tokenizer.json (or merges.txt), special token ids from
// tokenizer_config.json matched against tokenizer.json's added tokens, then config.json.
func loadVocab(dir string, vocabSize int, cfg map[string]json.RawMessage) (*vocab, error) {
	v := &vocab{}
	ids := map[string]int64{}
	var added []addedToken
	var tcfg map[string]json.RawMessage
	tcPath := filepath.Join(dir, "tokenizer_config.json")
	if exists(tcPath) {
		if err := readJSON(tcPath, &tcfg); err != nil {
			return nil, err
		}
	}
	tjPath := filepath.Join(dir, "tokenizer.json")
	haveTJ := exists(tjPath)
	if haveTJ {
		var tj struct {
			Model struct {
				Type   string           `json:"type"`
				Vocab  map[string]int64 `json:"vocab"`
				Merges json.RawMessage  `json:"merges"`
			} `json:"model"`
			AddedTokens []addedToken `json:"added_tokens"`
		}
		if err := readJSON(tjPath, &tj); err != nil {
			return nil, err
		}
		if tj.Model.Type != "" && tj.Model.Type != "BPE" {
			return nil, fmt.Errorf("%s: model type %q, GPT-2 needs BPE", tjPath, tj.Model.Type)
		}
		if tj.Model.Vocab == nil {
			return nil, fmt.Errorf("%s: no model.vocab", tjPath)
		}
		ids = tj.Model.Vocab
		added = tj.AddedTokens
		var err error
		if v.merges, err = parseMerges(tj.Model.Merges); err != nil {
			return nil, fmt.Errorf("%s: %w", tjPath, err)
		}
		v.source = "tokenizer.json"
	} else {
		vjPath := filepath.Join(dir, "vocab.json")
		if !exists(vjPath) {
			return nil, fmt.Errorf("%s has no tokenizer: neither tokenizer.json nor vocab.json and merges.txt", dir)
		}
		if err := readJSON(vjPath, &ids); err != nil {
			return nil, err
		}
		// The special tokens tokenizer_config.json names are the added tokens transformers
		// builds from these files.
		for _, typ := range specialTypes {
			if content, ok := configToken(tcfg, typ); ok {
				if id, ok := ids[content]; ok {
					id := id
					added = append(added, addedToken{ID: &id, Content: content, Special: true})
				}
			}
		}
		if raw, ok := tcfg["added_tokens_decoder"]; ok {
			var dec map[string]addedToken
			if err := json.Unmarshal(raw, &dec); err == nil {
				for k, a := range dec {
					if id, err := strconv.ParseInt(k, 10, 64); err == nil {
						a.ID = &id
						added = append(added, a)
					}
				}
			}
		}
		v.source = "vocab.json"
	}
	if v.merges == nil {
		mPath := filepath.Join(dir, "merges.txt")
		if !exists(mPath) {
			return nil, fmt.Errorf("%s has no BPE merges (in tokenizer.json or merges.txt)", dir)
		}
		var err error
		if v.merges, err = readMergesTxt(mPath); err != nil {
			return nil, err
		}
		v.source += " and merges.txt"
	}
	// The vocabulary: tokenizer.vocab includes the added tokens.
	for _, a := range added {
		if a.ID != nil {
			ids[a.Content] = *a.ID
		}
	}
	if vocabSize <= 0 {
		vocabSize = len(ids)
	}
	reverse := make([]*string, vocabSize)
	for tok, id := range ids {
		if id < 0 || id >= int64(vocabSize) {
			return nil, fmt.Errorf("tokenizer: token %q has id %d, outside the model's vocabulary of %d", tok, id, vocabSize)
		}
		if reverse[id] != nil {
			return nil, fmt.Errorf("tokenizer: tokens %q and %q both have id %d", *reverse[id], tok, id)
		}
		tok := tok
		reverse[id] = &tok
	}
	addedByID := map[int64]addedToken{}
	for _, a := range added {
		if a.ID != nil {
			addedByID[*a.ID] = a
		}
	}
	v.tokens = make([]string, vocabSize)
	v.types = make([]int32, vocabSize)
	for i := range vocabSize {
		if reverse[i] == nil {
			v.tokens[i], v.types[i] = fmt.Sprintf("[PAD%d]", i), tokUnused
			continue
		}
		tok := *reverse[i]
		typ := tokNormal
		if a, ok := addedByID[int64(i)]; ok && a.Content == tok {
			if a.Special || looksSpecial(tok) {
				typ = tokControl
			} else {
				tok = strings.ReplaceAll(tok, "\u2581", " ")
				typ = tokUserDefined
			}
		}
		v.tokens[i], v.types[i] = tok, typ
	}
	// Special token ids: tokenizer_config.json's tokens found among tokenizer.json's added
	// tokens, then config.json's *_token_id for the rest.
	set := map[string]bool{}
	setID := func(typ string, id int64) {
		if set[typ] || id < 0 || id > 1<<32-1 {
			return
		}
		set[typ] = true
		v.special = append(v.special, specialID{typ, uint32(id)})
	}
	for _, typ := range specialTypes {
		if b, ok := configBool(tcfg, "add_"+typ+"_token"); ok {
			switch typ {
			case "bos":
				v.addBOS = &b
			case "eos":
				v.addEOS = &b
			}
		}
		if !haveTJ {
			continue
		}
		content, ok := configToken(tcfg, typ)
		if !ok {
			continue
		}
		for _, a := range added {
			if a.Content == content {
				if a.ID != nil {
					setID(typ, *a.ID)
				}
				break
			}
		}
	}
	for _, typ := range specialTypes {
		var id int64
		if raw, ok := cfg[typ+"_token_id"]; ok && string(raw) != "null" && json.Unmarshal(raw, &id) == nil {
			setID(typ, id)
		}
	}
	if raw, ok := tcfg["chat_template"]; ok {
		_ = json.Unmarshal(raw, &v.chat) // a list of named templates is not carried over
	}
	return v, nil
}

// configToken returns tokenizer_config.json's "<typ>_token" content (a string or an object
// with "content").
func configToken(tcfg map[string]json.RawMessage, typ string) (string, bool) {
	raw, ok := tcfg[typ+"_token"]
	if !ok {
		return "", false
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, true
	}
	var o struct {
		Content *string `json:"content"`
	}
	if json.Unmarshal(raw, &o) == nil && o.Content != nil {
		return *o.Content, true
	}
	return "", false
}

func configBool(tcfg map[string]json.RawMessage, key string) (bool, bool) {
	raw, ok := tcfg[key]
	if !ok {
		return false, false
	}
	var b bool
	if json.Unmarshal(raw, &b) != nil {
		return false, false
	}
	return b, true
}

// looksSpecial is llama.cpp's does_token_look_special.
func looksSpecial(t string) bool {
	switch t {
	case "<pad>", "<mask>", "<2mass>", "[@BOS@]":
		return true
	}
	return strings.HasPrefix(t, "<|") && strings.HasSuffix(t, "|>") ||
		strings.HasPrefix(t, "<｜") && strings.HasSuffix(t, "｜>") ||
		strings.HasPrefix(t, "<unused") && strings.HasSuffix(t, ">")
}

// parseMerges reads tokenizer.json's model.merges: strings "a b", or pairs ["a", "b"] (since
// transformers 4.45) joined by a space, with spaces inside a part encoded as U+0120 as
// llama.cpp does.
func parseMerges(raw json.RawMessage) ([]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	var strs []string
	if nestedArray(raw) {
		strs = nil // pairs: skip the attempt as strings
	} else if err := json.Unmarshal(raw, &strs); err == nil {
		if len(strs) == 0 {
			return nil, nil
		}
		return strs, nil
	}
	var pairs [][]string
	if err := json.Unmarshal(raw, &pairs); err != nil {
		return nil, errors.New("model.merges is neither strings nor pairs of strings")
	}
	out := make([]string, len(pairs))
	for i, p := range pairs {
		if len(p) != 2 {
			return nil, fmt.Errorf("merge %d has %d parts, want 2", i, len(p))
		}
		out[i] = strings.ReplaceAll(p[0], " ", "\u0120") + " " + strings.ReplaceAll(p[1], " ", "\u0120")
	}
	return out, nil
}

// nestedArray reports whether raw starts as an array of arrays.
func nestedArray(raw []byte) bool {
	t := bytes.TrimLeft(raw, " \t\r\n")
	if len(t) == 0 || t[0] != '[' {
		return false
	}
	t = bytes.TrimLeft(t[1:], " \t\r\n")
	return len(t) > 0 && t[0] == '['
}

// readMergesTxt reads merges.txt as gguf-py does: an optional "#version" first line, blank
// lines skipped, malformed lines (not two parts) ignored.
func readMergesTxt(path string) ([]string, error) {
	b, err := osutil.ReadFile(path, maxTokenizerFile)
	if err != nil {
		return nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, len(b)+1)
	var out []string
	first := true
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if first {
			first = false
			if strings.HasPrefix(line, "#") {
				continue
			}
		}
		if line == "" {
			continue
		}
		parts := strings.Fields(line)
		if len(parts) != 2 {
			continue
		}
		out = append(out, parts[0]+" "+parts[1])
	}
	return out, sc.Err()
}
