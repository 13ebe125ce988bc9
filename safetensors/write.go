package safetensors

import (
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
)

// WriteTensor is a tensor to write: its bytes in little-endian order.
type WriteTensor struct {
	Name  string
	DType DType
	Shape []int64
	Data  []byte
}

// Write writes a safetensors file as Hugging Face's library does: the header (names sorted,
// padded with spaces to a multiple of 8 bytes) and the tensors' bytes in the header's order.
func Write(w io.Writer, tensors []WriteTensor, metadata map[string]string) error {
	ts := slices.Clone(tensors)
	slices.SortStableFunc(ts, func(a, b WriteTensor) int { return strings.Compare(a.Name, b.Name) })
	hdr := map[string]any{}
	if len(metadata) > 0 {
		hdr["__metadata__"] = metadata
	}
	var off int64
	for _, t := range ts {
		n := int64(t.DType.Size())
		for _, d := range t.Shape {
			n *= d
		}
		if n != int64(len(t.Data)) || t.DType.Size() == 0 {
			return fmt.Errorf("safetensors: tensor %q: %s %v needs %d bytes, got %d", t.Name, t.DType, t.Shape, n, len(t.Data))
		}
		if _, dup := hdr[t.Name]; dup {
			return fmt.Errorf("safetensors: tensor %q twice", t.Name)
		}
		shape := t.Shape
		if shape == nil {
			shape = []int64{}
		}
		hdr[t.Name] = map[string]any{"dtype": t.DType, "shape": shape, "data_offsets": []int64{off, off + n}}
		off += n
	}
	js, err := json.Marshal(hdr)
	if err != nil {
		return err
	}
	for len(js)%8 != 0 {
		js = append(js, ' ')
	}
	var n [8]byte
	binary.LittleEndian.PutUint64(n[:], uint64(len(js)))
	if _, err := w.Write(n[:]); err != nil {
		return err
	}
	if _, err := w.Write(js); err != nil {
		return err
	}
	for _, t := range ts {
		if _, err := w.Write(t.Data); err != nil {
			return err
		}
	}
	return nil
}
