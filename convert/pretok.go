package convert

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"

	"github.com/gorun-dev/gorun/tokenizer"
)

// chkTxt is convert_hf_to_gguf.py's chktxt: llama.cpp names a BPE pre-tokenizer
// (tokenizer.ggml.pre) by the sha256 of the ids its tokenizer gives this text.
const chkTxt = "\n \n\n \n\n\n \t \t\t \t\n  \n   \n    \n     \n🚀 (normal) 😶\u200d🌫\ufe0f (multiple emojis concatenated) ✅ 🦙🦙 3 33 333 3333 33333 333333 3333333 33333333 3.3 3..3 3...3 កាន់តែពិសេសអាច😁 ?我想在apple工作1314151天～ ------======= нещо на Български ''''''```````\"\"\"\"......!!!!!!?????? I've been 'told he's there, 'RE you sure? 'M not sure I'll make it, 'D you like some tea? We'Ve a'lL"

// preByHash is get_vocab_base_pre's table (llama.cpp c392e509): the sha256 of the Python
// spelling of chkTxt's ids ("[1, 2, 3]") to the pre-tokenizer's name. Where the script tests
// one hash twice, the later name (the one it returns) is kept.
var preByHash = map[string]string{
	"0ef9807a4087ebef797fc749390439009c3b9eda9ad1a097abbe738f486c01e5": "llama-bpe",
	"049ecf7629871e3041641907f3de7c733e4dbfdc736f57d882ba0b0845599754": "deepseek-llm",
	"347715f544604f9118bb75ed199f68779f423cabb20db6de6f31b908d04d7821": "deepseek-coder",
	"8aeee3860c56296a157a1fe2fad249ec40aa59b1bb5709f4ade11c4e6fe652ed": "falcon",
	"9d032fcbd5501f4a38150912590928bfb36091efb5df11b8e2124b0390e3fb1e": "falcon3",
	"0876d13b50744004aa9aeae05e7b0647eac9d801b5ba4668afc01e709c15e19f": "jina-v2-en",
	"8e62295832751ca1e8f92f2226f403dea30dc5165e448b5bfa05af5340c64ec7": "bert-bge-large",
	"b6dc8df998e1cfbdc4eac8243701a65afe638679230920b50d6f17d81c098166": "olmo",
	"35d91631860c815f952d711435f48d356ebac988362536bed955d43bfa436e34": "starcoder",
	"3ce83efda5659b07b1ad37ca97ca5797ea4285d9b9ab0dc679e4a720c9da7454": "gpt-2",
	"32d85c31273f8019248f2559fed492d929ea28b17e51d81d3bb36fff23ca72b3": "stablelm2",
	"6221ad2852e85ce96f791f476e0b390cf9b474c9e3d1362f53a24a06dc8220ff": "refact",
	"9c2227e4dd922002fb81bde4fc02b0483ca4f12911410dee2255e4987644e3f8": "command-r",
	"e636dc30a262dcc0d8c323492e32ae2b70728f4df7dfe9737d9f920a282b8aea": "qwen2",
	"a8594e3edff7c29c003940395316294b2c623e09894deebbc65f33f1515df79e": "dbrx",
	"c7699093ba4255a91e702aa38a596aa81669f3525dae06c2953267dde580f448": "jina-v1-en",
	"171aeeedd6fb548d418a7461d053f11b6f1f1fc9b387bd66640d28a4b9f5c643": "jina-v2-es",
	"27949a2493fc4a9f53f5b9b029c82689cfbe5d3a1929bb25e043089e28466de6": "jina-v2-de",
	"c136ed14d01c2745d4f60a9596ae66800e2b61fa45643e72436041855ad4089d": "smaug-bpe",
	"c7ea5862a53e4272c035c8238367063e2b270d51faa48c0f09e9d5b54746c360": "poro-chat",
	"7967bfa498ade6b757b064f31e964dddbb80f8f9a4d68d4ba7998fcf281c531a": "jina-v2-code",
	"b6e8e1518dc4305be2fe39c313ed643381c4da5db34a98f6a04c093f8afbe99b": "chatglm-bpe",
	"81d72c7348a9f0ebe86f23298d37debe0a5e71149e29bd283904c02262b27516": "chatglm-bpe",
	"7fc505bd3104ca1083b150b17d088b59534ede9bde81f0dd2090967d7fe52cee": "viking",
	"b53802fb28e26d645c3a310b34bfe07da813026ec7c7716883404d5e0f8b1901": "jais",
	"7b3e7548e4308f52a76e8229e4e6cc831195d0d1df43aed21ac6c93da05fec5f": "codeshell",
	"63b97e4253352e6f357cc59ea5b583e3a680eaeaf2632188c2b952de2588485e": "tekken",
	"855059429035d75a914d1eda9f10a876752e281a054a7a3d421ef0533e5b6249": "smollm",
	"3c30d3ad1d6b64202cd222813e7736c2db6e1bd6d67197090fc1211fbc612ae7": "bloom",
	"bc01ce58980e1db43859146dc51b1758b3b88729b217a74792e9f8d43e479d21": "gpt3-finnish",
	"4e2b24cc4770243d65a2c9ec19770a72f08cffc161adbb73fcbb6b7dd45a0aae": "exaone",
	"fcace8b9cac38ce847670c970cd5892031a753a1ef381abd1d9af00f713da085": "phi-2",
	"60824e3c0d9401f89943cbb2fff727f0e2d4c545ba4df2d6e4f09a6db0f5b450": "chameleon",
	"1431a23e583c97432bc230bff598d103ddb5a1f89960c8f1d1051aaa944d0b35": "minerva-7b",
	"8b5a93ed704057481f240da0be7e7dca721d7f8f4755263b6807227a2cbeae65": "roberta-bpe",
	"ad851be1dba641f2e3711822f816db2c265f788b37c63b4e1aeacb9ee92de8eb": "gigachat",
	"d4c8f286ea6b520b3d495c4455483cfa2302c0cfcd4be05d781b6a8a0a7cdaf1": "megrez",
	"877081d19cf6996e2c4ff0e1236341e9b7bde288f5311a56a937f0afbbb3aeb5": "deepseek-v3",
	"b3f499bb4255f8ca19fccd664443283318f2fd2414d5e0b040fbdd0cc195d6c5": "deepseek-r1-qwen",
}

