package llm_test

import (
	"log"
	"os"
	"path/filepath"

	"github.com/gorun-dev/gorun/internal/testmodel"
)

// The examples run as tests on a model written here, so that example_test.go (what go doc
// shows) uses only the public API: in a program, the path is a GGUF file of your own (made by
// llama.cpp's converter, gorun convert or gorun pull; gorun random-model writes random ones).

// exampleModel writes a tiny random-weight GPT-2 (a real file would be a GPT-2 GGUF from
// llama.cpp's converter) and returns its path; cleanup removes it.
func exampleModel() (path string, cleanup func()) {
	dir, err := os.MkdirTemp("", "gorun-example")
	if err != nil {
		log.Fatal(err)
	}
	c, _ := testmodel.Preset("tiny")
	c.NCtx = 256
	path = filepath.Join(dir, "tiny.gguf")
	if err := testmodel.Write(path, c); err != nil {
		log.Fatal(err)
	}
	return path, func() { os.RemoveAll(dir) }
}
