package quant

import "encoding/binary"

// Q5_0: blocks of 32 values stored as a half scale d and 5-bit quants q in 0..31; x = (q-16)*d.
// Layout (22 bytes): d f16 | qh uint32 (bit j: 5th bit of value j) | qs [16]byte (low 4 bits:
// value j in the low nibble of qs[j], value j+16 in the high nibble).

func init() {
	register(&Format{Type: Q5_0, Dequantize: dequantQ5_0, Quantize: quantQ5_0, QuantizeSearch: searchQ5_0,
		DotF32: dotQ5_0, VecDotType: Q8_0, VecDot: vecDotQ5_0})
}

const sizeQ5_0 = 22

// quantQ5_0 is quantize_row_q5_0_ref: d = max/-16, q = min(31, trunc(x/d + 16.5)).
func quantQ5_0(dst []byte, src []float32) error {
	if err := checkFinite(src); err != nil {
		return err
	}
	for i := 0; i < len(src)/32; i++ {
		b := (*[sizeQ5_0]byte)(dst[i*sizeQ5_0:])
		x := (*[32]float32)(src[i*32:])
		var amax, max float32
		for _, v := range x {
			if a := abs32(v); amax < a {
				amax = a
				max = v
			}
		}
		d := max / -16
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putF16(b[0:], d)
		var qh uint32
		for j := 0; j < 16; j++ {
			x0 := x[j] * id
			x1 := x[16+j] * id
			xi0 := uint8(min(31, int8(x0+16.5)))
			xi1 := uint8(min(31, int8(x1+16.5)))
			b[6+j] = xi0&15 | (xi1&15)<<4
			qh |= uint32(xi0&0x10) >> 4 << j
			qh |= uint32(xi1&0x10) >> 4 << (j + 16)
		}
		binary.LittleEndian.PutUint32(b[2:], qh)
	}
	return nil
}

func dequantQ5_0(dst []float32, src []byte) {
	for i := 0; i < len(dst)/32; i++ {
		b := (*[sizeQ5_0]byte)(src[i*sizeQ5_0:])
		y := (*[32]float32)(dst[i*32:])
		d := getF16(b[0:])
		qh := binary.LittleEndian.Uint32(b[2:])
		for j := 0; j < 16; j++ {
			h0 := uint8(qh>>j<<4) & 0x10
			h1 := uint8(qh>>(j+12)) & 0x10
			y[j] = float32(int32(b[6+j]&15|h0)-16) * d
			y[j+16] = float32(int32(b[6+j]>>4|h1)-16) * d
		}
	}
}

func dotQ5_0(w []byte, x []float32) float32 {
	var acc float32
	for i := 0; i < len(x)/32; i++ {
		b := (*[sizeQ5_0]byte)(w[i*sizeQ5_0:])
		xs := (*[32]float32)(x[i*32:])
		qh := binary.LittleEndian.Uint32(b[2:])
		var s0, s1, s2, s3 float32
		for j := 0; j < 16; j += 2 {
			v0, v1 := b[6+j], b[7+j]
			h := qh >> j
			s0 += float32(int32(v0&15|uint8(h<<4)&0x10)-16) * xs[j]
			s1 += float32(int32(v0>>4|uint8(h>>12)&0x10)-16) * xs[j+16]
			s2 += float32(int32(v1&15|uint8(h<<3)&0x10)-16) * xs[j+1]
			s3 += float32(int32(v1>>4|uint8(h>>13)&0x10)-16) * xs[j+17]
		}
		acc += getF16(b[0:]) * ((s0 + s1) + (s2 + s3))
	}
	return acc
}

// vecDotQ5_0 is ggml_vec_dot_q5_0_q8_0.
func vecDotQ5_0(w, xq []byte) float32 {
	var sumf float32
	for i := range min(len(w)/sizeQ5_0, len(xq)/sizeQ8_0) {
		a := (*[sizeQ5_0]byte)(w[i*sizeQ5_0:])
		b := (*[sizeQ8_0]byte)(xq[i*sizeQ8_0:])
		qh := binary.LittleEndian.Uint32(a[2:])
		var s0, s1 int32
		for j := 0; j < 16; j++ {
			h0 := uint8(qh>>j<<4) & 0x10
			h1 := uint8(qh>>(j+12)) & 0x10
			s0 += (int32(a[6+j]&15|h0) - 16) * int32(int8(b[2+j]))
			s1 += (int32(a[6+j]>>4|h1) - 16) * int32(int8(b[18+j]))
		}
		sumf += float32(getF16(a[0:])*getF16(b[0:])) * float32(s0+s1)
	}
	return sumf
}
