//go:build amd64 && !purego

package kernels

import (
	"encoding/binary"

	"github.com/gorun-dev/gorun/quant"
)

// IQ4_NL and IQ4_XS on the SIMD tiers (iq4_amd64.s). The Go side forms each 32-value block's
// float32 scale as quant's dequantizer does (IQ4_NL: the half d; IQ4_XS: d*float32(ls-32)), a
// chunk of blocks at a time; the assembly forms the values from the level table. On AVX-512,
// IQ4_NL's fused kernel is Q4_0's with the IQ4 levels as its table: both formats are a half
// scale times a 16-entry table picked by the same nibbles.

//go:noescape
func matvecIQ4x4AVX512(x *float32, w *byte, ws, ng, nsub, gstride uintptr, sc *float32, acc *[64]float32, base *[16]float32)

//go:noescape
func dequantIQ4AVX512(dst *float32, w *byte, ng, nsub, gstride uintptr, sc *float32, base *[16]float32)

//go:noescape
func matvecIQ4x4AVX2(x *float32, w *byte, ws, ng, nsub, gstride uintptr, sc *float32, acc *[64]float32, tab *[16]int8)

//go:noescape
func dequantIQ4AVX2(dst *float32, w *byte, ng, nsub, gstride uintptr, sc *float32, tab *[16]int8)

var (
	iq4Levels = quant.IQ4Levels() // float32, for VPERMPS
	iq4Values = quant.IQ4Values() // int8, for VPSHUFB
)

// iq4Chunk is the number of blocks whose scales a wrapper makes before calling the assembly.
const iq4Chunk = 64

// iq4Layout is how a type's blocks sit in a row: groups of nsub blocks, group bytes each,
// whose index bytes start at qoff.
type iq4Layout struct {
	t     quant.Type
	group int
	qoff  int
	nsub  int
}

var (
	layoutIQ4_NL = iq4Layout{quant.IQ4_NL, quant.SizeIQ4_NL, 2, 1}
	layoutIQ4_XS = iq4Layout{quant.IQ4_XS, quant.SizeIQ4_XS, 8, 8}
)

// scales writes the scales of the group g's blocks to sc[0], sc[stride], ...
func (l iq4Layout) scales(sc []float32, stride int, g []byte) {
	d := quant.F16ToF32(binary.LittleEndian.Uint16(g))
	if l.nsub == 1 {
		sc[0] = d
		return
	}
	ls := quant.IQ4XSScales(g)
	for k, v := range ls {
		sc[k*stride] = d * float32(v)
	}
}

// iq4Dequant and iq4MatVec call the tier's kernels. They are static calls, not function
// values, so that the wrappers' scale and accumulator arrays stay on the stack.
func iq4Dequant(avx512 bool, dst *float32, w *byte, ng, nsub, gstride uintptr, sc *float32) {
	if avx512 {
		dequantIQ4AVX512(dst, w, ng, nsub, gstride, sc, &iq4Levels)
	} else {
		dequantIQ4AVX2(dst, w, ng, nsub, gstride, sc, &iq4Values)
	}
}

func iq4MatVec(avx512 bool, x *float32, w *byte, ws, ng, nsub, gstride uintptr, sc *float32, acc *[64]float32) {
	if avx512 {
		matvecIQ4x4AVX512(x, w, ws, ng, nsub, gstride, sc, acc, &iq4Levels)
	} else {
		matvecIQ4x4AVX2(x, w, ws, ng, nsub, gstride, sc, acc, &iq4Values)
	}
}

// dequantIQ4 is the dequantizer of the layout l on the AVX-512 or the AVX2 tier.
func dequantIQ4(l iq4Layout, avx512 bool) func(dst []float32, src []byte) {
	return func(dst []float32, src []byte) {
		gv := 32 * l.nsub
		ng := len(dst) / gv
		if ng == 0 {
			return
		}
		_ = src[ng*l.group-1]
		var sc [iq4Chunk]float32
		per := iq4Chunk / l.nsub
		for g0 := 0; g0 < ng; g0 += per {
			n := min(per, ng-g0)
			for g := 0; g < n; g++ {
				l.scales(sc[g*l.nsub:], 1, src[(g0+g)*l.group:])
			}
			iq4Dequant(avx512, &dst[g0*gv], &src[g0*l.group+l.qoff], uintptr(n), uintptr(l.nsub), uintptr(l.group), &sc[0])
		}
	}
}

// matVecIQ4 is the fused kernel of the layout l on the AVX-512 or the AVX2 tier: the scales of the four rows' next chunk of
// blocks, interleaved (block s of row r at 4s+r), then the kernel over that chunk; the 16
// lanes of each row carry over from chunk to chunk and are reduced at the end with the
// package's tree.
func matVecIQ4(l iq4Layout, avx512 bool) func(x []float32, w []byte, ws int, out *[4]float32) {
	return func(x []float32, w []byte, ws int, out *[4]float32) {
		gv := 32 * l.nsub
		ng := len(x) / gv
		checkRows(w, ws, ng*l.group)
		var (
			acc [4 * lanes]float32
			sc  [4 * iq4Chunk]float32
		)
		per := iq4Chunk / l.nsub
		for g0 := 0; g0 < ng; g0 += per {
			n := min(per, ng-g0)
			for r := 0; r < 4; r++ {
				row := w[r*ws+g0*l.group:]
				for g := 0; g < n; g++ {
					l.scales(sc[4*g*l.nsub+r:], 4, row[g*l.group:])
				}
			}
			iq4MatVec(avx512, &x[g0*gv], &w[g0*l.group+l.qoff], uintptr(ws), uintptr(n), uintptr(l.nsub), uintptr(l.group), &sc[0], &acc)
		}
		for r := range out {
			out[r] = reduce((*[lanes]float32)(acc[r*lanes:]))
		}
	}
}

func useIQ4AVX512() {
	for _, l := range []iq4Layout{layoutIQ4_NL, layoutIQ4_XS} {
		dequant[l.t] = dequantIQ4(l, true)
		matVec4[l.t] = matVecIQ4(l, true)
	}
	matVec4[quant.IQ4_NL] = func(x []float32, w []byte, ws int, out *[4]float32) {
		checkRows(w, ws, len(x)/32*quant.SizeIQ4_NL)
		matvecQ4_0x4AVX512(&x[0], &w[0], uintptr(ws), uintptr(len(x)/32), out, f16Tab, &iq4Levels)
	}
}

func useIQ4AVX2() {
	for _, l := range []iq4Layout{layoutIQ4_NL, layoutIQ4_XS} {
		dequant[l.t] = dequantIQ4(l, false)
		matVec4[l.t] = matVecIQ4(l, false)
	}
}
