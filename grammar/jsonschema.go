package grammar

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
)

// The JSON rules every converted schema shares, as llama.cpp's json_schema_to_grammar writes
// them: whitespace is bounded (at most two newlines and 20 blanks between tokens), so a model
// cannot pad forever, and numbers have at most 16 digits per part.
var jsonPrimitives = []struct{ name, body string }{
	{"space", `| " " | "\n"{1,2} [ \t]{0,20}`},
	{"boolean", `("true" | "false") space`},
	{"null", `"null" space`},
	{"char", `[^"\\\x7F\x00-\x1F] | [\\] (["\\bfnrt] | "u" [0-9a-fA-F]{4})`},
	{"string", `"\"" char* "\"" space`},
	{"integral-part", `[0] | [1-9] [0-9]{0,15}`},
	{"decimal-part", `[0-9]{1,16}`},
	{"integer", `("-"? integral-part) space`},
	{"number", `("-"? integral-part) ("." decimal-part)? ([eE] [-+]? integral-part)? space`},
	{"value", `object | array | string | number | boolean | null`},
	{"object", `"{" space ( string ":" space value ("," space string ":" space value)* )? "}" space`},
	{"array", `"[" space ( value ("," space value)* )? "]" space`},
}

// JSONGrammar is the GBNF grammar of any JSON value (OpenAI's response_format json_object).
func JSONGrammar() string {
	g, _ := FromJSONSchema([]byte(`{"type":"object"}`))
	return g
}

// CompileJSONSchema converts a JSON schema to a grammar and compiles it.
func CompileJSONSchema(schema []byte) (*Grammar, error) {
	src, err := FromJSONSchema(schema)
	if err != nil {
		return nil, err
	}
	return Parse(src)
}

// SchemaError is a JSON schema the converter cannot turn into a grammar: where (a JSON
// pointer into the schema) and why.
type SchemaError struct {
	Path string
	Msg  string
}

func (e *SchemaError) Error() string {
	if e.Path == "" {
		return "JSON schema: " + e.Msg
	}
	return "JSON schema at " + e.Path + ": " + e.Msg
}

// maxSchemaDepth bounds the nesting of schemas within schemas.
const maxSchemaDepth = 64

// FromJSONSchema converts a JSON schema to GBNF, as llama.cpp's json_schema_to_grammar: type
// (one or a list; object, array, string, number, integer, boolean, null), properties with
// required and additionalProperties (the declared properties come in their declared order,
// then any additional ones), items with minItems and maxItems, enum and const, string
// minLength and maxLength, anyOf and oneOf (both as a choice), $ref to #/definitions/NAME or
// #/$defs/NAME (recursion allowed); annotations (title, description, default, examples,
// $schema, $id, $comment) are ignored. Any other keyword is an error naming it and where it
// is.
func FromJSONSchema(schema []byte) (string, error) {
	d := json.NewDecoder(bytes.NewReader(schema))
	d.UseNumber()
	root, err := decodeOrdered(d, 0)
	if err != nil {
		return "", &SchemaError{Msg: "not valid JSON: " + err.Error()}
	}
	if _, err := d.Token(); err != io.EOF {
		return "", &SchemaError{Msg: "text after the schema"}
	}
	c := &converter{root: root, rules: map[string]string{}, refs: map[string]string{}}
	expr, err := c.visit(root, "", 0)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "root ::= %s\n", expr)
	for _, name := range c.order {
		fmt.Fprintf(&b, "%s ::= %s\n", name, c.rules[name])
	}
	return b.String(), nil
}

type converter struct {
	root  any
	rules map[string]string
	order []string
	refs  map[string]string // $ref -> its rule
}

// addRule defines a rule (once) and returns its name.
func (c *converter) addRule(name, body string) string {
	if _, ok := c.rules[name]; !ok {
		c.order = append(c.order, name)
	}
	c.rules[name] = body
	return name
}

