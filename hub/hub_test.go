package hub

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gorun-dev/gorun/hub/hubtest"
)

const commit = "0123456789abcdef0123456789abcdef01234567"

func testRepos() (map[string]*hubtest.Repo, []byte) {
	r := rand.New(rand.NewPCG(1, 1))
	big := make([]byte, 300<<10)
	for i := range big {
		big[i] = byte(r.Uint32())
	}
	files := map[string][]byte{"model.Q8_0.gguf": big, "config.json": []byte(`{"a": 1}`), "README.md": []byte("# hi")}
	return map[string]*hubtest.Repo{
		"org/model": {Commit: commit, Files: files},
		"org/gated": {Commit: commit, Files: files, Gated: true},
	}, big
}

func newClient(t *testing.T, s *hubtest.Server) *Client {
	return &Client{Endpoint: s.URL, CacheDir: t.TempDir(), HTTP: s.Client()}
}

func TestFreshDownloadCacheLayout(t *testing.T) {
	repos, big := testRepos()
	s := hubtest.New(repos)
	defer s.Close()
	c := newClient(t, s)
	got, files, err := c.Files("org/model", "")
	if err != nil || got != commit || !slices.Equal(files, []string{"README.md", "config.json", "model.Q8_0.gguf"}) {
		t.Fatalf("Files: %s %v %v", got, files, err)
	}
	p, err := c.Download("org/model", "main", "model.Q8_0.gguf")
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(c.CacheDir, "models--org--model")
	if p != filepath.Join(dir, "snapshots", commit, "model.Q8_0.gguf") {
		t.Errorf("path %s", p)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, big) {
		t.Error("content differs")
	}
	if ref, _ := os.ReadFile(filepath.Join(dir, "refs", "main")); string(ref) != commit {
		t.Errorf("refs/main = %q", ref)
	}
	if target, err := os.Readlink(p); err == nil && !strings.HasPrefix(target, filepath.Join("..", "..", "blobs")) {
		t.Errorf("snapshot links to %s, want ../../blobs/SHA256", target)
	}
	blobs, _ := os.ReadDir(filepath.Join(dir, "blobs"))
	if len(blobs) != 1 || len(blobs[0].Name()) != 64 {
		t.Errorf("blobs %v", blobs)
	}
	// A small file is not in LFS: its blob is named by the git ETag and not checked by sha256.
	if p, err := c.Download("org/model", "main", "config.json"); err != nil {
		t.Fatal(err)
	} else if b, _ := os.ReadFile(p); string(b) != `{"a": 1}` {
		t.Errorf("config.json = %q", b)
	}
	// Already cached: no new download.
	n := s.Downloads()
	if _, err := c.Download("org/model", "main", "model.Q8_0.gguf"); err != nil || s.Downloads() != n {
		t.Errorf("second download: %v, %d storage requests (was %d)", err, s.Downloads(), n)
	}
}

func TestResumeAfterCutConnection(t *testing.T) {
	repos, big := testRepos()
	s := hubtest.New(repos)
	defer s.Close()
	c := newClient(t, s)
	s.CutNext(100 << 10)
	p, err := c.Download("org/model", "main", "model.Q8_0.gguf")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, big) {
		t.Error("content differs")
	}
	if r := s.Ranges(); len(r) != 2 || r[0] != "" || r[1] != "bytes=102400-" {
		t.Errorf("storage requests' ranges %q, want a resumption at 102400", r)
	}
}

func TestResumeAfterStalledConnection(t *testing.T) {
	repos, big := testRepos()
	s := hubtest.New(repos)
	defer s.Close()
	c := newClient(t, s)
	c.IdleTimeout = 300 * time.Millisecond
	s.StallNext(50 << 10)
	p, err := c.Download("org/model", "main", "model.Q8_0.gguf")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, big) {
		t.Error("content differs")
	}
	// (A loaded machine may add resumptions; the first one must start where the stall left off.)
	if r := s.Ranges(); len(r) < 2 || !slices.Contains(r, "bytes=51200-") {
		t.Errorf("ranges %q, want a resumption at 51200", r)
	}
}

func TestResumeFromPreviousRun(t *testing.T) {
	repos, big := testRepos()
	s := hubtest.New(repos)
	defer s.Close()
	c := newClient(t, s)
	blobs := filepath.Join(c.CacheDir, "models--org--model", "blobs")
	os.MkdirAll(blobs, 0o755)
	sum, _ := hashOf(big)
	if err := os.WriteFile(filepath.Join(blobs, sum+".incomplete"), big[:5000], 0o644); err != nil {
		t.Fatal(err)
	}
	p, err := c.Download("org/model", "main", "model.Q8_0.gguf")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, big) {
		t.Error("content differs")
	}
	if r := s.Ranges(); len(r) != 1 || r[0] != "bytes=5000-" {
		t.Errorf("ranges %q", r)
	}
}

func hashOf(b []byte) (string, error) { return sha256Hex(b), nil }

