package grammar

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"
)

// validate checks a JSON value against the keywords the converter supports (a small
// validator written from the JSON Schema specification, for the tests).
func validate(root, s map[string]any, v any) error {
	if ref, ok := s["$ref"].(string); ok {
		parts := strings.Split(strings.TrimPrefix(ref, "#/"), "/")
		return validate(root, root[parts[0]].(map[string]any)[parts[1]].(map[string]any), v)
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if alts, ok := s[k].([]any); ok {
			for _, a := range alts {
				if validate(root, a.(map[string]any), v) == nil {
					return nil
				}
			}
			return fmt.Errorf("%v matches none of %s", v, k)
		}
	}
	if c, ok := s["const"]; ok && !jsonEqual(c, v) {
		return fmt.Errorf("%v is not the const %v", v, c)
	}
	if e, ok := s["enum"].([]any); ok {
		found := false
		for _, x := range e {
			found = found || jsonEqual(x, v)
		}
		if !found {
			return fmt.Errorf("%v is not in the enum %v", v, e)
		}
	}
	switch t := s["type"].(type) {
	case string:
		if err := checkType(t, v); err != nil {
			return err
		}
	case []any:
		ok := false
		for _, one := range t {
			ok = ok || checkType(one.(string), v) == nil
		}
		if !ok {
			return fmt.Errorf("%v is none of the types %v", v, t)
		}
	}
	switch x := v.(type) {
	case string:
		n := float64(utf8.RuneCountInString(x))
		if m, ok := num(s, "minLength"); ok && n < m {
			return fmt.Errorf("%q is shorter than %v", x, m)
		}
		if m, ok := num(s, "maxLength"); ok && n > m {
			return fmt.Errorf("%q is longer than %v", x, m)
		}
	case []any:
		if m, ok := num(s, "minItems"); ok && float64(len(x)) < m {
			return fmt.Errorf("%d items, fewer than %v", len(x), m)
		}
		if m, ok := num(s, "maxItems"); ok && float64(len(x)) > m {
			return fmt.Errorf("%d items, more than %v", len(x), m)
		}
		if it, ok := s["items"].(map[string]any); ok {
			for _, e := range x {
				if err := validate(root, it, e); err != nil {
					return err
				}
			}
		}
	case map[string]any:
		props, _ := s["properties"].(map[string]any)
		required, _ := s["required"].([]any)
		for _, r := range required {
			if _, ok := x[r.(string)]; !ok {
				return fmt.Errorf("required property %v missing", r)
			}
		}
		for k, e := range x {
			if p, ok := props[k]; ok {
				if err := validate(root, p.(map[string]any), e); err != nil {
					return err
				}
				continue
			}
			switch a := s["additionalProperties"].(type) {
			case bool:
				if !a {
					return fmt.Errorf("additional property %q", k)
				}
			case map[string]any:
				if err := validate(root, a, e); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

func checkType(t string, v any) error {
	ok := false
	switch x := v.(type) {
	case nil:
		ok = t == "null"
	case bool:
		ok = t == "boolean"
	case string:
		ok = t == "string"
	case []any:
		ok = t == "array"
	case map[string]any:
		ok = t == "object"
	case json.Number:
		ok = t == "number" || t == "integer" && !strings.ContainsAny(string(x), ".eE")
	}
	if !ok {
		return fmt.Errorf("%v is not of type %s", v, t)
	}
	return nil
}

func jsonEqual(a, b any) bool { return reflect.DeepEqual(a, b) }

// num reads a numeric keyword.
func num(s map[string]any, key string) (float64, bool) {
	n, ok := s[key].(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

// decodeNumbers decodes JSON with numbers as json.Number (exactly as written).
func decodeNumbers(text string, v any) error {
	d := json.NewDecoder(strings.NewReader(text))
	d.UseNumber()
	return d.Decode(v)
}

// charVocab is single characters (printable ASCII, newline, tab, a few others) and a few
// JSON words, as tokens.
func charVocab() *Vocab {
	var toks [][]byte
	for c := 0x20; c < 0x7f; c++ {
		toks = append(toks, []byte{byte(c)})
	}
	for _, s := range []string{"\n", "\t", "é", "true", "false", "null", "\"name\"", "\": ", "12", "\\u00e9", "\\n"} {
		toks = append(toks, []byte(s))
	}
	return NewVocab(toks, nil)
}

// generate walks the grammar at random over the vocabulary: each step picks an allowed token
// (closing quotes and brackets favoured, so texts end), and stops where the text may end,
// with probability 1/2, or when nothing else may come. ok is false when it ran out of steps.
func generate(g *Grammar, v *Vocab, rng *rand.Rand) (text string, ok bool) {
	m := g.NewMatcher()
	allowed := make([]bool, v.Size())
	var b bytes.Buffer
	for range 4000 {
		if m.Done() || m.CanEnd() && rng.IntN(2) == 0 {
			return b.String(), true
		}
		if _, err := m.Mask(v, false, allowed); err != nil {
			panic(err)
		}
		var ids []int32
		for id, a := range allowed {
			if a {
				ids = append(ids, int32(id))
				if t := v.tokens[id]; len(t) == 1 && strings.ContainsRune(`"]}`, rune(t[0])) {
					ids = append(ids, int32(id), int32(id), int32(id), int32(id), int32(id))
				}
			}
		}
		if len(ids) == 0 {
			return b.String(), false
		}
		id := ids[rng.IntN(len(ids))]
		if err := m.AcceptToken(v, id); err != nil {
			panic(err)
		}
		b.Write(v.tokens[id])
	}
	return b.String(), false
}

// Texts generated under converted schemas are valid JSON that the schema accepts.
func TestJSONSchemaOutputsValidate(t *testing.T) {
	schemas := []string{
		`{}`,
		`{"type":"object"}`,
		`{"type":"object","properties":{"name":{"type":"string","minLength":1,"maxLength":8},"age":{"type":"integer"},"ok":{"type":"boolean"}},"required":["name"]}`,
		`{"type":"array","items":{"type":"number"},"minItems":2,"maxItems":4}`,
		`{"type":"array","items":{"enum":["a",1,null,{"k":[true]}]},"maxItems":3}`,
		`{"type":["string","null"],"maxLength":3}`,
		`{"const":{"x":[1,"é"]}}`,
		`{"anyOf":[{"type":"integer"},{"type":"object","properties":{"v":{"type":"null"}},"required":["v"]}]}`,
		`{"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":{"type":"string","maxLength":2}}`,
		`{"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"boolean"},"c":{"type":"null"}}}`,
		`{"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},"next":{"oneOf":[{"$ref":"#/$defs/node"},{"type":"null"}]}},"required":["v","next"]}},"$ref":"#/$defs/node"}`,
		`{"definitions":{"s":{"type":"string","maxLength":4}},"type":"array","items":{"$ref":"#/definitions/s"},"minItems":1}`,
	}
	v := charVocab()
	rng := rand.New(rand.NewPCG(1, 1))
	for _, src := range schemas {
		g, err := CompileJSONSchema([]byte(src))
		if err != nil {
			t.Fatalf("%s: %v", src, err)
		}
		var schema map[string]any
		if err := decodeNumbers(src, &schema); err != nil {
			t.Fatal(err)
		}
		completed := 0
		for range 60 {
			text, ok := generate(g, v, rng)
			if !ok {
				continue
			}
			completed++
			var val any
			if !json.Valid([]byte(text)) {
				t.Fatalf("%s: generated invalid JSON %q", src, text)
			}
			if err := decodeNumbers(text, &val); err != nil {
				t.Fatalf("%s: generated invalid JSON %q: %v", src, text, err)
			}
			if err := validate(schema, schema, val); err != nil {
				t.Fatalf("%s: generated %q: %v", src, text, err)
			}
		}
		if completed < 30 {
			t.Errorf("%s: only %d of 60 random texts completed", src, completed)
		}
	}
}

// Documents the schema accepts are matched by the grammar, and some it refuses are not; the
// properties come in their declared order.
func TestJSONSchemaMatchesDocuments(t *testing.T) {
	cases := []struct {
		schema   string
		yes, not []string
	}{
		{`{"type":"object","properties":{"b":{"type":"integer"},"a":{"type":"string"}},"required":["a"]}`,
			[]string{`{"a":"x"}`, `{"b":1,"a":"x"}`, `{ "b": -12, "a": "" }`, "{\n\"a\"\n:\"x\"}"},
			[]string{`{}`, `{"b":1}`, `{"a":"x","b":1}`, `{"a":1}`, `{"a":"x","c":1}`, `{"a":"x",}`}},
		{`{"type":"array","items":{"type":"integer"},"minItems":1,"maxItems":2}`,
			[]string{`[1]`, `[1, 2]`}, []string{`[]`, `[1,2,3]`, `[1.5]`}},
		{`{"type":"number"}`, []string{`0`, `-1.5e10`, `3.25`}, []string{`01`, `1.`, `.5`, `"1"`}},
		{`{"type":"string","minLength":2,"maxLength":3}`, []string{`"ab"`, `"\u00e9\n"`, `"abc"`}, []string{`"a"`, `"abcd"`, `"a"b"`}},
		{`{"enum":["x",2,true]}`, []string{`"x"`, `2`, `true`}, []string{`"y"`, `false`}},
	}
	for _, c := range cases {
		g, err := CompileJSONSchema([]byte(c.schema))
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range c.yes {
			if !matchesAll(g, s) {
				t.Errorf("%s refuses %s", c.schema, s)
			}
		}
		for _, s := range c.not {
			if matchesAll(g, s) {
				t.Errorf("%s accepts %s", c.schema, s)
			}
		}
	}
}

func TestJSONSchemaErrors(t *testing.T) {
	cases := []struct{ schema, want string }{
		{`{"type":"string","pattern":"^a"}`, `JSON schema: keyword "pattern" is not supported`},
		{`{"type":"object","properties":{"a":{"type":"integer","minimum":0}}}`, `at /properties/a: keyword "minimum" is not supported`},
		{`{"type":"string","format":"date"}`, `keyword "format" is not supported`},
		{`{"allOf":[{}]}`, `keyword "allOf" is not supported`},
		{`{"$ref":"#/definitions/missing"}`, `$ref "#/definitions/missing"`},
		{`{"$ref":"http://example.com/s.json"}`, "only #/definitions/NAME and #/$defs/NAME"},
		{`{"type":"strin"}`, `unknown type "strin"`},
		{`{"type":"array","minItems":3,"maxItems":2}`, "maxItems 2 is below minItems 3"},
		{`{"type":"string","maxLength":-1}`, "maxLength must be an integer"},
		{`{"type":"object","properties":{"a":{}},"required":["b"]}`, "required names b"},
		{`false`, "matches nothing"},
		{`{"type":`, "not valid JSON"},
		{`{} {}`, "text after the schema"},
		{`[1]`, "a schema must be an object or a boolean"},
		{strings.Repeat(`{"items":`, 100) + `{}` + strings.Repeat(`}`, 100), "nested deeper than"},
		{strings.Repeat(`[`, 100000), "not valid JSON"},
		{`{"type":"array","minItems":300000}`, "minItems must be an integer from 0 to"},
		{`{"type":"array","minItems":200000,"items":{"type":"array","minItems":200000}}`, "past"},
	}
	for _, c := range cases {
		_, err := CompileJSONSchema([]byte(c.schema))
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%.60s: error %v, want %q", c.schema, err, c.want)
		}
	}
}
