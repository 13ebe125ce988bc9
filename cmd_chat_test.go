package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/chat"
	"github.com/gorun-dev/gorun/internal/chatrefs"
	"github.com/gorun-dev/gorun/internal/testmodel"
	"github.com/gorun-dev/gorun/llm"
)

const llama3BOS = "<|begin_of_text|>"

// llama3ChatFile writes a tiny random GPT-2 with Llama 3 Instruct's control tokens, BOS rule
// and chat template (chat/testdata's) and returns its path and the template.
func llama3ChatFile(t *testing.T) (string, string) {
	t.Helper()
	src, err := os.ReadFile("chat/testdata/templates/llama3.jinja")
	if err != nil {
		t.Fatal(err)
	}
	c, _ := testmodel.Preset("tiny")
	c.NCtx = 512
	c.Chat = testmodel.Llama3Chat(string(src))
	p := filepath.Join(t.TempDir(), "llama3-chat.gguf")
	if err := testmodel.Write(p, c); err != nil {
		t.Fatal(err)
	}
	return p, string(src)
}

// verbosePrompts are the texts --verbose-prompt printed, in order.
func verbosePrompts(t *testing.T, stderr string) []string {
	t.Helper()
	var out []string
	for _, l := range strings.Split(stderr, "\n") {
		if q, ok := strings.CutPrefix(l, "prompt: "); ok {
			s, err := strconv.Unquote(q)
			if err != nil {
				t.Fatalf("prompt line %q: %v", l, err)
			}
			out = append(out, s)
		}
	}
	return out
}

// -cnv with a model that has a chat template: the first turn's prompt is Hugging Face's
// rendering of the system message and -p (without the BOS text: the tokenizer adds BOS), and
// the second turn feeds exactly what the rendering of the whole conversation adds to the
// context: the end of the answer's turn, which the model's end-of-turn token did not put
// into the context, and the user's next message with the assistant's header.
func TestConversationChatTemplate(t *testing.T) {
	model, src := llama3ChatFile(t)
	_, refs, err := chatrefs.Load("chat/testdata")
	if err != nil {
		t.Fatal(err)
	}
	ref := refs["llama3/system_user_gen"].Text
	if ref == nil {
		t.Fatal("no reference for llama3/system_user_gen")
	}
	tok, err := llm.LoadTokenizer(model)
	if err != nil {
		t.Fatal(err)
	}
	a, ok := tok.ID("a")
	if !ok {
		t.Fatal("no token a")
	}
	// The answers are "aaaaaa": the random model's greedy text, a raised logit aside, may be
	// white space, which the template trims.
	cmd := gorunProcess("-m", model, "-cnv", "-sys", "You are a helpful assistant.", "-p", "Hello!", "-n", "6", "--temp", "0", "-t", "1", "--verbose-prompt",
		"-l", fmt.Sprintf("%d+100", a))
	cmd.Stdin = strings.NewReader("And times 3?\n/exit\n")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, _ := cmd.Output()
	if code := cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("exit %d, stderr %q", code, stderr.String())
	}
	prompts := verbosePrompts(t, stderr.String())
	if len(prompts) != 2 {
		t.Fatalf("%d prompts fed, want 2: %q", len(prompts), stderr.String())
	}
	if want := strings.TrimPrefix(*ref, llama3BOS); prompts[0] != want {
		t.Errorf("first turn fed\n%q\nwant Hugging Face's render without its BOS text\n%q", prompts[0], want)
	}
	if strings.Contains(stderr.String(), "no chat template") {
		t.Errorf("the template was not used: %q", stderr.String())
	}
	// The answer as shown: between "> Hello!\n" and the next "\n> ".
	answer, ok := strings.CutPrefix(string(out), "> Hello!\n")
	answer, _, found := strings.Cut(answer, "\n> ")
	if !ok || !found {
		t.Fatalf("stdout %q", out)
	}
	tmpl, err := chat.New("llama3", src, chat.Options{BOS: llama3BOS, EOS: "<|end_of_text|>"})
	if err != nil {
		t.Fatal(err)
	}
	whole, err := tmpl.Render([]chat.Message{
		{Role: "system", Content: "You are a helpful assistant."}, {Role: "user", Content: "Hello!"},
		{Role: "assistant", Content: answer}, {Role: "user", Content: "And times 3?"},
	}, chat.RenderOptions{AddGenerationPrompt: true})
	if err != nil {
		t.Fatal(err)
	}
	if answer != "aaaaaa" {
		t.Fatalf("answer %q, want aaaaaa", answer)
	}
	if got := llama3BOS + prompts[0] + answer + prompts[1]; got != whole {
		t.Errorf("the context holds\n%q\nwant the whole conversation rendered\n%q", got, whole)
	}
	if !strings.HasPrefix(prompts[1], "<|eot_id|><|start_header_id|>user") {
		t.Errorf("second turn %q does not close the answer's turn first", prompts[1])
	}
}

