package convert

import (
	"math"

	"github.com/gorun-dev/gorun/quant"
)

// f32ToF16 is numpy's float32 to float16 conversion (npy_floatbits_to_halfbits): round to
// nearest even, subnormals rounded the same way, overflow to infinity (quant.F32ToF16 does all
// that), and a NaN kept with the top bits of its payload, not quieted as F16C does.
func f32ToF16(f float32) uint16 {
	b := math.Float32bits(f)
	if b&0x7f800000 == 0x7f800000 && b&0x007fffff != 0 {
		h := uint16(0x7c00 + (b&0x007fffff)>>13)
		if h == 0x7c00 { // the payload is all in the dropped bits: keep it a NaN
			h++
		}
		return uint16(b>>16)&0x8000 | h
	}
	return quant.F32ToF16(f)
}
