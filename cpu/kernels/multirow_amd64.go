//go:build amd64 && !purego

package kernels

//go:generate python3 gen/multirow.py
//go:generate python3 gen/multirow_avx2.py

import "github.com/gorun-dev/gorun/quant"

// The multi-row kernels of multirow_amd64.s: R = 2..8 activation rows (Q4_K, Q6_K: 2..4) times
// four weight rows.
// nb counts blocks (Q8_0, Q4_0: 32 values; Q4_K, Q6_K: 256) or steps of 16 values (F16).

//go:noescape
func mvrQ8_0x2AVX512(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32)

//go:noescape
func mvrQ8_0x3AVX512(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32)

//go:noescape
func mvrQ8_0x4AVX512(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32)

//go:noescape
func mvrQ4_0x2AVX512(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32, base *[16]float32)

//go:noescape
func mvrQ4_0x3AVX512(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32, base *[16]float32)

//go:noescape
func mvrQ4_0x4AVX512(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32, base *[16]float32)

//go:noescape
func mvrF16x2AVX512(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32)

//go:noescape
func mvrF16x3AVX512(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32)

//go:noescape
func mvrF16x4AVX512(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32)

//go:noescape
func mvrQ4_Kx2AVX512(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32, base *[16]float32)

//go:noescape
func mvrQ4_Kx3AVX512(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32, base *[16]float32)

//go:noescape
func mvrQ4_Kx4AVX512(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32, base *[16]float32)

//go:noescape
func mvrQ6_Kx2AVX512(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32)

//go:noescape
func mvrQ6_Kx3AVX512(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32)

//go:noescape
func mvrQ6_Kx4AVX512(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32)

//go:noescape
func mvrQ8_0x5AVX512(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32)

//go:noescape
func mvrQ8_0x6AVX512(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32)

//go:noescape
func mvrQ8_0x7AVX512(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32)

//go:noescape
func mvrQ8_0x8AVX512(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32)

//go:noescape
func mvrQ4_0x5AVX512(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32, base *[16]float32)

//go:noescape
func mvrQ4_0x6AVX512(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32, base *[16]float32)

//go:noescape
func mvrQ4_0x7AVX512(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32, base *[16]float32)

//go:noescape
func mvrQ4_0x8AVX512(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32, base *[16]float32)

//go:noescape
func mvrF16x5AVX512(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32)

//go:noescape
func mvrF16x6AVX512(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32)

//go:noescape
func mvrF16x7AVX512(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32)

//go:noescape
func mvrF16x8AVX512(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32)

//go:noescape
func mvrQ8_0x2AVX2(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32)

// mvrKernel is the signature the assembly kernels share (the table bases bound by wrappers).
type mvrKernel func(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32)

// useMultiRowAVX512 installs the AVX-512 multi-row kernels; a lone row goes to MatVec4.
func useMultiRowAVX512() {
	setMatVecRows(quant.Q8_0, multiRowBlocks(quant.Q8_0, 32, quant.SizeQ8_0,
		[]mvrKernel{mvrQ8_0x2AVX512, mvrQ8_0x3AVX512, mvrQ8_0x4AVX512,
			mvrQ8_0x5AVX512, mvrQ8_0x6AVX512, mvrQ8_0x7AVX512, mvrQ8_0x8AVX512}))
	setMatVecRows(quant.Q4_K, multiRowBlocks(quant.Q4_K, 256, quant.SizeQ4_K, []mvrKernel{
		func(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32) {
			mvrQ4_Kx2AVX512(x, xs, w, ws, nb, out, os, tab, &nibBase)
		},
		func(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32) {
			mvrQ4_Kx3AVX512(x, xs, w, ws, nb, out, os, tab, &nibBase)
		},
		func(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32) {
			mvrQ4_Kx4AVX512(x, xs, w, ws, nb, out, os, tab, &nibBase)
		},
	}))
	setMatVecRows(quant.Q6_K, multiRowBlocks(quant.Q6_K, 256, quant.SizeQ6_K,
		[]mvrKernel{mvrQ6_Kx2AVX512, mvrQ6_Kx3AVX512, mvrQ6_Kx4AVX512}))
	setMatVecRows(quant.Q4_0, multiRowBlocks(quant.Q4_0, 32, quant.SizeQ4_0, []mvrKernel{
		func(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32) {
			mvrQ4_0x2AVX512(x, xs, w, ws, nb, out, os, tab, &q4Base)
		},
		func(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32) {
			mvrQ4_0x3AVX512(x, xs, w, ws, nb, out, os, tab, &q4Base)
		},
		func(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32) {
			mvrQ4_0x4AVX512(x, xs, w, ws, nb, out, os, tab, &q4Base)
		},
		func(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32) {
			mvrQ4_0x5AVX512(x, xs, w, ws, nb, out, os, tab, &q4Base)
		},
		func(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32) {
			mvrQ4_0x6AVX512(x, xs, w, ws, nb, out, os, tab, &q4Base)
		},
		func(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32) {
			mvrQ4_0x7AVX512(x, xs, w, ws, nb, out, os, tab, &q4Base)
		},
		func(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32) {
			mvrQ4_0x8AVX512(x, xs, w, ws, nb, out, os, tab, &q4Base)
		},
	}))
	setMatVecRows(quant.F16, multiRowF16([]mvrKernel{mvrF16x2AVX512, mvrF16x3AVX512, mvrF16x4AVX512,
		mvrF16x5AVX512, mvrF16x6AVX512, mvrF16x7AVX512, mvrF16x8AVX512}))
}

