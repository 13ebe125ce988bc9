package llm

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gorun-dev/gorun/internal/stopstr"
	"github.com/gorun-dev/gorun/internal/testmodel"
	"github.com/gorun-dev/gorun/quant"
)

// genText generates with s and returns the text.
func genText(t *testing.T, s *Session, prompt string, opts GenerateOptions) (string, Stats) {
	t.Helper()
	var sb strings.Builder
	st, err := s.Generate(context.Background(), prompt, opts, func(p string) error { sb.WriteString(p); return nil })
	if err != nil {
		t.Fatal(err)
	}
	return sb.String(), st
}

// Resumed generation: N calls of k tokens give the same text and Pos as one call of N*k, for
// greedy and for seeded sampling, on a random model and on the trained fixture.
func TestResumeEqualsOneCall(t *testing.T) {
	models := map[string]*Model{"random": tinyModel(t, nil, Options{Threads: 2})}
	if p, err := fixturePath("gpt2-tiny-f16.gguf"); err == nil {
		m, err := Load(p, Options{Threads: 2})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { m.Close() })
		models["fixture"] = m
	}
	seeded := DefaultSampling()
	seeded.Seed = 1234
	seeded.RepeatPenalty = 1.3 // the penalty window spans the calls too
	for name, m := range models {
		for _, sample := range []SampleOptions{Greedy, seeded} {
			one, err := m.NewSession()
			if err != nil {
				t.Fatal(err)
			}
			opts := GenerateOptions{MaxTokens: 20, Sample: sample, IgnoreEOS: true}
			want, st := genText(t, one, "In the beginning God created", opts)
			if st.Tokens != 20 || st.Stop != StopLength {
				t.Fatalf("%s: one call: %+v", name, st)
			}
			for _, k := range []int{1, 4, 10} {
				s, _ := m.NewSession()
				opts.MaxTokens = k
				got, _ := genText(t, s, "In the beginning God created", opts)
				for i := 1; i < 20/k; i++ {
					more, st := genText(t, s, "", opts)
					if st.Tokens != k {
						t.Fatalf("%s: call %d generated %d tokens", name, i, st.Tokens)
					}
					got += more
				}
				if got != want || s.Pos() != one.Pos() || !slices.Equal(s.Tokens(), one.Tokens()) {
					t.Errorf("%s, seed %d, %d calls of %d: %q at pos %d; one call: %q at pos %d", name, sample.Seed, 20/k, k, got, s.Pos(), want, one.Pos())
				}
			}
			// Stopped by the callback's error after about 7 tokens, then resumed: the same text.
			s, _ := m.NewSession()
			var sb strings.Builder
			errStop := errors.New("enough")
			st7, err := s.Generate(context.Background(), "In the beginning God created", GenerateOptions{MaxTokens: 20, Sample: sample, IgnoreEOS: true},
				func(p string) error {
					sb.WriteString(p)
					if s.Pos() >= st.PromptTokens+7 {
						return errStop
					}
					return nil
				})
			if !errors.Is(err, errStop) || st7.Stop != StopCaller || st7.Tokens < 7 || st7.Tokens >= 20 {
				t.Fatalf("%s: stopped by the callback: %+v, %v", name, st7, err)
			}
			rest, _ := genText(t, s, "", GenerateOptions{MaxTokens: 20 - st7.Tokens, Sample: sample, IgnoreEOS: true})
			if sb.String()+rest != want || s.Pos() != one.Pos() {
				t.Errorf("%s, seed %d: resumed after a callback error: %q at pos %d; one call: %q at pos %d", name, sample.Seed, sb.String()+rest, s.Pos(), want, one.Pos())
			}
			if one.Pos() != st.PromptTokens+20 {
				t.Errorf("%s: pos %d after a %d-token prompt and 20 tokens", name, one.Pos(), st.PromptTokens)
			}
		}
	}
}

func fixturePath(name string) (string, error) {
	dir := os.Getenv("GORUN_FIXTURES")
	if dir == "" {
		dir = filepath.Join("..", "..", "shared", "fixtures")
	}
	p := filepath.Join(dir, name)
	_, err := os.Stat(p)
	return p, err
}