// primitive returns a shared rule, adding it and the rules it uses.
func (c *converter) primitive(name string) string {
	if _, ok := c.rules[name]; ok {
		return name
	}
	for _, p := range jsonPrimitives {
		if p.name == name {
			c.addRule(name, p.body)
			for _, word := range strings.FieldsFunc(p.body, func(r rune) bool { return !isNameByte(byte(r)) || r > 0x7f }) {
				if word != name && isPrimitive(word) && !inLiteral(p.body, word) {
					c.primitive(word)
				}
			}
		}
	}
	return name
}

func isPrimitive(name string) bool {
	return slices.ContainsFunc(jsonPrimitives, func(p struct{ name, body string }) bool { return p.name == name })
}

// inLiteral reports whether word occurs in body only inside quotes (such as "null").
func inLiteral(body, word string) bool {
	inQuote := false
	for i := 0; i < len(body); i++ {
		switch {
		case body[i] == '\\':
			i++
		case body[i] == '"':
			inQuote = !inQuote
		case !inQuote && strings.HasPrefix(body[i:], word) &&
			(i == 0 || !isNameByte(body[i-1])) && (i+len(word) == len(body) || !isNameByte(body[i+len(word)])):
			return false
		}
	}
	return true
}

var ignoredKeywords = map[string]bool{"title": true, "description": true, "default": true, "examples": true,
	"$schema": true, "$id": true, "$comment": true, "definitions": true, "$defs": true}

var knownKeywords = map[string]bool{"type": true, "properties": true, "required": true, "additionalProperties": true,
	"items": true, "minItems": true, "maxItems": true, "enum": true, "const": true, "minLength": true,
	"maxLength": true, "anyOf": true, "oneOf": true, "$ref": true}

// visit returns a GBNF expression for the schema s found at path.
func (c *converter) visit(s any, path string, depth int) (string, error) {
	if depth > maxSchemaDepth {
		return "", &SchemaError{Path: path, Msg: fmt.Sprintf("schemas nested deeper than %d", maxSchemaDepth)}
	}
	switch v := s.(type) {
	case bool:
		if !v {
			return "", &SchemaError{Path: path, Msg: "the schema false matches nothing"}
		}
		return c.primitive("value"), nil
	case *omap:
		return c.visitObject(v, path, depth)
	}
	return "", &SchemaError{Path: path, Msg: "a schema must be an object or a boolean"}
}

func (c *converter) visitObject(s *omap, path string, depth int) (string, error) {
	for _, k := range s.keys {
		if !knownKeywords[k] && !ignoredKeywords[k] {
			return "", &SchemaError{Path: path, Msg: fmt.Sprintf("keyword %q is not supported", k)}
		}
	}
	if ref, ok := s.get("$ref"); ok {
		return c.visitRef(ref, path+"/$ref", depth)
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if alts, ok := s.get(k); ok {
			return c.visitChoice(alts, path+"/"+k, depth)
		}
	}
	if v, ok := s.get("const"); ok {
		return jsonLiteral(v) + " space", c.needSpace()
	}
	if vs, ok := s.get("enum"); ok {
		list, ok := vs.([]any)
		if !ok || len(list) == 0 {
			return "", &SchemaError{Path: path + "/enum", Msg: "enum must be a non-empty array"}
		}
		var alts []string
		for _, v := range list {
			alts = append(alts, jsonLiteral(v))
		}
		return "(" + strings.Join(alts, " | ") + ") space", c.needSpace()
	}
	t, ok := s.get("type")
	if !ok {
		if _, hasProps := s.get("properties"); hasProps {
			t = "object"
		} else if _, hasItems := s.get("items"); hasItems {
			t = "array"
		} else {
			return c.primitive("value"), nil
		}
	}
	if list, isList := t.([]any); isList {
		var alts []string
		for i, one := range list {
			name, ok := one.(string)
			if !ok {
				return "", &SchemaError{Path: fmt.Sprintf("%s/type/%d", path, i), Msg: "a type must be a string"}
			}
			e, err := c.visitType(s, name, path, depth)
			if err != nil {
				return "", err
			}
			alts = append(alts, e)
		}
		if len(alts) == 0 {
			return "", &SchemaError{Path: path + "/type", Msg: "an empty list of types matches nothing"}
		}
		return "(" + strings.Join(alts, " | ") + ")", nil
	}
	name, ok := t.(string)
	if !ok {
		return "", &SchemaError{Path: path + "/type", Msg: "type must be a string or an array of strings"}
	}
	return c.visitType(s, name, path, depth)
}

