package gguf

import (
	"runtime/metrics"
	"testing"
)

// heapAllocs is the cumulative bytes allocated on the heap; runtime/metrics reads it without
// stopping the world, so it is cheap enough to call per fuzz input.
func heapAllocs() uint64 {
	s := []metrics.Sample{{Name: "/gc/heap/allocs:bytes"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

// FuzzParse feeds arbitrary bytes to Parse: it must return, without panicking, and allocate no
// more than a small multiple of the input, whatever the header claims.
func FuzzParse(f *testing.F) {
	f.Add(validRaw().encode())
	f.Add(encode(f, newTestWriter(f)))
	nested := validRaw()
	nested.kvs = append(nested.kvs, func(r *raw) {
		r.str("n").u32(uint32(TypeArray)).u32(uint32(TypeArray)).u64(2)
		r.u32(uint32(TypeString)).u64(1).str("x")
		r.u32(uint32(TypeBool)).u64(2).bytes(0, 1)
	})
	f.Add(nested.encode())
	f.Fuzz(func(t *testing.T, b []byte) {
		before := heapAllocs()
		file, err := Parse(b)
		if used, limit := heapAllocs()-before, 64*uint64(len(b))+1<<20; used > limit {
			t.Fatalf("%d input bytes allocated %d bytes", len(b), used)
		}
		if err != nil {
			return
		}
		exercise(t, file)
	})
}

// exercise touches everything a parsed file offers; none of it may panic.
func exercise(t *testing.T, f *File) {
	for _, kv := range f.KV {
		_ = kv.Value.String()
		if v, ok := f.Get(kv.Key); !ok || v.Type() != kv.Value.Type() {
			t.Fatalf("Get(%q) disagrees with KV", kv.Key)
		}
		_, _ = f.Uint(kv.Key)
		_, _ = f.Int(kv.Key)
		_, _ = f.Float(kv.Key)
		_, _ = f.Int32s(kv.Key)
		_, _ = f.Float32s(kv.Key)
		_, _ = f.Strings(kv.Key)
	}
	for i := range f.Tensors {
		ti := &f.Tensors[i]
		if f.Tensor(ti.Name) != ti {
			t.Fatalf("Tensor(%q) is not tensor %d", ti.Name, i)
		}
		if d := f.Data(ti); int64(len(d)) != ti.Size {
			t.Fatalf("tensor %q: Data is %d bytes, Size %d", ti.Name, len(d), ti.Size)
		}
		if ti.Offset%int64(f.Alignment) != 0 || (f.DataOffset+ti.Offset)%int64(f.Alignment) != 0 {
			t.Fatalf("tensor %q misaligned", ti.Name)
		}
	}
}
