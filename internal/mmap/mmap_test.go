package mmap

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestMapReadsTheFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "f")
	want := bytes.Repeat([]byte("gorun mmap "), 1000) // more than a page
	if err := os.WriteFile(p, want, 0o644); err != nil {
		t.Fatal(err)
	}
	var seen int64 = -1
	b, err := Map(p, func(size int64) error { seen = size; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if seen != int64(len(want)) {
		t.Errorf("check saw %d bytes, the file has %d", seen, len(want))
	}
	WillNeed(b)
	// The descriptor is closed by now: the mapping alone holds the file.
	if !bytes.Equal(b, want) {
		t.Errorf("mapped bytes differ from the file's")
	}
	if err := Unmap(b); err != nil {
		t.Fatal(err)
	}
}

func TestMapRefuses(t *testing.T) {
	dir := t.TempDir()
	empty := filepath.Join(dir, "empty")
	short := filepath.Join(dir, "short")
	if os.WriteFile(empty, nil, 0o644) != nil || os.WriteFile(short, []byte("abc"), 0o644) != nil {
		t.Fatal("cannot write the test files")
	}
	if _, err := Map(empty, nil); err == nil || err.Error() != empty+": empty file" {
		t.Errorf("empty file: %v", err)
	}
	tooShort := errors.New("too short")
	check := func(size int64) error {
		if size < 8 {
			return tooShort
		}
		return nil
	}
	if _, err := Map(short, check); !errors.Is(err, tooShort) || !strings.HasPrefix(err.Error(), short+": ") {
		t.Errorf("check's refusal: %v", err)
	}
	// check runs before the empty-file refusal, so a caller's own message wins.
	if _, err := Map(empty, check); !errors.Is(err, tooShort) {
		t.Errorf("check on an empty file: %v", err)
	}
	if _, err := Map(dir, nil); err == nil || !strings.Contains(err.Error(), "not a regular file (a directory)") {
		t.Errorf("directory: %v", err)
	}
	if _, err := Map(filepath.Join(dir, "none"), nil); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: %v", err)
	}
}
