package gguf

import (
	"encoding/binary"
	"fmt"
	"math"
	"strings"
	"testing"
	"time"
)

// raw builds GGUF bytes field by field, so tests can write what the Writer refuses to.
type raw struct{ b []byte }

func (r *raw) u32(v uint32) *raw { r.b = binary.LittleEndian.AppendUint32(r.b, v); return r }
func (r *raw) u64(v uint64) *raw { r.b = binary.LittleEndian.AppendUint64(r.b, v); return r }
func (r *raw) str(s string) *raw { r.u64(uint64(len(s))); r.b = append(r.b, s...); return r }
func (r *raw) bytes(p ...byte) *raw {
	r.b = append(r.b, p...)
	return r
}

// rawKV is one encoded key-value pair; rawTensor one tensor description.
type rawKV func(r *raw)

type rawTensor struct {
	name string
	dims []uint64
	typ  uint32
	off  uint64
}

// rawFile describes a whole file; mutate a copy of validRaw to make a broken one.
type rawFile struct {
	magic     string
	version   uint32
	nTensors  int64 // -1: len(tensors); other negative numbers are written as uint64
	nKV       int64 // -1: len(kvs)
	kvs       []rawKV
	tensors   []rawTensor
	align     int
	dataBytes int // bytes after the padded header
}

func kvU32(key string, v uint32) rawKV {
	return func(r *raw) { r.str(key).u32(uint32(TypeUint32)).u32(v) }
}

func kvStr(key, v string) rawKV {
	return func(r *raw) { r.str(key).u32(uint32(TypeString)).str(v) }
}

func validRaw() rawFile {
	return rawFile{
		magic: "GGUF", version: 3, nTensors: -1, nKV: -1,
		kvs: []rawKV{kvStr("general.architecture", "gpt2"), kvU32("gpt2.block_count", 2)},
		tensors: []rawTensor{
			{"a", []uint64{4, 2}, 0, 0},  // F32, 32 bytes
			{"b", []uint64{32}, 8, 32},   // Q8_0, 34 bytes
			{"c", []uint64{256}, 14, 96}, // Q6_K, 210 bytes
		},
		align: 32, dataBytes: 96 + 210,
	}
}

func (f rawFile) encode() []byte {
	r := &raw{}
	r.bytes([]byte(f.magic)...).u32(f.version)
	n := uint64(len(f.tensors))
	if f.nTensors != -1 {
		n = uint64(f.nTensors)
	}
	r.u64(n)
	n = uint64(len(f.kvs))
	if f.nKV != -1 {
		n = uint64(f.nKV)
	}
	r.u64(n)
	for _, kv := range f.kvs {
		kv(r)
	}
	for _, t := range f.tensors {
		r.str(t.name).u32(uint32(len(t.dims)))
		for _, d := range t.dims {
			r.u64(d)
		}
		r.u32(t.typ).u64(t.off)
	}
	for len(r.b)%f.align != 0 {
		r.b = append(r.b, 0)
	}
	return append(r.b, make([]byte, f.dataBytes)...)
}

func TestValidRaw(t *testing.T) {
	f, err := Parse(validRaw().encode())
	if err != nil {
		t.Fatal(err)
	}
	if len(f.Tensors) != 3 || f.Tensors[2].Size != 210 || len(f.Data(&f.Tensors[2])) != 210 {
		t.Fatalf("%+v", f.Tensors)
	}
}

