//go:build amd64 && !purego

package kernels

import "github.com/gorun-dev/gorun/quant"

// The multi-row kernels of multirow_amd64.s: R = 2, 3, 4 activation rows times four weight rows.
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

// mvrKernel is the signature the assembly kernels share (the table bases bound by wrappers).
type mvrKernel func(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32)

// useMultiRowAVX512 installs the AVX-512 multi-row kernels; a lone row goes to MatVec4.
func useMultiRowAVX512() {
	setMatVecRows(quant.Q8_0, multiRowBlocks(quant.Q8_0, 32, quant.SizeQ8_0,
		[...]mvrKernel{mvrQ8_0x2AVX512, mvrQ8_0x3AVX512, mvrQ8_0x4AVX512}))
	setMatVecRows(quant.Q4_K, multiRowBlocks(quant.Q4_K, 256, quant.SizeQ4_K, [...]mvrKernel{
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
		[...]mvrKernel{mvrQ6_Kx2AVX512, mvrQ6_Kx3AVX512, mvrQ6_Kx4AVX512}))
	setMatVecRows(quant.Q4_0, multiRowBlocks(quant.Q4_0, 32, quant.SizeQ4_0, [...]mvrKernel{
		func(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32) {
			mvrQ4_0x2AVX512(x, xs, w, ws, nb, out, os, tab, &q4Base)
		},
		func(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32) {
			mvrQ4_0x3AVX512(x, xs, w, ws, nb, out, os, tab, &q4Base)
		},
		func(x *float32, xs uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr, tab *float32) {
			mvrQ4_0x4AVX512(x, xs, w, ws, nb, out, os, tab, &q4Base)
		},
	}))
	setMatVecRows(quant.F16, multiRowF16([...]mvrKernel{mvrF16x2AVX512, mvrF16x3AVX512, mvrF16x4AVX512}))
}

// multiRowBlocks wraps the 2-, 3- and 4-row kernels of a type of blocks of n values, size bytes.
func multiRowBlocks(t quant.Type, n, size int, kern [3]mvrKernel) MatVecRowsFunc {
	one := matVec4[t]
	return func(x []float32, xs, rows, k int, w []byte, ws int, out []float32, os int) {
		checkMatVecRows(x, xs, rows, k, out, os)
		if rows == 1 {
			one(x[:k], w, ws, (*[4]float32)(out[:4]))
			return
		}
		checkRows(w, ws, k/n*size)
		kern[rows-2](&x[0], uintptr(4*xs), &w[0], uintptr(ws), uintptr(k/n), &out[0], uintptr(4*os), f16Tab)
	}
}

// multiRowF16 wraps the F16 kernels: whole steps of 16 values in assembly, the rest of each
// row added one by one as MatVec4's tail is.
func multiRowF16(kern [3]mvrKernel) MatVecRowsFunc {
	one := matVec4[quant.F16]
	return func(x []float32, xs, rows, k int, w []byte, ws int, out []float32, os int) {
		checkMatVecRows(x, xs, rows, k, out, os)
		if rows == 1 {
			one(x[:k], w, ws, (*[4]float32)(out[:4]))
			return
		}
		checkRows(w, ws, 2*k)
		n := k &^ 15
		if n > 0 {
			kern[rows-2](&x[0], uintptr(4*xs), &w[0], uintptr(ws), uintptr(n/16), &out[0], uintptr(4*os), f16Tab)
		} else {
			for i := range rows {
				clear(out[i*os : i*os+4])
			}
		}
		for i := range rows {
			if n < k {
				tailRows((*[4]float32)(out[i*os:i*os+4]), x[i*xs:i*xs+k], w, ws, n, quant.F16ToF32)
			}
		}
	}
}
