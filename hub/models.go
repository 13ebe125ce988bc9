package hub

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path"
	"slices"
	"strings"
)

// ErrNotCached is wrapped when Remove is asked for what the cache does not have.
var ErrNotCached = errors.New("not in the Hub cache")

// Cached is a GGUF file in the cache: one snapshot entry of a repository.
type Cached struct {
	Repo   string // ORG/NAME
	Commit string // the snapshot
	File   string // its path in the repository
	Path   string // on disk
	Size   int64  // of the file the entry leads to
}

// CachedGGUFs lists the GGUF files of every repository's snapshots in the cache (of a split
// file, its first part), sorted by repository and file. A cache that does not exist holds
// none. Entries that are not files inside the cache (a link out of it, a dangling link) are
// skipped: they could not be run.
func (c *Client) CachedGGUFs() ([]Cached, error) {
	entries, err := os.ReadDir(c.CacheDir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	k, err := c.openCache()
	if err != nil {
		return nil, err
	}
	defer k.Close()
	var out []Cached
	for _, e := range entries {
		repo, ok := repoOfFolder(e.Name())
		if !ok || !e.IsDir() {
			continue
		}
		snaps := e.Name() + "/snapshots"
		commits, err := fs.ReadDir(k.root.FS(), snaps)
		if err != nil {
			continue // a repository being downloaded: no snapshot yet
		}
		for _, commit := range commits {
			out = append(out, k.snapshotGGUFs(repo, snaps+"/"+commit.Name(), commit.Name())...)
		}
	}
	slices.SortFunc(out, func(a, b Cached) int {
		return strings.Compare(a.Repo+"\x00"+a.File+"\x00"+a.Commit, b.Repo+"\x00"+b.File+"\x00"+b.Commit)
	})
	return out, nil
}

// snapshotGGUFs lists the GGUF files under one snapshot folder (rel, in the cache).
func (k *cache) snapshotGGUFs(repo, rel, commit string) []Cached {
	var out []Cached
	fs.WalkDir(k.root.FS(), rel, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(strings.ToLower(p), ".gguf") || shardRE.MatchString(p) {
			return nil
		}
		st, err := k.root.Stat(p) // follows the link to its blob, never out of the cache
		if err != nil || !st.Mode().IsRegular() {
			return nil
		}
		out = append(out, Cached{Repo: repo, Commit: commit, File: strings.TrimPrefix(p, rel+"/"), Path: k.path(p), Size: st.Size()})
		return nil
	})
	return out
}

// repoOfFolder reads "models--ORG--NAME" as ORG/NAME.
func repoOfFolder(name string) (string, bool) {
	rest, ok := strings.CutPrefix(name, "models--")
	if !ok {
		return "", false
	}
	org, model, ok := strings.Cut(rest, "--")
	if !ok {
		return rest, CheckRepo(rest) == nil
	}
	repo := org + "/" + model
	return repo, CheckRepo(repo) == nil
}

// Remove deletes from the cache a repository (file "") or one of its files: the file's
// snapshot entries and the blobs they lead to; with the last file, the repository's folder.
// It returns what it removed. A file or repository not in the cache is an error.
func (c *Client) Remove(repo, file string) ([]string, error) {
	if err := CheckRepo(repo); err != nil {
		return nil, err
	}
	k, err := c.openCache()
	if err != nil {
		return nil, err
	}
	defer k.Close()
	dir := repoFolder(repo)
	st, err := k.root.Lstat(dir)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("%s is %w (%s)", repo, ErrNotCached, c.CacheDir)
	case err != nil:
		return nil, err
	case st.Mode()&fs.ModeSymlink != 0:
		return nil, k.linkError(dir)
	}
	if file == "" {
		return []string{k.path(dir)}, os.RemoveAll(k.path(dir))
	}
	if err := checkFileName(file); err != nil {
		return nil, err
	}
	removed, err := k.removeFile(dir, file)
	if err != nil || len(removed) == 0 {
		if err == nil {
			err = fmt.Errorf("%s: %s is %w", repo, file, ErrNotCached)
		}
		return removed, err
	}
	if rest, _ := c.CachedGGUFs(); !slices.ContainsFunc(rest, func(x Cached) bool { return x.Repo == repo }) {
		removed = append(removed, k.path(dir))
		return removed, os.RemoveAll(k.path(dir))
	}
	return removed, nil
}

// removeFile removes file's entry from every snapshot of the repository folder dir, and the
// blob each entry links to.
func (k *cache) removeFile(dir, file string) ([]string, error) {
	commits, err := fs.ReadDir(k.root.FS(), dir+"/snapshots")
	if err != nil {
		return nil, nil
	}
	var removed []string
	for _, commit := range commits {
		snap := dir + "/snapshots/" + commit.Name() + "/" + file
		if ok, err := k.checkDirs(snap); !ok || err != nil {
			continue
		}
		st, err := k.root.Lstat(snap)
		if err != nil {
			continue
		}
		if st.Mode()&fs.ModeSymlink != 0 {
			if target, err := k.root.Readlink(snap); err == nil {
				blob := path.Join(path.Dir(snap), target)
				if strings.HasPrefix(blob, dir+"/blobs/") {
					if err := k.root.Remove(blob); err == nil {
						removed = append(removed, k.path(blob))
					}
				}
			}
		}
		if err := k.root.Remove(snap); err != nil {
			return removed, err
		}
		removed = append(removed, k.path(snap))
	}
	return removed, nil
}
