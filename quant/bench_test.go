package quant

import (
	"math/rand/v2"
	"testing"
)

const benchN = 4096

var benchSink float32

func benchRows(b *testing.B, ty Type) (w []byte, x []float32) {
	rng := rand.New(rand.NewPCG(1, 1))
	x = gaussRow(rng, benchN, 1)
	w = mustQuantize(b, ty, gaussRow(rng, benchN, 0.05))
	return w, x
}

// BenchmarkDotF32 measures the fused dequantize-dot of one 4096-value row; MB/s counts weight
// bytes.
func BenchmarkDotF32(b *testing.B) {
	for _, ty := range append([]Type{F32, F16}, weightTypes...) {
		b.Run(ty.String(), func(b *testing.B) {
			var w []byte
			var x []float32
			if ty == F32 || ty == F16 {
				rng := rand.New(rand.NewPCG(1, 1))
				x = gaussRow(rng, benchN, 1)
				w = mustQuantize(b, ty, gaussRow(rng, benchN, 0.05))
			} else {
				w, x = benchRows(b, ty)
			}
			f, _ := FormatOf(ty)
			b.SetBytes(int64(len(w)))
			for b.Loop() {
				benchSink += f.DotF32(w, x)
			}
		})
	}
}

// BenchmarkVecDot measures the integer dot of one 4096-value row with activations already
// quantized to the type's VecDotType; MB/s counts weight bytes.
func BenchmarkVecDot(b *testing.B) {
	for _, ty := range weightTypes {
		b.Run(ty.String(), func(b *testing.B) {
			w, x := benchRows(b, ty)
			f, _ := FormatOf(ty)
			xq := mustQuantize(b, f.VecDotType, x)
			b.SetBytes(int64(len(w)))
			for b.Loop() {
				benchSink += f.VecDot(w, xq)
			}
		})
	}
}

// BenchmarkQuantize measures the reference quantizer on one 4096-value row; MB/s counts the
// float32 input bytes.
func BenchmarkQuantize(b *testing.B) {
	for _, ty := range blockTypes {
		b.Run(ty.String(), func(b *testing.B) {
			rng := rand.New(rand.NewPCG(2, 2))
			x := gaussRow(rng, benchN, 1)
			q := make([]byte, ty.TypeSize()*benchN/ty.BlockSize())
			f, _ := FormatOf(ty)
			b.SetBytes(4 * benchN)
			for b.Loop() {
				if err := f.Quantize(q, x); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkDequantize measures dequantizing one 4096-value row; MB/s counts weight bytes.
func BenchmarkDequantize(b *testing.B) {
	for _, ty := range blockTypes {
		b.Run(ty.String(), func(b *testing.B) {
			w, _ := benchRows(b, ty)
			f, _ := FormatOf(ty)
			y := make([]float32, benchN)
			b.SetBytes(int64(len(w)))
			for b.Loop() {
				f.Dequantize(y, w)
			}
		})
	}
}