func (c *converter) needSpace() error {
	c.primitive("space")
	return nil
}

func (c *converter) visitType(s *omap, t, path string, depth int) (string, error) {
	switch t {
	case "object":
		return c.visitObjectType(s, path, depth)
	case "array":
		return c.visitArray(s, path, depth)
	case "string":
		return c.visitString(s, path)
	case "number", "integer", "boolean", "null":
		return c.primitive(t), nil
	}
	return "", &SchemaError{Path: path + "/type", Msg: fmt.Sprintf("unknown type %q", t)}
}

func (c *converter) visitRef(ref any, path string, depth int) (string, error) {
	r, ok := ref.(string)
	if !ok {
		return "", &SchemaError{Path: path, Msg: "$ref must be a string"}
	}
	if name, ok := c.refs[r]; ok {
		return name, nil
	}
	var section, def string
	for _, prefix := range []string{"#/definitions/", "#/$defs/"} {
		if rest, ok := strings.CutPrefix(r, prefix); ok {
			section, def = prefix[2:len(prefix)-1], rest
		}
	}
	defs, _ := c.root.(*omap)
	sec, _ := defs.get(section)
	table, _ := sec.(*omap)
	target, found := table.get(def)
	if section == "" || !found {
		return "", &SchemaError{Path: path, Msg: fmt.Sprintf("$ref %q: only #/definitions/NAME and #/$defs/NAME of this schema are supported, and it must exist", r)}
	}
	name := c.freeName("ref-" + ruleSafe(def))
	c.refs[r] = name
	c.addRule(name, "") // reserved: a recursive reference finds it
	expr, err := c.visit(target, "#/"+section+"/"+def, depth+1)
	if err != nil {
		return "", err
	}
	c.addRule(name, expr)
	return name, nil
}

// freeName returns base, or base-N when taken.
func (c *converter) freeName(base string) string {
	name := base
	for i := 1; ; i++ {
		if _, taken := c.rules[name]; !taken && !isPrimitive(name) {
			return name
		}
		name = base + "-" + strconv.Itoa(i)
	}
}

func ruleSafe(s string) string {
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if isNameByte(s[i]) {
			b.WriteByte(s[i])
		} else {
			b.WriteByte('-')
		}
	}
	if b.Len() == 0 {
		return "x"
	}
	return b.String()
}

func (c *converter) visitChoice(alts any, path string, depth int) (string, error) {
	list, ok := alts.([]any)
	if !ok || len(list) == 0 {
		return "", &SchemaError{Path: path, Msg: "must be a non-empty array of schemas"}
	}
	var exprs []string
	for i, a := range list {
		e, err := c.visit(a, fmt.Sprintf("%s/%d", path, i), depth+1)
		if err != nil {
			return "", err
		}
		exprs = append(exprs, e)
	}
	return "(" + strings.Join(exprs, " | ") + ")", nil
}

// count reads a non-negative integer keyword (absent: def).
func count(s *omap, key, path string, def int) (int, error) {
	v, ok := s.get(key)
	if !ok {
		return def, nil
	}
	n, isNum := v.(json.Number)
	i, err := strconv.Atoi(string(n))
	if !isNum || err != nil || i < 0 || i > MaxElements {
		return 0, &SchemaError{Path: path + "/" + key, Msg: fmt.Sprintf("%s must be an integer from 0 to %d", key, MaxElements)}
	}
	return i, nil
}

