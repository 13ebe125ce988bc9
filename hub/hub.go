// Package hub downloads files from the Hugging Face Hub into the Hub's own cache layout
// ($HF_HOME/hub/models--ORG--NAME/{blobs,snapshots,refs}), so downloads are shared with the
// Hugging Face tools: resumable (HTTP Range on a blob's .incomplete file), each LFS file checked
// against the sha256 the Hub gives as its ETag, HF_TOKEN for gated and private repositories,
// HF_ENDPOINT for mirrors and HF_HUB_OFFLINE=1 to use the cache only.
package hub

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// DefaultEndpoint is the Hub's address when HF_ENDPOINT is not set.
const DefaultEndpoint = "https://huggingface.co"

// ErrOffline is wrapped when offline mode needs a file the cache does not have.
var ErrOffline = errors.New("offline (HF_HUB_OFFLINE=1) and not in the cache")

// ErrAuth is wrapped when the Hub refuses a repository for want of a token (401/403).
var ErrAuth = errors.New("the repository is gated or private")

// Client talks to one Hub endpoint and caches into one directory.
type Client struct {
	Endpoint string // no trailing slash
	Token    string
	CacheDir string // the hub directory: .../huggingface/hub
	Offline  bool
	HTTP     *http.Client
	// Progress is called as a file downloads (bytes done and total; total 0 when unknown).
	Progress func(file string, done, total int64)
	// Retries is how many times a cut download resumes (default 5).
	Retries int
	// IdleTimeout ends a download that receives nothing for this long (it then resumes as
	// after a cut connection); default one minute.
	IdleTimeout time.Duration
}

// FromEnv makes a client from the environment as huggingface_hub reads it: HF_ENDPOINT,
// HF_TOKEN (else the token file $HF_HOME/token), HF_HUB_CACHE or $HF_HOME/hub (HF_HOME defaults
// to $XDG_CACHE_HOME/huggingface or ~/.cache/huggingface), HF_HUB_OFFLINE.
func FromEnv() *Client {
	c := &Client{Endpoint: strings.TrimRight(os.Getenv("HF_ENDPOINT"), "/"), Token: os.Getenv("HF_TOKEN")}
	if c.Endpoint == "" {
		c.Endpoint = DefaultEndpoint
	}
	home := os.Getenv("HF_HOME")
	if home == "" {
		cache := os.Getenv("XDG_CACHE_HOME")
		if cache == "" {
			if h, err := os.UserHomeDir(); err == nil {
				cache = filepath.Join(h, ".cache")
			}
		}
		home = filepath.Join(cache, "huggingface")
	}
	c.CacheDir = os.Getenv("HF_HUB_CACHE")
	if c.CacheDir == "" {
		c.CacheDir = filepath.Join(home, "hub")
	}
	if c.Token == "" {
		if b, err := os.ReadFile(filepath.Join(home, "token")); err == nil {
			c.Token = strings.TrimSpace(string(b))
		}
	}
	switch strings.ToLower(os.Getenv("HF_HUB_OFFLINE")) {
	case "1", "true", "yes", "on":
		c.Offline = true
	}
	return c
}

var repoRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._-]*(/[A-Za-z0-9][A-Za-z0-9._-]*)?$`)

// CheckRepo validates a repository id ("org/name" or "name").
func CheckRepo(repo string) error {
	if !repoRE.MatchString(repo) || strings.Contains(repo, "..") || len(repo) > 96 {
		return fmt.Errorf("%q is not a Hugging Face repository id (ORG/NAME)", repo)
	}
	return nil
}

// repoDir is the repository's folder in the cache.
func (c *Client) repoDir(repo string) string {
	return filepath.Join(c.CacheDir, "models--"+strings.ReplaceAll(repo, "/", "--"))
}

func (c *Client) http() *http.Client {
	if c.HTTP != nil {
		return c.HTTP
	}
	return http.DefaultClient
}

func (c *Client) request(method, u string) (*http.Request, error) {
	req, err := http.NewRequest(method, u, nil)
	if err != nil {
		return nil, err
	}
	req.Header.Set("User-Agent", "gorun")
	if c.Token != "" {
		req.Header.Set("Authorization", "Bearer "+c.Token)
	}
	return req, nil
}

// statusError explains a failed Hub response.
func (c *Client) statusError(repo string, resp *http.Response) error {
	msg := ""
	if b, _ := io.ReadAll(io.LimitReader(resp.Body, 512)); len(b) > 0 {
		msg = ": " + strings.TrimSpace(string(b))
	}
	switch resp.StatusCode {
	case http.StatusUnauthorized, http.StatusForbidden:
		how := "set HF_TOKEN to a token from https://huggingface.co/settings/tokens"
		if c.Token != "" {
			how = "HF_TOKEN is set: check that its account has accepted the model's terms on its page and that the token can read it"
		}
		return fmt.Errorf("%s: %w (HTTP %d): %s", repo, ErrAuth, resp.StatusCode, how)
	case http.StatusNotFound:
		return fmt.Errorf("%s: not found on %s (HTTP 404%s): check the repository, revision and file names", repo, c.Endpoint, msg)
	}
	return fmt.Errorf("%s: HTTP %d%s", repo, resp.StatusCode, msg)
}

// Files lists the repository's files at a revision, and the commit it resolves to.
func (c *Client) Files(repo, revision string) (commit string, files []string, err error) {
	if err := CheckRepo(repo); err != nil {
		return "", nil, err
	}
	if revision == "" {
		revision = "main"
	}
	if c.Offline {
		return c.cachedFiles(repo, revision)
	}
	u := fmt.Sprintf("%s/api/models/%s/revision/%s", c.Endpoint, repo, url.PathEscape(revision))
	req, err := c.request("GET", u)
	if err != nil {
		return "", nil, err
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return "", nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return "", nil, c.statusError(repo, resp)
	}
	var info struct {
		SHA      string `json:"sha"`
		Siblings []struct {
			Name string `json:"rfilename"`
		} `json:"siblings"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&info); err != nil {
		return "", nil, fmt.Errorf("%s: the Hub's file list: %w", repo, err)
	}
	if !commitRE.MatchString(info.SHA) {
		return "", nil, fmt.Errorf("%s: the Hub's file list has no commit (sha %q)", repo, info.SHA)
	}
	for _, s := range info.Siblings {
		files = append(files, s.Name)
	}
	// The revision's commit is recorded, as snapshot_download does, for offline use.
	if revision != info.SHA {
		if err := writeRef(c.repoDir(repo), revision, info.SHA); err != nil {
			return "", nil, err
		}
	}
	return info.SHA, files, nil
}

// cachedFiles lists a cached snapshot's files (offline mode).
func (c *Client) cachedFiles(repo, revision string) (string, []string, error) {
	commit, err := c.cachedCommit(repo, revision)
	if err != nil {
		return "", nil, err
	}
	snap := filepath.Join(c.repoDir(repo), "snapshots", commit)
	var files []string
	err = filepath.WalkDir(snap, func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() {
			rel, _ := filepath.Rel(snap, p)
			files = append(files, filepath.ToSlash(rel))
		}
		return nil
	})
	if err != nil {
		return "", nil, fmt.Errorf("%s@%s: %w", repo, revision, ErrOffline)
	}
	return commit, files, nil
}

var commitRE = regexp.MustCompile(`^[0-9a-f]{40}$`)

func (c *Client) cachedCommit(repo, revision string) (string, error) {
	if commitRE.MatchString(revision) {
		return revision, nil
	}
	b, err := os.ReadFile(filepath.Join(c.repoDir(repo), "refs", filepath.FromSlash(revision)))
	if err != nil || !commitRE.MatchString(strings.TrimSpace(string(b))) {
		return "", fmt.Errorf("%s@%s: %w", repo, revision, ErrOffline)
	}
	return strings.TrimSpace(string(b)), nil
}

// checkFileName refuses names that would leave the snapshot directory.
func checkFileName(name string) error {
	if name == "" || strings.HasPrefix(name, "/") || strings.Contains(name, "\\") {
		return fmt.Errorf("bad file name %q", name)
	}
	for _, part := range strings.Split(name, "/") {
		if part == "" || part == "." || part == ".." {
			return fmt.Errorf("bad file name %q", name)
		}
	}
	return nil
}

