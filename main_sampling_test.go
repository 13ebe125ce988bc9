package main

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/internal/fixtures"
	"github.com/gorun-dev/gorun/llm"
)

// llama.cpp's "off" values of the sampling flags keep their meaning: --top-k 0 keeps every token (as --top-k of the vocabulary
// size), --repeat-last-n 0 turns the penalty off (as --repeat-penalty 1).
func TestSamplingFlagsOff(t *testing.T) {
	tiny := tinyFile(t) // a 512-token vocabulary
	gen := func(args ...string) string {
		t.Helper()
		base := []string{"-m", tiny, "-p", "a b c", "-n", "24", "--temp", "1.5", "--seed", "7", "--ignore-eos", "--no-display-prompt", "-t", "2"}
		code, out, errs := gorun(append(base, args...)...)
		if code != 0 {
			t.Fatalf("%v: exit %d: %s", args, code, errs)
		}
		return out
	}
	if a, b := gen("--top-k", "0", "--top-p", "1", "--min-p", "0.01"), gen("--top-k", "512", "--top-p", "1", "--min-p", "0.01"); a != b {
		t.Errorf("--top-k 0 %q differs from --top-k 512 %q", a, b)
	}
	if a, b := gen("--top-k", "0", "--top-p", "1", "--min-p", "0.01"), gen("--top-k", "40", "--top-p", "1", "--min-p", "0.01"); a == b {
		t.Errorf("--top-k 0 gives the text of --top-k 40: %q", a)
	}
	if a, b := gen("--repeat-penalty", "1.5", "--repeat-last-n", "0"), gen("--repeat-penalty", "1"); a != b {
		t.Errorf("--repeat-last-n 0 %q differs from no penalty %q", a, b)
	}
}

