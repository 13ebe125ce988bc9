package llm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/gorun-dev/gorun/internal/testmodel"
)

// These tests run under -race: every exported method of Session and Model may be called from
// any goroutine at any time, and either waits (for a step boundary) or returns a typed error.

var discard = func(string) error { return nil }

// Session.Close from another goroutine while Generate runs: Generate stops with ErrClosed
// (StopClosed) at its next step, nothing panics, and the session stays closed.
func TestConcurrentCloseDuringGenerate(t *testing.T) {
	m := tinyModel(t, func(c *testmodel.Config) { c.NCtx = 512 }, Options{Threads: 2})
	for trial := range 12 {
		s, err := m.NewSession()
		if err != nil {
			t.Fatal(err)
		}
		started := make(chan struct{}, 1)
		type result struct {
			st  Stats
			err error
		}
		done := make(chan result, 1)
		go func() {
			n := 0
			st, err := s.Generate(context.Background(), "a b c", GenerateOptions{MaxTokens: NoLimit, IgnoreEOS: true}, func(string) error {
				if n++; n == 2 {
					started <- struct{}{}
				}
				return nil
			})
			done <- result{st, err}
		}()
		<-started
		time.Sleep(time.Duration(trial%4) * 100 * time.Microsecond) // land inside a step, or between steps
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		select {
		case r := <-done:
			if !errors.Is(r.err, ErrClosed) || r.st.Stop != StopClosed {
				t.Fatalf("trial %d: Generate after a concurrent Close: %+v, %v", trial, r.st, r.err)
			}
		case <-time.After(time.Minute):
			t.Fatalf("trial %d: Generate did not stop after Close", trial)
		}
		if _, err := s.Eval([]int32{1}); !errors.Is(err, ErrClosed) {
			t.Fatalf("Eval after Close: %v", err)
		}
	}
}

// Save from another goroutine while Generate runs: every snapshot loads (checksum included)
// and is a consistent state of the session: its tokens are a prefix of the final context, and
// greedy generation from it reproduces the tokens the original generated after that point.
func TestConcurrentSaveDuringGenerate(t *testing.T) {
	m := tinyModel(t, func(c *testmodel.Config) { c.NCtx = 1024 }, Options{Threads: 2})
	s, err := m.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	genDone := make(chan error, 1)
	started := make(chan struct{})
	go func() {
		first := true
		_, err := s.Generate(context.Background(), "a b c", GenerateOptions{MaxTokens: 1000, IgnoreEOS: true}, func(string) error {
			if first {
				close(started)
				first = false
			}
			return nil
		})
		genDone <- err
	}()
	<-started
	var saves [][]byte
	for range 10 {
		var buf bytes.Buffer
		if err := s.Save(slowWriter{&buf}); err != nil {
			t.Fatalf("Save during Generate: %v", err)
		}
		saves = append(saves, buf.Bytes())
		time.Sleep(time.Millisecond)
	}
	if err := <-genDone; err != nil {
		t.Fatal(err)
	}
	final := s.Tokens()
	bad := 0
	for i, b := range saves {
		r, err := m.LoadSession(bytes.NewReader(b))
		if err != nil {
			bad++
			t.Errorf("save %d of 10 does not load: %v", i, err)
			continue
		}
		toks := r.Tokens()
		if !slices.Equal(toks, final[:min(len(toks), len(final))]) {
			t.Errorf("save %d: its %d tokens are not a prefix of the context", i, len(toks))
			continue
		}
		k := min(4, len(final)-len(toks))
		if k == 0 {
			continue
		}
		if _, err := r.Generate(context.Background(), "", GenerateOptions{MaxTokens: k, IgnoreEOS: true}, discard); err != nil {
			t.Fatal(err)
		}
		if got := r.Tokens(); !slices.Equal(got, final[:len(got)]) {
			t.Errorf("save %d at %d tokens continues with %v, the original with %v", i, len(toks), got[len(toks):], final[len(toks):len(got)])
		}
		r.Close()
	}
	if bad > 0 {
		t.Errorf("%d of %d saves taken during Generate failed to load", bad, len(saves))
	}
}

// slowWriter is a writer that takes its time (a slow disk, a network), so that a Save spans
// several generation steps.
type slowWriter struct{ w *bytes.Buffer }

func (s slowWriter) Write(b []byte) (int, error) {
	time.Sleep(200 * time.Microsecond)
	return s.w.Write(b)
}

