package llm

import (
	"context"
	"encoding/json"
	"math"
	"math/rand/v2"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/grammar"
)

// boundedJSON is a JSON grammar whose language is finite (strings of at most 12 characters,
// at most 3 members, values nested 2 deep), so every generation under it completes within
// the tiny model's context.
const boundedJSON = `
root   ::= "{" ws (member ("," ws member){0,2})? "}"
member ::= str ":" ws inner
inner  ::= scalar | "[" ws (scalar ("," ws scalar){0,2})? "]" ws | "{" ws (str ":" ws scalar ("," ws str ":" ws scalar){0,2})? "}" ws
scalar ::= str | num | "true" ws | "false" ws | "null" ws
str    ::= "\"" ([^"\\\x00-\x1F] | "\\" ["\\/bfnrt]){0,12} "\"" ws
num    ::= "-"? ([0-9] | [1-9] [0-9]{1,5}) ("." [0-9]{1,4})? ws
ws     ::= " "?
`

func generateWith(t *testing.T, m *Model, prompt string, opts GenerateOptions) (string, Stats) {
	t.Helper()
	s, err := m.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var b strings.Builder
	st, err := s.Generate(context.Background(), prompt, opts, func(p string) error { b.WriteString(p); return nil })
	if err != nil {
		t.Fatalf("%q: %v", prompt, err)
	}
	return b.String(), st
}

// A yes/no grammar yields only "yes" or "no", and generation stops there (the grammar is
// complete and nothing may follow).
func TestGrammarYesNo(t *testing.T) {
	m := loadFixtureModel(t, "gpt2-tiny-f16.gguf", Options{Threads: 2})
	g, err := grammar.Parse(`root ::= "yes" | "no"`)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]int{}
	for seed := uint64(1); seed <= 30; seed++ {
		opts := GenerateOptions{MaxTokens: 20, Sample: SampleOptions{Temperature: 1, TopK: NoTopK, TopP: 1, MinP: NoMinP, Seed: seed, Grammar: g}}
		text, st := generateWith(t, m, "Is the lamp lit? Answer:", opts)
		if text != "yes" && text != "no" {
			t.Fatalf("seed %d: %q", seed, text)
		}
		if st.Stop != StopGrammar {
			t.Fatalf("seed %d: stop %q, want %q", seed, st.Stop, StopGrammar)
		}
		seen[text]++
	}
	greedy, _ := generateWith(t, m, "Is the lamp lit? Answer:", GenerateOptions{MaxTokens: 20, Sample: SampleOptions{Grammar: g}})
	t.Logf("sampled %v; greedy %q", seen, greedy)
	if greedy != "yes" && greedy != "no" {
		t.Fatalf("greedy: %q", greedy)
	}
}

// Under a JSON grammar, every seed at temperature 1 gives valid JSON: the tiny model (which
// never saw JSON) is forced through the grammar until it completes.
func TestGrammarJSONSeeds(t *testing.T) {
	m := loadFixtureModel(t, "gpt2-tiny-f16.gguf", Options{Threads: 2})
	g, err := grammar.Parse(boundedJSON)
	if err != nil {
		t.Fatal(err)
	}
	seeds := 100
	if testing.Short() {
		seeds = 10
	}
	for seed := 1; seed <= seeds; seed++ {
		opts := GenerateOptions{MaxTokens: NoLimit, Sample: SampleOptions{Temperature: 1, Seed: uint64(seed), Grammar: g}}
		text, st := generateWith(t, m, "The dictionary entry, as JSON:", opts)
		if st.Stop != StopGrammar && st.Stop != StopEOS {
			t.Fatalf("seed %d: stop %q after %q", seed, st.Stop, text)
		}
		if !json.Valid([]byte(text)) {
			t.Fatalf("seed %d: invalid JSON %q", seed, text)
		}
		if seed <= 3 {
			t.Logf("seed %d (%s): %s", seed, st.Stop, text)
		}
	}
}

