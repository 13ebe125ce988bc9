package quant

import "encoding/binary"

// IQ4_NL: blocks of 32 values stored as a half scale d and 4-bit indices into the fixed
// non-linear table kvaluesIQ4NL; x = d*kvaluesIQ4NL[q]. Layout (18 bytes, as Q4_0): d f16 |
// qs [16]byte, value j in the low nibble of qs[j], value j+16 in the high nibble. The table's
// levels are denser near zero, where most weights are, than Q4_0's evenly spaced ones.

func init() {
	register(&Format{Type: IQ4_NL, Dequantize: dequantIQ4_NL, Quantize: quantIQ4_NL, QuantizeSearch: searchIQ4_NL,
		DotF32: dotIQ4_NL, VecDotType: Q8_0, VecDot: vecDotIQ4_NL})
}

const sizeIQ4_NL = 18

// kvaluesIQ4NL is ggml's kvalues_iq4nl: the 16 levels of IQ4_NL and IQ4_XS, ascending.
var kvaluesIQ4NL = [16]int8{-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}

// iq4Levels is kvaluesIQ4NL as float32 (exact).
var iq4Levels = func() (f [16]float32) {
	for i, v := range kvaluesIQ4NL {
		f[i] = float32(v)
	}
	return
}()

// IQ4Levels returns the 16 IQ4_NL/IQ4_XS levels as float32, for kernels that look them up.
func IQ4Levels() [16]float32 { return iq4Levels }

// IQ4Values returns the 16 IQ4_NL/IQ4_XS levels as int8 (ggml's kvalues_iq4nl).
func IQ4Values() [16]int8 { return kvaluesIQ4NL }

// bestIndexIQ4 is ggml's best_index_int8 over the IQ4 levels: the index of the level nearest
// x (the upper one on a tie). ggml bisects to the largest level ml <= x and then compares x
// with ml's and the next level's distances; the levels are integers, so ml is the largest level
// <= floor(x), read from a table, and the final comparison is ggml's own.
func bestIndexIQ4(x float32) uint8 {
	if x <= iq4Levels[0] {
		return 0
	}
	if x >= iq4Levels[15] {
		return 15
	}
	f := int(x) // floor(x): x is in (-127, 113)
	if float32(f) > x {
		f--
	}
	ml := iq4Floor[f-int(kvaluesIQ4NL[0])]
	if x-iq4Levels[ml] < iq4Levels[ml+1]-x {
		return ml
	}
	return ml + 1
}

// iq4Floor[i] is the index of the largest level <= i-127, for i-127 in -127..112.
var iq4Floor = func() (t [240]uint8) {
	for i := range t {
		for k, v := range kvaluesIQ4NL {
			if int(v) <= i+int(kvaluesIQ4NL[0]) {
				t[i] = uint8(k)
			}
		}
	}
	return
}()

// iq4Blocks is the output of iq4Quantize: the half scale, the packed indices and, for a
// super-block of several 32-value blocks (IQ4_XS), the 6-bit block scales' high bits (2 per
// block) and low nibbles (2 blocks per byte).
type iq4Blocks struct {
	dh      uint16
	qs      []byte // sbs/2 bytes
	scalesH uint16
	scalesL [4]byte
}