// repetition writes {lo,hi} (hi < 0: unbounded).
func repetition(lo, hi int) string {
	switch {
	case hi < 0:
		return fmt.Sprintf("{%d,}", lo)
	case lo == hi:
		return fmt.Sprintf("{%d}", lo)
	}
	return fmt.Sprintf("{%d,%d}", lo, hi)
}

func (c *converter) visitString(s *omap, path string) (string, error) {
	lo, err := count(s, "minLength", path, 0)
	if err != nil {
		return "", err
	}
	hi, err := count(s, "maxLength", path, -1)
	if err != nil {
		return "", err
	}
	if hi >= 0 && hi < lo {
		return "", &SchemaError{Path: path, Msg: fmt.Sprintf("maxLength %d is below minLength %d", hi, lo)}
	}
	if lo == 0 && hi < 0 {
		return c.primitive("string"), nil
	}
	c.primitive("char")
	c.primitive("space")
	return `"\"" char` + repetition(lo, hi) + ` "\"" space`, nil
}

func (c *converter) visitArray(s *omap, path string, depth int) (string, error) {
	item := c.primitive("value")
	if it, ok := s.get("items"); ok {
		var err error
		if item, err = c.visit(it, path+"/items", depth+1); err != nil {
			return "", err
		}
	}
	lo, err := count(s, "minItems", path, 0)
	if err != nil {
		return "", err
	}
	hi, err := count(s, "maxItems", path, -1)
	if err != nil {
		return "", err
	}
	if hi >= 0 && hi < lo {
		return "", &SchemaError{Path: path, Msg: fmt.Sprintf("maxItems %d is below minItems %d", hi, lo)}
	}
	c.primitive("space")
	if hi == 0 {
		return `"[" space "]" space`, nil
	}
	restHi := hi - 1
	if hi < 0 {
		restHi = -1
	}
	list := "(" + item + `) ("," space (` + item + "))" + repetition(max(lo-1, 0), restHi)
	if lo == 0 {
		list = "(" + list + ")?"
	}
	return `"[" space ` + list + ` "]" space`, nil
}

func (c *converter) visitObjectType(s *omap, path string, depth int) (string, error) {
	p, hasProps := s.get("properties")
	props, _ := p.(*omap)
	if hasProps && props == nil {
		return "", &SchemaError{Path: path + "/properties", Msg: fmt.Sprintf("properties must be an object, not %T", p)}
	}
	required := map[string]bool{}
	if r, ok := s.get("required"); ok {
		list, ok := r.([]any)
		if !ok {
			return "", &SchemaError{Path: path + "/required", Msg: "required must be an array of property names"}
		}
		for _, n := range list {
			name, ok := n.(string)
			if _, declared := props.get(name); !ok || !declared {
				return "", &SchemaError{Path: path + "/required", Msg: fmt.Sprintf("required names %v, which is not among the properties", n)}
			}
			required[name] = true
		}
	}
	extra := ""
	additional, _ := s.get("additionalProperties")
	switch a := additional.(type) {
	case nil:
		if props == nil { // {"type": "object"}: any object
			return c.primitive("object"), nil
		}
	case bool:
		if a {
			extra = c.primitive("value")
		}
	default:
		var err error
		if extra, err = c.visit(a, path+"/additionalProperties", depth+1); err != nil {
			return "", err
		}
	}
	c.primitive("space")
	var names []string
	if props != nil {
		names = props.keys // in the order the schema declares them, as llama.cpp
	}
	kvs := make([]string, len(names))
	for i, n := range names {
		v, err := c.visit(props.m[n], path+"/properties/"+n, depth+1)
		if err != nil {
			return "", err
		}
		kvs[i] = jsonLiteral(n) + ` space ":" space ` + v
	}
	base := c.freeName("object")
	tail := ""
	if extra != "" {
		c.primitive("string")
		kv := `string ":" space ` + extra
		tail = c.addRule(c.freeName(base+"-extra"), "("+kv+` ("," space `+kv+")*)?")
		tailMore := c.addRule(c.freeName(base+"-extra-more"), `("," space `+kv+")*")
		return `"{" space ` + c.objectRest(base, kvs, names, required, tail, tailMore) + ` "}" space`, nil
	}
	return `"{" space ` + c.objectRest(base, kvs, names, required, "", "") + ` "}" space`, nil
}

