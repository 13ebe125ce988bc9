package chat

import (
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/ardanlabs/jinja"
)

// The engine's own tojson filter differs from the one Hugging Face installs (Python's
// json.dumps(x, ensure_ascii=False, indent=indent, separators=separators,
// sort_keys=sort_keys)) in ways that change prompts: floats print as Go's %g (-90 for
// -90.0, 1.234567e+06 for 1234567.0), indent= sorts the keys and escapes <, > and &, and
// sort_keys/ensure_ascii are not known. The engine looks up its built-in filters before the
// render's variables, so a variable cannot replace it; instead New renames the filter in the
// template's source to tojsonName, which the engine does not know and so finds among the
// variables (addHelpers). The name is as long as "tojson" so that the engine's line:column
// positions in errors stay right.
const tojsonName = "TOJSON"

// renameToJSON rewrites every application of the tojson filter ("| tojson") inside the
// template's {{ }} and {% %} tags to tojsonName. It splits tags as the engine's scanner does
// (quoted strings skip closers) and leaves text, comments, string literals and
// {% raw %} blocks alone.
func renameToJSON(src string) string {
	if !strings.Contains(src, "tojson") {
		return src
	}
	var b strings.Builder
	b.Grow(len(src))
	i := 0
	for i < len(src) {
		open := strings.Index(src[i:], "{")
		if open < 0 || i+open+1 >= len(src) {
			b.WriteString(src[i:])
			break
		}
		open += i
		b.WriteString(src[i:open])
		var closer string
		switch src[open+1] {
		case '{':
			closer = "}}"
		case '%':
			closer = "%}"
		case '#':
			end := strings.Index(src[open+2:], "#}")
			if end < 0 {
				b.WriteString(src[open:])
				return b.String()
			}
			end += open + 4
			b.WriteString(src[open:end])
			i = end
			continue
		default:
			b.WriteByte('{')
			i = open + 1
			continue
		}
		end := tagEnd(src, open+2, closer)
		tag := src[open:end]
		if closer == "%}" && tagKeyword(tag) == "raw" {
			end = rawBlockEnd(src, end)
			b.WriteString(src[open:end])
		} else {
			b.WriteString(renameInTag(tag))
		}
		i = end
	}
	return b.String()
}

// tagEnd is the index just past the closer of the tag whose contents start at i, or
// len(src) for an unclosed tag (the engine reports that one).
func tagEnd(src string, i int, closer string) int {
	for i < len(src) {
		c := src[i]
		if c == '\'' || c == '"' {
			i = stringEnd(src, i)
			continue
		}
		if strings.HasPrefix(src[i:], closer) {
			return i + 2
		}
		i++
	}
	return len(src)
}

// stringEnd is the index just past the quoted string starting at i.
func stringEnd(src string, i int) int {
	quote := src[i]
	for i++; i < len(src); i++ {
		switch src[i] {
		case '\\':
			i++
		case quote:
			return i + 1
		}
	}
	return len(src)
}

// tagKeyword is the first word of a statement tag ("raw" of "{%- raw %}").
func tagKeyword(tag string) string {
	s := strings.TrimLeft(strings.TrimPrefix(tag[2:], "-"), " \t\r\n")
	n := 0
	for n < len(s) && isIdentByte(s[n]) {
		n++
	}
	return s[:n]
}

// rawBlockEnd is the index just past the {% endraw %} tag after i.
func rawBlockEnd(src string, i int) int {
	for i < len(src) {
		open := strings.Index(src[i:], "{%")
		if open < 0 {
			return len(src)
		}
		open += i
		end := tagEnd(src, open+2, "%}")
		if tagKeyword(src[open:end]) == "endraw" {
			return end
		}
		i = end
	}
	return len(src)
}

// renameInTag renames "| tojson" outside string literals in one tag.
func renameInTag(tag string) string {
	if !strings.Contains(tag, "tojson") {
		return tag
	}
	b := []byte(tag)
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '\'', '"':
			i = stringEnd(tag, i) - 1
		case '|':
			j := i + 1
			for j < len(b) && (b[j] == ' ' || b[j] == '\t' || b[j] == '\n' || b[j] == '\r') {
				j++
			}
			k := j
			for k < len(b) && isIdentByte(b[k]) {
				k++
			}
			if string(b[j:k]) == "tojson" {
				copy(b[j:k], tojsonName)
			}
		}
	}
	return string(b)
}