// While a Generate is inside its callback (a step boundary), from another goroutine: calls
// that change the context get ErrBusy; Save, Pos, Tokens and LastStats work; Close marks the
// session closed and the Generate then ends with ErrClosed.
func TestConcurrentBusyContract(t *testing.T) {
	m := tinyModel(t, nil, Options{Threads: 2})
	s, _ := m.NewSession()
	inside, resume := make(chan struct{}), make(chan struct{})
	genDone := make(chan error, 1)
	go func() {
		first := true
		_, err := s.Generate(context.Background(), "a b", GenerateOptions{MaxTokens: 20, IgnoreEOS: true}, func(string) error {
			if first {
				first = false
				close(inside)
				<-resume
			}
			return nil
		})
		genDone <- err
	}()
	<-inside
	busy := func(what string, err error) {
		t.Helper()
		if !errors.Is(err, ErrBusy) {
			t.Errorf("%s during Generate: %v, want ErrBusy", what, err)
		}
	}
	_, err := s.Generate(context.Background(), "x", GenerateOptions{MaxTokens: 2}, discard)
	busy("Generate", err)
	_, err = s.GenerateTokens(context.Background(), "x", GenerateOptions{MaxTokens: 2}, func(Piece) error { return nil })
	busy("GenerateTokens", err)
	for _, err := range s.Stream(context.Background(), "x", GenerateOptions{MaxTokens: 2}) {
		busy("Stream", err)
	}
	_, err = s.Eval([]int32{1})
	busy("Eval", err)
	_, err = s.Logits(context.Background())
	busy("Logits", err)
	busy("EvalLogits", s.EvalLogits([]int32{1, 2}, 0, make([]float32, 2*m.Hparams().NVocab)))
	busy("Rewind", s.Rewind(1))
	busy("Reset", s.Reset())
	_, err = s.Perplexity(context.Background(), testTokens, PerplexityOptions{Chunk: 8})
	busy("Perplexity", err)
	pos := s.Pos()
	if toks := s.Tokens(); len(toks) != pos || pos < 3 {
		t.Errorf("Pos %d, Tokens %v during Generate", pos, toks)
	}
	var buf bytes.Buffer
	if err := s.Save(&buf); err != nil {
		t.Errorf("Save during Generate's callback: %v", err)
	} else if r, err := m.LoadSession(&buf); err != nil || r.Pos() != pos {
		t.Errorf("the snapshot: %v", err)
	}
	_ = s.LastStats()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	close(resume)
	if err := <-genDone; !errors.Is(err, ErrClosed) {
		t.Errorf("Generate after Close from another goroutine: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}
}

// op is one exported call, on a session of a model.
type op struct {
	name        string
	closesModel bool
	run         func(m *Model, s *Session, saved []byte) error
}

func concurrencyOps() []op {
	ctx := context.Background()
	gen := GenerateOptions{MaxTokens: 3, IgnoreEOS: true}
	return []op{
		{name: "Generate", run: func(m *Model, s *Session, _ []byte) error {
			_, err := s.Generate(ctx, " a", gen, discard)
			return err
		}},
		{name: "GenerateTokens", run: func(m *Model, s *Session, _ []byte) error {
			_, err := s.GenerateTokens(ctx, " b", gen, func(Piece) error { return nil })
			return err
		}},
		{name: "Stream", run: func(m *Model, s *Session, _ []byte) error {
			for _, err := range s.Stream(ctx, "", gen) {
				if err != nil {
					return err
				}
			}
			return nil
		}},
		{name: "Eval", run: func(m *Model, s *Session, _ []byte) error {
			_, err := s.Eval([]int32{1, 2, 3})
			return err
		}},
		{name: "EvalContext", run: func(m *Model, s *Session, _ []byte) error {
			_, err := s.EvalContext(ctx, []int32{4})
			return err
		}},
		{name: "Logits", run: func(m *Model, s *Session, _ []byte) error {
			_, err := s.Logits(ctx)
			return err
		}},
		{name: "EvalLogits", run: func(m *Model, s *Session, _ []byte) error {
			return s.EvalLogits([]int32{5, 6, 7}, 1, make([]float32, 2*m.Hparams().NVocab))
		}},
		{name: "EvalAll", run: func(m *Model, s *Session, _ []byte) error {
			return s.EvalAll([]int32{8}, make([]float32, m.Hparams().NVocab))
		}},
		{name: "Perplexity", run: func(m *Model, s *Session, _ []byte) error {
			_, err := s.Perplexity(ctx, testTokens[:8], PerplexityOptions{Chunk: 4})
			return err
		}},
		{name: "Rewind", run: func(m *Model, s *Session, _ []byte) error { return s.Rewind(1) }},
		{name: "Reset", run: func(m *Model, s *Session, _ []byte) error { return s.Reset() }},
		{name: "Save", run: func(m *Model, s *Session, _ []byte) error {
			var buf bytes.Buffer
			if err := s.Save(&buf); err != nil {
				return err
			}
			r, err := m.LoadSession(&buf)
			if err != nil {
				return fmt.Errorf("a snapshot does not load: %w", err)
			}
			return r.Close()
		}},
		{name: "Close", run: func(m *Model, s *Session, _ []byte) error { return s.Close() }},
		{name: "getters", run: func(m *Model, s *Session, _ []byte) error {
			pos, toks := s.Pos(), s.Tokens()
			_ = s.LastStats()
			if pos > s.ContextLength() || len(toks) > s.ContextLength() || s.Model() != m {
				return fmt.Errorf("pos %d, %d tokens", pos, len(toks))
			}
			return nil
		}},
		{name: "Model.NewSession", run: func(m *Model, _ *Session, _ []byte) error {
			s, err := m.NewSession()
			if err != nil {
				return err
			}
			return s.Close()
		}},
		{name: "Model.LoadSession", run: func(m *Model, _ *Session, saved []byte) error {
			s, err := m.LoadSession(bytes.NewReader(saved))
			if err != nil {
				return err
			}
			return s.Close()
		}},
		{name: "Model getters", run: func(m *Model, _ *Session, _ []byte) error {
			m.Fingerprint()
			_, err := m.EstimateMemory(0)
			_ = m.ContextLength() + m.Threads()
			return err
		}},
		{name: "Model.Close", closesModel: true, run: func(m *Model, _ *Session, _ []byte) error { return m.Close() }},
	}
}

// allowed are the errors a call may return when another call runs at the same time.
func allowed(err error) bool {
	return err == nil || errors.Is(err, ErrBusy) || errors.Is(err, ErrClosed) || errors.Is(err, ErrContextFull) ||
		errors.Is(err, ErrInvalidOption) // Logits on an empty context, Rewind past a Reset
}

// Every pair of exported calls (a call with itself included) on one session, concurrently, a
// few times each: no panic, no race, only typed errors; afterwards the session is consistent
// (a snapshot continues exactly as the session does).
func TestConcurrentPairs(t *testing.T) {
	shared := tinyModel(t, nil, Options{Threads: 2})
	saved := savedSession(t, shared)
	ops := concurrencyOps()
	for i, a := range ops {
		for _, b := range ops[i:] {
			m := shared
			if a.closesModel || b.closesModel {
				m = tinyModel(t, nil, Options{Threads: 2})
			}
			s, err := m.NewSession()
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Eval([]int32{9, 10}); err != nil {
				t.Fatal(err)
			}
			var wg, ready sync.WaitGroup
			errs := make(chan error, 8)
			ready.Add(2)
			for _, o := range []op{a, b} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					ready.Done()
					ready.Wait() // start together
					for range 3 {
						if err := o.run(m, s, saved); !allowed(err) {
							errs <- fmt.Errorf("%s: %w", o.name, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Errorf("%s with %s: %v", a.name, b.name, err)
			}
			if m == shared && a.name != "Close" && b.name != "Close" {
				if err := snapshotContinues(m, s); err != nil {
					t.Errorf("%s with %s: afterwards: %v", a.name, b.name, err)
				}
			}
			s.Close()
		}
	}
}

// savedSession is a small saved session of m.
func savedSession(t testing.TB, m *Model) []byte {
	t.Helper()
	s, err := m.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Generate(context.Background(), "a b", GenerateOptions{MaxTokens: 3, IgnoreEOS: true}, discard); err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := s.Save(&buf); err != nil {
		t.Fatal(err)
	}
	return buf.Bytes()
}

// snapshotContinues saves s, restores the snapshot and checks that both generate the same
// greedy tokens.
func snapshotContinues(m *Model, s *Session) error {
	if s.Pos() == 0 {
		return nil
	}
	var buf bytes.Buffer
	if err := s.Save(&buf); err != nil {
		return err
	}
	r, err := m.LoadSession(&buf)
	if err != nil {
		return err
	}
	defer r.Close()
	opts := GenerateOptions{MaxTokens: 2, IgnoreEOS: true}
	for _, x := range []*Session{s, r} {
		if _, err := x.Generate(context.Background(), "", opts, discard); err != nil && !errors.Is(err, ErrContextFull) {
			return err
		}
	}
	if !slices.Equal(s.Tokens(), r.Tokens()) {
		return fmt.Errorf("the session continues with %v, its snapshot with %v", s.Tokens(), r.Tokens())
	}
	return nil
}