func TestMalformed(t *testing.T) {
	cases := []struct {
		name string
		edit func(f *rawFile)
		want string
	}{
		{"wrong magic", func(f *rawFile) { f.magic = "GGML" }, `magic "GGML"`},
		{"version 1", func(f *rawFile) { f.version = 1 }, "version 1 is not supported"},
		{"version 0", func(f *rawFile) { f.version = 0 }, "unsupported GGUF version 0"},
		{"version 4", func(f *rawFile) { f.version = 4 }, "unsupported GGUF version 4"},
		{"big-endian", func(f *rawFile) { f.version = 0x03000000 }, "big-endian"},
		{"absurd tensor count", func(f *rawFile) { f.nTensors = 1 << 62 }, "tensor count 4611686018427387904 cannot fit"},
		{"tensor count over", func(f *rawFile) { f.nTensors = 4 }, "tensor 3: has 0 dimensions"},
		{"counts together too large", func(f *rawFile) { f.nTensors, f.nKV = 12, 20 }, "20 metadata entries and 12 tensors cannot fit"},
		{"absurd KV count", func(f *rawFile) { f.nKV = math.MaxInt64 }, "metadata count"},
		{"negative KV count", func(f *rawFile) { f.nKV = -2 }, "metadata count"},
		{"absurd key length", func(f *rawFile) {
			f.kvs = append(f.kvs, func(r *raw) { r.u64(1 << 60) })
		}, "metadata entry 2: key length 1152921504606846976"},
		{"absurd string length", func(f *rawFile) {
			f.kvs = append(f.kvs, func(r *raw) { r.str("k").u32(uint32(TypeString)).u64(math.MaxUint64) })
		}, `key "k": string length 18446744073709551615`},
		{"absurd array length", func(f *rawFile) {
			f.kvs = append(f.kvs, func(r *raw) { r.str("k").u32(uint32(TypeArray)).u32(uint32(TypeUint32)).u64(1 << 61) })
		}, "array of uint32 count 2305843009213693952 cannot fit"},
		{"absurd string array length", func(f *rawFile) {
			f.kvs = append(f.kvs, func(r *raw) { r.str("k").u32(uint32(TypeArray)).u32(uint32(TypeString)).u64(1000) })
		}, "array of string count 1000 cannot fit"},
		{"string in array too long", func(f *rawFile) {
			f.kvs = append(f.kvs, func(r *raw) { r.str("k").u32(uint32(TypeArray)).u32(uint32(TypeString)).u64(2).str("x").u64(1 << 40) })
		}, "element 1: truncated"},
		{"invalid value type", func(f *rawFile) {
			f.kvs = append(f.kvs, func(r *raw) { r.str("k").u32(13).u32(0) })
		}, `key "k": invalid value type 13`},
		{"invalid array type", func(f *rawFile) {
			f.kvs = append(f.kvs, func(r *raw) { r.str("k").u32(uint32(TypeArray)).u32(99).u64(0) })
		}, "array of invalid type 99"},
		{"bad bool", func(f *rawFile) {
			f.kvs = append(f.kvs, func(r *raw) { r.str("k").u32(uint32(TypeBool)).bytes(2) })
		}, "invalid bool byte 2"},
		{"bad bool in array", func(f *rawFile) {
			f.kvs = append(f.kvs, func(r *raw) { r.str("k").u32(uint32(TypeArray)).u32(uint32(TypeBool)).u64(2).bytes(1, 7) })
		}, "element 1: invalid bool byte 7"},
		{"nesting too deep", func(f *rawFile) {
			f.kvs = append(f.kvs, func(r *raw) {
				r.str("k").u32(uint32(TypeArray))
				for range 20 {
					r.u32(uint32(TypeArray)).u64(1)
				}
			})
		}, "nested more than 8 deep"},
		{"duplicate key", func(f *rawFile) { f.kvs = append(f.kvs, kvU32("gpt2.block_count", 3)) }, `duplicate key "gpt2.block_count"`},
		{"alignment 0", func(f *rawFile) { f.kvs = append(f.kvs, kvU32(KeyAlignment, 0)) }, "general.alignment is 0, must be a power of two"},
		{"alignment 3", func(f *rawFile) { f.kvs = append(f.kvs, kvU32(KeyAlignment, 3)) }, "general.alignment is 3, must be a power of two"},
		{"alignment not u32", func(f *rawFile) { f.kvs = append(f.kvs, kvStr(KeyAlignment, "32")) }, "general.alignment is string, must be uint32"},
		{"dims overflow", func(f *rawFile) { f.tensors[0].dims = []uint64{1 << 32, 1 << 32} }, `tensor "a": shape [4294967296 4294967296] has more than 2^63-1 elements`},
		{"bytes overflow", func(f *rawFile) { f.tensors[0].dims = []uint64{1 << 31, 1 << 31} }, `tensor "a": shape [2147483648 2147483648] of f32 overflows`},
		{"dim over int64", func(f *rawFile) { f.tensors[0].dims = []uint64{1 << 63} }, "dimension 0 is"},
		{"zero dim", func(f *rawFile) { f.tensors[1].dims = []uint64{32, 0} }, `tensor "b": dimension 1 is 0`},
		{"too many dims", func(f *rawFile) { f.tensors[0].dims = []uint64{1, 1, 1, 1, 1} }, "has 5 dimensions, want 1 to 4"},
		{"no dims", func(f *rawFile) { f.tensors[0].dims = nil }, "has 0 dimensions"},
		{"absurd dims count", func(f *rawFile) { f.tensors[0].dims = make([]uint64, 1000) }, "has 1000 dimensions"},
		{"unknown type 4", func(f *rawFile) { f.tensors[1].typ = 4 }, `tensor "b": unknown tensor type 4`},
		{"unknown type 1000", func(f *rawFile) { f.tensors[2].typ = 1000 }, `tensor "c": unknown tensor type 1000`},
		{"block size", func(f *rawFile) { f.tensors[1].dims = []uint64{16, 2} }, `tensor "b": 16 elements per row is not a multiple of the q8_0 block size 32`},
		{"duplicate tensor", func(f *rawFile) { f.tensors[2].name = "a" }, `duplicate tensor name "a"`},
		{"long name", func(f *rawFile) { f.tensors[0].name = strings.Repeat("x", MaxTensorName+1) }, "name length 65537 is over the limit"},
		{"misaligned offset", func(f *rawFile) { f.tensors[1].off = 48 }, `tensor "b": data offset 48 is not a multiple of the alignment 32`},
		{"offset over int64", func(f *rawFile) { f.tensors[1].off = 1 << 63 }, "data offset 9223372036854775808 is too large"},
		{"offset past end", func(f *rawFile) { f.tensors[1].off = 1 << 40 }, `tensor "b" has data offset 1099511627776, want 32`},
		{"offset huge", func(f *rawFile) { f.tensors[1].off = math.MaxInt64 &^ 31 }, `tensor "b" has data offset 9223372036854775776, want 32`},
		{"gap", func(f *rawFile) { f.tensors[2].off = 160 }, `tensor "c" has data offset 160, want 96`},
		{"overlap", func(f *rawFile) { f.tensors[2].off = 32 }, `tensor "c" has data offset 32, want 96`},
		{"same offset", func(f *rawFile) { f.tensors[1].off, f.tensors[2].off = 0, 0 }, `tensor "b" has data offset 0, want 32`},
		{"out of order", func(f *rawFile) { f.tensors[0], f.tensors[2] = f.tensors[2], f.tensors[0] }, `tensor "c" has data offset 96, want 0`},
		{"end past end", func(f *rawFile) { f.dataBytes = 96 + 100 }, `tensor "c": data [`},
		{"data missing", func(f *rawFile) { f.dataBytes = 0 }, "ends past the end of the file"},
		{"alignment 2^31", func(f *rawFile) { f.kvs = append(f.kvs, kvU32(KeyAlignment, 1<<31)) }, "general.alignment is 2147483648, must be a power of two of at most 1048576"},
		{"alignment 2^21", func(f *rawFile) { f.kvs = append(f.kvs, kvU32(KeyAlignment, 1<<21)) }, "at most 1048576"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			f := validRaw()
			c.edit(&f)
			_, err := Parse(f.encode())
			if err == nil {
				t.Fatalf("no error, want %q", c.want)
			}
			if !strings.Contains(err.Error(), c.want) || !strings.HasPrefix(err.Error(), "gguf: ") {
				t.Fatalf("error %q, want it to contain %q", err, c.want)
			}
		})
	}
}

