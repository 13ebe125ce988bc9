package hub

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"
)

// cache is the Hub cache directory opened as an os.Root, so that no path built from the
// Hub's answers (file names, commits, ETags) can leave it. os.Root still follows a link that
// stays inside the root; the folders gorun makes or writes into must not be links at all (a
// planted link would redirect later writes), so every folder of a path is checked with Lstat
// and a link is an error naming it. Paths given to its methods are slash-separated and
// relative to the cache directory.
type cache struct {
	root *os.Root
	dir  string
}

func (c *Client) openCache() (*cache, error) {
	if err := os.MkdirAll(c.CacheDir, 0o755); err != nil {
		return nil, err
	}
	r, err := os.OpenRoot(c.CacheDir)
	if err != nil {
		return nil, err
	}
	return &cache{root: r, dir: c.CacheDir}, nil
}

func (k *cache) Close() error { return k.root.Close() }

// path is rel's path on disk.
func (k *cache) path(rel string) string { return filepath.Join(k.dir, filepath.FromSlash(rel)) }

// linkError explains a symbolic link found where the cache needs a folder or a file.
func (k *cache) linkError(rel string) error {
	target, _ := k.root.Readlink(rel)
	return fmt.Errorf("%s is a symbolic link (to %q) where the Hub cache needs a real folder or file: refusing to follow it; remove it and run again", k.path(rel), target)
}

// mkdirs makes the folder rel and its parents, refusing a link or a file on the way.
func (k *cache) mkdirs(rel string) error {
	parts := strings.Split(rel, "/")
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		st, err := k.root.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			if err := k.root.Mkdir(p, 0o755); err != nil && !errors.Is(err, fs.ErrExist) {
				return err
			}
		case err != nil:
			return err
		case st.Mode()&fs.ModeSymlink != 0:
			return k.linkError(p)
		case !st.IsDir():
			return fmt.Errorf("%s is not a folder: the Hub cache needs one there", k.path(p))
		}
	}
	return nil
}

// checkDirs checks that the folders holding rel are real folders (not links) where they exist;
// it reports whether they all exist.
func (k *cache) checkDirs(rel string) (bool, error) {
	dir := path.Dir(rel)
	if dir == "." {
		return true, nil
	}
	parts := strings.Split(dir, "/")
	for i := range parts {
		p := strings.Join(parts[:i+1], "/")
		st, err := k.root.Lstat(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return false, nil
		case err != nil:
			return false, err
		case st.Mode()&fs.ModeSymlink != 0:
			return false, k.linkError(p)
		case !st.IsDir():
			return false, fmt.Errorf("%s is not a folder: the Hub cache needs one there", k.path(p))
		}
	}
	return true, nil
}

// regular reports whether rel is a regular file (not a link), failing on a link or anything
// else that is not a file.
func (k *cache) regular(rel string) (bool, error) {
	if ok, err := k.checkDirs(rel); !ok || err != nil {
		return false, err
	}
	st, err := k.root.Lstat(rel)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return false, nil
	case err != nil:
		return false, err
	case st.Mode()&fs.ModeSymlink != 0:
		return false, k.linkError(rel)
	case !st.Mode().IsRegular():
		return false, fmt.Errorf("%s is not a regular file", k.path(rel))
	}
	return true, nil
}

// snapshotEntry reports whether the snapshot entry rel exists and leads, inside the cache, to
// a regular file (huggingface_hub's relative link to a blob, or a copy).
func (k *cache) snapshotEntry(rel string) (bool, error) {
	if ok, err := k.checkDirs(rel); !ok || err != nil {
		return false, err
	}
	if _, err := k.root.Lstat(rel); errors.Is(err, fs.ErrNotExist) {
		return false, nil
	}
	st, err := k.root.Stat(rel) // follows the link, but not out of the cache
	if err != nil {
		return false, fmt.Errorf("%s: the snapshot entry does not lead to a file inside the Hub cache: %w", k.path(rel), err)
	}
	if !st.Mode().IsRegular() {
		return false, fmt.Errorf("%s: the snapshot entry leads to %v, not a file; remove it and run again", k.path(rel), st.Mode().Type())
	}
	return true, nil
}

// writeFile writes a small file (a ref), refusing links on the way and at the end.
func (k *cache) writeFile(rel string, b []byte) error {
	if err := k.mkdirs(path.Dir(rel)); err != nil {
		return err
	}
	if st, err := k.root.Lstat(rel); err == nil && st.Mode()&fs.ModeSymlink != 0 {
		return k.linkError(rel)
	}
	return k.root.WriteFile(rel, b, 0o644)
}

// openPart opens a download's .incomplete file for reading and writing, creating it.
func (k *cache) openPart(rel string) (*os.File, error) {
	if err := k.mkdirs(path.Dir(rel)); err != nil {
		return nil, err
	}
	if _, err := k.regular(rel); err != nil {
		return nil, err
	}
	return k.root.OpenFile(rel, os.O_RDWR|os.O_CREATE, 0o644)
}

// link makes the snapshot entry snap for blob (both relative to the cache): a relative
// symbolic link as huggingface_hub makes, or, where links cannot be made (Windows without
// developer mode), a copy. The link's target is computed from the two names alone, which is
// right because neither holds a link (checked) nor a "." or ".." (validated names).
func (k *cache) link(blob, snap string) error {
	if err := k.mkdirs(path.Dir(snap)); err != nil {
		return err
	}
	rel, err := filepath.Rel(filepath.Dir(filepath.FromSlash(snap)), filepath.FromSlash(blob))
	if err != nil {
		return err
	}
	if err := k.root.Remove(snap); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	if err := k.root.Symlink(rel, snap); err == nil {
		return nil
	}
	in, err := k.root.Open(blob)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := k.root.OpenFile(snap+".tmp", os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o644)
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
	return k.root.Rename(snap+".tmp", snap)
}
