package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"text/tabwriter"

	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/hub"
	"github.com/gorun-dev/gorun/llm"
)

// Models by name: list, show and rm over what pull (and -hf) put in the Hugging Face cache,
// and the checkpoints gorun converted into its own cache folder.

// cachedModel is one runnable GGUF of the caches, named as the commands take it.
type cachedModel struct {
	name string // ORG/NAME:QUANT (or ORG/NAME:FILE when no quantization name picks it)
	repo string
	file string // in the repository, or the converted file's name
	path string
	size int64
}

// cachedModels lists the Hub cache's GGUF files and gorun's converted checkpoints.
func cachedModels(c *hub.Client) ([]cachedModel, error) {
	files, err := c.CachedGGUFs()
	if err != nil {
		return nil, err
	}
	byRepo := map[string][]string{}
	for _, f := range files {
		byRepo[f.Repo] = append(byRepo[f.Repo], f.File)
	}
	var out []cachedModel
	for _, f := range files {
		out = append(out, cachedModel{name: f.Repo + ":" + quantName(byRepo[f.Repo], f.File, f.Path), repo: f.Repo, file: f.File, path: f.Path, size: f.Size})
	}
	return append(out, convertedModels()...), nil
}

// quantName is the shortest name that picks file among a repository's files: its
// quantization (general.file_type, as Q4_K_M), else the file name.
func quantName(files []string, file, path string) string {
	if info, err := describeFile(path); err == nil && info.quant != "" {
		if picked, err := hub.PickGGUF(files, info.quant); err == nil && picked == file {
			return info.quant
		}
	}
	return file
}

// convertedDir is where pull -hf converts checkpoints (see pullModel).
func convertedDir() string {
	base, err := os.UserCacheDir()
	if err != nil {
		return ""
	}
	return filepath.Join(base, "gorun")
}

// convertedModels lists gorun's converted checkpoints: DIR/ORG--NAME/COMMIT/NAME-TYPE.gguf.
func convertedModels() []cachedModel {
	dir := convertedDir()
	if dir == "" {
		return nil
	}
	matches, _ := filepath.Glob(filepath.Join(dir, "*", "*", "*.gguf"))
	var out []cachedModel
	for _, p := range matches {
		st, err := os.Stat(p)
		if err != nil || !st.Mode().IsRegular() {
			continue
		}
		repo := strings.Replace(filepath.Base(filepath.Dir(filepath.Dir(p))), "--", "/", 1)
		base := strings.TrimSuffix(filepath.Base(p), ".gguf")
		outType := base[strings.LastIndexByte(base, '-')+1:]
		out = append(out, cachedModel{name: repo + ":" + outType, repo: repo, file: filepath.Base(p), path: p, size: st.Size()})
	}
	return out
}

// findCached returns the cached model ref names (ORG/NAME[:QUANT], QUANT picked as pull picks
// it), or an error listing what the cache has of the repository.
func findCached(models []cachedModel, ref string) (cachedModel, error) {
	repo, quant, err := hub.ParseRef(strings.TrimPrefix(ref, "hf://"))
	if err != nil {
		return cachedModel{}, err
	}
	var files []string
	for _, m := range models {
		if m.repo == repo && strings.EqualFold(m.name, repo+":"+quant) {
			return m, nil
		}
		if m.repo == repo {
			files = append(files, m.file)
		}
	}
	if len(files) == 0 {
		return cachedModel{}, fmt.Errorf("%s is not in the cache ('gorun list' shows what is; 'gorun pull %s' gets it)", repo, ref)
	}
	file, err := hub.PickGGUF(files, quant)
	if err != nil {
		return cachedModel{}, fmt.Errorf("%s: %w", repo, err)
	}
	for _, m := range models {
		if m.repo == repo && m.file == file {
			return m, nil
		}
	}
	return cachedModel{}, fmt.Errorf("%s: %s is not in the cache", repo, file)
}

// modelInfo is what a GGUF's header says of the model.
type modelInfo struct {
	name, arch, quant string
	context           uint64
	params            uint64
	size              int64 // of the tensors
}

func describeFile(path string) (modelInfo, error) {
	f, err := gguf.Open(path)
	if err != nil {
		return modelInfo{}, err
	}
	defer f.Close()
	return describe(f), nil
}

