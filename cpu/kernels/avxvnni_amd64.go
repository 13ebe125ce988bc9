//go:build amd64 && !purego

package kernels

import (
	"github.com/gorun-dev/gorun/quant"
	"github.com/klauspost/cpuid/v2"
)

//go:noescape
func intTile4x8AVXVNNI(tq *byte, td *float32, nb uintptr, x *byte, xs uintptr, xd *float32, xc *int32, ds uintptr, out *float32, os uintptr)

//go:noescape
func intRowsQ8_0x4AVXVNNI(x *byte, xd *float32, xc *int32, w *byte, ws, nb uintptr, out *[4]float32)

//go:noescape
func intRowsQ4_0x4AVXVNNI(x *byte, xd *float32, xc *int32, w *byte, ws, nb uintptr, out *[4]float32)

//go:noescape
func repackQ8_0x8AVXVNNI(tq *byte, td *float32, w *byte, ws, nb uintptr)

//go:noescape
func repackQ4_0x8AVXVNNI(tq *byte, td *float32, w *byte, ws, nb uintptr)

//go:noescape
func intRowsQ8_0x4x2AVXVNNI(x *byte, xs uintptr, xd *float32, xc *int32, ds uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr)

//go:noescape
func intRowsQ4_0x4x2AVXVNNI(x *byte, xs uintptr, xd *float32, xc *int32, ds uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr)

//go:noescape
func quantActAVXVNNI(x *float32, nb uintptr, q *byte, d *float32, c *int32, off int32) (bad uint32)

// The AVX-VNNI kernels (256-bit, VEX): the same IntKernel contract and bits as the AVX-512
// VNNI ones. A tile's 16 rows are computed as two halves of eight (one ymm register each).
var (
	intQ8_0AVXVNNI = IntKernel{Off: 128, Repack: repackAVXVNNI(repackQ8_0x8AVXVNNI, quant.SizeQ8_0, repackQ8_0),
		Tile: intTileAVXVNNI(4), Tile8: intTileAVXVNNI(8),
		Rows: intRowsVNNI(intRowsQ8_0x4AVXVNNI, quant.SizeQ8_0, intQ8_0Generic.Rows), Rows2: intRows2VNNI(intRowsQ8_0x4x2AVXVNNI, quant.SizeQ8_0, intQ8_0Generic.Rows)}
	intQ4_0AVXVNNI = IntKernel{Off: 8, Repack: repackAVXVNNI(repackQ4_0x8AVXVNNI, quant.SizeQ4_0, repackQ4_0),
		Tile: intTileAVXVNNI(4), Tile8: intTileAVXVNNI(8),
		Rows: intRowsVNNI(intRowsQ4_0x4AVXVNNI, quant.SizeQ4_0, intQ4_0Generic.Rows), Rows2: intRows2VNNI(intRowsQ4_0x4x2AVXVNNI, quant.SizeQ4_0, intQ4_0Generic.Rows)}
)

// hasAVXVNNI reports whether the CPU runs the AVX-VNNI kernels (they need AVX2 besides).
func hasAVXVNNI() bool {
	return cpuHas(AVX2) && cpuid.CPU.Supports(cpuid.AVXVNNI)
}

// useAVXVNNI installs the AVX-VNNI integer kernels where the CPU has AVX-VNNI, unless the
// tests ask for the tier's base kernels (baseOnly).
func useAVXVNNI() {
	if hasAVXVNNI() && !baseOnly {
		intKernels[quant.Q8_0] = &intQ8_0AVXVNNI
		intKernels[quant.Q4_0] = &intQ4_0AVXVNNI
		QuantizeAct = quantizeActAVXVNNI
	}
}

// intTileAVXVNNI is IntKernel.Tile (rows = 4) or Tile8 (rows = 8): the 4x8 kernel on each
// half of the tile, for each group of four activation rows.
func intTileAVXVNNI(rows int) func(t *IntTile, a *IntAct, m int, out []float32, os int) {
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
		for i := 0; i < rows; i += 4 {
			mi := m + i
			for h := 0; h < IntTileRows; h += 8 {
				intTile4x8AVXVNNI(&t.Q[h*4], &t.D[h], uintptr(nb), &a.Q[mi*a.K], uintptr(a.K), &a.D[mi*nb], &a.C[mi*nb],
					uintptr(4*nb), &out[i*os+h], uintptr(4*os))
			}
		}
	}
}

// repackAVXVNNI repacks whole tiles of 16 rows with kern (eight rows at a time) and partial
// ones with generic.
func repackAVXVNNI(kern func(tq *byte, td *float32, w *byte, ws, nb uintptr), size int,
	generic func(t *IntTile, w []byte, ws, n int)) func(t *IntTile, w []byte, ws, n int) {
	return func(t *IntTile, w []byte, ws, n int) {
		nb := len(t.D) / 16
		if n != IntTileRows || nb == 0 {
			generic(t, w, ws, n)
			return
		}
		_ = t.Q[nb*512-1]
		_ = w[(IntTileRows-1)*ws+nb*size-1]
		kern(&t.Q[0], &t.D[0], &w[0], uintptr(ws), uintptr(nb))
		kern(&t.Q[32], &t.D[8], &w[8*ws], uintptr(ws), uintptr(nb))
	}
}

func quantizeActAVXVNNI(a *IntAct, m int, x []float32, off int32) error {
	nb := a.K / 32
	if nb == 0 {
		return nil
	}
	x = x[:a.K]
	_ = a.Q[(m+1)*a.K-1]
	_ = a.D[(m+1)*nb-1]
	_ = a.C[(m+1)*nb-1]
	if quantActAVXVNNI(&x[0], uintptr(nb), &a.Q[m*a.K], &a.D[m*nb], &a.C[m*nb], off) != 0 {
		return quant.CheckFinite(x)
	}
	return nil
}
