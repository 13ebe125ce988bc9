package main

import (
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"strings"
	"time"

	"github.com/gorun-dev/gorun/convert"
	"github.com/gorun-dev/gorun/gguf"
	"github.com/gorun-dev/gorun/hub"
	"github.com/gorun-dev/gorun/internal/progress"
)

const pullSynopsis = `gorun pull ORG/NAME[:QUANT] [--revision R] [-o OUT.gguf]: get a model from the Hugging Face Hub

From a repository of GGUF files, QUANT picks the file (Q4_K_M, q8_0, f16, ... or a file name;
default: Q4_K_M, else Q4_0, Q8_0, ...); its path in the cache is printed. From a safetensors
checkpoint (GPT2LMHeadModel), the checkpoint is downloaded and converted, QUANT being the
--outtype (f16 by default, or any quantize recipe), to -o (default NAME-QUANT.gguf here).
Files go to the Hugging Face cache ($HF_HOME/hub, shared with the Hugging Face tools), resuming
interrupted downloads and checking each file against the Hub's ETag (an LFS file's sha256, a
small file's git blob sha1); a file of no announced size is refused (LFS) or capped at 10 MiB. HF_TOKEN authenticates (gated and
private models), HF_ENDPOINT names a mirror, HF_HUB_OFFLINE=1 uses the cache only.`

func cmdPull(args []string, stdout, stderr io.Writer) error {
	fs := newFlags("pull", pullSynopsis, stderr)
	revision := fs.String("revision", "main", "`REVISION`: a branch, tag or commit")
	out := fs.String("o", "", "output `FILE` for a converted checkpoint")
	pos, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return usageError(fs, stderr, "want one ORG/NAME[:QUANT], got %s", plural(len(pos), "argument"))
	}
	repo, quant, err := hub.ParseRef(strings.TrimPrefix(pos[0], "hf://"))
	if err != nil {
		return usageError(fs, stderr, "%v", err)
	}
	p, err := pullModel(hub.FromEnv(), repo, quant, *revision, *out, false, stderr)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, p)
	return nil
}

// pullModel gets a model from the Hub and returns the path of its GGUF: a GGUF repository's
// file (in the Hub cache), or a checkpoint converted to out (default NAME-QUANT.gguf in the
// working directory; with inCache, gorun's cache folder, reused when already converted).
func pullModel(c *hub.Client, repo, quant, revision, out string, inCache bool, stderr io.Writer) (string, error) {
	var bar *progress.Bar
	current := ""
	c.Progress = func(file string, done, total int64) {
		if file != current {
			if bar != nil {
				bar.Done()
			}
			bar, current = progress.New(stderr, "pull "+file, total).Bytes(), file
		}
		bar.Set(done, file, false)
	}
	finish := func() {
		if bar != nil {
			bar.Done()
			bar, current = nil, ""
		}
	}
	defer finish()
	c.Log = func(msg string) { // what each download verified
		finish()
		fmt.Fprintf(stderr, "pull: %s\n", msg)
	}
	commit, files, err := c.Files(repo, revision)
	if err != nil {
		return "", err
	}
	file, err := hub.PickGGUF(files, quant)
	if err != nil {
		return "", fmt.Errorf("%s: %w", repo, err)
	}
	if file != "" {
		p, err := c.Download(repo, commit, file)
		if err != nil {
			return "", err
		}
		if out != "" {
			fmt.Fprintf(stderr, "pull: -o is for converted checkpoints; the GGUF stays in the cache\n")
		}
		return p, nil
	}
	outType := strings.ToLower(quant)
	if outType == "" {
		outType = "f16"
	}
	if out == "" {
		out = path.Base(repo) + "-" + outType + ".gguf"
		if inCache {
			base, err := os.UserCacheDir()
			if err != nil {
				return "", err
			}
			out = filepath.Join(base, "gorun", strings.ReplaceAll(repo, "/", "--"), commit, out)
			if _, err := os.Stat(out); err == nil {
				return out, nil
			}
			if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
				return "", err
			}
		}
	}
	need, err := hub.CheckpointFiles(files)
	if err != nil {
		return "", fmt.Errorf("%s: %w", repo, err)
	}
	var dir string
	for _, f := range need {
		p, err := c.Download(repo, commit, f)
		if err != nil {
			return "", err
		}
		dir = filepath.Dir(p)
	}
	finish()
	target, err := gguf.ResolveOutput(out)
	if err != nil {
		return "", err
	}
	defer removeOnSignal(stderr, "pull", gguf.TempPath(target), target+".f32.tmp")()
	start := time.Now()
	rep, err := convert.Convert(dir, out, convert.Options{OutType: outType, ModelID: repo})
	if err != nil {
		return "", fmt.Errorf("converting %s: %w", repo, err)
	}
	fmt.Fprintf(stderr, "pull: converted %s@%s to %s (--outtype %s, %d tensors, %.1f s)\n", repo, commit[:min(12, len(commit))], out, rep.OutType, rep.Tensors, time.Since(start).Seconds())
	return out, nil
}

// resolveModel turns a -m value of the form hf://ORG/NAME[:QUANT] into a local GGUF path,
// from the caches or by pulling (a checkpoint is converted once, into gorun's cache folder);
// other values are left alone. Commands call it after parsing -m.
func resolveModel(model *string, stderr io.Writer) error {
	ref, ok := strings.CutPrefix(*model, "hf://")
	if !ok {
		return nil
	}
	repo, quant, err := hub.ParseRef(ref)
	if err != nil {
		return err
	}
	p, err := pullModel(hub.FromEnv(), repo, quant, "main", "", true, stderr)
	if err != nil {
		return err
	}
	*model = p
	return nil
}