// iq4Quantize is ggml's quantize_row_iq4_nl_impl with block_size 32 for one super-block of
// sbs values (32: IQ4_NL, 256: IQ4_XS), weights qw (nil: x^2) and ntry = 7, as llama-quantize
// calls it (quantize_iq4_nl, quantize_iq4_xs). Each 32-value block's scale is the
// weighted least-squares fit of the levels chosen at the best of 16 trial inverse scales
// (the largest value mapped to -127+itry, itry in -7..7); an IQ4_XS super-block then stores
// those scales as 6-bit multiples of one half scale. The float32 arithmetic is ggml's
// operation by operation (products rounded before they are added, as ggml computes them).
func iq4Quantize(out *iq4Blocks, x, qw []float32) {
	const ntry = 7
	sbs := len(x)
	var (
		sigma2  float32
		weight  [32]float32
		scales  [8]float32
		L       [QK_K]uint8
		maxS    float32
		amaxS   float32
		nblocks = sbs / 32
	)
	for _, v := range x {
		sigma2 += float32(v * v)
	}
	sigma2 *= 2 / float32(sbs)
	for ib := 0; ib < nblocks; ib++ {
		xb := x[ib*32 : ib*32+32]
		Lb := L[ib*32 : ib*32+32]
		if qw != nil {
			q := qw[ib*32 : ib*32+32]
			for j, v := range xb {
				weight[j] = q[j] * sqrt32(sigma2+float32(v*v))
			}
		} else {
			for j, v := range xb {
				weight[j] = v * v
			}
		}
		var amax, max float32
		for _, v := range xb {
			if a := abs32(v); a > amax {
				amax, max = a, v
			}
		}
		if amax < groupMaxEps {
			scales[ib] = 0
			continue
		}
		d := -max / iq4Levels[0]
		id := 1 / d
		var sumqx, sumq2 float32
		for j, v := range xb {
			l := bestIndexIQ4(float32(id * v))
			Lb[j] = l
			q := iq4Levels[l]
			wq := float32(weight[j] * q)
			sumqx += float32(wq * v)
			sumq2 += float32(wq * q)
		}
		d = sumqx / sumq2
		best := d * sumqx
		for itry := -ntry; itry <= ntry; itry++ {
			id = float32(itry+int(kvaluesIQ4NL[0])) / max
			sumqx, sumq2 = 0, 0
			for j, v := range xb {
				q := iq4Levels[bestIndexIQ4(float32(id*v))]
				wq := float32(weight[j] * q)
				sumqx += float32(wq * v)
				sumq2 += float32(wq * q)
			}
			if sumq2 > 0 && float32(sumqx*sumqx) > float32(best*sumq2) {
				d = sumqx / sumq2
				best = d * sumqx
			}
		}
		scales[ib] = d
		if a := abs32(d); a > amaxS {
			amaxS, maxS = a, d
		}
	}
	if nblocks > 1 {
		iq4SuperScales(out, x, &L, &scales, maxS)
	} else {
		out.dh = F32ToF16(scales[0])
		var id float32
		if scales[0] != 0 {
			id = 1 / scales[0]
		}
		for j, v := range x {
			L[j] = bestIndexIQ4(float32(id * v))
		}
	}
	packIQ4(out.qs, L[:sbs])
}

// iq4SuperScales stores an IQ4_XS super-block's block scales as l*d, l a 6-bit signed code in
// -32..31 and d = -maxS/32 the half scale (maxS the scale of largest magnitude), and re-picks
// each block's indices under its stored scale d*l. As in ggml, d is used unrounded for the
// codes and the indices; only dh is rounded.
func iq4SuperScales(out *iq4Blocks, x []float32, L *[QK_K]uint8, scales *[8]float32, maxS float32) {
	out.scalesH = 0
	d := -maxS / 32
	out.dh = F32ToF16(d)
	var id float32
	if d != 0 {
		id = 1 / d
	}
	for ib := 0; ib < len(x)/32; ib++ {
		l := max32(-32, min(31, nearestInt(float32(id*scales[ib]))))
		dl := d * float32(l)
		var idl float32
		if dl != 0 {
			idl = 1 / dl
		}
		for j, v := range x[ib*32 : ib*32+32] {
			L[ib*32+j] = bestIndexIQ4(float32(idl * v))
		}
		l += 32
		if ib%2 == 0 {
			out.scalesL[ib/2] = uint8(l & 0xf)
		} else {
			out.scalesL[ib/2] |= uint8(l&0xf) << 4
		}
		out.scalesH |= uint16(l>>4) << (2 * (ib % 8))
	}
}

