package kernels

import (
	"encoding/binary"
	"fmt"
	"math"

	"github.com/gorun-dev/gorun/quant"
)

// The integer path (--quantized-activations) for Q8_0 and Q4_0 weights: activations quantized
// to ggml's Q8_0 (blocks of 32, a half scale, 32 int8), integer dot products per block.
//
// Arithmetic. Output (m, r) is, for the blocks b = 0, 1, ... in order,
//
//	s   = Σ_j w[r,b,j] * x[m,b,j]          (exact int32; w the weight's integer values)
//	t   = float32(s) * dw[r,b]              (rounded to float32)
//	acc = fma(t, dx[m,b], acc)              (one rounding), starting from acc = 0
//
// Every step is exact or correctly rounded, so every kernel that follows it (the generic one,
// the streaming row kernel, the tile kernel with weights repacked) gives the same bits, whatever
// the tier, the batch size or the tiling: batched and token-by-token evaluation stay identical.
//
// VPDPBUSD multiplies unsigned by signed bytes, so the SIMD kernels use the weights as unsigned
// bytes u = w + off (Q8_0: w+128, Q4_0: the nibble itself, w+8) and add the correction
// C[m,b] = -off * Σ_j x[m,b,j] to each block's integer sum.

// IntAct holds activation rows quantized for the integer kernels, in a layout the kernels read
// with broadcasts: row m's int8 values Q[m*K:(m+1)*K], and for its block b (nb = K/32 blocks
// per row) the scale D[m*nb+b] (the Q8_0 half as float32) and the correction C[m*nb+b].
type IntAct struct {
	K int
	Q []byte
	D []float32
	C []int32
}

// Size makes a hold m rows of k values (k a multiple of 32), reusing its memory when it can.
func (a *IntAct) Size(m, k int) {
	nb := k / 32
	a.K = k
	if cap(a.Q) < m*k {
		a.Q = make([]byte, m*k)
		a.D = make([]float32, m*nb)
		a.C = make([]int32, m*nb)
	}
	a.Q, a.D, a.C = a.Q[:m*k], a.D[:m*nb], a.C[:m*nb]
}

// View returns the first m rows of k values of a's memory (sized by Size for at least m*k
// values), without allocating.
func (a *IntAct) View(m, k int) IntAct {
	nb := k / 32
	return IntAct{K: k, Q: a.Q[:m*k], D: a.D[:m*nb], C: a.C[:m*nb]}
}

// Pack stores row m from its Q8_0 encoding q8 (as quant's reference quantizer writes it), with
// the corrections for a weight type of unsigned offset off (IntKernel.Off).
func (a *IntAct) Pack(m int, q8 []byte, off int32) {
	nb := a.K / 32
	q := a.Q[m*a.K : (m+1)*a.K]
	d, c := a.D[m*nb:(m+1)*nb], a.C[m*nb:(m+1)*nb]
	for b := range nb {
		blk := q8[b*quant.SizeQ8_0 : (b+1)*quant.SizeQ8_0]
		d[b] = quant.F16ToF32(binary.LittleEndian.Uint16(blk))
		var sum int32
		for j, v := range blk[2:] {
			q[b*32+j] = v
			sum += int32(int8(v))
		}
		c[b] = -off * sum
	}
}

// QuantizeAct quantizes the float32 row x (len a.K) into row m of a as ggml's reference Q8_0
// quantizer does (d = amax/127 stored as a half, q = x*(1/d) rounded half away from zero),
// with the corrections for a weight type of unsigned offset off. Non-finite values are an
// error, as quant's quantizers make them.
var QuantizeAct func(a *IntAct, m int, x []float32, off int32) error

// quantizeActGeneric is QuantizeAct in Go.
func quantizeActGeneric(a *IntAct, m int, x []float32, off int32) error {
	nb := a.K / 32
	q := a.Q[m*a.K : (m+1)*a.K]
	d, c := a.D[m*nb:(m+1)*nb], a.C[m*nb:(m+1)*nb]
	x = x[:a.K]
	for b := range nb {
		xb := x[b*32 : b*32+32]
		var amax float32
		for _, v := range xb {
			if math.Float32bits(v)&0x7f800000 == 0x7f800000 {
				return quant.CheckFinite(x)
			}
			amax = max(amax, float32(math.Abs(float64(v))))
		}
		db := amax / 127
		var id float32
		if db != 0 {
			id = 1 / db
		}
		d[b] = quant.F16ToF32(quant.F32ToF16(db))
		var sum int32
		for j, v := range xb {
			t := roundHalfAway(float32(v * id))
			q[b*32+j] = byte(int8(t))
			sum += t
		}
		c[b] = -off * sum
	}
	return nil
}