// Download returns the path of the file in the cache's snapshot of the revision, downloading
// it when it is not there (or, offline, failing with ErrOffline).
func (c *Client) Download(repo, revision, name string) (string, error) {
	if err := CheckRepo(repo); err != nil {
		return "", err
	}
	if err := checkFileName(name); err != nil {
		return "", err
	}
	if revision == "" {
		revision = "main"
	}
	dir := c.repoDir(repo)
	if c.Offline {
		commit, err := c.cachedCommit(repo, revision)
		if err != nil {
			return "", err
		}
		p := filepath.Join(dir, "snapshots", commit, filepath.FromSlash(name))
		if _, err := os.Stat(p); err != nil {
			return "", fmt.Errorf("%s@%s: %s: %w", repo, revision, name, ErrOffline)
		}
		return p, nil
	}
	meta, err := c.head(repo, revision, name)
	if err != nil {
		return "", err
	}
	snap := filepath.Join(dir, "snapshots", meta.commit, filepath.FromSlash(name))
	if revision != meta.commit {
		if err := writeRef(dir, revision, meta.commit); err != nil {
			return "", err
		}
	}
	if _, err := os.Stat(snap); err == nil {
		return snap, nil
	}
	blob := filepath.Join(dir, "blobs", meta.etag)
	if _, err := os.Stat(blob); err != nil {
		if err := c.fetch(repo, name, meta, blob); err != nil {
			return "", err
		}
	}
	if err := link(blob, snap); err != nil {
		return "", err
	}
	return snap, nil
}

type fileMeta struct {
	commit, etag, url string
	size              int64
	lfs               bool // etag is the content's sha256
}

var etagRE = regexp.MustCompile(`^[0-9A-Za-z._-]{1,128}$`)

// head asks the Hub for a file's commit, ETag, size and download address without following
// the redirect to the storage host (the headers that matter are on the Hub's answer).
func (c *Client) head(repo, revision, name string) (fileMeta, error) {
	var m fileMeta
	u := fmt.Sprintf("%s/%s/resolve/%s/%s", c.Endpoint, repo, url.PathEscape(revision), escapePath(name))
	cl := *c.http()
	cl.CheckRedirect = func(req *http.Request, via []*http.Request) error {
		if len(via) >= 10 {
			return errors.New("too many redirects")
		}
		// A relative redirect is a renamed repository: follow it, as huggingface_hub does. An
		// absolute one goes to the storage host: the headers that matter are on this answer.
		if req.Response != nil && strings.HasPrefix(req.Response.Header.Get("Location"), "/") {
			return nil
		}
		return http.ErrUseLastResponse
	}
	req, err := c.request("HEAD", u)
	if err != nil {
		return m, err
	}
	req.Header.Set("Accept-Encoding", "identity")
	resp, err := cl.Do(req)
	if err != nil {
		return m, err
	}
	resp.Body.Close()
	if resp.StatusCode >= 400 {
		return m, c.statusError(repo, resp)
	}
	m.commit = resp.Header.Get("X-Repo-Commit")
	etag := resp.Header.Get("X-Linked-Etag")
	if etag == "" {
		etag = resp.Header.Get("ETag")
	}
	etag = strings.Trim(strings.TrimPrefix(etag, "W/"), `"`)
	size := resp.Header.Get("X-Linked-Size")
	if size == "" {
		size = resp.Header.Get("Content-Length")
	}
	m.size, _ = strconv.ParseInt(size, 10, 64)
	if !commitRE.MatchString(m.commit) || !etagRE.MatchString(etag) {
		return m, fmt.Errorf("%s: %s: the Hub's answer lacks a commit or ETag (X-Repo-Commit %q, ETag %q): is HF_ENDPOINT a Hub?", repo, name, m.commit, etag)
	}
	m.etag = etag
	m.lfs = regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(etag)
	m.url = u
	if loc := resp.Header.Get("Location"); loc != "" && resp.StatusCode >= 300 {
		ref, err := resp.Request.URL.Parse(loc)
		if err != nil {
			return m, err
		}
		m.url = ref.String()
	}
	return m, nil
}

func escapePath(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}

func writeRef(dir, revision, commit string) error {
	if checkFileName(revision) != nil {
		return nil // a revision that is not a plain ref name is not recorded
	}
	p := filepath.Join(dir, "refs", filepath.FromSlash(revision))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		return err
	}
	return os.WriteFile(p, []byte(commit), 0o644)
}

