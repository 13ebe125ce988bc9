// Package hub downloads files from the Hugging Face Hub into the Hub's own cache layout
// ($HF_HOME/hub/models--ORG--NAME/{blobs,snapshots,refs}), so downloads are shared with the
// Hugging Face tools: resumable (HTTP Range on a blob's .incomplete file), each LFS file checked
// against the sha256 the Hub gives as its ETag, HF_TOKEN for gated and private repositories,
// HF_ENDPOINT for mirrors and HF_HUB_OFFLINE=1 to use the cache only.
package hub

import (
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"hash"
	"io"
	"net"
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

// ErrUnreachable is wrapped when the Hub cannot be reached (no network, a DNS failure, a
// refused connection) and the cache does not have what was asked for.
var ErrUnreachable = errors.New("cannot reach the Hugging Face Hub")

// unreachable explains a failed connection to the Hub and how to work without it; an error of
// another kind (too many redirects) is returned as it is.
func (c *Client) unreachable(err error) error {
	var op *net.OpError
	var dns *net.DNSError
	if !errors.As(err, &op) && !errors.As(err, &dns) {
		return err
	}
	return fmt.Errorf("%w at %s (%v): check the network, or set HF_HUB_OFFLINE=1 to use only the models in the cache, or HF_ENDPOINT to use a mirror",
		ErrUnreachable, c.Endpoint, errors.Unwrap(err))
}

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
	// Log, when set, is told what each download verified ("FILE: N bytes, sha256 verified
	// against the Hub's ETag") or that a file was already in the cache.
	Log func(msg string)

	retryDelay time.Duration // the wait before a resumption, times the attempt (default 50 ms)
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
		// As huggingface_hub: what the cache has of the revision serves without the Hub.
		if commit, files, cerr := c.cachedFiles(repo, revision); cerr == nil && errors.Is(c.unreachable(err), ErrUnreachable) {
			c.log("%v; using the cached snapshot %s", c.unreachable(err), commit)
			return commit, files, nil
		}
		return "", nil, c.unreachable(err)
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
		k, err := c.openCache()
		if err != nil {
			return "", nil, err
		}
		defer k.Close()
		if err := writeRef(k, repoFolder(repo), revision, info.SHA); err != nil {
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
	if checkFileName(revision) != nil {
		return "", fmt.Errorf("%s@%s: %w", repo, revision, ErrOffline)
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
	if c.Offline {
		return c.cachedFile(repo, revision, name)
	}
	meta, err := c.head(repo, revision, name)
	if errors.Is(err, ErrUnreachable) {
		if p, cerr := c.cachedFile(repo, revision, name); cerr == nil {
			return p, nil
		}
	}
	if err != nil {
		return "", err
	}
	k, err := c.openCache()
	if err != nil {
		return "", err
	}
	defer k.Close()
	dir := repoFolder(repo)
	if revision != meta.commit {
		if err := writeRef(k, dir, revision, meta.commit); err != nil {
			return "", err
		}
	}
	snap := dir + "/snapshots/" + meta.commit + "/" + name
	if ok, err := k.snapshotEntry(snap); err != nil || ok {
		if ok {
			c.log("%s: cached (%s)", name, k.path(snap))
		}
		return k.path(snap), err
	}
	blob := dir + "/blobs/" + meta.etag
	have, err := k.regular(blob)
	if err != nil {
		return "", err
	}
	if have {
		c.log("%s: blob %s already in the cache", name, meta.etag)
	} else if err := c.fetch(k, repo, name, meta, blob); err != nil {
		return "", err
	}
	if err := k.link(blob, snap); err != nil {
		return "", err
	}
	return k.path(snap), nil
}

// cachedFile is Download offline: the snapshot entry, if the cache has it.
func (c *Client) cachedFile(repo, revision, name string) (string, error) {
	commit, err := c.cachedCommit(repo, revision)
	if err != nil {
		return "", err
	}
	k, err := c.openCache()
	if err != nil {
		return "", err
	}
	defer k.Close()
	snap := repoFolder(repo) + "/snapshots/" + commit + "/" + name
	ok, err := k.snapshotEntry(snap)
	if err != nil {
		return "", err
	}
	if !ok {
		return "", fmt.Errorf("%s@%s: %s: %w", repo, revision, name, ErrOffline)
	}
	return k.path(snap), nil
}

// repoFolder is the repository's folder relative to the cache.
func repoFolder(repo string) string {
	return "models--" + strings.ReplaceAll(repo, "/", "--")
}

func (c *Client) log(format string, args ...any) {
	if c.Log != nil {
		c.Log(fmt.Sprintf(format, args...))
	}
}

type fileMeta struct {
	commit, etag, url string
	size              int64 // -1: the Hub announced none
	lfs               bool  // etag is the content's sha256; else its git blob sha1
}

var (
	gitSHA1RE  = regexp.MustCompile(`^[0-9a-f]{40}$`)
	sha256RE   = regexp.MustCompile(`^[0-9a-f]{64}$`)
	sizeRE     = regexp.MustCompile(`^[0-9]{1,18}$`)
	maxGitFile = int64(10 << 20) // the Hub keeps larger files in LFS
)

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
		return m, c.unreachable(err)
	}
	resp.Body.Close()
	if resp.StatusCode >= 400 {
		return m, c.statusError(repo, resp)
	}
	m.commit = resp.Header.Get("X-Repo-Commit")
	if !commitRE.MatchString(m.commit) {
		return m, fmt.Errorf("%s: %s: the Hub's answer has no commit (X-Repo-Commit %q, want 40 hex digits): is HF_ENDPOINT a Hub?", repo, name, m.commit)
	}
	etag := resp.Header.Get("X-Linked-Etag")
	if etag == "" {
		etag = resp.Header.Get("ETag")
	}
	m.etag = strings.Trim(strings.TrimPrefix(etag, "W/"), `"`)
	// The ETag names the blob in the cache: only the two hashes the Hub gives are names.
	switch {
	case sha256RE.MatchString(m.etag):
		m.lfs = true
	case gitSHA1RE.MatchString(m.etag):
	default:
		return m, fmt.Errorf("%s: %s: the Hub's ETag %q is neither a sha256 (LFS) nor a git sha1 (40 or 64 lowercase hex digits): is HF_ENDPOINT a Hub?", repo, name, etag)
	}
	if m.size, err = announcedSize(resp); err != nil {
		return m, fmt.Errorf("%s: %s: %w", repo, name, err)
	}
	if m.size < 0 && m.lfs {
		return m, fmt.Errorf("%s: %s: the Hub announced no size (neither X-Linked-Size nor Content-Length) for this LFS file: refusing a download without a bound; is HF_ENDPOINT a Hub?", repo, name)
	}
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

// announcedSize is the file's size from X-Linked-Size (an LFS file's), else from the
// Content-Length of a direct answer (a redirect's is the redirect's own body); -1 for none.
func announcedSize(resp *http.Response) (int64, error) {
	key := "X-Linked-Size"
	v := resp.Header.Get(key)
	if v == "" && resp.StatusCode < 300 {
		key = "Content-Length"
		v = resp.Header.Get(key)
	}
	if v == "" {
		return -1, nil
	}
	if !sizeRE.MatchString(v) {
		return 0, fmt.Errorf("the Hub's %s %q is not a size", key, v)
	}
	return strconv.ParseInt(v, 10, 64)
}

func escapePath(name string) string {
	parts := strings.Split(name, "/")
	for i, p := range parts {
		parts[i] = url.PathEscape(p)
	}
	return strings.Join(parts, "/")
}

// writeRef records the commit a branch or tag name resolved to (refs/NAME), as huggingface_hub
// does for offline use.
func writeRef(k *cache, dir, revision, commit string) error {
	if checkFileName(revision) != nil {
		return nil // a revision that is not a plain ref name is not recorded
	}
	return k.writeFile(dir+"/refs/"+revision, []byte(commit))
}

// fetch downloads the file into blob, resuming blob.incomplete with Range requests after a
// cut connection (and from a previous run), and checks the content against the ETag: an LFS
// file's sha256, a small file's git blob sha1.
func (c *Client) fetch(k *cache, repo, name string, m fileMeta, blob string) error {
	part := blob + ".incomplete"
	retries := c.Retries
	if retries == 0 {
		retries = 5
	}
	delay := c.retryDelay
	if delay == 0 {
		delay = 50 * time.Millisecond
	}
	v := newVerifier(m)
	var have int64
	for attempt := 0; attempt <= retries; attempt++ {
		if attempt > 0 {
			time.Sleep(time.Duration(attempt) * delay)
		}
		var err error
		have, err = c.fetchOnce(k, repo, name, m, part, v)
		if err == nil {
			break
		}
		var perm permanent
		if errors.As(err, &perm) {
			return err
		}
		if attempt == retries {
			return fmt.Errorf("%s: %s: download failed after %d attempts: %w", repo, name, retries+1, err)
		}
	}
	got, err := v.sum(k, part, have)
	if err != nil {
		return err
	}
	if got != m.etag {
		k.root.Remove(part)
		return fmt.Errorf("%s: %s: the download's %s %s is not the Hub's ETag %s: corrupted in transit (removed; run again)", repo, name, v.kind(), got, m.etag)
	}
	if err := k.root.Rename(part, blob); err != nil {
		return err
	}
	c.log("%s: %d bytes, %s verified against the Hub's ETag", name, have, v.kind())
	return nil
}

// permanent marks errors a retry cannot fix.
type permanent struct{ error }

func (p permanent) Unwrap() error { return p.error }

// fetchOnce makes one request for the rest of the file, appending to part; it returns how
// many bytes part holds.
func (c *Client) fetchOnce(k *cache, repo, name string, m fileMeta, part string, v *verifier) (int64, error) {
	f, err := k.openPart(part)
	if err != nil {
		return 0, permanent{err}
	}
	defer f.Close()
	have, err := f.Seek(0, io.SeekEnd)
	if err != nil {
		return 0, permanent{err}
	}
	limit := m.size
	if limit < 0 {
		limit = maxGitFile
	}
	if have > limit {
		if err := restart(f, v); err != nil {
			return 0, permanent{err}
		}
		have = 0
	}
	if err := v.catchUp(f, have); err != nil {
		return have, permanent{err}
	}
	if have == m.size {
		return have, nil
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
			if err := restart(f, v); err != nil {
				return 0, permanent{err}
			}
			have = 0
		}
	case resp.StatusCode == http.StatusRequestedRangeNotSatisfiable:
		if err := restart(f, v); err != nil {
			return 0, permanent{err}
		}
		return 0, fmt.Errorf("%s: %s: range not satisfiable, starting over", repo, name)
	default:
		return have, permanent{c.statusError(repo, resp)}
	}
	buf := make([]byte, 1<<20)
	for {
		n, rerr := resp.Body.Read(buf)
		watchdog.Reset(idle)
		if n > 0 {
			if have+int64(n) > limit {
				if m.size < 0 {
					return have, permanent{fmt.Errorf("%s: %s: the server sent more than 10 MiB for a file of no announced size outside LFS (the Hub keeps larger files in LFS, with their size)", repo, name)}
				}
				return have, permanent{fmt.Errorf("%s: %s: the server sent more than the %d bytes the Hub announced", repo, name, m.size)}
			}
			if _, err := f.Write(buf[:n]); err != nil {
				return have, permanent{err}
			}
			v.write(buf[:n])
			have += int64(n)
			if c.Progress != nil {
				c.Progress(name, have, max(m.size, 0))
			}
		}
		if rerr == io.EOF {
			break
		}
		if rerr != nil {
			return have, rerr
		}
	}
	if m.size >= 0 && have != m.size {
		return have, fmt.Errorf("%s: %s: connection ended at byte %d of %d", repo, name, have, m.size)
	}
	return have, f.Sync()
}