// A wrong alignment in a file changes where every tensor must sit; 64 makes b misaligned.
func TestAlignmentFromFile(t *testing.T) {
	f := validRaw()
	f.kvs = append(f.kvs, kvU32(KeyAlignment, 64))
	f.align = 64
	f.tensors[1].off = 64
	f.tensors[2].off = 128
	f.dataBytes = 128 + 210
	p, err := Parse(f.encode())
	if err != nil {
		t.Fatal(err)
	}
	if p.Alignment != 64 || p.DataOffset%64 != 0 {
		t.Fatalf("alignment %d, data offset %d", p.Alignment, p.DataOffset)
	}
	f.tensors[1].off = 32
	if _, err := Parse(f.encode()); err == nil || !strings.Contains(err.Error(), "alignment 64") {
		t.Fatalf("misaligned for 64: %v", err)
	}
}

// Issue 8, row 4: tensors must lie where llama.cpp requires, at the running aligned sum, so a
// small file cannot describe many tensors over the same bytes (a copy of which would be huge).
// 500 tensors of 2 MiB all at offset 0 in a 2 MiB data section: refused at once, having
// allocated little, by the reader and so by everything built on it.
func TestOverlappingTensorsRefused(t *testing.T) {
	f := validRaw()
	f.tensors = nil
	for i := 0; i < 500; i++ {
		f.tensors = append(f.tensors, rawTensor{fmt.Sprintf("t%d", i), []uint64{512, 1024}, 0, 0}) // F32, 2 MiB
	}
	f.dataBytes = 2 << 20
	b := f.encode()
	start, before := time.Now(), heapAllocs()
	_, err := Parse(b)
	used, took := heapAllocs()-before, time.Since(start)
	if err == nil || !strings.Contains(err.Error(), `tensor "t1" has data offset 0, want 2097152`) {
		t.Fatalf("error %v", err)
	}
	if used > 1<<20 || took > 2*time.Second {
		t.Errorf("refusing took %v and allocated %d bytes", took, used)
	}
	// Laid out as the rule says, the same tensors need a data section 500 times as large.
	for i := range f.tensors {
		f.tensors[i].off = uint64(i) << 21
	}
	if _, err := Parse(f.encode()); err == nil || !strings.Contains(err.Error(), `tensor "t1": data [`) {
		t.Fatalf("packed but short: %v", err)
	}
}

