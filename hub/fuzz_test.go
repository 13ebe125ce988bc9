package hub

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// fuzzHub answers every request from the fuzz input: the file list (commit and names), the
// HEAD's status and headers, the GET's status, Content-Range and body.
type fuzzHub struct {
	commit                              string
	names                               []string
	headStatus, getStatus               int
	etag, linkedEtag, size, linkedSize  string
	location, contentRange              string
	body                                []byte
	mu                                  sync.Mutex
	sent                                int64
	url                                 string
	relativeLocation, explicitGetLength bool
}

func (h *fuzzHub) serve(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/api/models/") {
		sib := []map[string]string{}
		h.mu.Lock()
		names := h.names
		h.mu.Unlock()
		for _, n := range names {
			sib = append(sib, map[string]string{"rfilename": n})
		}
		json.NewEncoder(w).Encode(map[string]any{"sha": h.commit, "siblings": sib})
		return
	}
	if r.Method == http.MethodHead {
		for k, v := range map[string]string{"X-Repo-Commit": h.commit, "ETag": h.etag, "X-Linked-Etag": h.linkedEtag,
			"Content-Length": h.size, "X-Linked-Size": h.linkedSize} {
			if v != "" {
				w.Header().Set(k, v)
			}
		}
		if h.headStatus >= 300 && h.headStatus < 400 {
			loc := "/cdn/" + url.PathEscape(h.location)
			if !h.relativeLocation {
				loc = h.url + loc
			}
			w.Header().Set("Location", loc)
		}
		w.WriteHeader(h.headStatus)
		return
	}
	if h.contentRange != "" {
		w.Header().Set("Content-Range", h.contentRange)
	}
	if h.explicitGetLength {
		w.Header().Set("Content-Length", strconv.Itoa(len(h.body)))
	}
	w.WriteHeader(h.getStatus)
	n, _ := w.Write(h.body)
	h.mu.Lock()
	h.sent += int64(n)
	h.mu.Unlock()
}

// FuzzPull drives Files and Download against a Hub whose answers come from the fuzz input, in
// two rounds with different file lists on one cache. Whatever the answers: no panic, nothing
// created outside HF_HOME, no link in the cache leading out of it, no more bytes on disk than
// the Hub sent (and no file over its announced size or the 10 MiB cap), and a file Download
// returns has the content its ETag names.
func FuzzPull(f *testing.F) {
	const c1 = "0123456789abcdef0123456789abcdef01234567"
	// mode: bits 0-1 ETag (0 as given, 1 sha256 of the body, 2 its git sha1), bit 2 the ETag
	// as X-Linked-Etag, bit 3 Content-Length on HEAD is the body's length, bit 4 a relative
	// Location, bit 5 Content-Length on the GET.
	f.Add("config.json|model.gguf", c1, 1, `".."`, "", "", 200, 200, "", []byte("x"), uint8(0))
	f.Add("a\nb|a/b/c\nb/c", c1, 0, "", "", "", 200, 200, "", []byte("hello"), uint8(2|8))
	f.Add("m.gguf|m.gguf", c1, 302, "", "", "5", 302, 200, "", []byte("hello"), uint8(1|4|32))
	f.Add("p|p/q/a|p/q/a/evil/f", c1, 200, `"."`, "1", "", 200, 200, "", []byte("evil"), uint8(0))
	f.Add("big", c1, 200, "", "", "", 200, 206, "bytes 0-3/4", []byte("abcd"), uint8(1))
	f.Add("c.json", c1, 200, "", "", "", 200, 200, "", bytes.Repeat([]byte("z"), 4096), uint8(2))
	f.Fuzz(func(t *testing.T, names, commit string, locSeed int, etag, size, linkedSize string, headStatus, getStatus int, contentRange string, body []byte, mode uint8) {
		root := t.TempDir()
		home := filepath.Join(root, "home")
		h := &fuzzHub{commit: commit, headStatus: 200 + abs(headStatus)%400, getStatus: 200 + abs(getStatus)%400,
			size: size, linkedSize: linkedSize, contentRange: contentRange, body: body, location: strconv.Itoa(locSeed),
			relativeLocation: mode&16 != 0, explicitGetLength: mode&32 != 0}
		switch mode & 3 {
		case 1:
			etag = `"` + sha256Hex(body) + `"`
		case 2:
			etag = `"` + gitSHA1(body) + `"`
		}
		if mode&4 != 0 {
			h.linkedEtag = etag
		} else {
			h.etag = etag
		}
		if mode&8 != 0 {
			h.size = strconv.Itoa(len(body))
		}
		s := httptest.NewServer(http.HandlerFunc(h.serve))
		defer s.Close()
		h.url = s.URL
		c := &Client{Endpoint: s.URL, CacheDir: filepath.Join(home, "hub"), HTTP: &http.Client{Timeout: 5 * time.Second},
			Retries: 1, retryDelay: time.Microsecond, IdleTimeout: 5 * time.Second}
		rounds := strings.Split(names, "|")
		for _, round := range rounds[:min(len(rounds), 3)] {
			list := strings.Split(round, "\n")
			h.mu.Lock()
			h.names = list[:min(len(list), 4)]
			h.mu.Unlock()
			commit, files, err := c.Files("o/n", "main")
			if err != nil {
				continue
			}
			for _, name := range files {
				for _, rev := range []string{"main", commit} {
					p, err := c.Download("o/n", rev, name)
					if err == nil {
						checkDownloaded(t, home, p, etag)
					}
				}
			}
		}
		h.mu.Lock()
		sent := h.sent
		h.mu.Unlock()
		checkConfined(t, root, home, sent)
	})
}

