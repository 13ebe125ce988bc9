package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gorun-dev/gorun/internal/osutil"
	"github.com/gorun-dev/gorun/quant"
)

// IndexName is the file that lists the shards of a sharded checkpoint.
const IndexName = "model.safetensors.index.json"

// SingleName is the file of an unsharded checkpoint.
const SingleName = "model.safetensors"

// maxIndex bounds the index file read into memory.
const maxIndex = 64 << 20

// ErrPickle is returned for a checkpoint that only has PyTorch's pickle files.
var ErrPickle = errors.New("pytorch_model.bin is a Python pickle, which gorun does not read (it can run code when loaded); use the model's safetensors files (most Hugging Face repositories have model.safetensors; else convert with transformers: AutoModel.from_pretrained(dir).save_pretrained(out, safe_serialization=True))")

// Checkpoint is a model's tensors across one or more safetensors files.
type Checkpoint struct {
	Files []*File
	// Tensors lists every tensor in the order Hugging Face's tools (and llama.cpp's converter)
	// read them: files sorted by name, each file's tensors sorted by name.
	Tensors []*Tensor
	index   map[string]*Tensor
}

// OpenDir opens the checkpoint in a Hugging Face model directory: the shards named by
// model.safetensors.index.json when it exists, else model.safetensors. Every tensor the index
// names must be in the shard it names, and every shard's tensors must be in the index.
func OpenDir(dir string) (*Checkpoint, error) {
	idx := filepath.Join(dir, IndexName)
	if _, err := os.Stat(idx); err == nil {
		return openIndexed(dir, idx)
	}
	single := filepath.Join(dir, SingleName)
	if _, err := os.Stat(single); err != nil {
		for _, p := range []string{"pytorch_model.bin", "pytorch_model.bin.index.json"} {
			if _, err := os.Stat(filepath.Join(dir, p)); err == nil {
				return nil, fmt.Errorf("safetensors: %s: %w", dir, ErrPickle)
			}
		}
		return nil, fmt.Errorf("safetensors: %s has neither %s nor %s", dir, SingleName, IndexName)
	}
	return OpenFiles(single)
}

// OpenFiles opens the given safetensors files as one checkpoint. A tensor name in two files is
// an error.
func OpenFiles(paths ...string) (*Checkpoint, error) {
	c := &Checkpoint{index: map[string]*Tensor{}}
	paths = slices.Clone(paths)
	slices.SortFunc(paths, func(a, b string) int { return strings.Compare(filepath.Base(a), filepath.Base(b)) })
	for _, p := range paths {
		f, err := Open(p)
		if err != nil {
			c.Close()
			return nil, err
		}
		c.Files = append(c.Files, f)
		for i := range f.Tensors {
			t := &f.Tensors[i]
			if prev, dup := c.index[t.Name]; dup {
				c.Close()
				return nil, fmt.Errorf("safetensors: tensor %q is in both %s and %s", t.Name, prev.File, p)
			}
			c.index[t.Name] = t
			c.Tensors = append(c.Tensors, t)
		}
	}
	return c, nil
}

func openIndexed(dir, idx string) (*Checkpoint, error) {
	raw, err := osutil.ReadFile(idx, maxIndex)
	if err != nil {
		return nil, fmt.Errorf("safetensors: %w", err)
	}
	var index struct {
		WeightMap map[string]string `json:"weight_map"`
	}
	if err := json.Unmarshal(raw, &index); err != nil {
		return nil, fmt.Errorf("safetensors: %s: %w", idx, err)
	}
	if len(index.WeightMap) == 0 {
		return nil, fmt.Errorf("safetensors: %s: no weight_map (or an empty one)", idx)
	}
	var shards []string
	seen := map[string]bool{}
	for name, shard := range index.WeightMap {
		if shard == "" || shard != filepath.Base(shard) || shard == "." || shard == ".." || strings.ContainsAny(shard, `/\`) {
			return nil, fmt.Errorf("safetensors: %s: tensor %q is in %q, which is not a file name in the model's directory", idx, name, shard)
		}
		if !seen[shard] {
			seen[shard] = true
			p := filepath.Join(dir, shard)
			if _, err := os.Stat(p); err != nil {
				return nil, fmt.Errorf("safetensors: %s: the shard %s (holding tensor %q) is missing: %w", idx, shard, name, err)
			}
			shards = append(shards, p)
		}
	}
	c, err := OpenFiles(shards...)
	if err != nil {
		return nil, err
	}
	var missing, extra []string
	for name, shard := range index.WeightMap {
		t := c.index[name]
		if t == nil || filepath.Base(t.File) != shard {
			missing = append(missing, fmt.Sprintf("%s (in %s)", name, shard))
		}
	}
	for _, t := range c.Tensors {
		if _, ok := index.WeightMap[t.Name]; !ok {
			extra = append(extra, fmt.Sprintf("%s (in %s)", t.Name, filepath.Base(t.File)))
		}
	}
	if len(missing) > 0 || len(extra) > 0 {
		c.Close()
		slices.Sort(missing)
		slices.Sort(extra)
		msg := ""
		if len(missing) > 0 {
			msg = fmt.Sprintf("%d tensors the index names are not in their shards: %s", len(missing), abbreviate(missing))
		}
		if len(extra) > 0 {
			if msg != "" {
				msg += "; "
			}
			msg += fmt.Sprintf("%d tensors of the shards are not in the index: %s", len(extra), abbreviate(extra))
		}
		return nil, fmt.Errorf("safetensors: %s: %s", idx, msg)
	}
	return c, nil
}

func abbreviate(s []string) string {
	if len(s) > 5 {
		return strings.Join(s[:5], ", ") + fmt.Sprintf(", ... (%d more)", len(s)-5)
	}
	return strings.Join(s, ", ")
}

// Tensor returns the named tensor, or nil.
func (c *Checkpoint) Tensor(name string) *Tensor { return c.index[name] }

// Close unmaps every file.
func (c *Checkpoint) Close() error {
	var errs []error
	for _, f := range c.Files {
		errs = append(errs, f.Close())
	}
	c.Files, c.Tensors, c.index = nil, nil, nil
	return errors.Join(errs...)
}

// Float32s converts elements [from, from+len(dst)) of a F32, F16 or BF16 tensor to float32 in
// dst (exactly: every F16 and BF16 value is a float32).
func (t *Tensor) Float32s(dst []float32, from int64) error {
	if !t.DType.Float() {
		return fmt.Errorf("safetensors: tensor %q is %s, not a floating-point type gorun converts (F32, F16, BF16)", t.Name, t.DType)
	}
	es := int64(t.DType.Size())
	if from < 0 || from > t.Elements() || int64(len(dst)) > t.Elements()-from {
		return fmt.Errorf("safetensors: tensor %q: elements %d to %d out of range (%d)", t.Name, from, from+int64(len(dst)), t.Elements())
	}
	b := t.Data[from*es : (from+int64(len(dst)))*es]
	switch t.DType {
	case F32:
		for i := range dst {
			dst[i] = math.Float32frombits(binary.LittleEndian.Uint32(b[4*i:]))
		}
	case F16:
		for i := range dst {
			dst[i] = quant.F16ToF32(binary.LittleEndian.Uint16(b[2*i:]))
		}
	case BF16:
		for i := range dst {
			dst[i] = math.Float32frombits(uint32(binary.LittleEndian.Uint16(b[2*i:])) << 16)
		}
	}
	return nil
}
