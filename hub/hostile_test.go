package hub

import (
	"bytes"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/gorun-dev/gorun/hub/hubtest"
)

// hostileFile is what a hostile Hub answers for one file: the HEAD's headers as given (an
// empty value is left out) and the GET's body.
type hostileFile struct {
	etag, linkedEtag, size, linkedSize string
	body                               []byte
	repeat                             int // the body is sent this many times (an endless stream)
}

// hostileHub is a Hub whose answers the test writes header by header; it counts the body
// bytes it sends.
type hostileHub struct {
	*httptest.Server
	commit string
	mu     sync.Mutex
	files  map[string]hostileFile
	order  []string
	sent   int64
}

func newHostileHub(t *testing.T, commit string) *hostileHub {
	h := &hostileHub{commit: commit, files: map[string]hostileFile{}}
	h.Server = httptest.NewServer(http.HandlerFunc(h.serve))
	t.Cleanup(h.Close)
	return h
}

// set replaces the repository's file list.
func (h *hostileHub) set(files map[string]hostileFile, order ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.files, h.order = files, order
}

func (h *hostileHub) bytesSent() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.sent
}

func (h *hostileHub) serve(w http.ResponseWriter, r *http.Request) {
	h.mu.Lock()
	files, order := h.files, h.order
	h.mu.Unlock()
	if strings.HasPrefix(r.URL.Path, "/api/models/") {
		var sib []map[string]string
		for _, n := range order {
			sib = append(sib, map[string]string{"rfilename": n})
		}
		json.NewEncoder(w).Encode(map[string]any{"sha": h.commit, "siblings": sib})
		return
	}
	_, name, ok := strings.Cut(r.URL.Path, "/resolve/")
	if !ok {
		http.NotFound(w, r)
		return
	}
	_, name, _ = strings.Cut(name, "/") // the revision
	f, ok := files[name]
	if !ok {
		http.NotFound(w, r)
		return
	}
	for k, v := range map[string]string{"X-Repo-Commit": h.commit, "ETag": f.etag, "X-Linked-Etag": f.linkedEtag,
		"Content-Length": f.size, "X-Linked-Size": f.linkedSize} {
		if v != "" {
			w.Header().Set(k, v)
		}
	}
	if r.Method == http.MethodHead {
		return
	}
	w.Header().Del("Content-Length")
	for range max(1, f.repeat) {
		n, err := w.Write(f.body)
		h.mu.Lock()
		h.sent += int64(n)
		h.mu.Unlock()
		if err != nil {
			return
		}
	}
}

