//go:build amd64 && !purego

package kernels

import (
	"math"

	"github.com/gorun-dev/gorun/quant"
	"github.com/klauspost/cpuid/v2"
)

//go:noescape
func intTile4VNNI(tq *byte, td *float32, nb uintptr, x *byte, xs uintptr, xd *float32, xc *int32, ds uintptr, out *float32, os uintptr)

//go:noescape
func intTile8VNNI(tq *byte, td *float32, nb uintptr, x *byte, xs uintptr, xd *float32, xc *int32, ds uintptr, out *float32, os uintptr)

//go:noescape
func intRowsQ8_0x4VNNI(x *byte, xd *float32, xc *int32, w *byte, ws, nb uintptr, out *[4]float32)

//go:noescape
func intRowsQ4_0x4VNNI(x *byte, xd *float32, xc *int32, w *byte, ws, nb uintptr, out *[4]float32)

//go:noescape
func intRowsQ8_0x4x2VNNI(x *byte, xs uintptr, xd *float32, xc *int32, ds uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr)

//go:noescape
func intRowsQ4_0x4x2VNNI(x *byte, xs uintptr, xd *float32, xc *int32, ds uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr)

//go:noescape
func repackQ8_0x16VNNI(tq *byte, td *float32, w *byte, ws, nb uintptr, idx *[6][16]int32, offs *[16]int32)

//go:noescape
func repackQ4_0x16VNNI(tq *byte, td *float32, w *byte, ws, nb uintptr, idx *[6][16]int32, offs *[16]int32)

//go:noescape
func quantActVNNI(x *float32, nb uintptr, q *byte, d *float32, c *int32, off int32) (bad uint16)

var (
	intQ8_0VNNI = IntKernel{Off: 128, Repack: repackVNNI(repackQ8_0x16VNNI, quant.SizeQ8_0, repackQ8_0), Tile: intTileVNNI(intTile4VNNI, 4), Tile8: intTileVNNI(intTile8VNNI, 8),
		Rows: intRowsVNNI(intRowsQ8_0x4VNNI, quant.SizeQ8_0, intQ8_0Generic.Rows), Rows2: intRows2VNNI(intRowsQ8_0x4x2VNNI, quant.SizeQ8_0, intQ8_0Generic.Rows)}
	intQ4_0VNNI = IntKernel{Off: 8, Repack: repackVNNI(repackQ4_0x16VNNI, quant.SizeQ4_0, repackQ4_0), Tile: intTileVNNI(intTile4VNNI, 4), Tile8: intTileVNNI(intTile8VNNI, 8),
		Rows: intRowsVNNI(intRowsQ4_0x4VNNI, quant.SizeQ4_0, intQ4_0Generic.Rows), Rows2: intRows2VNNI(intRowsQ4_0x4x2VNNI, quant.SizeQ4_0, intQ4_0Generic.Rows)}
)

// useVNNI installs the AVX-512 VNNI integer kernels where the CPU has them, else the AVX-VNNI
// ones where it has those.
func useVNNI() {
	if cpuid.CPU.Supports(cpuid.AVX512VNNI) {
		intKernels[quant.Q8_0] = &intQ8_0VNNI
		intKernels[quant.Q4_0] = &intQ4_0VNNI
		QuantizeAct = quantizeActVNNI
		return
	}
	useAVXVNNI()
}

// intRowsVNNI runs kern on whole groups of four weight rows and generic on the rest (the same
// arithmetic, so the same bits).
func intRowsVNNI(kern func(x *byte, xd *float32, xc *int32, w *byte, ws, nb uintptr, out *[4]float32), size int,
	generic func(a *IntAct, m int, w []byte, ws int, out []float32)) func(a *IntAct, m int, w []byte, ws int, out []float32) {
	return func(a *IntAct, m int, w []byte, ws int, out []float32) {
		nb := a.K / 32
		n4 := len(out) &^ 3
		if nb == 0 {
			clear(out)
			return
		}
		_ = a.Q[(m+1)*a.K-1]
		_ = a.D[(m+1)*nb-1]
		_ = a.C[(m+1)*nb-1]
		for r := 0; r < n4; r += 4 {
			checkRows(w[r*ws:], ws, nb*size)
			intRowsQ8Call(kern, a, m, nb, w[r*ws:], ws, (*[4]float32)(out[r:r+4]))
		}
		if n4 < len(out) {
			generic(a, m, w[n4*ws:], ws, out[n4:])
		}
	}
}

