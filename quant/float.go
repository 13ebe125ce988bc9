package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	"unsafe"
)

func init() {
	register(&Format{Type: F32, Dequantize: dequantF32, Quantize: quantF32, DotF32: dotF32Row})
	register(&Format{Type: F16, Dequantize: dequantF16, Quantize: quantF16, DotF32: dotF16})
	register(&Format{Type: BF16, Dequantize: dequantBF16, Quantize: quantBF16, DotF32: dotBF16})
}

// AsF32 views little-endian float32 bytes as []float32 without copying. All platforms gorun
// targets are little-endian; b must be 4-byte aligned (GGUF data and arenas are).
func AsF32(b []byte) []float32 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*float32)(unsafe.Pointer(&b[0])), len(b)/4)
}

// AsU16 views bytes as []uint16 (half-precision storage) without copying.
func AsU16(b []byte) []uint16 {
	if len(b) == 0 {
		return nil
	}
	return unsafe.Slice((*uint16)(unsafe.Pointer(&b[0])), len(b)/2)
}

// F32Bytes views a []float32 as its bytes without copying.
func F32Bytes(f []float32) []byte {
	if len(f) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&f[0])), len(f)*4)
}

// CheckFinite returns an error naming the first NaN or Inf in x.
func CheckFinite(x []float32) error {
	for i, v := range x {
		if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
			return fmt.Errorf("value %v at element %d", v, i)
		}
	}
	return nil
}

func dequantF32(dst []float32, src []byte) { copy(dst, AsF32(src[:len(dst)*4])) }

func quantF32(dst []byte, src []float32) error {
	if err := CheckFinite(src); err != nil {
		return err
	}
	for i, v := range src {
		binary.LittleEndian.PutUint32(dst[4*i:], math.Float32bits(v))
	}
	return nil
}

func dequantF16(dst []float32, src []byte) {
	h := AsU16(src[:len(dst)*2])
	for i := range dst {
		dst[i] = f16Table[h[i]]
	}
}

func quantF16(dst []byte, src []float32) error {
	if err := CheckFinite(src); err != nil {
		return err
	}
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], F32ToF16(v))
	}
	return nil
}

func dequantBF16(dst []float32, src []byte) {
	h := AsU16(src[:len(dst)*2])
	for i := range dst {
		dst[i] = BF16ToF32(h[i])
	}
}

func quantBF16(dst []byte, src []float32) error {
	if err := CheckFinite(src); err != nil {
		return err
	}
	for i, v := range src {
		binary.LittleEndian.PutUint16(dst[2*i:], F32ToBF16(v))
	}
	return nil
}

func dotF32Row(w []byte, x []float32) float32 { return DotF32(AsF32(w[:len(x)*4]), x) }

// DotF32 is the float32 dot product of two equal-length vectors, with four independent
// accumulators so the additions pipeline.
func DotF32(a, b []float32) float32 {
	n := len(a)
	b = b[:n]
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= n; i += 4 {
		s0 += a[i] * b[i]
		s1 += a[i+1] * b[i+1]
		s2 += a[i+2] * b[i+2]
		s3 += a[i+3] * b[i+3]
	}
	for ; i < n; i++ {
		s0 += a[i] * b[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func dotF16(w []byte, x []float32) float32 {
	n := len(x)
	h := AsU16(w[:2*n])
	t := f16Table
	var s0, s1, s2, s3 float32
	i := 0
	for ; i+4 <= n; i += 4 {
		s0 += t[h[i]] * x[i]
		s1 += t[h[i+1]] * x[i+1]
		s2 += t[h[i+2]] * x[i+2]
		s3 += t[h[i+3]] * x[i+3]
	}
	for ; i < n; i++ {
		s0 += t[h[i]] * x[i]
	}
	return (s0 + s1) + (s2 + s3)
}

func dotBF16(w []byte, x []float32) float32 {
	n := len(x)
	h := AsU16(w[:2*n])
	var s0, s1 float32
	i := 0
	for ; i+2 <= n; i += 2 {
		s0 += BF16ToF32(h[i]) * x[i]
		s1 += BF16ToF32(h[i+1]) * x[i+1]
	}
	for ; i < n; i++ {
		s0 += BF16ToF32(h[i]) * x[i]
	}
	return s0 + s1
}