// --chat-template replaces the file's (a built-in name, Jinja text, or a file), and a
// template that does not compile stops the command with its name.
func TestConversationChatTemplateOverride(t *testing.T) {
	model, _ := llama3ChatFile(t)
	run := func(args ...string) (int, string) {
		cmd := gorunProcess(append([]string{"-m", model, "-cnv", "-p", "Hi", "-n", "1", "--temp", "0", "-t", "1", "--verbose-prompt"}, args...)...)
		cmd.Stdin = strings.NewReader("")
		var stderr strings.Builder
		cmd.Stderr = &stderr
		cmd.Run()
		return cmd.ProcessState.ExitCode(), stderr.String()
	}
	code, errs := run("--chat-template", "chatml")
	if want := strconv.Quote("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n"); code != 0 || !strings.Contains(errs, "prompt: "+want) {
		t.Errorf("chatml: exit %d, stderr %q, want the prompt %s", code, errs, want)
	}
	file := filepath.Join(t.TempDir(), "t.jinja")
	os.WriteFile(file, []byte("{% for m in messages %}[{{ m['role'] }}] {{ m['content'] }}\n{% endfor %}>"), 0o644)
	code, errs = run("--chat-template-file", file)
	if want := strconv.Quote("[user] Hi\n>"); code != 0 || !strings.Contains(errs, "prompt: "+want) {
		t.Errorf("--chat-template-file: exit %d, stderr %q, want the prompt %s", code, errs, want)
	}
	code, errs = run("--chat-template", "{% for %}")
	if code != 1 || !strings.Contains(errs, "--chat-template") || !strings.Contains(errs, "compile") {
		t.Errorf("bad template: exit %d, stderr %q", code, errs)
	}
}

// A model without a chat template keeps the plain lines in -cnv, and says so.
func TestConversationWithoutChatTemplate(t *testing.T) {
	cmd := gorunProcess("-m", tinyFile(t), "-cnv", "-sys", "S.", "-p", "Hi", "-n", "1", "--temp", "0", "-t", "1", "--verbose-prompt")
	cmd.Stdin = strings.NewReader("")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	cmd.Run()
	errs := stderr.String()
	if want := "prompt: " + strconv.Quote("S.\n\nUser: Hi\nAssistant:"); cmd.ProcessState.ExitCode() != 0 || !strings.Contains(errs, want) || !strings.Contains(errs, "no chat template") {
		t.Errorf("exit %d, stderr %q, want %s and a notice", cmd.ProcessState.ExitCode(), errs, want)
	}
}

// An answer the template writes otherwise (Llama 3's trims it: here all spaces) is rewound
// out of the context, which then holds the rendering: the second turn feeds the empty
// answer's end of turn and the next message, not the spaces.
func TestConversationChatTemplateRewind(t *testing.T) {
	model, _ := llama3ChatFile(t)
	tok, err := llm.LoadTokenizer(model)
	if err != nil {
		t.Fatal(err)
	}
	space, ok := tok.ID("Ġ")
	if !ok {
		t.Fatal("no space token")
	}
	cmd := gorunProcess("-m", model, "-cnv", "-p", "Hi", "-n", "3", "--temp", "0", "-t", "1", "--verbose-prompt", "-l", fmt.Sprintf("%d+100", space))
	cmd.Stdin = strings.NewReader("Again\n")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, _ := cmd.Output()
	prompts := verbosePrompts(t, stderr.String())
	if len(prompts) != 2 || !strings.HasPrefix(string(out), "> Hi\n   \n> ") {
		t.Fatalf("stdout %q, prompts %q", out, prompts)
	}
	want := "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nAgain<|eot_id|><|start_header_id|>assistant<|end_header_id|>\n\n"
	if prompts[1] != want {
		t.Errorf("second turn fed\n%q\nwant\n%q", prompts[1], want)
	}
	// The context before the second turn: BOS and the first turn's tokens, not the spaces.
	first := len(tok.Encode(prompts[0])) + 1
	if wantLine := fmt.Sprintf("after %d in the context", first); !strings.Contains(stderr.String(), wantLine) {
		t.Errorf("stderr %q lacks %q: the answer's spaces were not rewound", stderr.String(), wantLine)
	}
}