// intRows2VNNI runs the pair kernel kern on whole groups of four weight rows and generic on
// the rest, once per activation row (the same arithmetic, so the same bits).
func intRows2VNNI(kern func(x *byte, xs uintptr, xd *float32, xc *int32, ds uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr), size int,
	generic func(a *IntAct, m int, w []byte, ws int, out []float32)) func(a *IntAct, m int, w []byte, ws, n int, out []float32, os int) {
	return func(a *IntAct, m int, w []byte, ws, n int, out []float32, os int) {
		if n <= 0 {
			return
		}
		if os < n {
			panic("kernels: Rows2's output rows overlap")
		}
		nb, n4 := a.K/32, n&^3
		_ = out[os+n-1]
		if nb == 0 {
			clear(out[:n])
			clear(out[os : os+n])
			return
		}
		_ = a.Q[(m+2)*a.K-1]
		_ = a.D[(m+2)*nb-1]
		_ = a.C[(m+2)*nb-1]
		for r := 0; r < n4; r += 4 {
			checkRows(w[r*ws:], ws, nb*size)
			kern(&a.Q[m*a.K], uintptr(a.K), &a.D[m*nb], &a.C[m*nb], uintptr(4*nb), &w[r*ws], uintptr(ws), uintptr(nb), &out[r], uintptr(4*os))
		}
		if n4 < n {
			generic(a, m, w[n4*ws:], ws, out[n4:n])
			generic(a, m+1, w[n4*ws:], ws, out[os+n4:os+n])
		}
	}
}

func intRowsQ8Call(kern func(x *byte, xd *float32, xc *int32, w *byte, ws, nb uintptr, out *[4]float32),
	a *IntAct, m, nb int, w []byte, ws int, out *[4]float32) {
	kern(&a.Q[m*a.K], &a.D[m*nb], &a.C[m*nb], &w[0], uintptr(ws), uintptr(nb), out)
}

// intTileVNNI wraps the tile kernel of rows activation rows, after checking every range it
// reads and writes.
func intTileVNNI(kern func(tq *byte, td *float32, nb uintptr, x *byte, xs uintptr, xd *float32, xc *int32, ds uintptr, out *float32, os uintptr),
	rows int) func(t *IntTile, a *IntAct, m int, out []float32, os int) {
	return func(t *IntTile, a *IntAct, m int, out []float32, os int) {
		nb := a.K / 32
		if len(t.D) != nb*16 || len(t.Q) != nb*512 {
			panic("kernels: integer tile and activations of different lengths")
		}
		_ = out[(rows-1)*os+15]
		if nb == 0 {
			for i := range rows {
				clear(out[i*os : i*os+16])
			}
			return
		}
		_ = a.Q[(m+rows)*a.K-1]
		_ = a.D[(m+rows)*nb-1]
		_ = a.C[(m+rows)*nb-1]
		kern(&t.Q[0], &t.D[0], uintptr(nb), &a.Q[m*a.K], uintptr(a.K), &a.D[m*nb], &a.C[m*nb], uintptr(4*nb), &out[0], uintptr(4*os))
	}
}

// transposeIdx are the VPERMT2D index vectors of the repack kernels' three rounds (see
// TRANSPOSE16): entries 0..15 pick from the first register, 16..31 from the second.
var transposeIdx = func() (t [6][16]int32) {
	for k := range 16 {
		g, i := k/4, k%4 // round 1: (rows 2p, 2p+1 | rows 2p+2, 2p+3) -> 4 rows x 4 groups
		t[0][k] = int32(8*(i%2) + 16*(i/2) + g)
		t[1][k] = t[0][k] + 4
		g, j := k/8, k%8 // round 2: (rows 0-3 | rows 4-7), 4 groups -> 8 rows x 2 groups
		t[2][k] = int32(4*g + j%4 + 16*(j/4))
		t[3][k] = t[2][k] + 8
		t[4][k] = int32(k%8 + 16*(k/8)) // round 3: (rows 0-7 | rows 8-15), 2 groups -> 16 rows
		t[5][k] = t[4][k] + 8
	}
	return t
}()

// repackVNNI repacks whole tiles of 16 rows with kern and partial ones with generic.
func repackVNNI(kern func(tq *byte, td *float32, w *byte, ws, nb uintptr, idx *[6][16]int32, offs *[16]int32), size int,
	generic func(t *IntTile, w []byte, ws, n int)) func(t *IntTile, w []byte, ws, n int) {
	return func(t *IntTile, w []byte, ws, n int) {
		nb := len(t.D) / 16
		if n != IntTileRows || nb == 0 {
			generic(t, w, ws, n)
			return
		}
		_ = t.Q[nb*512-1]
		_ = w[(IntTileRows-1)*ws+nb*size-1]
		if (IntTileRows-1)*ws > math.MaxInt32 {
			generic(t, w, ws, n)
			return
		}
		var offs [16]int32 // each row's byte offset, for the scale gather
		for r := range offs {
			offs[r] = int32(r * ws)
		}
		kern(&t.Q[0], &t.D[0], &w[0], uintptr(ws), uintptr(nb), &transposeIdx, &offs)
	}
}

func quantizeActVNNI(a *IntAct, m int, x []float32, off int32) error {
	nb := a.K / 32
	if nb == 0 {
		return nil
	}
	x = x[:a.K]
	_ = a.Q[(m+1)*a.K-1]
	_ = a.D[(m+1)*nb-1]
	_ = a.C[(m+1)*nb-1]
	if quantActVNNI(&x[0], uintptr(nb), &a.Q[m*a.K], &a.D[m*nb], &a.C[m*nb], off) != 0 {
		return quant.CheckFinite(x)
	}
	return nil
}
