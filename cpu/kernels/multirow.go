package kernels

import "github.com/gorun-dev/gorun/quant"

// MaxMatVecRows is the most activation rows one MatVecRows call takes.
const MaxMatVecRows = 8

// MatVecRowsFunc sets out[i*os+j] to the dot product of x[i*xs : i*xs+k] with row j < 4 of w
// (rows ws bytes apart) for every activation row i < rows, 1 <= rows <= MaxMatVecRows. k must
// be a whole number of the weight type's blocks.
type MatVecRowsFunc func(x []float32, xs, rows, k int, w []byte, ws int, out []float32, os int)

// matVecRows[t] is the active tier's multi-row kernel for weights of type t: a fused kernel that
// forms each weight once for all rows where the tier has one (matVecRowsFused[t]), else perRow
// over matVec4[t].
var (
	matVecRows      [64]MatVecRowsFunc
	matVecRowsFused [64]bool
)

// MatVecRows returns the kernel that multiplies four weight rows of type t with up to
// MaxMatVecRows activation rows, each weight loaded and dequantized once for all of them: the
// decode step of several sessions. Every output element has the same bits as MatVec4 gives for
// its activation row alone, so a session's logits do not depend on who else is in the batch.
// Nil exactly where MatVec4 is nil.
func MatVecRows(t quant.Type) MatVecRowsFunc {
	if int(t) < 0 || int(t) >= len(matVecRows) {
		return nil
	}
	return matVecRows[t]
}

// MatVecRowsFused reports whether MatVecRows(t) forms each weight once for all its activation
// rows (a fused multi-row kernel), rather than once per row: only then does it beat the tile
// path for more than a couple of rows.
func MatVecRowsFused(t quant.Type) bool {
	return int(t) >= 0 && int(t) < len(matVecRowsFused) && matVecRowsFused[t]
}

// setMatVecRows installs the fused multi-row kernel of type t.
func setMatVecRows(t quant.Type, f MatVecRowsFunc) {
	matVecRows[t], matVecRowsFused[t] = f, true
}

// clearMatVecRows removes every multi-row kernel (before a tier installs its own).
func clearMatVecRows() {
	clear(matVecRows[:])
	clear(matVecRowsFused[:])
}

// fillMatVecRows gives every type with a MatVec4 but no multi-row kernel in the active tier
// the reference: MatVec4 once per activation row (the four weight rows come from L1 after the
// first).
func fillMatVecRows() {
	for t, mv := range matVec4 {
		if mv != nil && matVecRows[t] == nil {
			matVecRows[t] = perRow(quant.Type(t), mv)
		}
	}
}

// perRow is the multi-row kernel made of one MatVec4 call per activation row: the reference
// the fused kernels are tested against.
func perRow(t quant.Type, mv func(x []float32, w []byte, ws int, out *[4]float32)) MatVecRowsFunc {
	return func(x []float32, xs, rows, k int, w []byte, ws int, out []float32, os int) {
		checkMatVecRows(x, xs, rows, k, t.BlockSize(), out, os)
		checkWeightRows(w, ws, k/t.BlockSize()*t.TypeSize())
		for i := range rows {
			mv(x[i*xs:i*xs+k], w, ws, (*[4]float32)(out[i*os:i*os+4]))
		}
	}
}

// checkMatVecRows panics unless rows is in 1..MaxMatVecRows, k a positive multiple of block,
// and x and out hold the rows (the assembly kernels read and write them without bounds checks).
func checkMatVecRows(x []float32, xs, rows, k, block int, out []float32, os int) {
	if rows < 1 || rows > MaxMatVecRows || k <= 0 || k%block != 0 || (rows > 1 && (xs < k || os < 4)) ||
		(rows-1)*xs+k > len(x) || (rows-1)*os+4 > len(out) {
		panic("kernels: MatVecRows operands out of range")
	}
}

// checkWeightRows panics unless w holds four rows of rowBytes at stride ws (by length, not
// capacity: the kernels would read past it unchecked).
func checkWeightRows(w []byte, ws, rowBytes int) {
	if rowBytes <= 0 || ws < rowBytes || 3*ws+rowBytes > len(w) {
		panic("kernels: MatVecRows weight rows out of range")
	}
}