func abs(x int) int {
	if x < 0 {
		return -(x + 1)
	}
	return x
}

// checkDownloaded fails unless p is inside home and holds the content the ETag names.
func checkDownloaded(t *testing.T, home, p, etag string) {
	t.Helper()
	if !inside(home, p) {
		t.Fatalf("Download returned %s, outside HF_HOME %s", p, home)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("Download returned %s: %v", p, err)
	}
	e := strings.Trim(strings.TrimPrefix(etag, "W/"), `"`)
	if e != sha256Hex(b) && e != gitSHA1(b) {
		t.Fatalf("%s: content of %d bytes does not match the ETag %s", p, len(b), etag)
	}
}

// checkConfined fails when anything appeared in root beside home, when a link under home
// leads outside it (lexically or resolved), or when the files under home hold more bytes than
// the Hub sent (refs aside) or more than the 10 MiB cap each.
func checkConfined(t *testing.T, root, home string, sent int64) {
	t.Helper()
	ents, _ := os.ReadDir(root)
	for _, e := range ents {
		if e.Name() != "home" {
			t.Fatalf("%s was created outside HF_HOME", filepath.Join(root, e.Name()))
		}
	}
	var total int64
	filepath.WalkDir(home, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		if d.Type()&fs.ModeSymlink != 0 {
			target, _ := os.Readlink(p)
			if filepath.IsAbs(target) || !inside(home, filepath.Join(filepath.Dir(p), target)) {
				t.Fatalf("link %s -> %s leads outside HF_HOME", p, target)
			}
			if r, err := filepath.EvalSymlinks(p); err == nil && !inside(home, r) {
				t.Fatalf("link %s resolves to %s, outside HF_HOME", p, r)
			}
			return nil
		}
		if d.Type().IsRegular() && !strings.Contains(p, string(filepath.Separator)+"refs"+string(filepath.Separator)) {
			st, err := d.Info()
			if err == nil {
				total += st.Size()
				if st.Size() > maxGitFile {
					t.Fatalf("%s: %d bytes", p, st.Size())
				}
			}
		}
		return nil
	})
	if total > sent {
		t.Fatalf("%d bytes in the cache, the Hub sent %d", total, sent)
	}
}

func inside(dir, p string) bool {
	rel, err := filepath.Rel(dir, p)
	return err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) && !filepath.IsAbs(rel)
}