// Every prefix of a valid file that cuts into its header or tensor data fails cleanly; a prefix
// that only drops padding after the last tensor is still a whole file.
func TestTruncated(t *testing.T) {
	for _, b := range [][]byte{validRaw().encode(), encode(t, newTestWriter(t))} {
		full, err := Parse(b)
		if err != nil {
			t.Fatal(err)
		}
		var end int64
		for i := range full.Tensors {
			end = max(end, full.DataOffset+full.Tensors[i].Offset+full.Tensors[i].Size)
		}
		for n := 0; n < len(b); n++ {
			_, err := Parse(b[:n:n])
			if int64(n) < end && err == nil {
				t.Fatalf("prefix of %d bytes (of %d) parsed", n, len(b))
			}
			if int64(n) >= end && err != nil {
				t.Fatalf("prefix of %d bytes, past the data: %v", n, err)
			}
		}
	}
}

// Issue 8, row 11: an array of strings costs its bytes in the file and no more when parsed: a
// header of two million empty tokens (16 MB) used to cost 32 MB of string headers on top,
// before anything could compare the count with the model's tensors.
func TestStringArrayCostsItsBytes(t *testing.T) {
	const n = 2 << 20
	f := validRaw()
	f.kvs = append(f.kvs, func(r *raw) {
		r.str("tokenizer.ggml.tokens").u32(uint32(TypeArray)).u32(uint32(TypeString)).u64(n)
		r.b = append(r.b, make([]byte, 8*n)...)
	})
	b := f.encode()
	before := heapAllocs()
	p, err := Parse(b)
	if err != nil {
		t.Fatal(err)
	}
	if used := heapAllocs() - before; used > 8*n+1<<20 {
		t.Errorf("parsing %d empty strings allocated %d bytes", n, used)
	}
	v, _ := p.Get("tokenizer.ggml.tokens")
	if v.Len() != n || v.Index(n-1).Interface() != "" {
		t.Fatalf("len %d", v.Len())
	}
	s, err := p.Strings("tokenizer.ggml.tokens")
	if err != nil || len(s) != n {
		t.Fatal(len(s), err)
	}
}
