package hub

import (
	"fmt"
	"path"
	"regexp"
	"slices"
	"strings"
)

// DefaultQuants are tried in order when no quantization is named, as the Hub's default for
// llama.cpp's -hf (Q4_K_M) and then the common alternatives.
var DefaultQuants = []string{"Q4_K_M", "Q4_0", "Q8_0", "Q5_K_M", "Q6_K", "F16", "BF16", "F32"}

var shardRE = regexp.MustCompile(`-0*([2-9]|[1-9][0-9]+)-of-[0-9]+\.gguf$`)

// ParseRef splits "ORG/NAME[:QUANT]".
func ParseRef(ref string) (repo, quant string, err error) {
	repo, quant, _ = strings.Cut(ref, ":")
	if err := CheckRepo(repo); err != nil {
		return "", "", err
	}
	return repo, quant, nil
}

// PickGGUF chooses the GGUF file of a repository for a quantization name (case ignored, matched
// as a whole word of the file name: "q4_k_m" finds "gpt2.Q4_K_M.gguf"), or the first of
// DefaultQuants present when quant is empty; a name that is itself a file is taken as is.
// For a split GGUF the first part is returned.
func PickGGUF(files []string, quant string) (string, error) {
	var ggufs []string
	for _, f := range files {
		if strings.HasSuffix(strings.ToLower(f), ".gguf") && !shardRE.MatchString(f) {
			ggufs = append(ggufs, f)
		}
	}
	if len(ggufs) == 0 {
		return "", nil
	}
	slices.Sort(ggufs)
	if quant != "" && slices.Contains(ggufs, quant) {
		return quant, nil
	}
	match := func(q string) string {
		re := regexp.MustCompile(`(?i)(^|[^A-Za-z0-9])` + regexp.QuoteMeta(q) + `([^A-Za-z0-9]|$)`)
		best := ""
		for _, f := range ggufs {
			if re.MatchString(path.Base(f)) && (best == "" || len(f) < len(best)) {
				best = f
			}
		}
		return best
	}
	if quant != "" {
		if f := match(quant); f != "" {
			return f, nil
		}
		return "", fmt.Errorf("no GGUF file for %q; the repository has: %s", quant, strings.Join(ggufs, ", "))
	}
	for _, q := range DefaultQuants {
		if f := match(q); f != "" {
			return f, nil
		}
	}
	return ggufs[0], nil
}

// CheckpointFiles lists the files of a Hugging Face checkpoint to download for conversion:
// config.json, the tokenizer files present, and model.safetensors or the index and its shards.
func CheckpointFiles(files []string) ([]string, error) {
	has := map[string]bool{}
	for _, f := range files {
		has[f] = true
	}
	if !has["config.json"] {
		return nil, fmt.Errorf("no GGUF file and no config.json: not a model gorun can use")
	}
	out := []string{"config.json"}
	// tokenizer.model is fetched when present so that conversion sees what llama.cpp's
	// converter would read first (and refuses it: gorun converts byte-level BPE only).
	for _, f := range []string{"tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "generation_config.json",
		"special_tokens_map.json", "tokenizer.model"} {
		if has[f] {
			out = append(out, f)
		}
	}
	switch {
	case has["model.safetensors.index.json"]:
		out = append(out, "model.safetensors.index.json")
		for _, f := range files {
			if !strings.Contains(f, "/") && strings.HasPrefix(f, "model-") && strings.HasSuffix(f, ".safetensors") {
				out = append(out, f)
			}
		}
	case has["model.safetensors"]:
		out = append(out, "model.safetensors")
	case has["pytorch_model.bin"] || has["pytorch_model.bin.index.json"]:
		return nil, fmt.Errorf("the repository has only pytorch_model.bin (a Python pickle, which gorun does not read): look for a safetensors or GGUF version of the model")
	default:
		return nil, fmt.Errorf("the repository has no model.safetensors")
	}
	return out, nil
}
