package convert

import (
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
	"unicode"
)

// modelMeta is the general.* naming metadata llama.cpp's converter derives from the model's
// _name_or_path and directory name (gguf-py's Metadata heuristics, without a model card).
type modelMeta struct {
	name, organization, basename, finetune, version, sizeLabel string
}

// deriveMeta applies gguf-py's Metadata.apply_metadata_heuristic for the config's
// _name_or_path (when it looks like a Hub id) and then the directory's name, each filling only
// what is still unset; size_label falls back to the parameter count.
func deriveMeta(nameOrPath, dirName string, totalParams int64) modelMeta {
	var m modelMeta
	apply := func(id string) {
		full, org, base, ft, ver, size := modelIDComponents(id, totalParams)
		fill := func(dst *string, v string) {
			if *dst == "" {
				*dst = v
			}
		}
		if full != "" {
			fill(&m.name, idToTitle(full))
		}
		if org != "" {
			fill(&m.organization, idToTitle(org))
		}
		fill(&m.basename, base)
		fill(&m.finetune, ft)
		fill(&m.version, ver)
		fill(&m.sizeLabel, size)
	}
	if nameOrPath != "" && strings.Count(nameOrPath, "/") <= 1 {
		apply(nameOrPath)
	}
	if dirName != "" {
		apply(dirName)
	}
	if m.name == "" {
		m.name = dirName
	}
	if _, rest, ok := strings.Cut(m.name, "/"); ok && m.name == dirName {
		m.name = rest
	}
	if m.sizeLabel == "" && totalParams > 0 {
		m.sizeLabel = roundedCount(totalParams, 2)
	}
	return m
}

var (
	reVersion  = regexp.MustCompile(`^(?i:(v|iter)?\d+([.]\d+)*)$`)
	reQuant    = regexp.MustCompile(`^(?i:i?q\d(_\w)*|b?fp?(16|32))$`)
	reSize     = regexp.MustCompile(`^(?i:(([A]|\d+[x])?\d+([._]\d+)?[KMBT][\d]?|small|mini|medium|large|x?xl))$`)
	reFinetune = regexp.MustCompile(`^(?i:chat|instruct|vision|lora)$`)
	reTitleNo  = regexp.MustCompile(`^(v\d+(?:\.\d+)*|\d.*)$`)
)

// modelIDComponents is gguf-py's Metadata.get_model_id_components: it splits a model id such as
// "org/Name-7B-Instruct-v0.1" into its full name, organization, basename, finetune, version
// and size label ("" where absent).
func modelIDComponents(id string, totalParams int64) (full, org, basename, finetune, version, sizeLabel string) {
	if strings.Contains(id, " ") {
		return id, "", "", "", "", ""
	}
	full = id
	if o, rest, ok := strings.Cut(id, "/"); ok {
		org, full = o, rest
	}
	if strings.HasPrefix(org, ".") {
		org = ""
	}
	var parts []string
	for _, p := range strings.Split(full, "-") {
		if p != "" {
			parts = append(parts, p)
		}
	}
	types := make([]map[string]bool, len(parts))
	for i, part := range parts {
		t := map[string]bool{}
		types[i] = t
		switch {
		case reVersion.MatchString(part):
			t["version"] = true
		case reQuant.MatchString(part):
			t["type"] = true
			parts[i] = strings.ToUpper(part)
		case i > 0 && reSize.MatchString(part):
			part = strings.ReplaceAll(part, "_", ".")
			r := []rune(part)
			if isDecimal(r[len(r)-1]) && len(r) >= 2 { // bloom-7b1: 7.1b
				r = append(append(append([]rune{}, r[:len(r)-2]...), '.', r[len(r)-1]), r[len(r)-2])
			}
			if len(r) > 1 && isDecimal(r[len(r)-2]) && strings.ContainsRune("kmbt", r[len(r)-1]) {
				r[len(r)-1] = unicode.ToUpper(r[len(r)-1])
			}
			part = string(r)
			if totalParams != 0 {
				if v, err := strconv.ParseFloat(string(r[:len(r)-1]), 64); err == nil && pyFloatOK(string(r[:len(r)-1])) {
					label := v * math.Pow(1000, float64(strings.IndexRune(" KMBT", r[len(r)-1])))
					if totalParams > 0 && math.Abs(label-float64(totalParams)) > float64(7*totalParams/8) {
						t["finetune"] = true
						r[len(r)-1] = unicode.ToLower(r[len(r)-1])
						part = string(r)
					}
				}
			}
			t["size_label"] = true
			parts[i] = part
		case i > 0 && reFinetune.MatchString(part):
			t["finetune"] = true
		}
	}
	// Word-based size labels are dropped when a number-based one is present.
	numeric := false
	for i, p := range parts {
		if types[i]["size_label"] && strings.IndexFunc(p, isDecimal) >= 0 {
			numeric = true
		}
	}
	if numeric {
		for i, p := range parts {
			if types[i]["size_label"] && strings.IndexFunc(p, func(r rune) bool { return !unicode.IsLetter(r) }) < 0 {
				delete(types[i], "size_label")
			}
		}
	}
	atStart := true
	for i, p := range parts {
		t := types[i]
		if atStart && ((len(t) == 0 && unicode.IsLetter([]rune(p)[0])) || t["version"]) {
			t["basename"] = true
		} else {
			atStart = false
			if len(t) == 0 {
				t["finetune"] = true
			}
		}
	}
	for i := len(parts) - 1; i >= 0; i-- {
		if types[i]["basename"] && len(types[i]) > 1 {
			delete(types[i], "basename")
		} else {
			break
		}
	}
	join := func(want string, exclude string) string {
		var out []string
		seen := map[string]bool{}
		for i, p := range parts {
			if types[i][want] && (exclude == "" || !types[i][exclude]) {
				if want == "size_label" && seen[p] {
					continue
				}
				seen[p] = true
				out = append(out, p)
			}
		}
		return strings.Join(out, "-")
	}
	basename = join("basename", "")
	sizeLabel = join("size_label", "")
	finetune = join("finetune", "")
	version = join("version", "basename")
	if sizeLabel == "" && finetune == "" && version == "" {
		basename = "" // too ambiguous
	}
	return full, org, basename, finetune, version, sizeLabel
}

