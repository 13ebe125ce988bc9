package main

import (
	"encoding/json"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/internal/fixtures"
)

const personSchema = `{"type":"object","properties":{"name":{"type":"string","maxLength":10},"age":{"type":"integer"}},"required":["name","age"],"additionalProperties":false}`

// checkPerson asserts that out is a JSON object as personSchema describes.
func checkPerson(t *testing.T, what, out string) {
	t.Helper()
	var p struct {
		Name *string `json:"name"`
		Age  *int64  `json:"age"`
	}
	d := json.NewDecoder(strings.NewReader(out))
	d.DisallowUnknownFields()
	if err := d.Decode(&p); err != nil || p.Name == nil || p.Age == nil || len([]rune(*p.Name)) > 10 {
		t.Fatalf("%s: %q does not match the schema (%v)", what, out, err)
	}
}

// --grammar, --grammar-file, -j and --json-schema-file constrain the run command's text;
// generation stops where the grammar completes.
func TestRunGrammarFlags(t *testing.T) {
	model := fixtures.Path(t, "gpt2-tiny-f16.gguf")
	dir := t.TempDir()
	schemaFile := filepath.Join(dir, "person.json")
	grammarFile := filepath.Join(dir, "list.gbnf")
	if err := os.WriteFile(schemaFile, []byte(personSchema), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(grammarFile, []byte("# a list of words\nroot ::= \"- \" word (\"\\n- \" word){1,2}\nword ::= [a-z]{1,8}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	run := func(args ...string) (string, string) {
		t.Helper()
		base := []string{"-m", model, "-p", "The entry:", "--temp", "1", "--no-display-prompt", "-t", "2"}
		code, out, errs := gorun(append(base, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		return out, errs
	}
	for seed := 1; seed <= 5; seed++ {
		s := strconv.Itoa(seed)
		out, errs := run("-s", s, "--grammar", `root ::= "yes" | "no"`)
		if out != "yes" && out != "no" || !strings.Contains(errs, "stop reason      = grammar") {
			t.Fatalf("--grammar yes/no, seed %d: %q\n%s", seed, out, errs)
		}
		out, _ = run("-s", s, "-j", personSchema)
		checkPerson(t, "-j", out)
		out, _ = run("-s", s, "--json-schema-file", schemaFile)
		checkPerson(t, "--json-schema-file", out)
		out, _ = run("-s", s, "--grammar-file", grammarFile)
		lines := strings.Split(out, "\n")
		if len(lines) < 2 || len(lines) > 3 {
			t.Fatalf("--grammar-file: %q", out)
		}
		for _, l := range lines {
			w, ok := strings.CutPrefix(l, "- ")
			if !ok || w == "" || strings.Trim(w, "abcdefghijklmnopqrstuvwxyz") != "" {
				t.Fatalf("--grammar-file: line %q of %q", l, out)
			}
		}
	}
}

// A bad grammar, schema or combination is a usage error (exit 2) that names the option and
// the problem, before the model is loaded.
func TestRunGrammarErrors(t *testing.T) {
	missing := filepath.Join(t.TempDir(), "none.gbnf")
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--grammar", "root ::= foo"}, `--grammar: grammar: line 1, column 10: undefined rule "foo"`},
		{[]string{"--grammar", "root ::= (\"a\""}, "unbalanced parentheses"},
		{[]string{"--grammar", ""}, ""}, // empty is no grammar: the model load fails instead
		{[]string{"-j", `{"type":"string","pattern":"a"}`}, `--json-schema: JSON schema: keyword "pattern" is not supported`},
		{[]string{"-j", `{"type":`}, "not valid JSON"},
		{[]string{"-j", "{}", "--grammar", `root ::= "a"`}, "exclude each other"},
		{[]string{"--grammar-file", missing}, "--grammar-file"},
		{[]string{"--json-schema-file", missing}, "--json-schema-file"},
	}
	for _, c := range cases {
		code, _, errs := gorun(append([]string{"-m", "absent.gguf", "-p", "x"}, c.args...)...)
		if c.want == "" {
			if code == exitUsage {
				t.Errorf("%v: usage error %s", c.args, errs)
			}
			continue
		}
		if code != exitUsage || !strings.Contains(errs, c.want) || strings.Count(strings.TrimSpace(errs), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q (want exit 2 and %q)", c.args, code, errs, c.want)
		}
	}
}

// gorun serve answers response_format json_schema with JSON the schema accepts.
func TestServeResponseFormatCLI(t *testing.T) {
	url, stop := serveFor(t, "-m", fixtures.Path(t, "gpt2-tiny-f16.gguf"))
	defer stop()
	body := `{"messages":[{"role":"user","content":"Who?"}],"temperature":1,"seed":3,"max_tokens":300,` +
		`"response_format":{"type":"json_schema","json_schema":{"name":"person","schema":` + personSchema + `}}}`
	resp, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	var r struct {
		Choices []struct {
			Message struct {
				Content string `json:"content"`
			} `json:"message"`
			FinishReason string `json:"finish_reason"`
		} `json:"choices"`
	}
	if resp.StatusCode != 200 || json.Unmarshal(b, &r) != nil || len(r.Choices) != 1 {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
	checkPerson(t, "serve", r.Choices[0].Message.Content)
	if r.Choices[0].FinishReason != "stop" {
		t.Fatalf("finish reason %q", r.Choices[0].FinishReason)
	}
	bad := `{"messages":[{"role":"user","content":"Who?"}],"response_format":{"type":"json_schema","json_schema":{"schema":{"type":"strin"}}}}`
	resp2, err := http.Post(url+"/v1/chat/completions", "application/json", strings.NewReader(bad))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp2.Body)
	resp2.Body.Close()
	if resp2.StatusCode != 400 || !strings.Contains(string(b), `unknown type \"strin\"`) {
		t.Fatalf("bad schema: %d %s", resp2.StatusCode, b)
	}
}
