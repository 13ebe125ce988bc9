package quant

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"hash/fnv"
	"io"
	"math"
	"os"
	"testing"
)

// testdata/ggml_ref.bin holds what ggml itself computes for the inputs of refCases: the bytes
// of quantize_row_*_ref, a hash of dequantize_row_*'s float32 results, a hash of the
// activations quantized to the vec-dot type and the result of the scalar ggml_vec_dot_*: reference
// numbers computed, outside this repository, by llama.cpp's ggml (February 2025) built for
// baseline x86-64 (no FMA, as llama.cpp builds its quantizers) over the inputs of refCases
// (GORUN_WRITE_GGML_INPUTS=file go test -run TestGGMLReference writes them). The fixture files
// cover q8_0, q4_0, q4_K, q5_K and q6_K; this covers every type of the package. The IQ4_NL and
// IQ4_XS records (appended later, same inputs scheme) hold what llama-quantize writes for them,
// ggml_quantize_chunk's quantize_iq4_nl / quantize_iq4_xs without an imatrix (not the *_ref
// functions), with ggml's dequantize_row_iq4_*, quantize_row_q8_0_ref / q8_K_ref and the
// scalar ggml_vec_dot_iq4_nl_q8_0 / ggml_vec_dot_iq4_xs_q8_K (ggml-cpu-quants.c built without
// SIMD flags), from llama.cpp c392e509.

var refTypes = []Type{Q8_0, Q4_0, Q4_1, Q5_0, Q5_1, Q2_K, Q3_K, Q4_K, Q5_K, Q6_K, Q8_1, Q8_K, IQ4_NL, IQ4_XS}

const refN = 512

// splitMix is a fixed, documented generator, so the inputs never change with Go's libraries.
type splitMix uint64