// restart empties the partial download and the hash of its bytes.
func restart(f *os.File, v *verifier) error {
	if err := f.Truncate(0); err != nil {
		return err
	}
	if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	v.reset()
	return nil
}

// verifier hashes a download as it streams in: sha256 for an LFS file, the git blob sha1
// (sha1 of "blob SIZE\x00" and the content) for a small file. Its state is always the hash of
// the first n bytes of the partial file.
type verifier struct {
	lfs  bool
	size int64 // -1: unknown, the git header is then hashed with the content at the end
	h    hash.Hash
	n    int64
}

func newVerifier(m fileMeta) *verifier {
	v := &verifier{lfs: m.lfs, size: m.size}
	v.reset()
	return v
}

func (v *verifier) kind() string {
	if v.lfs {
		return "sha256"
	}
	return "git blob sha1"
}

func (v *verifier) reset() {
	v.n = 0
	if v.lfs {
		v.h = sha256.New()
		return
	}
	v.h = sha1.New()
	if v.size >= 0 {
		fmt.Fprintf(v.h, "blob %d\x00", v.size)
	}
}

func (v *verifier) write(b []byte) {
	v.h.Write(b)
	v.n += int64(len(b))
}

// catchUp hashes the partial file's first have bytes when they are not what was hashed (a
// download resumed from an earlier run).
func (v *verifier) catchUp(f *os.File, have int64) error {
	if v.n == have {
		return nil
	}
	v.reset()
	n, err := io.Copy(v.h, io.NewSectionReader(f, 0, have))
	v.n = n
	return err
}

// sum is the hash of the complete download of have bytes, as the ETag writes it.
func (v *verifier) sum(k *cache, part string, have int64) (string, error) {
	if v.n != have || (!v.lfs && v.size < 0) {
		// The git header needs the size: hash the (at most maxGitFile) file again.
		v.size = have
		f, err := k.root.Open(part)
		if err != nil {
			return "", err
		}
		defer f.Close()
		v.n = -1
		if err := v.catchUp(f, have); err != nil {
			return "", err
		}
	}
	return hex.EncodeToString(v.h.Sum(nil)), nil
}
