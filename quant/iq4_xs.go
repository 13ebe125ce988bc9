package quant

import "encoding/binary"

// IQ4_XS: super-blocks of 256 values in 8 blocks of 32, each block's values its scale times the
// IQ4_NL levels: x = d*(ls-32)*kvaluesIQ4NL[q], ls the block's 6-bit code. Layout (136 bytes):
// d f16 | scales_h u16 (2 high bits of block ib's code at bits 2ib, 2ib+1) | scales_l [4]byte
// (low nibble of block ib's code in byte ib/2, low nibble for even ib) | qs [128]byte (block
// ib's 16 bytes at 16ib, packed as IQ4_NL's).

func init() {
	register(&Format{Type: IQ4_XS, Dequantize: dequantIQ4_XS, Quantize: quantIQ4_XS, QuantizeSearch: searchIQ4_XS,
		DotF32: dotIQ4_XS, VecDotType: Q8_K, VecDot: vecDotIQ4_XS})
}

const sizeIQ4_XS = 136

// iq4xsScales returns the 8 block codes ls-32 (-32..31) of an IQ4_XS super-block.
func iq4xsScales(b []byte) (ls [8]int32) {
	h := binary.LittleEndian.Uint16(b[2:])
	for ib := range ls {
		lo := int32(b[4+ib/2]>>(4*(ib%2))) & 0xf
		hi := int32(h>>(2*ib)) & 3
		ls[ib] = lo | hi<<4 - 32
	}
	return
}

// quantIQ4_XS is what llama-quantize writes for IQ4_XS without an importance matrix
// (quantize_iq4_xs with no weights; quantize_row_iq4_xs_ref is the same call).
func quantIQ4_XS(dst []byte, src []float32) error {
	if err := checkFinite(src); err != nil {
		return err
	}
	for i := 0; i < len(src)/QK_K; i++ {
		iq4xsBlock(dst[i*sizeIQ4_XS:(i+1)*sizeIQ4_XS], src[i*QK_K:(i+1)*QK_K], nil)
	}
	return nil
}

// iq4xsBlock quantizes one super-block with ggml's algorithm, weights qw (nil: x^2).
func iq4xsBlock(b []byte, x, qw []float32) {
	out := iq4Blocks{qs: b[8:136]}
	iq4Quantize(&out, x, qw)
	binary.LittleEndian.PutUint16(b[0:], out.dh)
	binary.LittleEndian.PutUint16(b[2:], out.scalesH)
	copy(b[4:8], out.scalesL[:])
}

func dequantIQ4_XS(dst []float32, src []byte) {
	for i := 0; i < len(dst)/QK_K; i++ {
		b := src[i*sizeIQ4_XS : (i+1)*sizeIQ4_XS]
		d := getF16(b[0:])
		ls := iq4xsScales(b)
		for ib := 0; ib < 8; ib++ {
			dl := d * float32(ls[ib])
			qs := b[8+16*ib : 8+16*ib+16]
			y := dst[i*QK_K+32*ib : i*QK_K+32*ib+32]
			for j := 0; j < 16; j++ {
				y[j] = dl * iq4Levels[qs[j]&15]
				y[j+16] = dl * iq4Levels[qs[j]>>4]
			}
		}
	}
}

func dotIQ4_XS(w []byte, x []float32) float32 {
	var acc float32
	for i := 0; i < len(x)/QK_K; i++ {
		b := w[i*sizeIQ4_XS : (i+1)*sizeIQ4_XS]
		d := getF16(b[0:])
		ls := iq4xsScales(b)
		for ib := 0; ib < 8; ib++ {
			dl := d * float32(ls[ib])
			s := iq4BlockDot(b[8+16*ib:], (*[32]float32)(x[i*QK_K+32*ib:]))
			acc += float32(dl * s)
		}
	}
	return acc
}

// vecDotIQ4_XS is ggml_vec_dot_iq4_xs_q8_K (its plain-C form).
func vecDotIQ4_XS(w, xq []byte) float32 {
	var sumf float32
	for i := range min(len(w)/sizeIQ4_XS, len(xq)/sizeQ8_K) {
		a := w[i*sizeIQ4_XS : (i+1)*sizeIQ4_XS]
		dy, q8 := q8K((*[sizeQ8_K]byte)(xq[i*sizeQ8_K:]))
		d4d8 := getF16(a[0:]) * dy
		ls := iq4xsScales(a)
		for ib := 0; ib < 8; ib++ {
			dl := d4d8 * float32(ls[ib])
			sumf += float32(dl * float32(iq4BlockIntDot(a[8+16*ib:], q8[32*ib:])))
		}
	}
	return sumf
}