// packIQ4 stores 4-bit indices as Q4_0 does: in each 32-value block, index j in the low nibble
// of byte j, index j+16 in the high nibble.
func packIQ4(qs []byte, L []uint8) {
	for i := 0; i < len(L)/32; i++ {
		for j := 0; j < 16; j++ {
			qs[16*i+j] = L[32*i+j] | L[32*i+16+j]<<4
		}
	}
}

// quantIQ4_NL is what llama-quantize writes for IQ4_NL without an importance matrix
// (quantize_iq4_nl with no weights: the trial search of iq4Quantize, weights x^2), block by
// block.
func quantIQ4_NL(dst []byte, src []float32) error {
	if err := checkFinite(src); err != nil {
		return err
	}
	for i := 0; i < len(src)/32; i++ {
		b := dst[i*sizeIQ4_NL : (i+1)*sizeIQ4_NL]
		out := iq4Blocks{qs: b[2:18]}
		iq4Quantize(&out, src[i*32:i*32+32], nil)
		binary.LittleEndian.PutUint16(b[0:], out.dh)
	}
	return nil
}

func dequantIQ4_NL(dst []float32, src []byte) {
	for i := 0; i < len(dst)/32; i++ {
		b := (*[sizeIQ4_NL]byte)(src[i*sizeIQ4_NL:])
		y := (*[32]float32)(dst[i*32:])
		d := getF16(b[0:])
		for j := 0; j < 16; j++ {
			y[j] = d * iq4Levels[b[2+j]&15]
			y[j+16] = d * iq4Levels[b[2+j]>>4]
		}
	}
}

// iq4BlockDot is the dot product of one 32-value block's indices (16 bytes) with x, the
// scale left out.
func iq4BlockDot(qs []byte, xs *[32]float32) float32 {
	qs = qs[:16]
	var s0, s1, s2, s3 float32
	for j := 0; j < 16; j += 2 {
		v0, v1 := qs[j], qs[j+1]
		s0 += float32(iq4Levels[v0&15] * xs[j])
		s1 += float32(iq4Levels[v0>>4] * xs[j+16])
		s2 += float32(iq4Levels[v1&15] * xs[j+1])
		s3 += float32(iq4Levels[v1>>4] * xs[j+17])
	}
	return (s0 + s1) + (s2 + s3)
}

func dotIQ4_NL(w []byte, x []float32) float32 {
	var acc float32
	for i := 0; i < len(x)/32; i++ {
		b := w[i*sizeIQ4_NL : (i+1)*sizeIQ4_NL]
		acc += float32(getF16(b[0:]) * iq4BlockDot(b[2:], (*[32]float32)(x[i*32:])))
	}
	return acc
}

// iq4BlockIntDot is the integer dot product of one block's indices (16 bytes) with 32 int8
// activations: ggml's sumi1 + sumi2.
func iq4BlockIntDot(qs, q8 []byte) int32 {
	qs, q8 = qs[:16], q8[:32]
	var s1, s2 int32
	for j := 0; j < 16; j++ {
		s1 += int32(int8(q8[j])) * int32(kvaluesIQ4NL[qs[j]&15])
		s2 += int32(int8(q8[j+16])) * int32(kvaluesIQ4NL[qs[j]>>4])
	}
	return s1 + s2
}

// vecDotIQ4_NL is ggml_vec_dot_iq4_nl_q8_0 (its plain-C form).
func vecDotIQ4_NL(w, xq []byte) float32 {
	var sumf float32
	for i := range min(len(w)/sizeIQ4_NL, len(xq)/sizeQ8_0) {
		a := w[i*sizeIQ4_NL : (i+1)*sizeIQ4_NL]
		b := xq[i*sizeQ8_0 : (i+1)*sizeQ8_0]
		d := getF16(b[0:]) * getF16(a[0:])
		sumf += float32(d * float32(iq4BlockIntDot(a[2:], b[2:])))
	}
	return sumf
}
