package llm_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log"
	"strings"
	"sync"

	"github.com/gorun-dev/gorun/llm"
)

// Load a model, open a session and stream a greedy continuation of a prompt.
func Example() {
	path, cleanup := exampleModel()
	defer cleanup()

	m, err := llm.Load(path, llm.Options{Threads: 2})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	s, err := m.NewSession()
	if err != nil {
		log.Fatal(err)
	}
	var text strings.Builder
	st, err := s.Generate(context.Background(), "Hello", llm.GenerateOptions{MaxTokens: 16, IgnoreEOS: true},
		func(piece string) error {
			text.WriteString(piece) // an app would print or display it now
			return nil
		})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(st.Tokens, "tokens, stopped by", st.Stop)
	fmt.Println("context:", s.Pos(), "tokens")
	// Output:
	// 16 tokens, stopped by length
	// context: 21 tokens
}

// Stream yields every token with its id and log-probability; a stop string ends the answer
// without being emitted, even when it spans tokens.
func ExampleSession_Stream() {
	path, cleanup := exampleModel()
	defer cleanup()
	m, err := llm.Load(path, llm.Options{Threads: 2})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	s, _ := m.NewSession()

	opts := llm.GenerateOptions{MaxTokens: 64, IgnoreEOS: true, Sample: llm.DefaultSampling()} // llama.cpp's filters
	opts.Sample.Seed = 42
	opts.LogProbs = true
	var text strings.Builder
	n := 0
	for p, err := range s.Stream(context.Background(), "Once upon a time", opts) {
		if err != nil {
			log.Fatal(err)
		}
		if p.LogProb > 0 {
			log.Fatal("a probability above 1")
		}
		text.WriteString(p.Text)
		n++
	}
	st := s.LastStats()
	fmt.Println(n, "pieces,", st.Tokens, "tokens, seed", st.Seed)

	// The same seed and a stop string taken from that text: the answer ends just before it.
	stop := text.String()[10:13]
	s.Reset()
	opts.Stop = []string{stop}
	var short strings.Builder
	for p, err := range s.Stream(context.Background(), "Once upon a time", opts) {
		if err != nil {
			log.Fatal(err)
		}
		short.WriteString(p.Text)
	}
	fmt.Println(s.LastStats().Stop, strings.HasPrefix(text.String(), short.String()+stop), !strings.Contains(short.String(), stop))
	// Output:
	// 64 pieces, 64 tokens, seed 42
	// stop string true true
}

// Several sessions of one model generate at the same time; their tokens are computed together,
// one forward pass per step, and each gets the text it would get alone.
func ExampleModel_NewSession_concurrent() {
	path, cleanup := exampleModel()
	defer cleanup()
	m, err := llm.Load(path, llm.Options{Threads: 2})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()

	prompts := []string{"The first", "A second one", "And a third"}
	alone := make([]string, len(prompts))
	together := make([]string, len(prompts))
	gen := func(prompt string) string {
		s, err := m.NewSession()
		if err != nil {
			log.Fatal(err)
		}
		var b strings.Builder
		if _, err := s.Generate(context.Background(), prompt, llm.GenerateOptions{MaxTokens: 12, IgnoreEOS: true},
			func(p string) error { b.WriteString(p); return nil }); err != nil {
			log.Fatal(err)
		}
		return b.String()
	}
	for i, p := range prompts {
		alone[i] = gen(p)
	}
	var wg sync.WaitGroup
	for i, p := range prompts {
		wg.Add(1)
		go func() { defer wg.Done(); together[i] = gen(p) }()
	}
	wg.Wait()
	for i := range prompts {
		fmt.Println(together[i] == alone[i])
	}
	// Output:
	// true
	// true
	// true
}

// Save a conversation and restore it later (in another process, with the same model file).
func ExampleSession_Save() {
	path, cleanup := exampleModel()
	defer cleanup()
	m, err := llm.Load(path, llm.Options{Threads: 2})
	if err != nil {
		log.Fatal(err)
	}
	defer m.Close()
	s, _ := m.NewSession()
	opts := llm.GenerateOptions{MaxTokens: 8, IgnoreEOS: true}
	discard := func(string) error { return nil }
	s.Generate(context.Background(), "Remember this", opts, discard)

	var saved bytes.Buffer
	if err := s.Save(&saved); err != nil {
		log.Fatal(err)
	}
	restored, err := m.LoadSession(bytes.NewReader(saved.Bytes()))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(restored.Pos() == s.Pos())

	// A damaged copy is refused.
	b := saved.Bytes()
	b[len(b)/2] ^= 1
	_, err = m.LoadSession(bytes.NewReader(b))
	fmt.Println(errors.Is(err, llm.ErrBadFile))
	// Output:
	// true
	// true
}

// Close is safe to call twice, and the model's sessions then return ErrClosed.
func ExampleModel_Close() {
	path, cleanup := exampleModel()
	defer cleanup()
	m, err := llm.Load(path, llm.Options{Threads: 2})
	if err != nil {
		log.Fatal(err)
	}
	s, _ := m.NewSession()
	m.Close()
	fmt.Println(m.Close())
	_, err = s.Eval([]int32{1, 2, 3})
	fmt.Println(errors.Is(err, llm.ErrClosed))
	// Output:
	// <nil>
	// true
}