// Issue 15 item 1: the CLI, the server and the library generate with one loop and one sampler
// chain, so the same prompt, seed, penalties and logit bias give the same text through all three.
//
// The CLI counts the frequency and presence penalties over the last --repeat-last-n tokens of
// the context, prompt included (llama.cpp's), the server over the generated tokens (OpenAI's).
// Here the bias bans the prompt's tokens, so the two counts differ only in tokens whose logit
// is -Inf anyway, and --repeat-last-n -1 makes both windows the whole generation.
func TestSameTextCLIServerLibrary(t *testing.T) {
	model := fixtures.Path(t, "gpt2-tiny-f16.gguf")
	const prompt, n, seed = "The capital of France is", 40, 42
	m, err := llm.Load(model, llm.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	tok := m.Tokenizer()
	bias := map[int32]float32{tok.Encode(" the")[0]: 1.5}
	for _, id := range tok.Encode(prompt) {
		bias[id] = float32(math.Inf(-1))
	}
	// The command's options, as a library user writes them: DefaultSampling is what the
	// command's options left out mean.
	sample := llm.DefaultSampling()
	sample.Temperature, sample.Seed, sample.RepeatPenalty, sample.RepeatLastN = 0.9, seed, 1.3, llm.WholeContext
	sample.FrequencyPenalty, sample.PresencePenalty, sample.LogitBias = 0.5, 0.4, bias
	library := func(o llm.SampleOptions) string {
		t.Helper()
		sess, err := m.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		var b strings.Builder
		if _, err := sess.Generate(context.Background(), prompt, llm.GenerateOptions{MaxTokens: n, IgnoreEOS: true, Sample: o},
			func(s string) error { b.WriteString(s); return nil }); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	lib := library(sample)

	args := []string{"-m", model, "-p", prompt, "-n", strconv.Itoa(n), "--ignore-eos", "--no-display-prompt", "-t", "2",
		"--temp", "0.9", "--seed", strconv.Itoa(seed), "--repeat-penalty", "1.3", "--repeat-last-n", "-1",
		"--frequency-penalty", "0.5", "--presence-penalty", "0.4"}
	jsonBias := map[string]float64{}
	for id, b := range bias {
		args = append(args, "-l", fmt.Sprintf("%d%+g", id, b))  // 1234+1.5, 5678-inf
		jsonBias[strconv.Itoa(int(id))] = max(float64(b), -100) // the API's -100 bans a token
	}
	code, cli, errs := gorun(args...)
	if code != 0 {
		t.Fatalf("gorun: exit %d: %s", code, errs)
	}

	url, stop := serveFor(t, "-m", model)
	defer stop()
	body, _ := json.Marshal(map[string]any{"prompt": prompt, "max_tokens": n, "ignore_eos": true, "temperature": 0.9, "seed": seed,
		"repeat_penalty": 1.3, "repeat_last_n": -1, "frequency_penalty": 0.5, "presence_penalty": 0.4, "logit_bias": jsonBias})
	server := completionText(t, url, string(body))

	if cli != lib || server != lib {
		t.Errorf("same seed, penalties and bias, three texts:\nlibrary %q\ncli     %q\nserver  %q", lib, cli, server)
	}
	if ids := tok.Encode(lib); len(ids) < n/2 {
		t.Errorf("library text %q: %d tokens, want about %d", lib, len(ids), n)
	}
	// The penalties and the bias are at work: each changes the text of the same seed.
	plain := sample
	plain.FrequencyPenalty, plain.PresencePenalty, plain.RepeatPenalty, plain.LogitBias = 0, 0, 1, nil
	noBias := sample
	noBias.LogitBias = nil
	for name, o := range map[string]llm.SampleOptions{"no penalties or bias": plain, "no bias": noBias} {
		if s := library(o); s == lib {
			t.Errorf("%s gives the same text %q: the test shows nothing", name, s)
		}
	}
}

// Issue 21 item 8: one meaning per value. 0 turns top-k, min-p and the penalty window off and
// seed 0 is a seed like any other, in the command, the server and the library alike, so a
// command line written as SampleOptions gives the same text.
func TestZeroMeansTheSameEverywhere(t *testing.T) {
	model := fixtures.Path(t, "gpt2-tiny-f16.gguf")
	const prompt, n = "And God said", 24
	m, err := llm.Load(model, llm.Options{Threads: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer m.Close()
	library := func(o llm.SampleOptions) string {
		t.Helper()
		sess, err := m.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		defer sess.Close()
		var b strings.Builder
		if _, err := sess.Generate(context.Background(), prompt, llm.GenerateOptions{MaxTokens: n, IgnoreEOS: true, Sample: o},
			func(s string) error { b.WriteString(s); return nil }); err != nil {
			t.Fatal(err)
		}
		return b.String()
	}
	// TopK, MinP, RepeatLastN and Seed left at zero.
	lib := library(llm.SampleOptions{Temperature: 1.3, TopP: 0.95, RepeatPenalty: 1.5})
	code, cli, errs := gorun("-m", model, "-p", prompt, "-n", strconv.Itoa(n), "--ignore-eos", "--no-display-prompt", "-t", "2",
		"--temp", "1.3", "--top-k", "0", "--min-p", "0", "--repeat-last-n", "0", "--repeat-penalty", "1.5", "--seed", "0")
	if code != 0 {
		t.Fatalf("gorun: exit %d: %s", code, errs)
	}
	url, stop := serveFor(t, "-m", model)
	defer stop()
	server := completionText(t, url, fmt.Sprintf(`{"prompt":%q,"max_tokens":%d,"ignore_eos":true,"temperature":1.3,"top_k":0,"min_p":0,"repeat_last_n":0,"repeat_penalty":1.5,"seed":0}`, prompt, n))
	if cli != lib || server != lib {
		t.Errorf("the same zeros, three texts:\nlibrary %q\ncli     %q\nserver  %q", lib, cli, server)
	}
	// The zeros are "off", not the defaults: llama.cpp's filters give another text for seed 0.
	d := llm.DefaultSampling()
	d.Temperature, d.RepeatPenalty, d.Seed = 1.3, 1.5, 0
	if lib == library(d) {
		t.Errorf("zero filters give the text of DefaultSampling's: %q", lib)
	}
	// An absent seed and -1 are random, everywhere: two requests differ.
	if a, b := completionText(t, url, fmt.Sprintf(`{"prompt":%q,"max_tokens":%d,"temperature":1.3,"top_k":0,"seed":-1}`, prompt, n)),
		completionText(t, url, fmt.Sprintf(`{"prompt":%q,"max_tokens":%d,"temperature":1.3,"top_k":0}`, prompt, n)); a == b {
		t.Errorf("seed -1 and no seed gave one text %q", a)
	}
}