// wideRowsL1 bounds the activation rows (bytes) the five-to-eight-row kernels take at once.
// Their two passes read every activation value once per two weight rows, twice as often as the
// four-row kernels do: from L1 that is free, from L2 it is the bound. Streaming Q8_0 and F16
// weights on one thread (BenchmarkStreamRows), eight rows of 768 took 30-45% less CPU time in
// one eight-row call than in two four-row calls; eight rows of 3072 (96 KiB) took 40-60% more.
const wideRowsL1 = 32 << 10

// rowsPerCall is the most activation rows of length k one call of kernels for up to most rows
// should take (see wideRowsL1).
func rowsPerCall(most, k int) int {
	if most > 4 && most*4*k > wideRowsL1 {
		return 4
	}
	return most
}

// useMultiRowAVX2 installs the AVX2 multi-row kernel (Q8_0, two activation rows at a time: the
// tier's sixteen registers hold no more sums; multirow_avx2_amd64.s says why not F16).
func useMultiRowAVX2() {
	setMatVecRows(quant.Q8_0, multiRowBlocks(quant.Q8_0, 32, quant.SizeQ8_0, []mvrKernel{mvrQ8_0x2AVX2}))
}

// multiRowBlocks wraps the kernels for 2, 3, ... activation rows (kern[r-2] takes r) of a type
// of blocks of n values, size bytes each; more rows than one call should take go in turns.
func multiRowBlocks(t quant.Type, n, size int, kern []mvrKernel) MatVecRowsFunc {
	one := matVec4[t]
	return func(x []float32, xs, rows, k int, w []byte, ws int, out []float32, os int) {
		checkMatVecRows(x, xs, rows, k, n, out, os)
		checkWeightRows(w, ws, k/n*size)
		most := rowsPerCall(len(kern)+1, k)
		for m := 0; m < rows; {
			r := min(rows-m, most)
			if r == 1 {
				one(x[m*xs:m*xs+k], w, ws, (*[4]float32)(out[m*os:m*os+4]))
			} else {
				kern[r-2](&x[m*xs], uintptr(4*xs), &w[0], uintptr(ws), uintptr(k/n), &out[m*os], uintptr(4*os), f16Tab)
			}
			m += r
		}
	}
}

// multiRowF16 wraps the F16 kernels as multiRowBlocks does: whole steps of 16 values in
// assembly, the rest of each row added one by one as MatVec4's tail is.
func multiRowF16(kern []mvrKernel) MatVecRowsFunc {
	one := matVec4[quant.F16]
	return func(x []float32, xs, rows, k int, w []byte, ws int, out []float32, os int) {
		checkMatVecRows(x, xs, rows, k, 1, out, os)
		checkWeightRows(w, ws, 2*k)
		n := k &^ 15
		most := rowsPerCall(len(kern)+1, k)
		for m := 0; m < rows; {
			r := min(rows-m, most)
			switch {
			case r == 1:
				one(x[m*xs:m*xs+k], w, ws, (*[4]float32)(out[m*os:m*os+4]))
			case n > 0:
				kern[r-2](&x[m*xs], uintptr(4*xs), &w[0], uintptr(ws), uintptr(n/16), &out[m*os], uintptr(4*os), f16Tab)
			default:
				for i := m; i < m+r; i++ {
					clear(out[i*os : i*os+4])
				}
			}
			if r > 1 && n < k {
				for i := m; i < m+r; i++ {
					tailRows((*[4]float32)(out[i*os:i*os+4]), x[i*xs:i*xs+k], w, ws, n, quant.F16ToF32)
				}
			}
			m += r
		}
	}
}
