package main

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/hub/hubtest"
	"github.com/gorun-dev/gorun/internal/fixtures"
)

// gorun pull against a local fake Hub: a GGUF repository (the file picked by its quantization
// name, its cache path printed) and a safetensors checkpoint (downloaded and converted); then
// offline from the cache, and a gated repository explained.
func TestPullCommand(t *testing.T) {
	micro := filepath.Dir(fixtures.Path(t, "hf/gpt2-micro/model.safetensors"))
	ref := fixtures.Path(t, "hf/gpt2-micro-f16.llamacpp.gguf")
	ckpt := map[string][]byte{}
	for _, f := range []string{"config.json", "tokenizer.json", "tokenizer_config.json", "vocab.json", "merges.txt", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(micro, f))
		if err != nil {
			t.Fatal(err)
		}
		ckpt[f] = b
	}
	refBytes, err := os.ReadFile(ref)
	if err != nil {
		t.Fatal(err)
	}
	const commit = "89abcdef0123456789abcdef0123456789abcdef"
	s := hubtest.New(map[string]*hubtest.Repo{
		"test/gpt2-micro":      {Commit: commit, Files: ckpt},
		"test/gpt2-micro-GGUF": {Commit: commit, Files: map[string][]byte{"gpt2-micro.F16.gguf": refBytes, "README.md": []byte("hi")}},
		"test/gated":           {Commit: commit, Files: ckpt, Gated: true},
	})
	defer s.Close()
	home := t.TempDir()
	t.Setenv("HF_HOME", home)
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("HF_ENDPOINT", s.URL)
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_HUB_OFFLINE", "")

	code, stdout, stderr := gorun("pull", "test/gpt2-micro-GGUF:f16")
	want := filepath.Join(home, "hub", "models--test--gpt2-micro-GGUF", "snapshots", commit, "gpt2-micro.F16.gguf")
	if code != 0 || strings.TrimSpace(stdout) != want {
		t.Fatalf("pull GGUF: exit %d, stdout %q (want %s), stderr %s", code, stdout, want, stderr)
	}
	if b, _ := os.ReadFile(want); string(b) != string(refBytes) {
		t.Error("pulled GGUF differs")
	}

	out := filepath.Join(t.TempDir(), "m.gguf")
	code, stdout, stderr = gorun("pull", "test/gpt2-micro", "-o", out)
	if code != 0 || strings.TrimSpace(stdout) != out {
		t.Fatalf("pull checkpoint: exit %d, stdout %q, stderr %s", code, stdout, stderr)
	}
	// What was verified is said, per file.
	for _, want := range []string{"pull: model.safetensors: ", "sha256 verified", "pull: config.json: ", "git blob sha1 verified"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("pull's messages lack %q: %s", want, stderr)
		}
	}
	if code, _, stderr := gorun("-m", out, "-p", "Hello", "-n", "4", "--temp", "0"); code != 0 {
		t.Fatalf("run: exit %d: %s", code, stderr)
	}

	// -m hf://ORG/NAME (once wired into the commands): a checkpoint is converted once, into
	// gorun's cache folder, and found there afterwards.
	if runtime.GOOS == "linux" {
		t.Setenv("XDG_CACHE_HOME", t.TempDir())
	}
	model := "hf://test/gpt2-micro"
	var log strings.Builder
	if err := resolveModel(&model, &log); err != nil || !strings.HasSuffix(model, filepath.Join(commit, "gpt2-micro-f16.gguf")) {
		t.Fatalf("resolveModel: %q, %v", model, err)
	}
	first := model

	s.Close()
	t.Setenv("HF_HUB_OFFLINE", "1")
	model = "hf://test/gpt2-micro"
	if err := resolveModel(&model, &log); err != nil || model != first {
		t.Errorf("resolveModel offline: %q, %v", model, err)
	}
	if code, stdout, stderr := gorun("pull", "test/gpt2-micro-GGUF:F16"); code != 0 || strings.TrimSpace(stdout) != want {
		t.Errorf("offline: exit %d, %q, %s", code, stdout, stderr)
	}
	if code, _, stderr := gorun("pull", "test/other"); code != 1 || !strings.Contains(stderr, "offline") {
		t.Errorf("offline, uncached: exit %d, %s", code, stderr)
	}
}

func TestPullGated(t *testing.T) {
	s := hubtest.New(map[string]*hubtest.Repo{"test/gated": {Commit: strings.Repeat("a", 40), Files: map[string][]byte{"x.gguf": []byte("GGUF")}, Gated: true}})
	defer s.Close()
	t.Setenv("HF_HOME", t.TempDir())
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("HF_ENDPOINT", s.URL)
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_HUB_OFFLINE", "")
	code, _, stderr := gorun("pull", "test/gated")
	if code != 1 || !strings.Contains(stderr, "gated or private") || !strings.Contains(stderr, "HF_TOKEN") {
		t.Errorf("exit %d: %s", code, stderr)
	}
	if code, _, stderr := gorun("pull", "not a repo"); code != 2 {
		t.Errorf("bad id: exit %d: %s", code, stderr)
	}
}

// gorun pull of a Llama safetensors repository converts it as gorun convert does: llama3-micro
// (with a tokenizer.model-free Llama 3 tokenizer) becomes a llama GGUF whose tensors are
// llama.cpp's (every tensor's sha256 equal to its conversion's digest).
func TestPullLlamaCheckpoint(t *testing.T) {
	dir := filepath.Dir(fixtures.Path(t, "hf/llama3-micro/model.safetensors"))
	files := map[string][]byte{}
	for _, f := range []string{"config.json", "generation_config.json", "tokenizer.json", "tokenizer_config.json", "model.safetensors"} {
		b, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		files[f] = b
	}
	s := hubtest.New(map[string]*hubtest.Repo{"test/llama3-micro": {Commit: strings.Repeat("b", 40), Files: files}})
	defer s.Close()
	t.Setenv("HF_HOME", t.TempDir())
	t.Setenv("HF_HUB_CACHE", "")
	t.Setenv("HF_ENDPOINT", s.URL)
	t.Setenv("HF_TOKEN", "")
	t.Setenv("HF_HUB_OFFLINE", "")
	out := filepath.Join(t.TempDir(), "m.gguf")
	if code, _, stderr := gorun("pull", "test/llama3-micro", "-o", out); code != 0 {
		t.Fatalf("pull: exit %d: %s", code, stderr)
	}
	f, err := gguf.Open(out)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if a, _ := f.String("general.architecture"); a != "llama" {
		t.Errorf("architecture %q", a)
	}
	if p, _ := f.String("tokenizer.ggml.pre"); p != "smaug-bpe" {
		t.Errorf("pre-tokenizer %q", p)
	}
	var digests map[string]struct {
		Tensors []struct {
			Name   string `json:"name"`
			SHA256 string `json:"sha256"`
		} `json:"tensors"`
	}
	b, err := os.ReadFile(fixtures.Path(t, "hf/llamacpp_digests.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &digests); err != nil {
		t.Fatal(err)
	}
	want := digests["llama3-micro-f16.llamacpp.gguf"].Tensors
	if len(f.Tensors) != len(want) {
		t.Fatalf("%d tensors, want %d", len(f.Tensors), len(want))
	}
	for i, w := range want {
		sum := sha256.Sum256(f.Data(&f.Tensors[i]))
		if f.Tensors[i].Name != w.Name || hex.EncodeToString(sum[:]) != w.SHA256 {
			t.Errorf("tensor %d: %s, want %s with llama.cpp's bytes", i, f.Tensors[i].Name, w.Name)
		}
	}
}
