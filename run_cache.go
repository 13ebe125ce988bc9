package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
)

// usePromptCache is --prompt-cache FILE, as llama-cli's: a session saved in FILE by this model
// (llm's Save) is loaded and the tokens it holds that begin the prompt are reused; the rest of
// the prompt is evaluated and the session saved back to FILE. A file saved by another model or
// with another context length, or damaged, is reported and replaced. The prompt is in the
// context afterwards: generation goes on from it.
func (g *generator) usePromptCache(ctx context.Context, path, text string, info io.Writer) error {
	ids := g.m.Tokenize(text, true)
	if len(ids) == 0 {
		ids = []int32{g.m.StartToken()}
	}
	reused, err := g.loadPromptCache(path, ids)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		fmt.Fprintf(info, "prompt cache: %s does not exist yet: it will hold this prompt\n", path)
	case err != nil:
		fmt.Fprintf(info, "prompt cache: %s is not usable (%v): it will be replaced\n", path, err)
	default:
		fmt.Fprintf(info, "prompt cache: reusing %d of the prompt's %d tokens from %s\n", reused, len(ids), path)
	}
	g.showPrompt(text)
	if _, err := g.sess.EvalContext(ctx, ids[g.sess.Pos():]); err != nil {
		return err
	}
	return savePromptCache(g, path)
}

// loadPromptCache replaces g's session by the one saved in path, rewound to the tokens it
// shares with ids, and returns their count. The last prompt token is always evaluated again:
// its logits choose the first generated token. Nothing shared: g's session stays.
func (g *generator) loadPromptCache(path string, ids []int32) (int, error) {
	f, err := os.Open(path)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	s, err := g.m.LoadSession(bufio.NewReader(f))
	if err != nil {
		return 0, err
	}
	cached := s.Tokens()
	n := 0
	for n < len(cached) && n < len(ids)-1 && cached[n] == ids[n] {
		n++
	}
	if n == 0 {
		s.Close()
		return 0, nil
	}
	if err := s.Rewind(n); err != nil {
		s.Close()
		return 0, err
	}
	g.sess.Close()
	g.sess = s
	return n, nil
}

// savePromptCache writes g's session to path through a temporary file, so that an
// interrupted save leaves the old cache or none.
func savePromptCache(g *generator, path string) error {
	tmp := path + ".tmp"
	f, err := os.Create(tmp)
	if err != nil {
		return fmt.Errorf("--prompt-cache: %w", err)
	}
	w := bufio.NewWriter(f)
	err = g.sess.Save(w)
	if err == nil {
		err = w.Flush()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
		return fmt.Errorf("--prompt-cache %s: %w", path, err)
	}
	return nil
}