// Regular expressions of the Split pre-tokenizers gorun's tokenizer implements, as
// tokenizer.json spells them.
const (
	llama3Regex = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
	qwen2Regex  = `(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`
)

// hfPipeline is tokenizer.json's description of how it encodes, beyond the vocabulary.
type hfPipeline struct {
	modelType     string
	byteFallback  *bool
	ignoreMerges  bool
	decoderType   string
	normalizer    json.RawMessage
	preTokenizer  json.RawMessage
	postProcessor json.RawMessage
}

// llama2Style is LlamaHfVocab's test: a BPE with byte fallback and a Sequence decoder (Llama 2,
// Mistral), not Llama 3's (ignore_merges, no byte fallback).
func (p *hfPipeline) llama2Style() bool {
	llama3 := p.modelType == "BPE" && p.ignoreMerges && p.byteFallback != nil && !*p.byteFallback
	return !llama3 && p.modelType == "BPE" && p.byteFallback != nil && *p.byteFallback && p.decoderType == "Sequence"
}

// preStep is one pre-tokenizer of tokenizer.json.
type preStep struct {
	Type             string          `json:"type"`
	Pattern          json.RawMessage `json:"pattern"`
	Behavior         string          `json:"behavior"`
	Invert           bool            `json:"invert"`
	AddPrefixSpace   *bool           `json:"add_prefix_space"`
	UseRegex         *bool           `json:"use_regex"`
	IndividualDigits bool            `json:"individual_digits"`
	PreTokenizers    []preStep       `json:"pretokenizers"`
}

// byteLevel reports whether s is a ByteLevel pre-tokenizer without a prefix space and with
// its GPT-2 regex on (useRegex) or off.
func (s preStep) byteLevel(useRegex bool) bool {
	return s.Type == "ByteLevel" && s.AddPrefixSpace != nil && !*s.AddPrefixSpace &&
		(s.UseRegex == nil || *s.UseRegex) == useRegex
}

// splitRegex returns the regex of an isolating Split pre-tokenizer ("" for any other).
func (s preStep) splitRegex() string {
	var p struct {
		Regex string `json:"Regex"`
	}
	if s.Type != "Split" || s.Behavior != "Isolated" || s.Invert || json.Unmarshal(s.Pattern, &p) != nil {
		return ""
	}
	return p.Regex
}

// preFamily names the pre-tokenizer of gorun's tokenizer that splits text as tokenizer.json
// states (a name tokenizer.NewWithPre accepts), or "" when gorun implements none of it. Without
// tokenizer.json (p nil), transformers builds GPT-2's byte-level tokenizer from vocab.json.
func preFamily(p *hfPipeline) string {
	if p == nil {
		return "gpt-2"
	}
	// chkTxt is NFC-normalized already, so an NFC normalizer (Qwen2's) changes none of its ids.
	if n := bytes.TrimSpace(p.normalizer); len(n) > 0 && string(n) != "null" {
		var norm struct {
			Type string `json:"type"`
		}
		if json.Unmarshal(n, &norm) != nil || norm.Type != "NFC" {
			return ""
		}
	}
	var s preStep
	if json.Unmarshal(p.preTokenizer, &s) != nil {
		return ""
	}
	if s.byteLevel(true) {
		return "gpt-2"
	}
	if s.Type != "Sequence" || len(s.PreTokenizers) != 2 {
		return ""
	}
	first, second := s.PreTokenizers[0], s.PreTokenizers[1]
	switch {
	case first.splitRegex() == llama3Regex && second.byteLevel(false):
		if p.ignoreMerges {
			return "llama-bpe" // gorun's llama-bpe ignores merges as Hugging Face's does here
		}
		return "smaug-bpe"
	case first.splitRegex() == qwen2Regex && second.byteLevel(false) && !p.ignoreMerges:
		return "qwen2"
	case first.Type == "Digits" && first.IndividualDigits && second.byteLevel(true):
		return "starcoder"
	}
	return ""
}