// Zero values mean what the gorun command's 0 means: a zero Temperature is greedy, zero
// filters are off, MaxTokens 0 generates nothing and NoLimit runs to a full context; RandomSeed
// is random and reported, and seed 0 is a seed like any other.
func TestZeroValues(t *testing.T) {
	m := tinyModel(t, func(c *testmodel.Config) { c.NCtx = 256 }, Options{Threads: 2})
	s, _ := m.NewSession()
	txt, st := genText(t, s, "a b", GenerateOptions{IgnoreEOS: true})
	if n := len(m.Tokenize("a b", true)); st.Tokens != 0 || txt != "" || st.Stop != StopLength || s.Pos() != n {
		t.Errorf("MaxTokens 0: %d tokens %q, stop %q, pos %d (want nothing generated after the prompt's %d tokens)", st.Tokens, txt, st.Stop, s.Pos(), n)
	}
	s.Reset()
	_, st = genText(t, s, "a b", GenerateOptions{MaxTokens: NoLimit, IgnoreEOS: true})
	if st.Stop != StopContextFull || s.Pos() != 256 {
		t.Errorf("NoLimit: %d tokens, stop %q, pos %d", st.Tokens, st.Stop, s.Pos())
	}
	if st.Seed != 0 {
		t.Errorf("greedy decoding reports seed %d (it draws nothing)", st.Seed)
	}
	gen := func(o SampleOptions) (string, Stats) {
		s.Reset()
		return genText(t, s, "a b", GenerateOptions{MaxTokens: 16, IgnoreEOS: true, Sample: o})
	}
	// Zero filters are off: with TopK 1 (only the most likely token) the text is greedy's, and
	// the zero filters added to it change nothing; DefaultSampling's filters do filter.
	greedy, _ := gen(Greedy)
	if top1, _ := gen(SampleOptions{Temperature: 1, TopK: 1}); top1 != greedy {
		t.Errorf("TopK 1: %q, greedy %q", top1, greedy)
	}
	zero, _ := gen(SampleOptions{Temperature: 1, Seed: 5})
	off, _ := gen(SampleOptions{Temperature: 1, Seed: 5, TopK: NoTopK, TopP: 1, MinP: NoMinP, RepeatPenalty: 1, RepeatLastN: 0})
	if zero != off {
		t.Errorf("zero filters %q, filters off %q", zero, off)
	}
	// Seed 0 is reproducible; RandomSeed varies and reports the seed it drew.
	s0a, st0 := gen(SampleOptions{Temperature: 1})
	s0b, _ := gen(SampleOptions{Temperature: 1})
	if s0a != s0b || st0.Seed != 0 {
		t.Errorf("seed 0: %q then %q, reported seed %d", s0a, s0b, st0.Seed)
	}
	texts := map[string]bool{}
	var seeds []uint64
	for i := 0; i < 4; i++ {
		o := DefaultSampling()
		o.Temperature = 1
		txt, st := gen(o)
		texts[txt] = true
		if st.Seed == RandomSeed {
			t.Fatal("random seed not reported")
		}
		seeds = append(seeds, st.Seed)
		// The reported seed reproduces the text.
		o.Seed = st.Seed
		if again, _ := gen(o); again != txt {
			t.Errorf("seed %d: %q, then %q", st.Seed, txt, again)
		}
	}
	if len(texts) < 2 {
		t.Errorf("random seeds %v gave one text %v", seeds, texts)
	}
}

// NaN, Inf and out-of-range sampling options are refused with an error naming the option.
func TestInvalidOptions(t *testing.T) {
	m := tinyModel(t, nil, Options{Threads: 2})
	s, _ := m.NewSession()
	nan, inf := float32(math.NaN()), float32(math.Inf(1))
	for _, c := range []struct {
		o    SampleOptions
		name string
	}{
		{SampleOptions{Temperature: nan}, "Temperature"},
		{SampleOptions{Temperature: inf}, "Temperature"},
		{SampleOptions{Temperature: 1, TopP: nan}, "TopP"},
		{SampleOptions{TopP: 1.5}, "TopP"},
		{SampleOptions{MinP: -inf}, "MinP"},
		{SampleOptions{MinP: 2}, "MinP"},
		{SampleOptions{RepeatPenalty: inf}, "RepeatPenalty"},
		{SampleOptions{RepeatPenalty: -1}, "RepeatPenalty"},
	} {
		_, err := s.Generate(context.Background(), "a", GenerateOptions{Sample: c.o}, func(string) error { return nil })
		if !errors.Is(err, ErrInvalidOption) || !strings.Contains(err.Error(), c.name) {
			t.Errorf("%+v: %v", c.o, err)
		}
	}
	if s.Pos() != 0 {
		t.Errorf("refused generations left %d tokens", s.Pos())
	}
	if _, err := s.Generate(context.Background(), "a", GenerateOptions{Stop: []string{""}}, func(string) error { return nil }); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("empty stop string: %v", err)
	}
}