// roundHalfAway is C's roundf for the small values quantization makes (|f| < 2^31).
func roundHalfAway(f float32) int32 {
	t := int32(f)
	if d := f - float32(t); d >= 0.5 {
		t++
	} else if d <= -0.5 {
		t--
	}
	return t
}

// IntTile is up to IntTileRows weight rows repacked for the tile kernel: for block b, the
// unsigned quants of row r, elements 4g..4g+3, at Q[b*512+g*64+r*4:][:4] (so one 64-byte load
// holds the same four elements of all 16 rows), and the rows' scales at D[b*16+r]. Missing
// rows are zero (scale 0).
type IntTile struct {
	Q []byte
	D []float32
}

// IntTileRows is the number of weight rows in an IntTile.
const IntTileRows = 16

// Size makes t hold a tile of k values per row.
func (t *IntTile) Size(k int) {
	nb := k / 32
	if cap(t.Q) < nb*512 {
		t.Q = make([]byte, nb*512)
		t.D = make([]float32, nb*16)
	}
	t.Q, t.D = t.Q[:nb*512], t.D[:nb*16]
}

// IntKernel is the integer path's kernels for one weight type.
type IntKernel struct {
	// Off is the offset that makes the weight's integer values unsigned (see IntAct.Pack).
	Off int32

	// Rows sets out[j] to the dot product of activation row m of a with weight row j, for
	// j < len(out) (rows ws bytes apart in w, stored as the weight type).
	Rows func(a *IntAct, m int, w []byte, ws int, out []float32)

	// Rows2 is Rows for activation rows m and m+1 and the n weight rows of w at once, each
	// weight block read and unpacked once for both: it sets out[j] (row m) and out[os+j] (row
	// m+1) for j < n <= os, with Rows' bits. nil where the tier has none (then Rows serves,
	// once per row).
	Rows2 func(a *IntAct, m int, w []byte, ws, n int, out []float32, os int)

	// Repack writes the n <= IntTileRows weight rows of w (ws bytes apart) into t.
	Repack func(t *IntTile, w []byte, ws, n int)

	// Tile sets out[i*os+r] to the dot product of activation row m+i of a with row r of t,
	// for i < 4 and r < IntTileRows; nil where the tier has no tile kernel (then Rows serves).
	Tile func(t *IntTile, a *IntAct, m int, out []float32, os int)

	// Tile8 is Tile for eight activation rows (i < 8); nil where Tile is.
	Tile8 func(t *IntTile, a *IntAct, m int, out []float32, os int)
}

// SIMD reports whether these kernels are a SIMD tier's (AVX-512 VNNI or AVX-VNNI), which have
// a tile kernel; the generic tier's plain-Go reference has none and is several times slower
// than the float path.
func (k *IntKernel) SIMD() bool { return k.Tile != nil }

// intKernels[t] is the active tier's integer path for weight type t, nil where there is none.
var intKernels [64]*IntKernel

// IntKernelFor returns the integer kernels for weights of type t, or nil.
func IntKernelFor(t quant.Type) *IntKernel {
	if int(t) < 0 || int(t) >= len(intKernels) {
		return nil
	}
	return intKernels[t]
}

// The generic tier's integer kernels: the reference for every other tier, bit for bit.
var (
	intQ8_0Generic = IntKernel{Off: 128, Rows: intRowsGeneric(quant.SizeQ8_0, q8_0Values), Repack: repackQ8_0}
	intQ4_0Generic = IntKernel{Off: 8, Rows: intRowsGeneric(quant.SizeQ4_0, q4_0Values), Repack: repackQ4_0}
)

func useIntGeneric() {
	clear(intKernels[:])
	intKernels[quant.Q8_0] = &intQ8_0Generic
	intKernels[quant.Q4_0] = &intQ4_0Generic
	QuantizeAct = quantizeActGeneric
}

