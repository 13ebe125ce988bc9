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
	"unicode/utf16"
	"unicode/utf8"

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
	// addSpacePrefix is tokenizer_config.json's add_prefix_space.
	addSpacePrefix *bool
	// pipeline is tokenizer.json's description of its encoding, nil without tokenizer.json.
	pipeline *hfPipeline
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
	if err := checkJSONText(path, b); err != nil {
		return err
	}
	if err := json.Unmarshal(b, v); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}

// present reports whether the file p is there; one that is there but is not a regular file
// (a named pipe, a device, a folder) is an error naming it, not a file to skip.
func present(p string) (bool, error) {
	st, err := os.Stat(p)
	if errors.Is(err, os.ErrNotExist) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if !st.Mode().IsRegular() {
		f, err := osutil.OpenRegular(p) // its error says what the file is
		if err == nil {
			f.Close()
			return false, fmt.Errorf("%s: not a regular file", p)
		}
		return false, err
	}
	return true, nil
}

// checkJSONText refuses what encoding/json would silently turn into U+FFFD: bytes that are
// not UTF-8 and lone UTF-16 surrogate escapes. Hugging Face's tokenizers (serde_json) cannot
// read such a file, and llama.cpp's converter fails writing such a token, so converting it
// would make a tokenizer neither has.
func checkJSONText(path string, b []byte) error {
	if !utf8.Valid(b) {
		i := 0
		for i < len(b) {
			r, n := utf8.DecodeRune(b[i:])
			if r == utf8.RuneError && n <= 1 {
				break
			}
			i += n
		}
		return fmt.Errorf("%s: not UTF-8 (byte %d is 0x%02x)", path, i, b[i])
	}
	if lit, ok := loneSurrogate(b); ok {
		return fmt.Errorf("%s: the string %s holds a lone UTF-16 surrogate escape, which is no character: Hugging Face's tokenizers cannot read this file", path, lit)
	}
	return nil
}

// loneSurrogate finds a \uD800-\uDFFF escape that is not a high surrogate followed by a low
// one, and returns the JSON string literal holding it (shortened).
func loneSurrogate(b []byte) (string, bool) {
	start := -1 // the opening quote of the string being read, -1 outside strings
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			if start < 0 {
				start = i
			} else {
				start = -1
			}
		case '\\':
			if start < 0 {
				continue // not JSON: the decoder says so
			}
			if r, ok := hexEscape(b, i); ok && utf16.IsSurrogate(r) {
				if lo, ok := hexEscape(b, i+6); ok && r < 0xdc00 && lo >= 0xdc00 && lo <= 0xdfff {
					i += 11 // a pair
					continue
				}
				return stringLiteral(b, start), true
			}
			i++ // the escaped character
		}
	}
	return "", false
}

// hexEscape decodes the \uXXXX escape at b[i:].
func hexEscape(b []byte, i int) (rune, bool) {
	if i+6 > len(b) || b[i] != '\\' || b[i+1] != 'u' {
		return 0, false
	}
	v, err := strconv.ParseUint(string(b[i+2:i+6]), 16, 16)
	return rune(v), err == nil
}