// Close twice, use after Close: errors matching ErrClosed, never a crash.
func TestCloseAndUseAfterClose(t *testing.T) {
	m := tinyModel(t, nil, Options{Threads: 2})
	s, _ := m.NewSession()
	genText(t, s, "a b", GenerateOptions{MaxTokens: 3})
	var saved bytes.Buffer
	if err := s.Save(&saved); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Fatal(err)
	}
	if err := m.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
	check := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrClosed) {
			t.Errorf("%s after Close: %v", what, err)
		}
	}
	_, err := m.NewSession()
	check("NewSession", err)
	_, err = s.Eval([]int32{1})
	check("Eval", err)
	_, err = s.Logits(context.Background())
	check("Logits", err)
	check("EvalAll", s.EvalAll([]int32{1}, make([]float32, m.Hparams().NVocab)))
	st, err := s.Generate(context.Background(), "x", GenerateOptions{}, func(string) error { return nil })
	check("Generate", err)
	if st.Stop != StopClosed {
		t.Errorf("stop reason %q", st.Stop)
	}
	for _, err := range s.Stream(context.Background(), "", GenerateOptions{}) {
		check("Stream", err)
	}
	check("Save", s.Save(&bytes.Buffer{}))
	_, err = m.LoadSession(&saved)
	check("LoadSession", err)
	_, err = s.Perplexity(context.Background(), testTokens, PerplexityOptions{Chunk: 8})
	check("Perplexity", err)
	// A closed session, of a live model.
	m2 := tinyModel(t, nil, Options{Threads: 2})
	s2, _ := m2.NewSession()
	s2.Close()
	s2.Close()
	_, err = s2.Eval([]int32{1})
	check("Eval on a closed session", err)
}

// Close while sessions generate: it stops them (ErrClosed) or lets them finish, then returns;
// run under -race.
func TestCloseDuringGeneration(t *testing.T) {
	for trial := 0; trial < 3; trial++ {
		m := tinyModel(t, func(c *testmodel.Config) { c.NCtx = 512 }, Options{Threads: 2})
		var wg sync.WaitGroup
		started := make(chan struct{}, 4)
		closing := make(chan struct{})
		errs := make([]error, 4)
		for i := range errs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				s, err := m.NewSession()
				if err != nil {
					errs[i] = err
					return
				}
				n := 0
				_, errs[i] = s.Generate(context.Background(), "a b c", GenerateOptions{MaxTokens: NoLimit, IgnoreEOS: true}, func(string) error {
					if n++; n == 2 {
						// Every session is mid-generation when Close comes: none can
						// finish its whole context first, however fast the kernels are.
						started <- struct{}{}
						<-closing
					}
					return nil
				})
			}()
		}
		for range 4 {
			<-started
		}
		close(closing)
		time.Sleep(time.Duration(trial) * time.Millisecond)
		if err := m.Close(); err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(time.Minute):
			t.Fatal("generations did not stop after Close")
		}
		for i, err := range errs {
			if !errors.Is(err, ErrClosed) {
				t.Errorf("trial %d, session %d: %v", trial, i, err)
			}
		}
	}
}