// The generic JSON grammar (response_format json_object): each step's text stays a prefix the
// matcher accepts, and a completed text is valid JSON.
func TestGrammarGenericJSON(t *testing.T) {
	m := loadFixtureModel(t, "gpt2-tiny-f16.gguf", Options{Threads: 2})
	g, err := grammar.Parse(grammar.JSONGrammar())
	if err != nil {
		t.Fatal(err)
	}
	complete := 0
	for seed := uint64(1); seed <= 10; seed++ {
		opts := GenerateOptions{MaxTokens: 200, Sample: SampleOptions{Temperature: 1, Seed: seed, Grammar: g}}
		text, st := generateWith(t, m, "JSON:", opts)
		switch st.Stop {
		case StopEOS, StopGrammar:
			complete++
			if !json.Valid([]byte(text)) {
				t.Fatalf("seed %d: completed but invalid JSON %q", seed, text)
			}
		case StopLength:
			if err := g.NewMatcher().Accept([]byte(text)); err != nil {
				t.Fatalf("seed %d: the text is not a prefix of the grammar: %v", seed, err)
			}
		default:
			t.Fatalf("seed %d: stop %q", seed, st.Stop)
		}
	}
	t.Logf("%d of 10 completed", complete)
}

// The grammar stage picks exactly the token that masking every refused token (logit -Inf)
// before the unconstrained chain picks, for greedy, top-k and full-vocabulary sampling.
func TestGrammarEqualsFullMask(t *testing.T) {
	m := loadFixtureModel(t, "gpt2-tiny-f16.gguf", Options{Threads: 2})
	v := m.grammarVocab()
	g, err := grammar.Parse(`root ::= [a-z ]* "." | "{" [0-9]+ "}"`)
	if err != nil {
		t.Fatal(err)
	}
	n := v.Size()
	rng := rand.New(rand.NewPCG(1, 2))
	logits := make([]float32, n)
	allowed := make([]bool, n)
	prefixes := []string{"", "ab", "{1", " x"}
	for trial := range 200 {
		for i := range logits {
			logits[i] = float32(rng.NormFloat64() * 3)
		}
		opts := []SampleOptions{Greedy, {Temperature: 0.9, Seed: 7}, {Temperature: 1.2, TopK: NoTopK, TopP: 1, MinP: NoMinP, Seed: 9}, {Temperature: 1, TopK: 5, Seed: 3}}[trial%4]
		opts.Seed += uint64(trial)
		prefix := prefixes[trial%len(prefixes)]

		opts.Grammar = g
		s := m.NewSampler(opts) // three steps in a row: a state seen again uses its cached list
		if err := s.gram.m.Accept([]byte(prefix)); err != nil {
			t.Fatal(err)
		}
		mt := g.NewMatcher()
		if err := mt.Accept([]byte(prefix)); err != nil {
			t.Fatal(err)
		}
		for step := range 3 {
			if mt.Done() {
				break
			}
			if _, err := mt.Mask(v, true, allowed); err != nil {
				t.Fatal(err)
			}
			ban := map[int32]float32{}
			for i, ok := range allowed {
				if !ok {
					ban[int32(i)] = float32(math.Inf(-1))
				}
			}
			ref := opts
			ref.Grammar, ref.LogitBias = nil, ban
			pos := uint64(trial*3 + step)
			want, err := NewSampler(ref, n).SampleAt(logits, nil, pos)
			if err != nil {
				t.Fatal(err)
			}
			if trial%2 == 1 { // the state's set ready, as a GPU step leaves it (topKOfAllowed)
				if err := s.gram.m.Prepare(v, s.gram.allowEOG); err != nil {
					t.Fatal(err)
				}
			}
			got, err := s.SampleAt(logits, nil, pos)
			if err != nil {
				t.Fatal(err)
			}
			if got != want {
				t.Fatalf("trial %d step %d (%+v, after %q): grammar stage %d, full mask %d", trial, step, opts, prefix, got, want)
			}
			if err := mt.AcceptToken(v, got); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// topKOf gives exactly the k first candidates of the sampler's order (logit, then id), sorted,
// ties included, whether its sampled threshold lets enough through or it falls back.
func TestTopKOf(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for trial := range 400 {
		n := 1 + rng.IntN(3000)
		if trial%4 == 0 {
			n = 4096 + rng.IntN(60000)
		}
		logits := make([]float32, n)
		for i := range logits {
			switch trial % 3 {
			case 0:
				logits[i] = float32(rng.IntN(1 + trial%50)) // many ties
			case 1:
				logits[i] = float32(rng.NormFloat64())
			default: // sorted runs: a sample of every stride-th logit misses the top
				logits[i] = float32(i % 977)
			}
		}
		want := make([]candidate, n)
		for i, l := range logits {
			want[i] = candidate{id: int32(i), logit: l}
		}
		sortDesc(want)
		k := 1 + rng.IntN(min(n, 300))
		got := topKOf(make([]candidate, n), make([]int32, n), logits, k)
		if len(got) != k {
			t.Fatalf("n %d k %d: %d candidates", n, k, len(got))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Fatalf("n %d k %d: position %d is %+v, want %+v", n, k, i, got[i], want[i])
			}
		}
	}
}

// The second look further down the order (when many of the most likely tokens are allowed
// but not k of them) gives the top k of the allowed tokens, as the full mask does.
func TestGrammarWideLook(t *testing.T) {
	m := loadFixtureModel(t, "gpt2-tiny-f16.gguf", Options{Threads: 2})
	v := m.grammarVocab()
	g, err := grammar.Parse(`root ::= [a-z]+`)
	if err != nil {
		t.Fatal(err)
	}
	n := v.Size()
	allowed := make([]bool, n)
	if _, err := g.NewMatcher().Mask(v, false, allowed); err != nil {
		t.Fatal(err)
	}
	var yes, no []int32
	for id, ok := range allowed {
		if ok {
			yes = append(yes, int32(id))
		} else {
			no = append(no, int32(id))
		}
	}
	// Ranks 0-223: 30 allowed among refused ones; below: one allowed in ten.
	logits := make([]float32, n)
	for i := range logits {
		logits[i] = -100
	}
	rank := float32(1e4)
	put := func(id int32) { logits[id] = rank; rank-- }
	for i := range 224 {
		if i%7 == 3 && len(yes) > 0 && i/7 < 30 {
			put(yes[0])
			yes = yes[1:]
		} else {
			put(no[0])
			no = no[1:]
		}
	}
	for i := range 2000 {
		if i%10 == 0 {
			put(yes[0])
			yes = yes[1:]
		} else {
			put(no[0])
			no = no[1:]
		}
	}
	const k = 40
	stage := &grammarStage{m: g.NewMatcher(), v: v}
	got, err := stage.topAllowed(make([]candidate, n), make([]int32, n), logits, k)
	if err != nil {
		t.Fatal(err)
	}
	want := make([]candidate, 0, n)
	for id, ok := range allowed {
		if ok {
			want = append(want, candidate{id: int32(id), logit: logits[id]})
		}
	}
	want = topK(want, k)
	if len(got) != k {
		t.Fatalf("%d candidates", len(got))
	}
	for i := range got {
		if got[i].id != want[i].id {
			t.Fatalf("candidate %d: %d, want %d", i, got[i].id, want[i].id)
		}
	}
	if _, cached := stage.m.CachedAllowed(v, false); cached {
		t.Error("the wide look walked the trie")
	}
}

// With the next mask computed in the background during each step (as on a GPU), generation
// gives the same text as without, greedy and sampled; -race checks the hand-over.
func TestGrammarPreparedDuringStep(t *testing.T) {
	m := loadFixtureModel(t, "gpt2-tiny-f16.gguf", Options{Threads: 2})
	g, err := grammar.Parse(boundedJSON)
	if err != nil {
		t.Fatal(err)
	}
	for seed := uint64(0); seed < 6; seed++ {
		opts := GenerateOptions{MaxTokens: 40, Sample: SampleOptions{Temperature: 0.9, TopK: 40, Seed: seed, Grammar: g}}
		if seed == 0 {
			opts.Sample = SampleOptions{Grammar: g}
		}
		m.onGPU = false
		want, _ := generateWith(t, m, "Data:", opts)
		m.onGPU = true
		got, _ := generateWith(t, m, "Data:", opts)
		m.onGPU = false
		if got != want {
			t.Fatalf("seed %d: %q with the mask prepared during the step, %q without", seed, got, want)
		}
	}
}