// fetch downloads the file into blob, resuming blob.incomplete with Range requests after a
// cut connection (and from a previous run), and checks an LFS file's sha256.
func (c *Client) fetch(repo, name string, m fileMeta, blob string) error {
	if err := os.MkdirAll(filepath.Dir(blob), 0o755); err != nil {
		return err
	}
	part := blob + ".incomplete"
	retries := c.Retries
	if retries == 0 {
		retries = 5
	}
	var lastErr error
	for attempt := 0; attempt <= retries; attempt++ {
		if attempt > 0 {
			time.Sleep(time.Duration(attempt) * 50 * time.Millisecond)
		}
		done, err := c.fetchOnce(repo, name, m, part)
		if err == nil {
			break
		}
		lastErr = err
		var perm permanent
		if errors.As(err, &perm) {
			return err
		}
		_ = done
		if attempt == retries {
			return fmt.Errorf("%s: %s: download failed after %d attempts: %w", repo, name, retries+1, lastErr)
		}
	}
	if m.lfs {
		sum, err := fileSHA256(part)
		if err != nil {
			return err
		}
		if sum != m.etag {
			os.Remove(part)
			return fmt.Errorf("%s: %s: the download's sha256 %s is not the Hub's %s: corrupted in transit (removed; run again)", repo, name, sum, m.etag)
		}
	}
	return os.Rename(part, blob)
}

// permanent marks errors a retry cannot fix.
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

func (c *Client) fetchOnce(repo, name string, m fileMeta, part string) (int64, error) {
	f, err := os.OpenFile(part, os.O_WRONLY|os.O_CREATE, 0o644)
	if err != nil {
		return 0, permanent{err}
	}
	defer f.Close()
	have, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, permanent{err}
	}
	if m.size > 0 && have == m.size {
		return have, nil
	}
	if m.size > 0 && have > m.size {
		if err := f.Truncate(0); err != nil {
			return 0, permanent{err}
		}
		have, _ = f.Seek(0, io.SeekStart)
	}
	req, err := c.request("GET", m.url)
	if err != nil {
		return have, permanent{err}
	}
	idle := c.IdleTimeout
	if idle <= 0 {
		idle = time.Minute
	}
	ctx, cancel := context.WithCancel(req.Context())
	defer cancel()
	watchdog := time.AfterFunc(idle, cancel) // a stalled connection: give up and resume
	defer watchdog.Stop()
	req = req.WithContext(ctx)
	req.Header.Set("Accept-Encoding", "identity")
	if have > 0 {
		req.Header.Set("Range", fmt.Sprintf("bytes=%d-", have))
	}
	resp, err := c.http().Do(req)
	if err != nil {
		return have, err
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusPartialContent && have > 0:
		if !strings.HasPrefix(resp.Header.Get("Content-Range"), fmt.Sprintf("bytes %d-", have)) {
			return have, permanent{fmt.Errorf("%s: %s: the server resumed at the wrong place (Content-Range %q, want from byte %d)", repo, name, resp.Header.Get("Content-Range"), have)}
		}
	case resp.StatusCode == http.StatusOK:
		if have > 0 { // no resumption: start over
			if err := f.Truncate(0); err != nil {
				return 0, permanent{err}
			}
			if _, err := f.Seek(0, io.SeekStart); err != nil {
				return 0, permanent{err}
			}
			have = 0
		}
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		f.Truncate(0)
		return 0, fmt.Errorf("%s: %s: range not satisfiable, starting over", repo, name)
	default:
		return have, permanent{c.statusError(repo, resp)}
	}
	buf := make([]byte, 1<<20)
	for {
		n, rerr := resp.Body.Read(buf)
		watchdog.Reset(idle)
		if n > 0 {
			if m.size > 0 && have+int64(n) > m.size {
				return have, permanent{fmt.Errorf("%s: %s: the server sent more than the %d bytes the Hub announced", repo, name, m.size)}
			}
			if _, err := f.Write(buf[:n]); err != nil {
				return have, permanent{err}
			}
			have += int64(n)
			if c.Progress != nil {
				c.Progress(name, have, m.size)
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return have, rerr
		}
	}
	if m.size > 0 && have != m.size {
		return have, fmt.Errorf("%s: %s: connection ended at byte %d of %d", repo, name, have, m.size)
	}
	return have, f.Sync()
}

func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// link makes the snapshot entry for a blob: a relative symbolic link as huggingface_hub makes,
// or, where links cannot be made (Windows without developer mode), a copy.
func link(blob, snap string) error {
	if err := os.MkdirAll(filepath.Dir(snap), 0o755); err != nil {
		return err
	}
	rel, err := filepath.Rel(filepath.Dir(snap), blob)
	if err != nil {
		return err
	}
	os.Remove(snap)
	if err := os.Symlink(rel, snap); err == nil {
		return nil
	}
	in, err := os.Open(blob)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.Create(snap + ".tmp")
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	if err := out.Close(); err != nil {
		return err
	}
	return os.Rename(snap+".tmp", snap)
}
