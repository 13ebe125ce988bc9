package llm

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/gorun-dev/gorun/internal/testmodel"
)

// sessionHeaderSize is the fixed part of a saved session, before the tokens.
const sessionHeaderSize = 8 + 4 + 8 + 4 + 4 + 4 + 4 + 4

// reseal recomputes a saved session's checksum (its last 4 bytes) over the rest, as a hostile
// writer would.
func reseal(b []byte) []byte {
	if len(b) < 4 {
		return b
	}
	binary.LittleEndian.PutUint32(b[len(b)-4:], crc32.ChecksumIEEE(b[:len(b)-4]))
	return b
}

// cacheValueOffset is the byte offset of the i-th float32 of the saved cache rows.
func cacheValueOffset(b []byte, i int) int {
	tokens := int(binary.LittleEndian.Uint32(b[sessionHeaderSize-8:]))
	return sessionHeaderSize + 4*tokens + 4*i
}

// A saved session whose cache holds NaN or an infinity, with a valid checksum, is refused by
// LoadSession with an error naming the problem.
func TestLoadSessionRejectsNonFiniteCache(t *testing.T) {
	m := tinyModel(t, nil, Options{Threads: 2})
	saved := savedSession(t, m)
	hp := m.Hparams()
	n := int(binary.LittleEndian.Uint32(saved[sessionHeaderSize-4:])) // evaluated tokens
	values := 2 * hp.NLayer * n * hp.KVShape().Width
	for _, bad := range []float32{float32(math.NaN()), float32(math.Inf(1)), float32(math.Inf(-1))} {
		for _, i := range []int{0, values / 2, values - 1} {
			b := bytes.Clone(saved)
			binary.LittleEndian.PutUint32(b[cacheValueOffset(b, i):], math.Float32bits(bad))
			_, err := m.LoadSession(bytes.NewReader(reseal(b)))
			if !errors.Is(err, ErrBadFile) || !strings.Contains(err.Error(), "not finite") {
				t.Errorf("%v at cache value %d of %d: %v", bad, i, values, err)
			}
		}
	}
}

// Bytes after the checksum are refused: the session is the whole stream.
func TestLoadSessionRejectsTrailingBytes(t *testing.T) {
	m := tinyModel(t, nil, Options{Threads: 2})
	saved := savedSession(t, m)
	for _, extra := range [][]byte{{0}, []byte("more"), bytes.Repeat([]byte{1}, 5000)} {
		_, err := m.LoadSession(bytes.NewReader(append(bytes.Clone(saved), extra...)))
		if !errors.Is(err, ErrBadFile) || !strings.Contains(err.Error(), "after the checksum") {
			t.Errorf("%d trailing bytes: %v", len(extra), err)
		}
	}
	if _, err := m.LoadSession(bytes.NewReader(saved)); err != nil {
		t.Errorf("the session itself: %v", err)
	}
}

// A session restored from a hostile file with finite but huge cache values (whose attention
// overflows) cannot generate forever: generating without a token limit ends, with an error or
// at the context's end, in bounded time.
func TestHostileSessionGenerationEnds(t *testing.T) {
	m := tinyModel(t, func(c *testmodel.Config) { c.NCtx = 128 }, Options{Threads: 2})
	saved := savedSession(t, m)
	hp := m.Hparams()
	n := int(binary.LittleEndian.Uint32(saved[sessionHeaderSize-4:]))
	for _, v := range []float32{math.MaxFloat32, -math.MaxFloat32, 1e30} {
		b := bytes.Clone(saved)
		for i := range 2 * hp.NLayer * n * hp.KVShape().Width {
			binary.LittleEndian.PutUint32(b[cacheValueOffset(b, i):], math.Float32bits(v))
		}
		s, err := m.LoadSession(bytes.NewReader(reseal(b)))
		if err != nil {
			continue // refusing it is fine too
		}
		start, pos := time.Now(), s.Pos()
		st, err := s.Generate(context.Background(), "", GenerateOptions{MaxTokens: NoLimit, IgnoreEOS: true}, discard)
		if err == nil && st.Stop != StopContextFull {
			t.Errorf("cache values %g: generation ended with %q", v, st.Stop)
		}
		if st.Tokens > m.ContextLength()-pos || s.Pos() > m.ContextLength() {
			t.Errorf("cache values %g: %d tokens generated after %d", v, st.Tokens, pos)
		}
		if d := time.Since(start); d > 30*time.Second {
			t.Errorf("cache values %g: generation took %v", v, d)
		}
		s.Close()
	}
}