func isDecimal(r rune) bool { return unicode.Is(unicode.Nd, r) }

// pyFloatOK rejects the spellings Go's ParseFloat accepts and Python's float does not.
func pyFloatOK(s string) bool {
	return s != "" && !strings.ContainsAny(s, "xXpP") && !strings.EqualFold(s, "inf") && !strings.EqualFold(s, "nan")
}

// idToTitle is gguf-py's Metadata.id_to_title: dashes to spaces, and each all-lowercase word
// that is not a version or number title-cased ("gpt2-micro" -> "Gpt2 Micro").
func idToTitle(s string) string {
	words := strings.Fields(strings.ReplaceAll(strings.TrimSpace(s), "-", " "))
	for i, w := range words {
		if pyIsLower(w) && !reTitleNo.MatchString(w) {
			words[i] = pyTitle(w)
		}
	}
	return strings.Join(words, " ")
}

// pyIsLower is Python's str.islower: at least one cased character and no uppercase ones.
func pyIsLower(s string) bool {
	cased := false
	for _, r := range s {
		if unicode.IsUpper(r) || unicode.IsTitle(r) {
			return false
		}
		if unicode.IsLower(r) {
			cased = true
		}
	}
	return cased
}

// pyTitle is Python's str.title: a letter after a non-letter is uppercased, others lowercased.
func pyTitle(s string) string {
	var b strings.Builder
	prevCased := false
	for _, r := range s {
		if prevCased {
			b.WriteRune(unicode.ToLower(r))
		} else {
			b.WriteRune(unicode.ToTitle(r))
		}
		prevCased = unicode.IsLetter(r)
	}
	return b.String()
}

// roundedCount is gguf-py's model_weight_count_rounded_notation: 6541184 -> "6.5M",
// 163037184 -> "163M".
func roundedCount(n int64, minDigits int) string {
	x := float64(n)
	var scaled float64
	var suffix string
	switch {
	case x > 1e12:
		scaled, suffix = x*1e-12, "T"
	case x > 1e9:
		scaled, suffix = x*1e-9, "B"
	case x > 1e6:
		scaled, suffix = x*1e-6, "M"
	default:
		scaled, suffix = x*1e-3, "K"
	}
	digits := strings.TrimLeft(strconv.FormatFloat(math.RoundToEven(scaled), 'f', 0, 64), "0")
	fix := max(minDigits-len(digits), 0)
	return fmt.Sprintf("%.*f%s", fix, scaled, suffix)
}