// objectRest writes the properties as a chain of rules, rest-i-first and rest-i-more (whether
// a comma is due before the next property), so that any optional property may be left out
// with a grammar linear in their number.
func (c *converter) objectRest(base string, kvs, names []string, required map[string]bool, tailFirst, tailMore string) string {
	rule := func(i int, first bool) string {
		if i == len(kvs) {
			switch {
			case tailFirst == "":
				return `""`
			case first:
				return tailFirst
			}
			return tailMore
		}
		suffix := "-more"
		if first {
			suffix = "-first"
		}
		return fmt.Sprintf("%s-%d%s", base, i, suffix)
	}
	for i := len(kvs) - 1; i >= 0; i-- {
		for _, first := range []bool{true, false} {
			lead := ""
			if !first {
				lead = `"," space `
			}
			body := lead + kvs[i] + " " + rule(i+1, false)
			if !required[names[i]] {
				body = "(" + body + ") | " + rule(i+1, first)
			}
			c.addRule(rule(i, first), body)
		}
	}
	return rule(0, true)
}

// jsonLiteral writes a JSON value as a GBNF literal of its compact encoding.
func jsonLiteral(v any) string {
	b, _ := json.Marshal(v)
	var s strings.Builder
	s.WriteByte('"')
	for _, c := range string(b) {
		switch {
		case c == '"' || c == '\\':
			s.WriteByte('\\')
			s.WriteRune(c)
		case c < 0x20 || c == 0x7f:
			fmt.Fprintf(&s, `\x%02X`, c)
		default:
			s.WriteRune(c)
		}
	}
	s.WriteByte('"')
	return s.String()
}

// omap is a JSON object that keeps its keys' order (a schema's properties come in the order
// it declares them).
type omap struct {
	keys []string
	m    map[string]any
}

func (o *omap) get(k string) (any, bool) {
	if o == nil {
		return nil, false
	}
	v, ok := o.m[k]
	return v, ok
}

// MarshalJSON writes the object back (for enum and const values), keys in order.
func (o *omap) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		kb, _ := json.Marshal(k)
		vb, err := json.Marshal(o.m[k])
		if err != nil {
			return nil, err
		}
		b.Write(kb)
		b.WriteByte(':')
		b.Write(vb)
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// decodeOrdered reads one JSON value with objects as *omap and numbers as json.Number.
func decodeOrdered(d *json.Decoder, depth int) (any, error) {
	if depth > 2*maxSchemaDepth+8 {
		return nil, errors.New("nested too deeply")
	}
	t, err := d.Token()
	if err != nil {
		return nil, err
	}
	switch t {
	case json.Delim('{'):
		o := &omap{m: map[string]any{}}
		for d.More() {
			kt, err := d.Token()
			if err != nil {
				return nil, err
			}
			k := kt.(string)
			v, err := decodeOrdered(d, depth+1)
			if err != nil {
				return nil, err
			}
			if _, dup := o.m[k]; dup {
				return nil, fmt.Errorf("key %q appears twice in an object", k)
			}
			o.keys = append(o.keys, k)
			o.m[k] = v
		}
		_, err = d.Token()
		return o, err
	case json.Delim('['):
		list := []any{}
		for d.More() {
			v, err := decodeOrdered(d, depth+1)
			if err != nil {
				return nil, err
			}
			list = append(list, v)
		}
		_, err = d.Token()
		return list, err
	}
	return t, nil
}