// stringLiteral is the JSON string starting at the quote b[start], at most 80 bytes of it.
func stringLiteral(b []byte, start int) string {
	end := start + 1
	for end < len(b) && b[end] != '"' {
		if b[end] == '\\' {
			end++
		}
		end++
	}
	end = min(end+1, len(b))
	if end-start > 80 {
		return string(b[start:start+77]) + "..."
	}
	return string(b[start:end])
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
	haveTC, err := present(tcPath)
	if err != nil {
		return nil, err
	}
	if haveTC {
		if err := readJSON(tcPath, &tcfg); err != nil {
			return nil, err
		}
	}
	tjPath := filepath.Join(dir, "tokenizer.json")
	haveTJ, err := present(tjPath)
	if err != nil {
		return nil, err
	}
	var pairs [][2]string // the merges' two tokens, as the tokenizer names them
	if haveTJ {
		var tj struct {
			Model struct {
				Type         string           `json:"type"`
				Vocab        map[string]int64 `json:"vocab"`
				Merges       json.RawMessage  `json:"merges"`
				ByteFallback *bool            `json:"byte_fallback"`
				IgnoreMerges bool             `json:"ignore_merges"`
			} `json:"model"`
			AddedTokens   []addedToken    `json:"added_tokens"`
			Normalizer    json.RawMessage `json:"normalizer"`
			PreTokenizer  json.RawMessage `json:"pre_tokenizer"`
			PostProcessor json.RawMessage `json:"post_processor"`
			Decoder       struct {
				Type string `json:"type"`
			} `json:"decoder"`
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
		v.pipeline = &hfPipeline{modelType: tj.Model.Type, byteFallback: tj.Model.ByteFallback,
			ignoreMerges: tj.Model.IgnoreMerges, decoderType: tj.Decoder.Type, normalizer: tj.Normalizer,
			preTokenizer: tj.PreTokenizer, postProcessor: tj.PostProcessor}
		if v.merges, pairs, err = parseMerges(tj.Model.Merges); err != nil {
			return nil, fmt.Errorf("%s: %w", tjPath, err)
		}
		v.source = "tokenizer.json"
	} else {
		vjPath := filepath.Join(dir, "vocab.json")
		haveVJ, err := present(vjPath)
		if err != nil {
			return nil, err
		}
		if !haveVJ {
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
		haveM, err := present(mPath)
		if err != nil {
			return nil, err
		}
		if !haveM {
			return nil, fmt.Errorf("%s has no BPE merges (in tokenizer.json or merges.txt)", dir)
		}
		if v.merges, pairs, err = readMergesTxt(mPath); err != nil {
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
	if err := checkMerges(pairs, ids, v.source); err != nil {
		return nil, err
	}
	if err := checkPadding(vocabSize, len(ids), v.source); err != nil {
		return nil, err
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
	if raw, ok := tcfg["add_prefix_space"]; ok {
		var b *bool // null writes false, as Python's struct.pack("?", None)
		if err := json.Unmarshal(raw, &b); err != nil {
			return nil, fmt.Errorf("%s: add_prefix_space is %s, want true or false", tcPath, raw)
		}
		v.addSpacePrefix = new(bool)
		if b != nil {
			*v.addSpacePrefix = *b
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
//
// It also returns each merge's two tokens as the tokenizer names them (a string merge split at
// its first space, as Hugging Face's tokenizers splits it).
func parseMerges(raw json.RawMessage) ([]string, [][2]string, error) {
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil, nil
	}
	var strs []string
	if nestedArray(raw) {
		strs = nil // pairs: skip the attempt as strings
	} else if err := json.Unmarshal(raw, &strs); err == nil {
		if len(strs) == 0 {
			return nil, nil, nil
		}
		pairs := make([][2]string, len(strs))
		for i, s := range strs {
			a, b, ok := strings.Cut(s, " ")
			if !ok {
				return nil, nil, fmt.Errorf("merge %d (%q) is not two tokens separated by a space", i+1, s)
			}
			pairs[i] = [2]string{a, b}
		}
		return strs, pairs, nil
	}
	var parts [][]string
	if err := json.Unmarshal(raw, &parts); err != nil {
		return nil, nil, errors.New("model.merges is neither strings nor pairs of strings")
	}
	out := make([]string, len(parts))
	pairs := make([][2]string, len(parts))
	for i, p := range parts {
		if len(p) != 2 {
			return nil, nil, fmt.Errorf("merge %d has %d parts, want 2", i, len(p))
		}
		out[i] = strings.ReplaceAll(p[0], " ", "\u0120") + " " + strings.ReplaceAll(p[1], " ", "\u0120")
		pairs[i] = [2]string{p[0], p[1]}
	}
	return out, pairs, nil
}

// checkMerges refuses a merge naming a token the vocabulary lacks (either part, or the token
// they merge into), as Hugging Face's tokenizers refuses it (MergeTokenOutOfVocabulary):
// such merges come from another tokenizer than the vocabulary. Merges are numbered from 1.
func checkMerges(pairs [][2]string, ids map[string]int64, source string) error {
	for i, p := range pairs {
		for _, tok := range []string{p[0], p[1], p[0] + p[1]} {
			if _, ok := ids[tok]; !ok {
				return fmt.Errorf("tokenizer (%s): merge %d (%q) names %q, which is not in the vocabulary of %d tokens: the merges do not belong to this vocabulary", source, i+1, p[0]+" "+p[1], tok, len(ids))
			}
		}
	}
	return nil
}

// checkPadding refuses a tokenizer far smaller than config.json's vocab_size. llama.cpp pads
// the vocabulary with [PADn] tokens up to vocab_size, which is right for an embedding rounded
// up (GPT-2 to 50304, others to a multiple of 64 or 128): fewer than 128 tokens, or up to an
// eighth of vocab_size, are padded here too. More than that is a tokenizer that is not the
// model's (a 2-token vocab.json beside a 50257-row embedding), whose output would be unusable.
func checkPadding(vocabSize, tokens int, source string) error {
	pad := vocabSize - tokens
	if pad < 128 || pad <= vocabSize/8 {
		return nil
	}
	return fmt.Errorf("tokenizer (%s) has %d tokens, config.json's vocab_size %d: %d [PAD] tokens would fill the rest (up to 127, or an eighth of vocab_size, pad a vocabulary rounded up); the tokenizer is not this model's", source, tokens, vocabSize, pad)
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
func readMergesTxt(path string) ([]string, [][2]string, error) {
	b, err := osutil.ReadFile(path, maxTokenizerFile)
	if err != nil {
		return nil, nil, err
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, len(b)+1)
	var out []string
	var pairs [][2]string
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
		pairs = append(pairs, [2]string{parts[0], parts[1]})
	}
	return out, pairs, sc.Err()
}
