//go:build unix

package convert

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

// Issue 17 item 8: a tokenizer.json that is a named pipe used to be skipped silently (the
// conversion then read vocab.json); it is an error naming it, and the pipe is never opened
// for a blocking read.
func TestTokenizerJSONFIFO(t *testing.T) {
	src := microDir(t)
	dir := linkTokenizer(t, src, t.TempDir(), "model.safetensors", "config.json", "vocab.json", "merges.txt", "tokenizer_config.json")
	p := filepath.Join(dir, "tokenizer.json")
	if err := syscall.Mkfifo(p, 0o600); err != nil {
		t.Skip(err)
	}
	_, err := Convert(dir, filepath.Join(t.TempDir(), "m.gguf"), Options{})
	if err == nil || !strings.Contains(err.Error(), p) || !strings.Contains(err.Error(), "named pipe") {
		t.Fatalf("error %v, want one naming the pipe", err)
	}
	_ = os.Remove(p)
}