// postProcess adds the tokens tokenizer.json's post_processor adds to a single sequence, as
// Hugging Face's encode does by default (add_special_tokens).
func postProcess(raw json.RawMessage, ids []int32) ([]int32, error) {
	if t := bytes.TrimSpace(raw); len(t) == 0 || string(t) == "null" {
		return ids, nil
	}
	var p struct {
		Type       string            `json:"type"`
		Processors []json.RawMessage `json:"processors"`
		Single     []struct {
			SpecialToken *struct {
				ID string `json:"id"`
			} `json:"SpecialToken"`
			Sequence *struct {
				ID string `json:"id"`
			} `json:"Sequence"`
		} `json:"single"`
		SpecialTokens map[string]struct {
			IDs []int32 `json:"ids"`
		} `json:"special_tokens"`
		Cls []json.RawMessage `json:"cls"`
		Sep []json.RawMessage `json:"sep"`
	}
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, fmt.Errorf("post_processor: %w", err)
	}
	switch p.Type {
	case "ByteLevel":
		return ids, nil
	case "Sequence":
		var err error
		for _, q := range p.Processors {
			if ids, err = postProcess(q, ids); err != nil {
				return nil, err
			}
		}
		return ids, nil
	case "TemplateProcessing":
		var out []int32
		for _, piece := range p.Single {
			switch {
			case piece.Sequence != nil:
				out = append(out, ids...)
			case piece.SpecialToken != nil:
				st, ok := p.SpecialTokens[piece.SpecialToken.ID]
				if !ok {
					return nil, fmt.Errorf("post_processor: the template names %q, which special_tokens lacks", piece.SpecialToken.ID)
				}
				out = append(out, st.IDs...)
			}
		}
		return out, nil
	case "RobertaProcessing", "BertProcessing":
		cls, err1 := pairID(p.Cls)
		sep, err2 := pairID(p.Sep)
		if err1 != nil || err2 != nil {
			return nil, fmt.Errorf("post_processor %s: cls and sep must be [token, id]", p.Type)
		}
		return append(append([]int32{cls}, ids...), sep), nil
	}
	return nil, fmt.Errorf("post_processor %q is not one gorun knows (ByteLevel, TemplateProcessing, RobertaProcessing, BertProcessing, Sequence)", p.Type)
}

// pairID reads the id of a ["token", id] pair.
func pairID(pair []json.RawMessage) (int32, error) {
	var id int32
	if len(pair) != 2 {
		return 0, fmt.Errorf("not a pair")
	}
	return id, json.Unmarshal(pair[1], &id)
}

// pyListHash is sha256 of Python's str() of a list of ints: "[1, 2, 3]".
func pyListHash(ids []int32) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, id := range ids {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(strconv.Itoa(int(id)))
	}
	b.WriteByte(']')
	sum := sha256.Sum256([]byte(b.String()))
	return hex.EncodeToString(sum[:])
}

// preTokenizer is tokenizer.ggml.pre for the vocabulary, found as llama.cpp's
// get_vocab_base_pre finds it: the hash of chkTxt's ids, here computed with gorun's tokenizer
// built from the vocabulary with the pre-tokenizer tokenizer.json states (which therefore must
// be one gorun implements), looked up in llama.cpp's table. Where llama.cpp's table lacks the
// hash (llama.cpp's converter refuses such a tokenizer), the implemented pre-tokenizer's own
// name is written and a warning added: gorun's runtime selects the same splitting by it.
func preTokenizer(v *vocab, warnings *[]string) (string, error) {
	family := preFamily(v.pipeline)
	if family == "" {
		return "", fmt.Errorf("%s: its normalizer and pre_tokenizer are not a byte-level BPE gorun implements (GPT-2's, Llama 3's or Qwen2's regex, StarCoder's digits): llama.cpp could not name its pre-tokenizer either", v.source)
	}
	bpe, err := tokenizer.NewWithPre(family, v.tokens, v.merges, v.types)
	if err != nil {
		return "", fmt.Errorf("%s: %w", v.source, err)
	}
	ids := bpe.Encode(chkTxt)
	if v.pipeline != nil {
		if ids, err = postProcess(v.pipeline.postProcessor, ids); err != nil {
			return "", fmt.Errorf("%s: %w", v.source, err)
		}
	}
	hash := pyListHash(ids)
	if name, ok := preByHash[hash]; ok {
		return name, nil
	}
	*warnings = append(*warnings, fmt.Sprintf("the tokenizer's fingerprint (chkhsh %s) is not in llama.cpp's table, whose converter refuses it; tokenizer.ggml.pre is %q, the pre-tokenizer tokenizer.json states", hash, family))
	return family, nil
}