// q8_0Values writes the 32 integer values of a Q8_0 block.
func q8_0Values(v *[32]int32, blk []byte) {
	for j := range v {
		v[j] = int32(int8(blk[2+j]))
	}
}

// q4_0Values writes the 32 integer values (nibble - 8) of a Q4_0 block.
func q4_0Values(v *[32]int32, blk []byte) {
	for j := 0; j < 16; j++ {
		v[j] = int32(blk[2+j]&15) - 8
		v[j+16] = int32(blk[2+j]>>4) - 8
	}
}

// intRowsGeneric is IntKernel.Rows for a 32-value block type of size bytes per block whose
// integer values values writes.
func intRowsGeneric(size int, values func(*[32]int32, []byte)) func(a *IntAct, m int, w []byte, ws int, out []float32) {
	return func(a *IntAct, m int, w []byte, ws int, out []float32) {
		nb := a.K / 32
		x, dx := a.Q[m*a.K:(m+1)*a.K], a.D[m*nb:(m+1)*nb]
		var v [32]int32
		for r := range out {
			row := w[r*ws : r*ws+nb*size]
			var acc float32
			for b := range nb {
				blk := row[b*size : (b+1)*size]
				values(&v, blk)
				var s int32
				for j, q := range x[b*32 : b*32+32] {
					s += v[j] * int32(int8(q))
				}
				t := float32(float32(s) * quant.F16ToF32(binary.LittleEndian.Uint16(blk)))
				acc = FMA32(t, dx[b], acc)
			}
			out[r] = acc
		}
	}
}

// repackQ8_0 is IntKernel.Repack for Q8_0: u = w+128 (the sign bit flipped).
func repackQ8_0(t *IntTile, w []byte, ws, n int) {
	repack(t, w, ws, n, quant.SizeQ8_0, func(blk []byte, g int) uint32 {
		return binary.LittleEndian.Uint32(blk[2+4*g:]) ^ 0x80808080
	})
}

// repackQ4_0 is IntKernel.Repack for Q4_0: u = the nibble (values 0..15 in the low nibbles,
// 16..31 in the high ones).
func repackQ4_0(t *IntTile, w []byte, ws, n int) {
	repack(t, w, ws, n, quant.SizeQ4_0, func(blk []byte, g int) uint32 {
		q := binary.LittleEndian.Uint32(blk[2+4*(g&3):])
		return q >> (4 * uint(g>>2)) & 0x0f0f0f0f
	})
}

// repack fills t from n rows of blocks of size bytes; group(blk, g) returns the unsigned
// quants of elements 4g..4g+3 of a block, little-endian in a uint32.
func repack(t *IntTile, w []byte, ws, n, size int, group func(blk []byte, g int) uint32) {
	if n > IntTileRows {
		panic(fmt.Sprintf("kernels: repack of %d rows, at most %d", n, IntTileRows))
	}
	nb := len(t.D) / 16
	if n < IntTileRows {
		clear(t.Q)
		clear(t.D)
	}
	for r := range n {
		row := w[r*ws : r*ws+nb*size]
		for b := range nb {
			blk := row[b*size : (b+1)*size]
			t.D[b*16+r] = quant.F16ToF32(binary.LittleEndian.Uint16(blk))
			q := t.Q[b*512+r*4:]
			for g := range 8 {
				binary.LittleEndian.PutUint32(q[g*64:], group(blk, g))
			}
		}
	}
}

// FMA32 returns a*b+c rounded once to float32, as the SIMD tiers' fused multiply-add. The
// product is exact in float64; the sum is rounded to float64 with round-to-odd (53 bits, more
// than 24+1), after which the rounding to float32 is the correct one.
func FMA32(a, b, c float32) float32 {
	p := float64(float64(a) * float64(b))
	z := float64(c)
	s := float64(p + z)
	if math.IsInf(s, 0) || math.IsNaN(s) {
		return float32(s)
	}
	// TwoSum: e is the exact rounding error of s = p + z.
	bv := float64(s - p)
	e := float64(float64(p-float64(s-bv)) + float64(z-bv))
	if e != 0 && math.Float64bits(s)&1 == 0 {
		// Round to odd: s was inexact and landed on an even significand; step towards the
		// exact sum, which lies strictly between s and that neighbour.
		s = math.Nextafter(s, math.Copysign(math.Inf(1), e))
	}
	return float32(s)
}