func isIdentByte(c byte) bool {
	return c == '_' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// jsonOptions are json.dumps's keyword arguments that Hugging Face's tojson passes on.
type jsonOptions struct {
	ensureASCII bool
	indent      *string // nil: one line
	itemSep     string
	keySep      string
	sortKeys    bool
}

// filterToJSON is Hugging Face's tojson: tojson(x, ensure_ascii=False, indent=None,
// separators=None, sort_keys=False), positional or by name.
func filterToJSON(args []jinja.Value, kwargs map[string]jinja.Value) (jinja.Value, error) {
	if len(args) == 0 {
		return jinja.Undefined(), fmt.Errorf("tojson: no value")
	}
	names := []string{"ensure_ascii", "indent", "separators", "sort_keys"}
	if len(args)-1 > len(names) {
		return jinja.Undefined(), fmt.Errorf("tojson: %d arguments, at most %d", len(args)-1, len(names))
	}
	params := map[string]jinja.Value{}
	for i, a := range args[1:] {
		params[names[i]] = a
	}
	for k, v := range kwargs {
		if !containsString(names, k) {
			return jinja.Undefined(), fmt.Errorf("tojson: unknown argument %s", k)
		}
		params[k] = v
	}
	opts, err := parseJSONOptions(params)
	if err != nil {
		return jinja.Undefined(), err
	}
	var b strings.Builder
	if err := encodeJSON(&b, args[0], opts, 0); err != nil {
		return jinja.Undefined(), fmt.Errorf("tojson: %w", err)
	}
	return jinja.NewString(b.String()), nil
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func parseJSONOptions(p map[string]jinja.Value) (jsonOptions, error) {
	o := jsonOptions{itemSep: ", ", keySep: ": "}
	if v, ok := p["ensure_ascii"]; ok {
		o.ensureASCII = v.IsTruthy()
	}
	if v, ok := p["sort_keys"]; ok {
		o.sortKeys = v.IsTruthy()
	}
	if v, ok := p["indent"]; ok && !v.IsNone() && !v.IsUndefined() {
		var ind string
		switch {
		case v.IsInt():
			ind = strings.Repeat(" ", int(max(0, min(v.AsInt(), 64))))
		case v.IsString():
			ind = v.AsString()
		default:
			return o, fmt.Errorf("tojson: indent must be an integer or a string, not %s", v.String())
		}
		o.indent = &ind
		o.itemSep = "," // json.dumps's default separators with an indent
	}
	if v, ok := p["separators"]; ok && !v.IsNone() && !v.IsUndefined() {
		if !v.IsList() || v.AsList().Len() != 2 || !v.AsList().Get(0).IsString() || !v.AsList().Get(1).IsString() {
			return o, fmt.Errorf("tojson: separators must be two strings")
		}
		o.itemSep, o.keySep = v.AsList().Get(0).AsString(), v.AsList().Get(1).AsString()
	}
	return o, nil
}

// encodeJSON writes v as Python's json.dumps would.
func encodeJSON(b *strings.Builder, v jinja.Value, o jsonOptions, level int) error {
	if level > maxJSONDepth {
		return fmt.Errorf("nested deeper than %d", maxJSONDepth)
	}
	switch {
	case v.IsNone():
		b.WriteString("null")
	case v.IsBool():
		b.WriteString(strconv.FormatBool(v.AsBool()))
	case v.IsInt():
		b.WriteString(strconv.FormatInt(v.AsInt(), 10))
	case v.IsFloat():
		b.WriteString(pythonFloat(v.AsFloat()))
	case v.IsString():
		writeJSONString(b, v.AsString(), o.ensureASCII)
	case v.IsList():
		return encodeList(b, v.AsList().Items, o, level)
	case v.IsDict():
		return encodeDict(b, v.AsDict(), o, level)
	default:
		return fmt.Errorf("%s is not JSON serializable", kindName(v))
	}
	return nil
}

func kindName(v jinja.Value) string {
	if v.IsUndefined() {
		return "an undefined value"
	}
	return "a callable"
}

func encodeList(b *strings.Builder, items []jinja.Value, o jsonOptions, level int) error {
	if len(items) == 0 {
		b.WriteString("[]")
		return nil
	}
	b.WriteByte('[')
	for i, item := range items {
		writeSeparator(b, o, i, level+1)
		if err := encodeJSON(b, item, o, level+1); err != nil {
			return err
		}
	}
	writeClose(b, o, level)
	b.WriteByte(']')
	return nil
}

func encodeDict(b *strings.Builder, d *jinja.Dict, o jsonOptions, level int) error {
	if d.Len() == 0 {
		b.WriteString("{}")
		return nil
	}
	keys := d.Keys
	if o.sortKeys {
		keys = append([]string(nil), keys...)
		sort.Strings(keys) // Python compares str by code point: the UTF-8 byte order
	}
	b.WriteByte('{')
	for i, k := range keys {
		writeSeparator(b, o, i, level+1)
		writeJSONString(b, k, o.ensureASCII)
		b.WriteString(o.keySep)
		if err := encodeJSON(b, d.Data[k], o, level+1); err != nil {
			return err
		}
	}
	writeClose(b, o, level)
	b.WriteByte('}')
	return nil
}

// writeSeparator goes before the i-th item of a container whose items sit at level.
func writeSeparator(b *strings.Builder, o jsonOptions, i, level int) {
	if i > 0 {
		b.WriteString(o.itemSep)
	}
	if o.indent != nil {
		b.WriteByte('\n')
		b.WriteString(strings.Repeat(*o.indent, level))
	}
}

func writeClose(b *strings.Builder, o jsonOptions, level int) {
	if o.indent != nil {
		b.WriteByte('\n')
		b.WriteString(strings.Repeat(*o.indent, level))
	}
}

// writeJSONString quotes s as json.dumps does: \" \\ \n \r \t \b \f, \u00XX for the other
// control characters, everything else as it is (or \uXXXX, surrogate pairs beyond the BMP,
// with ensure_ascii). A byte that is not UTF-8 is written as U+FFFD (range's decoding).
func writeJSONString(b *strings.Builder, s string, ensureASCII bool) {
	b.WriteByte('"')
	for _, r := range s {
		switch {
		case r == '"':
			b.WriteString(`\"`)
		case r == '\\':
			b.WriteString(`\\`)
		case r == '\n':
			b.WriteString(`\n`)
		case r == '\r':
			b.WriteString(`\r`)
		case r == '\t':
			b.WriteString(`\t`)
		case r == '\b':
			b.WriteString(`\b`)
		case r == '\f':
			b.WriteString(`\f`)
		case r < 0x20:
			fmt.Fprintf(b, `\u%04x`, r)
		case ensureASCII && r > 0x7e:
			writeEscapedRune(b, r)
		default:
			b.WriteRune(r)
		}
	}
	b.WriteByte('"')
}

func writeEscapedRune(b *strings.Builder, r rune) {
	if r < 0x10000 {
		fmt.Fprintf(b, `\u%04x`, r)
		return
	}
	r -= 0x10000
	fmt.Fprintf(b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
}

// pythonFloat is Python's repr of a float as json.dumps writes it: the shortest digits that
// read back to f, positional between 1e-4 and 1e16 (with ".0" when whole), otherwise
// d.ddde+XX; NaN and Infinity for the values JSON has no number for.
func pythonFloat(f float64) string {
	switch {
	case math.IsNaN(f):
		return "NaN"
	case math.IsInf(f, 1):
		return "Infinity"
	case math.IsInf(f, -1):
		return "-Infinity"
	}
	// 'e' with -1 gives the shortest round-trip digits: d.dddde±XX.
	e := strconv.FormatFloat(f, 'e', -1, 64)
	mant, expText, _ := strings.Cut(e, "e")
	exp, _ := strconv.Atoi(expText)
	if exp < -4 || exp >= 16 {
		sign := "+"
		if exp < 0 {
			sign, exp = "-", -exp
		}
		return fmt.Sprintf("%se%s%02d", mant, sign, exp)
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsAny(s, ".") {
		s += ".0"
	}
	return s
}
