// Command mkdelta writes llama3_micro_hf_delta.i16.gz: Hugging Face's float64 logits of the
// llama3-micro prompts (llama3_micro_hf_logits.py's l3m_f64cpu.f64) minus the fixture's
// hf_logits.f32, in steps of 1e-6 as little-endian int16 (the differences stay within
// ±0.032), gzip. Storing the difference keeps the file small; the test adds it back.
//
//	go run ./llm/testdata/mkdelta F64_FILE ../shared/fixtures/hf/llama3-micro/hf_logits.f32 OUT
package main

import (
	"compress/gzip"
	"encoding/binary"
	"fmt"
	"math"
	"os"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "mkdelta:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	if len(args) != 3 {
		return fmt.Errorf("usage: mkdelta F64_FILE FIXTURE_F32 OUT")
	}
	exact, err := os.ReadFile(args[0])
	if err != nil {
		return err
	}
	fixture, err := os.ReadFile(args[1])
	if err != nil {
		return err
	}
	n := len(fixture) / 4
	if len(exact) != 8*n {
		return fmt.Errorf("%d float64 bytes for %d float32 values", len(exact), n)
	}
	out := make([]byte, 2*n)
	for i := 0; i < n; i++ {
		e := math.Float64frombits(binary.LittleEndian.Uint64(exact[8*i:]))
		f := float64(math.Float32frombits(binary.LittleEndian.Uint32(fixture[4*i:])))
		q := math.Round((e - f) * 1e6)
		if q < math.MinInt16 || q > math.MaxInt16 {
			return fmt.Errorf("value %d: difference %g does not fit", i, e-f)
		}
		binary.LittleEndian.PutUint16(out[2*i:], uint16(int16(q)))
	}
	file, err := os.Create(args[2])
	if err != nil {
		return err
	}
	z, _ := gzip.NewWriterLevel(file, gzip.BestCompression)
	if _, err := z.Write(out); err != nil {
		return err
	}
	if err := z.Close(); err != nil {
		return err
	}
	return file.Close()
}