// Callers can tell the failures apart with errors.Is.
func TestTypedErrors(t *testing.T) {
	dir := t.TempDir()
	if _, err := Load(filepath.Join(dir, "missing.gguf"), Options{}); !errors.Is(err, fs.ErrNotExist) || errors.Is(err, ErrBadFile) {
		t.Errorf("missing file: %v", err)
	}
	garbage := filepath.Join(dir, "garbage.gguf")
	os.WriteFile(garbage, []byte("GGUF but not really a model file at all"), 0o644)
	if _, err := Load(garbage, Options{}); !errors.Is(err, ErrBadFile) {
		t.Errorf("garbage: %v", err)
	}
	// A valid GGUF of another architecture, and one with an unsupported tensor type.
	c, _ := testmodel.Preset("tiny")
	good := filepath.Join(dir, "tiny.gguf")
	if err := testmodel.Write(good, c); err != nil {
		t.Fatal(err)
	}
	orig, _ := os.ReadFile(good)
	edit := func(name string, f func(b []byte) []byte) string {
		p := filepath.Join(dir, name)
		os.WriteFile(p, f(bytes.Clone(orig)), 0o644)
		return p
	}
	llama := edit("llama.gguf", func(b []byte) []byte {
		i := bytes.Index(b, []byte("gpt2")) // general.architecture's value comes first
		copy(b[i:], "gptj")
		return b
	})
	if _, err := Load(llama, Options{}); !errors.Is(err, ErrUnsupportedArchitecture) {
		t.Errorf("architecture gptj: %v", err)
	}
	// A 1-D F32 tensor retyped I32: same size, a ggml type gorun does not compute with.
	i32 := edit("i32.gguf", func(b []byte) []byte {
		name := []byte("blk.0.attn_norm.weight")
		i := bytes.Index(b, name) + len(name) + 4 + 8 // n_dims u32, ne0 u64, then the type
		binary.LittleEndian.PutUint32(b[i:], uint32(quant.I32))
		return b
	})
	if _, err := Load(i32, Options{}); !errors.Is(err, ErrUnsupportedType) {
		t.Errorf("i32 weights: %v", err)
	}
	m := tinyModel(t, func(c *testmodel.Config) { c.NCtx = 8 }, Options{Threads: 2})
	s, _ := m.NewSession()
	if _, err := s.Eval(make([]int32, 9)); !errors.Is(err, ErrContextFull) {
		t.Errorf("9 tokens in 8: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := s.Generate(ctx, "a", GenerateOptions{}, func(string) error { return nil }); !errors.Is(err, ErrCancelled) || !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled: %v", err)
	}
	if _, err := s.EvalContext(ctx, []int32{1, 2}); !errors.Is(err, ErrCancelled) {
		t.Errorf("cancelled Eval: %v", err)
	}
	if s.Pos() != 0 {
		t.Errorf("cancelled calls left %d tokens", s.Pos())
	}
}

// Stop strings end generation even when they span tokens, and are never emitted.
func TestStopStrings(t *testing.T) {
	m := tinyModel(t, nil, Options{Threads: 2})
	s, _ := m.NewSession()
	var pieces []string
	var toks []int32
	opts := GenerateOptions{MaxTokens: 30, IgnoreEOS: true}
	for p, err := range s.Stream(context.Background(), "a b c", opts) {
		if err != nil {
			t.Fatal(err)
		}
		pieces = append(pieces, p.Text)
		toks = append(toks, p.Token)
	}
	full := strings.Join(pieces, "")
	// Stop strings made of the end of one piece and the start of a later one.
	tried := 0
	for i := 1; i+2 < len(pieces) && tried < 6; i++ {
		a, b := pieces[i], pieces[i+1]+pieces[i+2]
		if len(a) < 2 || len(b) < 2 {
			continue
		}
		stop := a[len(a)-1:] + b[:2]
		at := strings.Index(full, stop)
		tried++
		s.Reset()
		var got strings.Builder
		st, err := s.Generate(context.Background(), "a b c", GenerateOptions{MaxTokens: 30, IgnoreEOS: true, Stop: []string{"never generated", stop}},
			func(p string) error { got.WriteString(p); return nil })
		if err != nil {
			t.Fatal(err)
		}
		if got.String() != full[:at] || st.Stop != StopString || st.StopString != stop {
			t.Errorf("stop %q: got %q, stop %q %q; want %q", stop, got.String(), st.Stop, st.StopString, full[:at])
		}
	}
	if tried == 0 {
		t.Fatalf("no pieces to build a spanning stop string from: %q", pieces)
	}
	// Held-back text that turns out not to be a stop string is released.
	s.Reset()
	txt, st := genText(t, s, "a b c", GenerateOptions{MaxTokens: 30, IgnoreEOS: true, Stop: []string{full[len(full)-3:] + "\x00"}})
	if txt != full || st.Stop != StopLength {
		t.Errorf("text with an unmatched stop string: %q (%q), want %q", txt, st.Stop, full)
	}
	// Unit cases of the matcher, text fed in arbitrary pieces.
	for _, c := range []struct {
		pieces []string
		stops  []string
		want   string
	}{
		{[]string{"Hello ", "Us", "er", ": hi"}, []string{"User:"}, "Hello "},
		{[]string{"abc", "dUs", "e"}, []string{"User:"}, "abcdUse"},
		{[]string{"x", "yz"}, []string{"xyz", "y"}, ""},
		{[]string{"x", "yw"}, []string{"xyz", "y"}, "x"},
		{[]string{"aab"}, []string{"ab"}, "a"},
	} {
		sp := stopstr.Matcher{Stops: c.stops}
		var out string
		hit := false
		for _, p := range c.pieces {
			o, h, _ := sp.Add(p)
			out += o
			if hit = h; h {
				break
			}
		}
		if !hit {
			out += sp.TakeHeld()
		}
		if out != c.want {
			t.Errorf("%q with stops %q: %q, want %q", c.pieces, c.stops, out, c.want)
		}
	}
}

