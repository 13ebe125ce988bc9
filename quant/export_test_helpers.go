package quant

import "fmt"

// QuantizeRowsForTest stores src in dst as type t with the reference quantizer (used by tests
// of other packages to build weights).
func QuantizeRowsForTest(t Type, dst []byte, src []float32) error {
	f, err := FormatOf(t)
	if err != nil {
		return err
	}
	if f.Quantize == nil {
		return fmt.Errorf("%v has no quantizer", t)
	}
	return f.Quantize(dst, src)
}