// FuzzLoadSession feeds saved-session bytes to LoadSession (with the checksum recomputed when
// fix is set, so that mutations reach the checks behind it). Every input ends in a typed
// error, or in a session whose cache holds only finite values and that generates a bounded
// number of tokens, within 10 s.
func FuzzLoadSession(f *testing.F) {
	m := tinyModel(f, func(c *testmodel.Config) {
		c.NVocab, c.NCtx, c.NEmbd, c.NHead, c.NLayer, c.NFF = 300, 16, 32, 2, 1, 64
	}, Options{Threads: 1})
	for _, seed := range fuzzSessionSeeds(f, m) {
		f.Add(seed, false)
		f.Add(seed, true)
	}
	f.Fuzz(func(t *testing.T, b []byte, fix bool) {
		if fix {
			b = reseal(bytes.Clone(b))
		}
		timer := time.AfterFunc(10*time.Second, func() { panic(fmt.Sprintf("input ran over 10 s: %q", b)) })
		defer timer.Stop()
		s, err := m.LoadSession(bytes.NewReader(b))
		if err != nil {
			if !errors.Is(err, ErrBadFile) && !errors.Is(err, ErrSessionMismatch) {
				t.Fatalf("untyped error: %v", err)
			}
			return
		}
		defer s.Close()
		if err := checkCacheFinite(s); err != nil {
			t.Fatal(err)
		}
		pos := s.Pos()
		st, err := s.Generate(context.Background(), "", GenerateOptions{MaxTokens: NoLimit, IgnoreEOS: true}, discard)
		if st.Tokens > m.ContextLength()-pos {
			t.Fatalf("generated %d tokens after %d in a %d-token context (%v)", st.Tokens, pos, m.ContextLength(), err)
		}
	})
}

// fuzzSessionSeeds are real saved sessions of m: empty, with a pending sampled token, fully
// evaluated, and full.
func fuzzSessionSeeds(t testing.TB, m *Model) [][]byte {
	var seeds [][]byte
	s, err := m.NewSession()
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	save := func() {
		var buf bytes.Buffer
		if err := s.Save(&buf); err != nil {
			t.Fatal(err)
		}
		seeds = append(seeds, buf.Bytes())
	}
	save()
	if _, err := s.Generate(context.Background(), "Hello", GenerateOptions{MaxTokens: 3, IgnoreEOS: true}, discard); err != nil {
		t.Fatal(err)
	}
	save()
	if _, err := s.Eval([]int32{7}); err != nil {
		t.Fatal(err)
	}
	save()
	if _, err := s.Generate(context.Background(), "", GenerateOptions{MaxTokens: NoLimit, IgnoreEOS: true}, discard); err != nil {
		t.Fatal(err)
	}
	save()
	return seeds
}

// checkCacheFinite reports a non-finite value in the cache rows of s's evaluated tokens.
func checkCacheFinite(s *Session) error {
	hp := s.m.Hparams()
	for l := range hp.NLayer {
		for _, v := range []bool{false, true} {
			err := s.kvRows(l, v, s.npast, func(rows []byte) error {
				for i := 0; i+4 <= len(rows); i += 4 {
					if x := math.Float32frombits(binary.LittleEndian.Uint32(rows[i:])); math.IsNaN(float64(x)) || math.IsInf(float64(x), 0) {
						return fmt.Errorf("layer %d: cache value %d is %v", l, i/4, x)
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
	}
	return nil
}