// Stream yields every token with its id and its log-probability under the model.
func TestStreamTokensAndLogProbs(t *testing.T) {
	m := tinyModel(t, nil, Options{Threads: 2})
	s, _ := m.NewSession()
	var ps []Piece
	for p, err := range s.Stream(context.Background(), "a b c", GenerateOptions{MaxTokens: 8, IgnoreEOS: true, LogProbs: true}) {
		if err != nil {
			t.Fatal(err)
		}
		ps = append(ps, p)
	}
	ctxToks := s.Tokens()
	if len(ps) != 8 || s.LastStats().Tokens != 8 || s.LastStats().Stop != StopLength {
		t.Fatalf("%d pieces, stats %+v", len(ps), s.LastStats())
	}
	n := len(ctxToks)
	V := m.Hparams().NVocab
	logits := batchLogits(t, m, ctxToks)
	for i, p := range ps {
		pos := n - 8 + i
		if p.Token != ctxToks[pos] {
			t.Errorf("piece %d: token %d, context has %d", i, p.Token, ctxToks[pos])
		}
		want := -nll(logits[(pos-1)*V:pos*V], p.Token)
		if math.Abs(float64(p.LogProb)-want) > 1e-5 || p.LogProb > 0 {
			t.Errorf("piece %d: log-probability %v, want %v", i, p.LogProb, want)
		}
	}
	// Breaking out of the loop stops generation; the session goes on from there.
	for range s.Stream(context.Background(), "", GenerateOptions{MaxTokens: 8, IgnoreEOS: true}) {
		break
	}
	if st := s.LastStats(); st.Tokens != 1 || st.Stop != StopCaller || s.Pos() != n+1 {
		t.Errorf("break: %+v, pos %d", st, s.Pos())
	}
}