func TestCorruptedDownloadRejected(t *testing.T) {
	repos, _ := testRepos()
	s := hubtest.New(repos)
	defer s.Close()
	c := newClient(t, s)
	s.Corrupt(true)
	_, err := c.Download("org/model", "main", "model.Q8_0.gguf")
	if err == nil || !strings.Contains(err.Error(), "sha256") {
		t.Fatalf("error %v", err)
	}
	dir := filepath.Join(c.CacheDir, "models--org--model")
	blobs, _ := os.ReadDir(filepath.Join(dir, "blobs"))
	if len(blobs) != 0 {
		t.Errorf("left in blobs: %v", blobs)
	}
	if _, err := os.Stat(filepath.Join(dir, "snapshots", commit, "model.Q8_0.gguf")); !os.IsNotExist(err) {
		t.Errorf("snapshot entry: %v", err)
	}
	s.Corrupt(false)
	if _, err := c.Download("org/model", "main", "model.Q8_0.gguf"); err != nil {
		t.Fatalf("after the corruption: %v", err)
	}
}

func TestOfflineUsesCache(t *testing.T) {
	repos, big := testRepos()
	s := hubtest.New(repos)
	c := newClient(t, s)
	if _, err := c.Download("org/model", "main", "model.Q8_0.gguf"); err != nil {
		t.Fatal(err)
	}
	s.Close()
	off := &Client{Endpoint: s.URL, CacheDir: c.CacheDir, Offline: true}
	p, err := off.Download("org/model", "main", "model.Q8_0.gguf")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, big) {
		t.Error("content differs")
	}
	if got, files, err := off.Files("org/model", "main"); err != nil || got != commit || !slices.Equal(files, []string{"model.Q8_0.gguf"}) {
		t.Errorf("offline Files: %s %v %v", got, files, err)
	}
	if _, err := off.Download("org/model", "main", "config.json"); !errors.Is(err, ErrOffline) {
		t.Errorf("uncached file offline: %v", err)
	}
	if _, err := off.Download("org/other", "main", "x.gguf"); !errors.Is(err, ErrOffline) {
		t.Errorf("uncached repo offline: %v", err)
	}
}

func TestGatedRepo(t *testing.T) {
	repos, _ := testRepos()
	s := hubtest.New(repos)
	defer s.Close()
	s.Token = "hf_secret"
	c := newClient(t, s)
	_, _, err := c.Files("org/gated", "main")
	if !errors.Is(err, ErrAuth) || !strings.Contains(err.Error(), "set HF_TOKEN") || !strings.Contains(err.Error(), "401") {
		t.Fatalf("error %v", err)
	}
	if _, err := c.Download("org/gated", "main", "config.json"); !errors.Is(err, ErrAuth) {
		t.Fatalf("download error %v", err)
	}
	c.Token = "wrong"
	if _, _, err := c.Files("org/gated", "main"); err == nil || !strings.Contains(err.Error(), "accepted the model's terms") {
		t.Fatalf("wrong token: %v", err)
	}
	c.Token = "hf_secret"
	if _, err := c.Download("org/gated", "main", "model.Q8_0.gguf"); err != nil {
		t.Fatalf("with the token: %v", err)
	}
}

func TestNotFoundAndBadNames(t *testing.T) {
	repos, _ := testRepos()
	s := hubtest.New(repos)
	defer s.Close()
	c := newClient(t, s)
	if _, err := c.Download("org/model", "main", "nope.gguf"); err == nil || !strings.Contains(err.Error(), "404") {
		t.Errorf("missing file: %v", err)
	}
	if _, _, err := c.Files("org/none", "main"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Errorf("missing repo: %v", err)
	}
	for _, bad := range []string{"../x", "a/../../b", "/etc/passwd"} {
		if _, err := c.Download("org/model", "main", bad); err == nil {
			t.Errorf("file %q accepted", bad)
		}
	}
	for _, bad := range []string{"", "a/b/c", "../x", "a b"} {
		if err := CheckRepo(bad); err == nil {
			t.Errorf("repo %q accepted", bad)
		}
	}
}

func TestPickGGUF(t *testing.T) {
	files := []string{"README.md", "gpt2.Q4_K_M.gguf", "gpt2.Q8_0.gguf", "gpt2.f16.gguf", "big-Q6_K-00001-of-00002.gguf", "big-Q6_K-00002-of-00002.gguf"}
	for _, c := range []struct{ quant, want string }{
		{"", "gpt2.Q4_K_M.gguf"}, {"q8_0", "gpt2.Q8_0.gguf"}, {"F16", "gpt2.f16.gguf"}, {"Q6_K", "big-Q6_K-00001-of-00002.gguf"},
		{"gpt2.Q8_0.gguf", "gpt2.Q8_0.gguf"},
	} {
		if got, err := PickGGUF(files, c.quant); err != nil || got != c.want {
			t.Errorf("%q: %q, %v; want %q", c.quant, got, err, c.want)
		}
	}
	if _, err := PickGGUF(files, "q2_k"); err == nil || !strings.Contains(err.Error(), "gpt2.Q8_0.gguf") {
		t.Errorf("missing quant: %v", err)
	}
	if got, err := PickGGUF([]string{"config.json"}, ""); got != "" || err != nil {
		t.Errorf("no GGUF: %q, %v", got, err)
	}
}