func describe(f *gguf.File) modelInfo {
	var m modelInfo
	m.name, _ = f.String("general.name")
	m.arch, _ = f.String("general.architecture")
	if ft, err := f.Uint("general.file_type"); err == nil {
		m.quant = strings.ReplaceAll(strings.ToUpper(fileTypeName(ft)), " ", "_")
		m.quant = strings.TrimPrefix(m.quant, "ALL_")
	}
	m.context, _ = f.Uint(m.arch + ".context_length")
	for _, ti := range f.Tensors {
		n := uint64(1)
		for _, d := range ti.Dims {
			n *= uint64(d)
		}
		m.params += n
		m.size += int64(ti.Size)
	}
	return m
}

const listSynopsis = `gorun list: the models in the Hugging Face cache (what pull and -hf downloaded) and gorun's converted checkpoints

NAME is what run, serve, bench (as -hf NAME or hf://NAME), show and rm take.`

func cmdList(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("list", listSynopsis, stderr)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) > 0 {
		return usageError(fs, stderr, "unexpected argument %q", pos[0])
	}
	models, err := cachedModels(hub.FromEnv())
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	fmt.Fprintln(w, "NAME\tQUANT\tSIZE\tARCH\tCONTEXT")
	for _, m := range models {
		info, err := describeFile(m.path)
		if err != nil {
			fmt.Fprintf(w, "%s\t?\t%s\t(%v)\t\n", m.name, llm.FormatBytes(m.size), err)
			continue
		}
		fmt.Fprintf(w, "%s\t%s\t%s\t%s\t%d\n", m.name, info.quant, llm.FormatBytes(m.size), info.arch, info.context)
	}
	return w.Flush()
}

func cmdShow(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("show", "gorun show MODEL: what a model is (MODEL: a GGUF file, or ORG/NAME[:QUANT] of the cache)", stderr)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError(fs, stderr, "want one MODEL, got %s", plural(len(pos), "argument"))
	}
	path := pos[0]
	if _, err := os.Stat(path); err != nil {
		models, lerr := cachedModels(hub.FromEnv())
		if lerr != nil {
			return lerr
		}
		m, ferr := findCached(models, path)
		if ferr != nil {
			return ferr
		}
		path = m.path
	}
	info, err := describeFile(path)
	if err != nil {
		return err
	}
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	w := tabwriter.NewWriter(stdout, 0, 4, 2, ' ', 0)
	for _, row := range [][2]string{
		{"name", info.name}, {"architecture", info.arch}, {"quantization", info.quant},
		{"parameters", fmt.Sprintf("%d (%s)", info.params, sizeLabel(info.params))},
		{"context length", fmt.Sprint(info.context)}, {"size", llm.FormatBytes(st.Size())}, {"file", path},
	} {
		fmt.Fprintf(w, "%s\t%s\n", row[0], row[1])
	}
	return w.Flush()
}

func cmdRm(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("rm", "gorun rm ORG/NAME[:QUANT]...: remove models from the cache (ORG/NAME: all its files)", stderr)
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) == 0 {
		return usageError(fs, stderr, "want ORG/NAME[:QUANT], got no arguments")
	}
	c := hub.FromEnv()
	for _, ref := range pos {
		removed, err := removeModel(c, ref)
		for _, p := range removed {
			fmt.Fprintf(stdout, "removed %s\n", p)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// removeModel removes ORG/NAME (the repository's cache folder and its converted checkpoints)
// or ORG/NAME:QUANT (that file).
func removeModel(c *hub.Client, ref string) ([]string, error) {
	repo, quant, err := hub.ParseRef(strings.TrimPrefix(ref, "hf://"))
	if err != nil {
		return nil, err
	}
	if quant == "" {
		removed, err := c.Remove(repo, "")
		if convertedDir() == "" {
			return removed, err
		}
		conv := filepath.Join(convertedDir(), strings.ReplaceAll(repo, "/", "--"))
		if _, serr := os.Lstat(conv); serr == nil {
			if rerr := os.RemoveAll(conv); rerr != nil {
				return removed, rerr
			}
			removed = append(removed, conv)
			if errors.Is(err, hub.ErrNotCached) {
				err = nil // it was only converted
			}
		}
		return removed, err
	}
	models, err := cachedModels(c)
	if err != nil {
		return nil, err
	}
	m, err := findCached(models, ref)
	if err != nil {
		return nil, err
	}
	if strings.HasPrefix(m.path, convertedDir()+string(filepath.Separator)) {
		return []string{m.path}, os.Remove(m.path)
	}
	return c.Remove(repo, m.file)
}

// sizeLabel writes a parameter count as llama.cpp's size labels do: 124M, 1.2B.
func sizeLabel(n uint64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.1fB", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.0fM", float64(n)/1e6)
	}
	return fmt.Sprintf("%.0fK", float64(n)/1e3)
}

// plural writes "1 argument", "2 arguments".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
