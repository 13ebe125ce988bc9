package quant

import "encoding/binary"

// Q5_1: blocks of 32 values stored as a half scale d, a half minimum m and 5-bit quants q;
// x = q*d + m.
// Layout (24 bytes): d f16 | m f16 | qh uint32 | qs [16]byte, bits as in Q5_0.

func init() {
	register(&Format{Type: Q5_1, Dequantize: dequantQ5_1, Quantize: quantQ5_1, QuantizeSearch: searchQ5_1,
		DotF32: dotQ5_1, VecDotType: Q8_1, VecDot: vecDotQ5_1})
}

const sizeQ5_1 = 24

// quantQ5_1 is quantize_row_q5_1_ref: d = (max-min)/31, m = min, q = trunc((x-min)/d + 0.5).
func quantQ5_1(dst []byte, src []float32) error {
	if err := checkFinite(src); err != nil {
		return err
	}
	for i := 0; i < len(src)/32; i++ {
		b := (*[sizeQ5_1]byte)(dst[i*sizeQ5_1:])
		x := (*[32]float32)(src[i*32:])
		lo, hi := minMax32(x)
		d := (hi - lo) / 31
		var id float32
		if d != 0 {
			id = 1 / d
		}
		putF16(b[0:], d)
		putF16(b[2:], lo)
		var qh uint32
		for j := 0; j < 16; j++ {
			x0 := (x[j] - lo) * id
			x1 := (x[16+j] - lo) * id
			xi0 := uint8(x0 + 0.5)
			xi1 := uint8(x1 + 0.5)
			b[8+j] = xi0&15 | (xi1&15)<<4
			qh |= uint32(xi0&0x10) >> 4 << j
			qh |= uint32(xi1&0x10) >> 4 << (j + 16)
		}
		binary.LittleEndian.PutUint32(b[4:], qh)
	}
	return nil
}

func dequantQ5_1(dst []float32, src []byte) {
	for i := 0; i < len(dst)/32; i++ {
		b := (*[sizeQ5_1]byte)(src[i*sizeQ5_1:])
		y := (*[32]float32)(dst[i*32:])
		d, m := getF16(b[0:]), getF16(b[2:])
		qh := binary.LittleEndian.Uint32(b[4:])
		for j := 0; j < 16; j++ {
			h0 := uint8(qh>>j<<4) & 0x10
			h1 := uint8(qh>>(j+12)) & 0x10
			y[j] = float32(float32(b[8+j]&15|h0)*d) + m
			y[j+16] = float32(float32(b[8+j]>>4|h1)*d) + m
		}
	}
}

func dotQ5_1(w []byte, x []float32) float32 {
	var acc float32
	for i := 0; i < len(x)/32; i++ {
		b := (*[sizeQ5_1]byte)(w[i*sizeQ5_1:])
		xs := (*[32]float32)(x[i*32:])
		qh := binary.LittleEndian.Uint32(b[4:])
		var s0, s1, s2, s3, t0, t1 float32
		for j := 0; j < 16; j += 2 {
			v0, v1 := b[8+j], b[9+j]
			h := qh >> j
			s0 += float32(v0&15|uint8(h<<4)&0x10) * xs[j]
			s1 += float32(v0>>4|uint8(h>>12)&0x10) * xs[j+16]
			s2 += float32(v1&15|uint8(h<<3)&0x10) * xs[j+1]
			s3 += float32(v1>>4|uint8(h>>13)&0x10) * xs[j+17]
			t0 += xs[j] + xs[j+16]
			t1 += xs[j+1] + xs[j+17]
		}
		acc += getF16(b[0:])*((s0+s1)+(s2+s3)) + getF16(b[2:])*(t0+t1)
	}
	return acc
}

// vecDotQ5_1 is ggml_vec_dot_q5_1_q8_1.
func vecDotQ5_1(w, xq []byte) float32 {
	var sumf float32
	for i := range min(len(w)/sizeQ5_1, len(xq)/sizeQ8_1) {
		a := (*[sizeQ5_1]byte)(w[i*sizeQ5_1:])
		b := (*[sizeQ8_1]byte)(xq[i*sizeQ8_1:])
		qh := binary.LittleEndian.Uint32(a[4:])
		var s0, s1 int32
		for j := 0; j < 16; j++ {
			h0 := uint8(qh>>j<<4) & 0x10
			h1 := uint8(qh>>(j+12)) & 0x10
			s0 += int32(a[8+j]&15|h0) * int32(int8(b[4+j]))
			s1 += int32(a[8+j]>>4|h1) * int32(int8(b[20+j]))
		}
		sumf += float32(float32(getF16(a[0:])*getF16(b[0:]))*float32(s0+s1)) + float32(getF16(a[2:])*getF16(b[2:]))
	}
	return sumf
}
