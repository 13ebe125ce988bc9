package quant

// Layout helpers exported for the backends' kernels, which dequantize the formats with SIMD
// and must read them exactly as this package does.

// KScales unpacks the 12 bytes of 6-bit scales and mins of a Q4_K or Q5_K super-block.
func KScales(q []byte) (sc, mn [8]uint8) { return kScales(q) }

// Block sizes (bytes) of the super-block formats.
const (
	SizeQ4_K   = sizeQ4_K
	SizeQ5_K   = sizeQ5_K
	SizeQ6_K   = sizeQ6_K
	SizeQ8_0   = sizeQ8_0
	SizeQ4_0   = sizeQ4_0
	SizeIQ4_NL = sizeIQ4_NL
	SizeIQ4_XS = sizeIQ4_XS
)

// F16Table maps every half-precision bit pattern to its float32 value (read-only): SIMD
// kernels load block scales through it with one broadcast.
func F16Table() *[1 << 16]float32 { return f16Table }

// Q3Scales unpacks the 16 signed 6-bit sub-block scales of a Q3_K super-block.
func Q3Scales(s *[12]byte) [16]int8 { return q3Scales(s) }