// Save and LoadSession round-trip: the restored session continues exactly as the original;
// corrupted, truncated and mismatched data are refused.
func TestSaveLoadSession(t *testing.T) {
	m := tinyModel(t, nil, Options{Threads: 2})
	s, _ := m.NewSession()
	opts := GenerateOptions{MaxTokens: 10, IgnoreEOS: true, Sample: DefaultSampling()}
	opts.Sample.Temperature, opts.Sample.Seed = 0.9, 7
	genText(t, s, "a b c", opts)
	var buf bytes.Buffer
	if err := s.Save(&buf); err != nil {
		t.Fatal(err)
	}
	saved := bytes.Clone(buf.Bytes())
	want, _ := genText(t, s, "", opts)
	r, err := m.LoadSession(bytes.NewReader(saved))
	if err != nil {
		t.Fatal(err)
	}
	if r.Pos() != s.Pos()-10 {
		t.Errorf("restored pos %d", r.Pos())
	}
	if got, _ := genText(t, r, "", opts); got != want || !slices.Equal(r.Tokens(), s.Tokens()) {
		t.Errorf("restored session generates %q, the original %q", got, want)
	}
	// Restoring a fully evaluated session (logits recomputed) also continues the same way.
	s.Reset()
	genText(t, s, "x y", GenerateOptions{MaxTokens: 3})
	s.Eval([]int32{5})
	buf.Reset()
	s.Save(&buf)
	want, _ = genText(t, s, "", opts)
	r, err = m.LoadSession(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := genText(t, r, "", opts); got != want {
		t.Errorf("restored evaluated session generates %q, the original %q", got, want)
	}
	for i := 0; i < len(saved); i += 1 + len(saved)/50 {
		b := bytes.Clone(saved)
		b[i] ^= 0x20
		if _, err := m.LoadSession(bytes.NewReader(b)); err == nil {
			t.Errorf("byte %d corrupted: accepted", i)
		} else if !errors.Is(err, ErrBadFile) && !errors.Is(err, ErrSessionMismatch) {
			t.Errorf("byte %d corrupted: %v", i, err)
		}
	}
	for _, n := range []int{0, 5, 40, len(saved) - 1} {
		if _, err := m.LoadSession(bytes.NewReader(saved[:n])); !errors.Is(err, ErrBadFile) {
			t.Errorf("truncated to %d bytes: %v", n, err)
		}
	}
	other := tinyModel(t, func(c *testmodel.Config) { c.Seed = 2 }, Options{Threads: 2})
	if _, err := other.LoadSession(bytes.NewReader(saved)); !errors.Is(err, ErrSessionMismatch) {
		t.Errorf("other weights: %v", err)
	}
	wider := tinyModel(t, func(c *testmodel.Config) { c.NEmbd = 128 }, Options{Threads: 2})
	if _, err := wider.LoadSession(bytes.NewReader(saved)); !errors.Is(err, ErrSessionMismatch) {
		t.Errorf("other shape: %v", err)
	}
	short := tinyModel(t, nil, Options{Threads: 2, ContextLength: 8})
	if _, err := short.LoadSession(bytes.NewReader(saved)); !errors.Is(err, ErrSessionMismatch) {
		t.Errorf("shorter context: %v", err)
	}
}

// Rewind drops tokens; generating again from the same point gives the same text.
func TestRewind(t *testing.T) {
	m := tinyModel(t, nil, Options{Threads: 2})
	s, _ := m.NewSession()
	_, st := genText(t, s, "a b c", GenerateOptions{MaxTokens: 5, IgnoreEOS: true})
	mark := s.Pos()
	first, _ := genText(t, s, " d", GenerateOptions{MaxTokens: 12, IgnoreEOS: true})
	if err := s.Rewind(mark); err != nil {
		t.Fatal(err)
	}
	again, _ := genText(t, s, " d", GenerateOptions{MaxTokens: 12, IgnoreEOS: true})
	if again != first {
		t.Errorf("after Rewind: %q, first time %q", again, first)
	}
	if err := s.Rewind(s.Pos() + 1); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("rewind past the end: %v", err)
	}
	if err := s.Rewind(st.PromptTokens); err != nil || s.Pos() != st.PromptTokens {
		t.Errorf("rewind to the prompt: %v, pos %d", err, s.Pos())
	}
}

// lateCancel is a context cancelled while a step computes: armed, it answers Err's checks
// before the step (the loop's and sync's) and is cancelled from the next one on.
type lateCancel struct {
	context.Context
	armed atomic.Bool
	calls atomic.Int32
}

func (c *lateCancel) Err() error {
	if c.armed.Load() && c.calls.Add(1) > 2 {
		return context.Canceled
	}
	return nil
}

// Issue 21 item 13: a cancellation that comes while the next token computes (where Ctrl-C
// lands, mostly) emits no token after it.
func TestCancelDuringStepEmitsNothingMore(t *testing.T) {
	m := tinyModel(t, nil, Options{Threads: 2})
	s, _ := m.NewSession()
	ctx := &lateCancel{Context: context.Background()}
	pieces := 0
	st, err := s.GenerateTokens(ctx, "a b", GenerateOptions{MaxTokens: 16, IgnoreEOS: true}, func(Piece) error {
		pieces++
		ctx.armed.Store(true) // the user presses Ctrl-C as this token shows
		return nil
	})
	if !errors.Is(err, ErrCancelled) || st.Stop != StopCancelled || pieces != 1 || st.Tokens != 1 {
		t.Errorf("%d pieces, %d tokens, stop %q, %v; want the one token before the cancellation", pieces, st.Tokens, st.Stop, err)
	}
	// The session goes on from there.
	if _, st := genText(t, s, "", GenerateOptions{MaxTokens: 2, IgnoreEOS: true}); st.Tokens != 2 {
		t.Errorf("after the cancellation: %+v", st)
	}
}