func (s *splitMix) next() uint64 {
	*s += 0x9e3779b97f4a7c15
	z := uint64(*s)
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// uniform is in [0, 1).
func (s *splitMix) uniform() float64 { return float64(s.next()>>11) / (1 << 53) }

// gauss is an Irwin-Hall approximation of a standard normal (exact in float64).
func (s *splitMix) gauss() float64 {
	var sum float64
	for i := 0; i < 12; i++ {
		sum += s.uniform()
	}
	return sum - 6
}

// refDists are the input shapes of the reference cases: ordinary and awkward blocks.
var refDists = []string{"gauss", "weights", "heavy", "outliers", "negative", "zeros", "tiny",
	"large", "grid", "sparse"}

// refInput returns the weights and activations of case (type index ti, distribution di).
func refInput(ti, di int) (x, act []float32) {
	s := splitMix(uint64(ti)<<32 | uint64(di))
	x = make([]float32, refN)
	act = make([]float32, refN)
	for i := range act {
		act[i] = float32(s.gauss() + 0.3)
	}
	for i := range x {
		g := s.gauss()
		var v float64
		switch refDists[di] {
		case "gauss":
			v = g
		case "weights":
			v = 0.02*g + 0.01
		case "heavy":
			v = g * g * g
		case "outliers":
			v = 2*s.uniform() - 1
			if i%97 == 13 {
				v = 50 * g
			}
		case "negative":
			v = -math.Abs(g) - 0.1
		case "zeros": // a zero half, a constant block, a constant sub-block
			switch {
			case i < 256:
				v = 0
			case i < 288:
				v = 0.5
			case i >= 320 && i < 336:
				v = -0.25
			default:
				v = g
			}
		case "tiny":
			v = g * 1e-20
		case "large":
			v = math.Max(-65000, math.Min(65000, g*2e4))
		case "grid":
			v = math.Round(g*4) / 8
		case "sparse":
			if s.uniform() < 0.9 {
				v = 0
			} else {
				v = g
			}
		}
		x[i] = float32(v)
	}
	return x, act
}

func hashF32(x []float32) uint64 {
	h := fnv.New64a()
	var b [4]byte
	for _, v := range x {
		binary.LittleEndian.PutUint32(b[:], math.Float32bits(v))
		h.Write(b[:])
	}
	return h.Sum64()
}

func hashBytes(b []byte) uint64 {
	h := fnv.New64a()
	h.Write(b)
	return h.Sum64()
}

// refRecord is one case of ggml_ref.bin: type, distribution, n, then the quantized row, the
// hash of its dequantization (0 where ggml has no dequantizer), and for weight types the hash
// of the quantized activations and the vec-dot result.
type refRecord struct {
	typ, dist  uint32
	q          []byte
	deqHash    uint64
	actHash    uint64
	vecDotBits uint32
}

func readRefRecords(r io.Reader) ([]refRecord, error) {
	var recs []refRecord
	for {
		var hdr [3]uint32
		if err := binary.Read(r, binary.LittleEndian, &hdr); err == io.EOF {
			return recs, nil
		} else if err != nil {
			return nil, err
		}
		rec := refRecord{typ: hdr[0], dist: hdr[1]}
		rs, err := Type(hdr[0]).RowSize(int64(hdr[2]))
		if err != nil {
			return nil, err
		}
		rec.q = make([]byte, rs)
		if _, err := io.ReadFull(r, rec.q); err != nil {
			return nil, err
		}
		var tail struct {
			Deq, Act uint64
			Dot      uint32
		}
		if err := binary.Read(r, binary.LittleEndian, &tail); err != nil {
			return nil, err
		}
		rec.deqHash, rec.actHash, rec.vecDotBits = tail.Deq, tail.Act, tail.Dot
		recs = append(recs, rec)
	}
}

// writeRefInputs writes the cases' inputs for the C generator: per case type, distribution,
// n (uint32), then n float32 weights and n float32 activations.
func writeRefInputs(path string) error {
	var buf bytes.Buffer
	for ti, ty := range refTypes {
		for di := range refDists {
			x, act := refInput(ti, di)
			binary.Write(&buf, binary.LittleEndian, [3]uint32{uint32(ty), uint32(di), refN})
			binary.Write(&buf, binary.LittleEndian, x)
			binary.Write(&buf, binary.LittleEndian, act)
		}
	}
	return os.WriteFile(path, buf.Bytes(), 0o644)
}

// Every type's quantizer, dequantizer, activation quantizer and integer dot reproduce ggml's
// reference results bit for bit.
func TestGGMLReference(t *testing.T) {
	if p := os.Getenv("GORUN_WRITE_GGML_INPUTS"); p != "" {
		if err := writeRefInputs(p); err != nil {
			t.Fatal(err)
		}
	}
	f, err := os.Open("testdata/ggml_ref.bin")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	recs, err := readRefRecords(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(refTypes)*len(refDists) {
		t.Fatalf("%d records, want %d", len(recs), len(refTypes)*len(refDists))
	}
	for k, rec := range recs {
		ti, di := k/len(refDists), k%len(refDists)
		ty := refTypes[ti]
		if Type(rec.typ) != ty || int(rec.dist) != di {
			t.Fatalf("record %d is %v/%d, want %v/%d", k, Type(rec.typ), rec.dist, ty, di)
		}
		name := ty.String() + "/" + refDists[di]
		x, act := refInput(ti, di)
		q := mustQuantize(t, ty, x)
		if !bytes.Equal(q, rec.q) {
			t.Errorf("%s: quantized bytes differ from ggml's\n%s", name, firstBlockDiff(ty, q, rec.q))
			continue
		}
		if rec.deqHash != 0 {
			if h := hashF32(mustDequantize(t, ty, q, refN)); h != rec.deqHash {
				t.Errorf("%s: dequantized values differ from ggml's", name)
			}
		}
		f, _ := FormatOf(ty)
		if f.VecDot == nil {
			continue
		}
		xq := mustQuantize(t, f.VecDotType, act)
		if h := hashBytes(xq); h != rec.actHash {
			t.Errorf("%s: activations quantized to %v differ from ggml's", name, f.VecDotType)
			continue
		}
		got := f.VecDot(q, xq)
		want := math.Float32frombits(rec.vecDotBits)
		if got != want {
			t.Errorf("%s: VecDot %v, ggml's scalar vec_dot %v", name, got, want)
		}
	}
}

func firstBlockDiff(ty Type, got, want []byte) string {
	ts := ty.TypeSize()
	for b := 0; b < len(want)/ts; b++ {
		g, w := got[b*ts:(b+1)*ts], want[b*ts:(b+1)*ts]
		if !bytes.Equal(g, w) {
			return fmt.Sprintf("block %d:\n got % x\nwant % x", b, g, w)
		}
	}
	return ""
}
