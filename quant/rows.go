package quant

import (
	"encoding/binary"
	"fmt"
	"math"
	"runtime"
	"sync"
)

// QuantizeRow stores the len(src) values of src in dst as type t with the reference quantizer.
// len(src) must be a whole number of t's blocks and dst exactly t.RowSize(len(src)) bytes.
// NaN or Inf input is an error.
func QuantizeRow(t Type, dst []byte, src []float32) error {
	f, err := FormatOf(t)
	if err != nil {
		return err
	}
	if f.Quantize == nil {
		return fmt.Errorf("quantizing to %v is not supported", t)
	}
	if err := checkRow(t, len(dst), len(src)); err != nil {
		return err
	}
	return f.Quantize(dst, src)
}

// DequantizeRow writes the len(dst) values stored in src (type t) to dst. len(dst) must be a
// whole number of t's blocks and src exactly t.RowSize(len(dst)) bytes.
func DequantizeRow(t Type, dst []float32, src []byte) error {
	f, err := FormatOf(t)
	if err != nil {
		return err
	}
	if f.Dequantize == nil {
		return fmt.Errorf("dequantizing %v is not supported", t)
	}
	if err := checkRow(t, len(src), len(dst)); err != nil {
		return err
	}
	f.Dequantize(dst, src)
	return nil
}

// QuantizeRows quantizes len(src)/rowLen rows of rowLen values each into dst, which must hold
// exactly that many rows of t.RowSize(rowLen) bytes. Blocks never straddle rows, so the result
// is the same as quantizing each row with QuantizeRow; large inputs are split between
// GOMAXPROCS goroutines. An error names the first bad row.
func QuantizeRows(t Type, dst []byte, src []float32, rowLen int) error {
	f, err := FormatOf(t)
	if err != nil {
		return err
	}
	if f.Quantize == nil {
		return fmt.Errorf("quantizing to %v is not supported", t)
	}
	if rowLen <= 0 {
		return fmt.Errorf("row length %d", rowLen)
	}
	if len(src)%rowLen != 0 {
		return fmt.Errorf("%d values are not a whole number of %d-value rows", len(src), rowLen)
	}
	rs, err := t.RowSize(int64(rowLen))
	if err != nil {
		return err
	}
	rows := len(src) / rowLen
	if int64(len(dst)) != int64(rows)*rs {
		return fmt.Errorf("%d rows of %d %v values need %d bytes, have %d", rows, rowLen, t, int64(rows)*rs, len(dst))
	}
	rsz := int(rs)
	quantRows := func(lo, hi int) error {
		for r := lo; r < hi; r++ {
			if err := f.Quantize(dst[r*rsz:(r+1)*rsz], src[r*rowLen:(r+1)*rowLen]); err != nil {
				return fmt.Errorf("row %d: %w", r, err)
			}
		}
		return nil
	}
	workers := min(runtime.GOMAXPROCS(0), rows)
	if workers <= 1 || len(src) < parallelQuantize {
		return quantRows(0, rows)
	}
	per := (rows + workers - 1) / workers
	errs := make([]error, workers)
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		lo, hi := w*per, min(rows, (w+1)*per)
		if lo >= hi {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = quantRows(lo, hi)
		}()
	}
	wg.Wait()
	for _, err := range errs { // in row order: the first bad row's error
		if err != nil {
			return err
		}
	}
	return nil
}

// parallelQuantize is the input size (values) from which QuantizeRows uses several goroutines.
const parallelQuantize = 1 << 16

// checkRow verifies that n values of t take exactly size bytes.
func checkRow(t Type, size, n int) error {
	rs, err := t.RowSize(int64(n))
	if err != nil {
		return err
	}
	if int64(size) != rs {
		return fmt.Errorf("%d %v values take %d bytes, have %d", n, t, rs, size)
	}
	return nil
}

// checkFinite is CheckFinite with a fast path for the common all-finite case.
func checkFinite(x []float32) error {
	for _, v := range x {
		if math.Float32bits(v)&0x7f800000 == 0x7f800000 {
			return CheckFinite(x)
		}
	}
	return nil
}

// nearestInt is ggml's nearest_int: adding 1.5*2^23 leaves the float32 sum's mantissa holding
// the input rounded to the nearest integer, ties to even, for |f| < 2^22. Written with the same
// bit trick so that out-of-range inputs give ggml's results too.
func nearestInt(f float32) int32 {
	v := f + 12582912
	return int32(math.Float32bits(v)&0x007fffff) - 0x00400000
}

// abs32 is fabsf.
func abs32(f float32) float32 { return math.Float32frombits(math.Float32bits(f) &^ (1 << 31)) }

// sqrt32 is sqrtf: the float64 square root of a float32 rounded to float32 is correctly rounded.
func sqrt32(f float32) float32 { return float32(math.Sqrt(float64(f))) }

// roundAway is C's roundf (round half away from zero) converted to an integer, for |f| < 2^31.
// The fraction f - trunc(f) of a float32 is exact, so comparing it with ±0.5 decides ties
// exactly.
func roundAway(f float32) int32 {
	t := int32(f)
	if d := f - float32(t); d >= 0.5 {
		t++
	} else if d <= -0.5 {
		t--
	}
	return t
}

// getF16 reads a little-endian half at b[0:2] as float32.
func getF16(b []byte) float32 { return f16Table[binary.LittleEndian.Uint16(b)] }

// putF16 stores f as a little-endian half at b[0:2], rounding to nearest even.
func putF16(b []byte, f float32) { binary.LittleEndian.PutUint16(b, F32ToF16(f)) }

// i8f maps a byte holding an int8 to its float32 value.
var i8f = func() (t [256]float32) {
	for i := range t {
		t[i] = float32(int8(uint8(i)))
	}
	return
}()