func gitSHA1(b []byte) string {
	s := sha1.Sum(append([]byte(fmt.Sprintf("blob %d\x00", len(b))), b...))
	return hex.EncodeToString(s[:])
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// escapeCheck makes HF_HOME a folder of a fresh temporary folder and returns a client caching
// under it, and a function failing the test when anything appeared beside HF_HOME.
func escapeCheck(t *testing.T, h *hostileHub) (*Client, func()) {
	root := t.TempDir()
	home := filepath.Join(root, "home")
	c := &Client{Endpoint: h.URL, CacheDir: filepath.Join(home, "hub"), HTTP: h.Client(), Retries: 1}
	return c, func() {
		t.Helper()
		ents, _ := os.ReadDir(root)
		for _, e := range ents {
			if e.Name() != "home" {
				t.Errorf("%s was created outside HF_HOME", filepath.Join(root, e.Name()))
			}
		}
	}
}

// Issue 17 item 3: an ETag of ".." or "." is not a blob name; it used to make the repository
// directory a "blob" and the snapshot entry a link to it.
func TestDotETagRefused(t *testing.T) {
	const commit = "0123456789abcdef0123456789abcdef01234567"
	h := newHostileHub(t, commit)
	for _, etag := range []string{`".."`, `"."`, `W/".."`, `"blobs"`, `"abc"`, strings.Repeat("A", 40), `"` + strings.Repeat("0", 63) + `/"`} {
		h.set(map[string]hostileFile{"a": {etag: etag, size: "1", body: []byte("x")}}, "a")
		c, outside := escapeCheck(t, h)
		if _, _, err := c.Files("o/n", "main"); err != nil {
			t.Fatal(err)
		}
		p, err := c.Download("o/n", "main", "a")
		if err == nil || !strings.Contains(err.Error(), "ETag") {
			t.Errorf("ETag %s: %q, %v; want an error about the ETag", etag, p, err)
		}
		outside()
	}
}

// Issue 17 item 3: repeated pulls of a repository whose file list changes, with a hostile
// ETag, used to create directories and links outside HF_HOME.
func TestRepeatedHostilePullsStayInCache(t *testing.T) {
	const commit = "0123456789abcdef0123456789abcdef01234567"
	h := newHostileHub(t, commit)
	c, outside := escapeCheck(t, h)
	evil := []byte("evil")
	for _, name := range []string{"p", "p/q/a", "p/q/a/evil/f"} {
		f := hostileFile{etag: `".."`, size: "1", body: []byte("x")}
		if name == "p/q/a/evil/f" {
			f = hostileFile{etag: `"` + gitSHA1(evil) + `"`, size: "4", body: evil}
		}
		h.set(map[string]hostileFile{name: f}, name)
		if _, _, err := c.Files("o/n", "main"); err != nil {
			t.Fatal(err)
		}
		c.Download("o/n", "main", name)
	}
	outside()
}

// A link planted in the cache (by an older gorun, another tool or a hostile hub) is never
// followed when the cache's folders are made: the error names it.
func TestPlantedLinkInCacheRefused(t *testing.T) {
	const commit = "0123456789abcdef0123456789abcdef01234567"
	h := newHostileHub(t, commit)
	body := []byte("hello")
	h.set(map[string]hostileFile{"sub/f": {etag: `"` + gitSHA1(body) + `"`, size: "5", body: body}}, "sub/f")
	for _, plant := range []string{"snapshots/" + commit + "/sub", "blobs", "snapshots", "refs"} {
		c, outside := escapeCheck(t, h)
		repo := filepath.Join(c.CacheDir, "models--o--n")
		link := filepath.Join(repo, filepath.FromSlash(plant))
		if err := os.MkdirAll(filepath.Dir(link), 0o755); err != nil {
			t.Fatal(err)
		}
		target := filepath.Join(filepath.Dir(c.CacheDir), "elsewhere")
		if err := os.MkdirAll(target, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(target, link); err != nil {
			t.Skipf("symbolic links: %v", err)
		}
		_, err := c.Download("o/n", "main", "sub/f")
		if err == nil || !strings.Contains(err.Error(), "symbolic link") || !strings.Contains(err.Error(), link) {
			t.Errorf("link at %s: %v; want an error naming the link", plant, err)
		}
		if ents, _ := os.ReadDir(target); len(ents) > 0 {
			t.Errorf("link at %s: written through it: %v", plant, ents)
		}
		os.Remove(link)
		outside()
	}
}

// Issue 17 item 4: an LFS file (sha256 ETag) announced with neither X-Linked-Size nor
// Content-Length is refused before its body is read, not written without bound.
func TestUnknownSizeLFSRefused(t *testing.T) {
	const commit = "0123456789abcdef0123456789abcdef01234567"
	h := newHostileHub(t, commit)
	chunk := bytes.Repeat([]byte("z"), 1<<20)
	h.set(map[string]hostileFile{"m.gguf": {etag: `"` + sha256Hex(chunk) + `"`, body: chunk, repeat: 64}}, "m.gguf")
	c, outside := escapeCheck(t, h)
	_, err := c.Download("o/n", "main", "m.gguf")
	if err == nil || !strings.Contains(err.Error(), "no size") {
		t.Errorf("error %v, want a refusal for the unknown size", err)
	}
	if n := h.bytesSent(); n > 2<<20 {
		t.Errorf("the client read %d bytes of a body of unknown size", n)
	}
	outside()
}

// Issue 17 item 4: a small (git) file of unknown size is capped at the Hub's limit for files
// outside LFS, 10 MiB: a longer body is an error and no more than the cap is written.
func TestUnknownSizeGitFileCapped(t *testing.T) {
	const commit = "0123456789abcdef0123456789abcdef01234567"
	h := newHostileHub(t, commit)
	chunk := bytes.Repeat([]byte("z"), 1<<20)
	h.set(map[string]hostileFile{"c.json": {etag: `"` + gitSHA1(chunk) + `"`, body: chunk, repeat: 40}}, "c.json")
	c, outside := escapeCheck(t, h)
	var biggest int64
	c.Progress = func(_ string, done, _ int64) { biggest = max(biggest, done) }
	_, err := c.Download("o/n", "main", "c.json")
	if err == nil || !strings.Contains(err.Error(), "10 MiB") {
		t.Errorf("error %v, want the 10 MiB cap", err)
	}
	if biggest > 10<<20 {
		t.Errorf("%d bytes written, more than the 10 MiB cap", biggest)
	}
	outside()
}

// Issue 17 item 4: a small file's body is checked against its git blob sha1 ETag (it used to
// be stored unchecked).
func TestGitETagChecked(t *testing.T) {
	const commit = "0123456789abcdef0123456789abcdef01234567"
	h := newHostileHub(t, commit)
	body, other := []byte(`{"a": 1}`), []byte(`{"a": 2}`)
	h.set(map[string]hostileFile{"config.json": {etag: `"` + gitSHA1(other) + `"`, size: strconv.Itoa(len(body)), body: body}}, "config.json")
	c, outside := escapeCheck(t, h)
	_, err := c.Download("o/n", "main", "config.json")
	if err == nil || !strings.Contains(err.Error(), "git blob sha1") {
		t.Errorf("error %v, want a git hash mismatch", err)
	}
	blobs, _ := os.ReadDir(filepath.Join(c.CacheDir, "models--o--n", "blobs"))
	if len(blobs) != 0 {
		t.Errorf("left in blobs: %v", blobs)
	}
	outside()
}

// An empty file is a known size (0), checked as any other.
func TestEmptyFile(t *testing.T) {
	const commit = "0123456789abcdef0123456789abcdef01234567"
	h := newHostileHub(t, commit)
	h.set(map[string]hostileFile{"e": {etag: `"` + gitSHA1(nil) + `"`, size: "0"}}, "e")
	c, _ := escapeCheck(t, h)
	p, err := c.Download("o/n", "main", "e")
	if err != nil {
		t.Fatal(err)
	}
	if st, err := os.Stat(p); err != nil || st.Size() != 0 {
		t.Errorf("%v %v", st, err)
	}
}

// Within the 10 MiB cap, a small file of unknown size is downloaded and its git blob sha1
// checked once its size is known; the log says so.
func TestUnknownSizeGitFileVerified(t *testing.T) {
	const commit = "0123456789abcdef0123456789abcdef01234567"
	h := newHostileHub(t, commit)
	small := []byte(`{"ok": true}`)
	h.set(map[string]hostileFile{"c.json": {etag: `W/"` + gitSHA1(small) + `"`, body: small}}, "c.json")
	c, outside := escapeCheck(t, h)
	var log []string
	c.Log = func(msg string) { log = append(log, msg) }
	p, err := c.Download("o/n", "main", "c.json")
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(p); !bytes.Equal(b, small) {
		t.Errorf("content %q", b)
	}
	if want := "c.json: 12 bytes, git blob sha1 verified"; len(log) != 1 || !strings.HasPrefix(log[0], want) {
		t.Errorf("log %q, want %q", log, want)
	}
	outside()
}

// The LFS download says what it verified, and a second one that the file was cached.
func TestVerificationLogged(t *testing.T) {
	repos, _ := testRepos()
	s := hubtest.New(repos)
	defer s.Close()
	c := newClient(t, s)
	var log []string
	c.Log = func(msg string) { log = append(log, msg) }
	for range 2 {
		if _, err := c.Download("org/model", "main", "model.Q8_0.gguf"); err != nil {
			t.Fatal(err)
		}
	}
	if len(log) != 2 || !strings.HasPrefix(log[0], "model.Q8_0.gguf: 307200 bytes, sha256 verified") || !strings.HasPrefix(log[1], "model.Q8_0.gguf: cached") {
		t.Errorf("log %q", log)
	}
}

// A header that is not a size is an error naming it, not a size of zero.
func TestBadSizeHeader(t *testing.T) {
	const commit = "0123456789abcdef0123456789abcdef01234567"
	h := newHostileHub(t, commit)
	body := []byte("x")
	for _, size := range []string{"-1", "1e3", "0x10", "99999999999999999999"} {
		h.set(map[string]hostileFile{"f": {etag: `"` + gitSHA1(body) + `"`, linkedSize: size, body: body}}, "f")
		c, _ := escapeCheck(t, h)
		if _, err := c.Download("o/n", "main", "f"); err == nil || !strings.Contains(err.Error(), "X-Linked-Size") {
			t.Errorf("X-Linked-Size %s: %v", size, err)
		}
	}
}
