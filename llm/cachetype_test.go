package llm

import (
	"bytes"
	"context"
	"errors"
	"math"
	"testing"

	"github.com/gorun-dev/gorun/internal/testmodel"
	"github.com/gorun-dev/gorun/quant"
)

// An f16 KV cache (llama.cpp's -ctk/-ctv f16) holds the keys and values rounded to half
// precision: half the memory, logits close to the f32 cache's; batched steps and a saved
// session keep it; a session saved with one cache type is refused by a model of the other;
// another type is refused at load.
func TestCacheTypeF16(t *testing.T) {
	edit := func(c *testmodel.Config) { c.NCtx = 128 }
	m32 := tinyModel(t, edit, Options{Threads: 2})
	m16 := tinyModel(t, edit, Options{Threads: 2, CacheType: quant.F16})
	if m16.CacheType() != quant.F16 || m32.CacheType() != quant.F32 {
		t.Fatalf("cache types %v, %v", m32.CacheType(), m16.CacheType())
	}
	e32, _ := m32.EstimateMemory(0)
	e16, _ := m16.EstimateMemory(0)
	if e16.KVCache*2 != e32.KVCache {
		t.Errorf("KV cache estimate: f16 %d bytes, f32 %d", e16.KVCache, e32.KVCache)
	}
	prompt := []int32{5, 300, 17, 42, 7, 3, 250}
	s32, _ := m32.NewSession()
	s16, _ := m16.NewSession()
	l32, err := s32.Eval(prompt)
	if err != nil {
		t.Fatal(err)
	}
	l32 = append([]float32(nil), l32...)
	l16, err := s16.Eval(prompt)
	if err != nil {
		t.Fatal(err)
	}
	if rel := relErr(l16, l32); rel == 0 || rel > 1e-3 {
		t.Errorf("f16 cache logits: relative error %.3g against the f32 cache's (want small, not zero)", rel)
	}
	// Generation, batched with another session, then saved and restored.
	opts := GenerateOptions{MaxTokens: 12, IgnoreEOS: true}
	alone, _ := m16.NewSession()
	alone.Eval(prompt)
	var want bytes.Buffer
	if _, err := alone.Generate(context.Background(), "", opts, func(p string) error { want.WriteString(p); return nil }); err != nil {
		t.Fatal(err)
	}
	other, _ := m16.NewSession()
	done := make(chan error, 1)
	go func() {
		_, err := other.Generate(context.Background(), "x y z", opts, func(string) error { return nil })
		done <- err
	}()
	var got bytes.Buffer
	if _, err := s16.Generate(context.Background(), "", opts, func(p string) error { got.WriteString(p); return nil }); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if got.String() != want.String() {
		t.Errorf("f16 cache: %q next to another session, %q alone", got.String(), want.String())
	}
	var saved bytes.Buffer
	if err := s16.Save(&saved); err != nil {
		t.Fatal(err)
	}
	if _, err := m32.LoadSession(bytes.NewReader(saved.Bytes())); !errors.Is(err, ErrSessionMismatch) {
		t.Errorf("an f16 session into an f32 model: %v, want ErrSessionMismatch", err)
	}
	back, err := m16.LoadSession(bytes.NewReader(saved.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	if back.Pos() != s16.Pos() {
		t.Errorf("restored %d tokens of %d", back.Pos(), s16.Pos())
	}
	if _, err := Load(m32.Path(), Options{CacheType: quant.Q8_0}); !errors.Is(err, ErrInvalidOption) {
		t.Errorf("a q8_0 cache: %v, want ErrInvalidOption", err)
	}
}

func relErr(got, want []float32) float64 {
	var num, den float64
	for i := range got {
		d := float64(got[i]) - float64(want[i])
		num += d * d
		den += float64(want[i]) * float64(want[i])
	}
	if den == 0 {
		return math.Sqrt(num)
	}
	return math.Sqrt(num / den)
}
