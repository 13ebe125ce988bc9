//go:build amd64 && !purego && !amd64.v3

#include "textflag.h"

// func candErr8AVX2(x *float32, w *float64, n uintptr, p *candParams, e *[8]float64, lt *int32)
//
// Eight candidates in the eight float32 lanes of a YMM register (levels, stored values) and
// two YMM registers of four float64 lanes (errors); every lane does the generic loop's
// operations in its order: (x+dm)*id, the 1.5*2^23 rounding trick, clamp, float32(l)*ds, -dm,
// x-y, to float64, *w, *diff, += (no fused multiply-add). n > 0.
TEXT ·candErr8AVX2(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ p+24(FP), DX
	MOVQ e+32(FP), R8
	MOVQ lt+40(FP), R9
	VMOVUPS 0(DX), Y10    // dm
	VMOVUPS 32(DX), Y11   // id
	VMOVUPS 64(DX), Y12   // ds
	VMOVDQU 96(DX), Y13   // lmin
	VMOVDQU 128(DX), Y14  // lmax
	MOVL $0x4B400000, AX  // 12582912.0
	VMOVQ AX, X8
	VPBROADCASTD X8, Y8
	MOVL $0x007FFFFF, AX
	VMOVQ AX, X9
	VPBROADCASTD X9, Y9
	MOVL $0x00400000, AX
	VMOVQ AX, X15
	VPBROADCASTD X15, Y15
	VXORPD Y0, Y0, Y0     // errors, lanes 0-3
	VXORPD Y1, Y1, Y1     // errors, lanes 4-7

loop:
	VBROADCASTSS (SI), Y2 // v
	VADDPS Y10, Y2, Y3    // v + dm
	VMULPS Y11, Y3, Y3    // * id
	VADDPS Y8, Y3, Y3     // + 1.5*2^23
	VPAND Y9, Y3, Y3
	VPSUBD Y15, Y3, Y3    // nearestInt
	VPMAXSD Y13, Y3, Y3
	VPMINSD Y14, Y3, Y3   // l
	VMOVDQU Y3, (R9)
	VCVTDQ2PS Y3, Y4      // float32(l)
	VMULPS Y12, Y4, Y4    // ds*l
	VSUBPS Y10, Y4, Y4    // ds*l - dm
	VSUBPS Y4, Y2, Y4     // v - (ds*l - dm)
	VCVTPS2PD X4, Y5      // diff, lanes 0-3
	VEXTRACTF128 $1, Y4, X6
	VCVTPS2PD X6, Y6      // diff, lanes 4-7
	VBROADCASTSD (DI), Y7 // w
	VMULPD Y5, Y7, Y3     // w*diff
	VMULPD Y5, Y3, Y3     // *diff
	VADDPD Y3, Y0, Y0
	VMULPD Y6, Y7, Y4
	VMULPD Y6, Y4, Y4
	VADDPD Y4, Y1, Y1
	ADDQ $4, SI
	ADDQ $8, DI
	ADDQ $32, R9
	DECQ CX
	JNZ loop

	VMOVUPD Y0, (R8)
	VMOVUPD Y1, 32(R8)
	VZEROUPPER
	RET

// func qkx2Sums8AVX2(x, w *float32, n uintptr, lo float32, isc *[8]float32, nmax int32, sums *[24]float32, lt *int32)
//
// makeQKX2Quants' sums for eight candidate inverse scales, one per float32 lane, in the
// scalar loop's order: l = clamp(nearestInt(isc*(x-lo)), 0, nmax), wl = w*l, then
// sumL += wl, sumL2 += wl*l, sumXL += wl*x (each product rounded before its sum). Levels go to
// lt[8*j+c]; sums[0:8], [8:16], [16:24] receive sumL, sumL2, sumXL. n > 0.
TEXT ·qkx2Sums8AVX2(SB), NOSPLIT, $0-64
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), DI
	MOVQ n+16(FP), CX
	VBROADCASTSS lo+24(FP), Y9
	MOVQ isc+32(FP), DX
	VMOVUPS (DX), Y10
	MOVL nmax+40(FP), AX
	VMOVD AX, X11
	VPBROADCASTD X11, Y11
	MOVQ sums+48(FP), R8
	MOVQ lt+56(FP), R9
	MOVL $0x4B400000, AX
	VMOVQ AX, X8
	VPBROADCASTD X8, Y8
	MOVL $0x007FFFFF, AX
	VMOVQ AX, X13
	VPBROADCASTD X13, Y13
	MOVL $0x00400000, AX
	VMOVQ AX, X14
	VPBROADCASTD X14, Y14
	VPXOR Y12, Y12, Y12
	VXORPS Y5, Y5, Y5     // sumL
	VXORPS Y7, Y7, Y7     // sumL2
	VXORPS Y15, Y15, Y15  // sumXL

sloop:
	VBROADCASTSS (SI), Y0 // v
	VBROADCASTSS (DI), Y1 // w
	VSUBPS Y9, Y0, Y2     // v - lo
	VMULPS Y10, Y2, Y2    // isc*(v - lo)
	VADDPS Y8, Y2, Y2
	VPAND Y13, Y2, Y2
	VPSUBD Y14, Y2, Y2    // nearestInt
	VPMINSD Y11, Y2, Y2
	VPMAXSD Y12, Y2, Y2   // l
	VMOVDQU Y2, (R9)
	VCVTDQ2PS Y2, Y3      // float32(l)
	VMULPS Y3, Y1, Y4     // wl
	VADDPS Y4, Y5, Y5
	VMULPS Y3, Y4, Y6     // wl*l
	VADDPS Y6, Y7, Y7
	VMULPS Y0, Y4, Y6     // wl*v
	VADDPS Y6, Y15, Y15
	ADDQ $4, SI
	ADDQ $4, DI
	ADDQ $32, R9
	DECQ CX
	JNZ sloop

	VMOVUPS Y5, (R8)
	VMOVUPS Y7, 32(R8)
	VMOVUPS Y15, 64(R8)
	VZEROUPPER
	RET

// func qkx2Mad8AVX2(x, w *float32, n uintptr, scale, mn *[8]float32, lt *int32, mad *[8]float32)
//
// makeQKX2Quants' error of eight candidates (levels lt[8*j+c], scale and min per lane), in the
// scalar order: diff = scale*l + min - x, mad += w*(diff*diff). n > 0.
TEXT ·qkx2Mad8AVX2(SB), NOSPLIT, $0-56
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ scale+24(FP), DX
	VMOVUPS (DX), Y10
	MOVQ mn+32(FP), DX
	VMOVUPS (DX), Y11
	MOVQ lt+40(FP), R9
	MOVQ mad+48(FP), R8
	VXORPS Y5, Y5, Y5

mloop:
	VBROADCASTSS (SI), Y0 // v
	VBROADCASTSS (DI), Y1 // w
	VMOVDQU (R9), Y2
	VCVTDQ2PS Y2, Y2      // float32(l)
	VMULPS Y10, Y2, Y2    // scale*l
	VADDPS Y11, Y2, Y2    // + min
	VSUBPS Y0, Y2, Y2     // - v
	VMULPS Y2, Y2, Y2     // diff*diff
	VMULPS Y1, Y2, Y2     // w*diff
	VADDPS Y2, Y5, Y5
	ADDQ $4, SI
	ADDQ $4, DI
	ADDQ $32, R9
	DECQ CX
	JNZ mloop

	VMOVUPS Y5, (R8)
	VZEROUPPER
	RET

// func qxSums8AVX2(x *float32, n uintptr, isc *[8]float32, nmax int32, sums *[16]float32)
//
// makeQXQuants' sums for eight candidate inverse scales, one per float32 lane, in the scalar
// loop's order: l = clamp(nearestInt(isc*x), -nmax, nmax-1), w = x*x, then
// sumlx += (w*x)*l, suml2 += (w*l)*l (each product rounded). sums[0:8] and [8:16] receive
// sumlx and suml2. n > 0.
TEXT ·qxSums8AVX2(SB), NOSPLIT, $0-40
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	MOVQ isc+16(FP), DX
	VMOVUPS (DX), Y10
	MOVL nmax+24(FP), AX
	MOVL AX, BX
	NEGL BX
	VMOVD BX, X12
	VPBROADCASTD X12, Y12 // -nmax
	DECL AX
	VMOVD AX, X11
	VPBROADCASTD X11, Y11 // nmax-1
	MOVQ sums+32(FP), R8
	MOVL $0x4B400000, AX
	VMOVQ AX, X8
	VPBROADCASTD X8, Y8
	MOVL $0x007FFFFF, AX
	VMOVQ AX, X13
	VPBROADCASTD X13, Y13
	MOVL $0x00400000, AX
	VMOVQ AX, X14
	VPBROADCASTD X14, Y14
	VXORPS Y5, Y5, Y5     // sumlx
	VXORPS Y7, Y7, Y7     // suml2

qloop:
	VBROADCASTSS (SI), Y0 // v
	VMULPS Y0, Y0, Y1     // w = v*v
	VMULPS Y0, Y1, Y9     // w*v
	VMULPS Y10, Y0, Y2    // isc*v
	VADDPS Y8, Y2, Y2
	VPAND Y13, Y2, Y2
	VPSUBD Y14, Y2, Y2    // nearestInt
	VPMINSD Y11, Y2, Y2
	VPMAXSD Y12, Y2, Y2   // l
	VCVTDQ2PS Y2, Y3      // float32(l)
	VMULPS Y3, Y9, Y4     // (w*v)*l
	VADDPS Y4, Y5, Y5
	VMULPS Y3, Y1, Y6     // w*l
	VMULPS Y3, Y6, Y6     // (w*l)*l
	VADDPS Y6, Y7, Y7
	ADDQ $4, SI
	DECQ CX
	JNZ qloop

	VMOVUPS Y5, (R8)
	VMOVUPS Y7, 32(R8)
	VZEROUPPER
	RET

// func symGridAVX2(x, w *float32, n uintptr, s *float32, groups uintptr, lo, hi, sxx float32, res *gridBest)
//
// symGrid for 8*groups candidate inverse scales s, eight at a time in the float32 lanes, in the
// generic loop's order and operations: y = s*x, l = clamp((y + 1.5*2^23) - 1.5*2^23, lo, hi),
// r = y - l, wr = w*r, srl += wr*l, srr += wr*r (each product rounded, no fused
// multiply-add); then s2 = s*s, sll = (s2*sxx - (srl+srl)) - srr, q = srl/sll,
// e = (srr - srl*q)/s2, d = (1+q)/s where 0 < sll and 0 < sll+srl; each lane keeps the
// candidate with the strictly smallest e (res: e, d, index; +Inf, 0, -1 for none).
// n > 0, groups > 0.
TEXT ·symGridAVX2(SB), NOSPLIT, $0-64
	MOVQ s+24(FP), DX
	MOVQ groups+32(FP), BX
	VBROADCASTSS lo+40(FP), Y11
	VBROADCASTSS hi+44(FP), Y12
	VBROADCASTSS sxx+48(FP), Y14
	MOVQ res+56(FP), R8
	MOVL $0x4B400000, AX  // 12582912.0
	VMOVD AX, X13
	VBROADCASTSS X13, Y13
	MOVL $0x3F800000, AX  // 1.0
	VMOVD AX, X15
	VBROADCASTSS X15, Y15
	// best so far: e (+Inf), d (0), index (-1), in the result itself
	MOVL $0x7F800000, AX
	VMOVD AX, X0
	VBROADCASTSS X0, Y0
	VMOVUPS Y0, (R8)
	VXORPS Y0, Y0, Y0
	VMOVUPS Y0, 32(R8)
	VPCMPEQD Y0, Y0, Y0
	VMOVDQU Y0, 64(R8)
	XORQ R10, R10         // first candidate index of the group

sgroup:
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), DI
	MOVQ n+16(FP), CX
	VMOVUPS (DX), Y10     // s
	VXORPS Y1, Y1, Y1     // srl
	VXORPS Y2, Y2, Y2     // srr

sloop2:
	VBROADCASTSS (SI), Y3 // v
	VBROADCASTSS (DI), Y4 // w
	VMULPS Y3, Y10, Y5    // y = s*v
	VADDPS Y13, Y5, Y6
	VSUBPS Y13, Y6, Y6    // rounded
	VMINPS Y12, Y6, Y6
	VMAXPS Y11, Y6, Y6    // l
	VSUBPS Y6, Y5, Y7     // r = y - l
	VMULPS Y7, Y4, Y8     // wr
	VMULPS Y6, Y8, Y9     // wr*l
	VADDPS Y9, Y1, Y1
	VMULPS Y7, Y8, Y9     // wr*r
	VADDPS Y9, Y2, Y2
	ADDQ $4, SI
	ADDQ $4, DI
	DECQ CX
	JNZ sloop2

	VMULPS Y10, Y10, Y3   // s2
	VMULPS Y14, Y3, Y4    // s2*sxx
	VADDPS Y1, Y1, Y5     // srl+srl
	VSUBPS Y5, Y4, Y4
	VSUBPS Y2, Y4, Y4     // sll
	VXORPS Y0, Y0, Y0
	VCMPPS $1, Y4, Y0, Y6 // 0 < sll
	VADDPS Y1, Y4, Y5     // sll+srl
	VCMPPS $1, Y5, Y0, Y7 // 0 < sll+srl
	VANDPS Y7, Y6, Y6     // fitting lanes
	VDIVPS Y4, Y1, Y5     // q = srl/sll
	VMULPS Y5, Y1, Y7     // srl*q
	VSUBPS Y7, Y2, Y7     // srr - srl*q
	VDIVPS Y3, Y7, Y7     // e
	VADDPS Y15, Y5, Y8    // 1+q
	VDIVPS Y10, Y8, Y8    // d
	VMOVUPS (R8), Y9      // best e
	VCMPPS $1, Y9, Y7, Y0 // e < best e
	VANDPS Y6, Y0, Y0     // ... and fitting
	VBLENDVPS Y0, Y7, Y9, Y9
	VMOVUPS Y9, (R8)
	VMOVUPS 32(R8), Y9
	VBLENDVPS Y0, Y8, Y9, Y9
	VMOVUPS Y9, 32(R8)
	MOVL R10, AX
	VMOVD AX, X9
	VPBROADCASTD X9, Y9
	VPADDD lanes<>(SB), Y9, Y9 // candidate indices
	VMOVDQU 64(R8), Y7
	VBLENDVPS Y0, Y9, Y7, Y7
	VMOVDQU Y7, 64(R8)
	ADDQ $32, DX
	ADDQ $8, R10
	DECQ BX
	JNZ sgroup

	// The best of the lanes: the smallest e, the lowest index among equal ones (-1 and d 0
	// when no lane has a candidate: their e are all +Inf and their indices -1).
	VMOVUPS (R8), Y0
	VEXTRACTF128 $1, Y0, X1
	VMINPS X1, X0, X1
	VMOVHLPS X1, X1, X2
	VMINPS X2, X1, X1
	VMOVSHDUP X1, X2
	VMINSS X2, X1, X1
	VBROADCASTSS X1, Y1   // min e
	VCMPPS $0, Y1, Y0, Y2 // e == min
	VMOVDQU 64(R8), Y3    // indices
	VPCMPEQD Y4, Y4, Y4
	VPSRLD $1, Y4, Y4     // 0x7fffffff
	VBLENDVPS Y2, Y3, Y4, Y4
	VEXTRACTI128 $1, Y4, X5
	VPMINSD X5, X4, X4
	VPSHUFD $0x4E, X4, X5
	VPMINSD X5, X4, X4
	VPSHUFD $0xB1, X4, X5
	VPMINSD X5, X4, X4    // lowest index, in every dword
	VMOVD X4, 96(R8)      // bi
	VPBROADCASTD X4, Y4
	VPCMPEQD Y4, Y3, Y5   // its lane (all lanes when it is -1: their d are 0)
	VANDPS 32(R8), Y5, Y5
	VEXTRACTF128 $1, Y5, X6
	VORPS X6, X5, X5
	VMOVHLPS X5, X5, X6
	VORPS X6, X5, X5
	VMOVSHDUP X5, X6
	VORPS X6, X5, X5
	VMOVSS X5, 100(R8)    // bd
	VZEROUPPER
	RET

DATA lanes<>+0(SB)/4, $0
DATA lanes<>+4(SB)/4, $1
DATA lanes<>+8(SB)/4, $2
DATA lanes<>+12(SB)/4, $3
DATA lanes<>+16(SB)/4, $4
DATA lanes<>+20(SB)/4, $5
DATA lanes<>+24(SB)/4, $6
DATA lanes<>+28(SB)/4, $7
GLOBL lanes<>(SB), RODATA|NOPTR, $32

// func blockStatsAVX2(x, w *float32, n8 uintptr, out *[3]float32)
//
// blockStats over 8*n8 values: max(0, x), max(0, -x) and sum w x^2 in eight lane sums
// (element j into lane j%8; w*x then *x, rounded), reduced ((0+4) + (2+6)) + ((1+5) + (3+7)).
// n8 > 0.
TEXT ·blockStatsAVX2(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), DI
	MOVQ n8+16(FP), CX
	MOVQ out+24(FP), R8
	VXORPS Y0, Y0, Y0     // max x
	VXORPS Y1, Y1, Y1     // max -x
	VXORPS Y2, Y2, Y2     // sums
	VXORPS Y5, Y5, Y5     // 0

bsloop:
	VMOVUPS (SI), Y3      // x
	VMOVUPS (DI), Y4      // w
	VMAXPS Y3, Y0, Y0
	VSUBPS Y3, Y5, Y6     // -x
	VMAXPS Y6, Y1, Y1
	VMULPS Y3, Y4, Y7     // w*x
	VMULPS Y3, Y7, Y7     // *x
	VADDPS Y7, Y2, Y2
	ADDQ $32, SI
	ADDQ $32, DI
	DECQ CX
	JNZ bsloop

	VEXTRACTF128 $1, Y0, X3
	VMAXPS X3, X0, X0
	VMOVHLPS X0, X0, X3
	VMAXPS X3, X0, X0
	VMOVSHDUP X0, X3
	VMAXSS X3, X0, X0
	VMOVSS X0, (R8)
	VEXTRACTF128 $1, Y1, X3
	VMAXPS X3, X1, X1
	VMOVHLPS X1, X1, X3
	VMAXPS X3, X1, X1
	VMOVSHDUP X1, X3
	VMAXSS X3, X1, X1
	VMOVSS X1, 4(R8)
	VEXTRACTF128 $1, Y2, X3
	VADDPS X3, X2, X2     // (0+4) (1+5) (2+6) (3+7)
	VMOVHLPS X2, X2, X3
	VADDPS X3, X2, X2     // ((0+4)+(2+6)) ((1+5)+(3+7))
	VMOVSHDUP X2, X3
	VADDSS X3, X2, X2
	VMOVSS X2, 8(R8)
	VZEROUPPER
	RET

// func asymGrid8AVX2(x, w *float32, n uintptr, s, m0 *[8]float32, hi float32, sums *[24]float32)
//
// asymGrid8's sums for eight candidates (inverse scale s, offset m0 per lane), in the generic
// loop's order and operations: y = (x - m0)*s, l = clamp((y + 1.5*2^23) - 1.5*2^23, 0, hi),
// r = y - l, wr = w*r, then sr += wr, srl += wr*l, srr += wr*r. sums[0:8], [8:16], [16:24]
// receive sr, srl, srr. n > 0.
TEXT ·asymGrid8AVX2(SB), NOSPLIT, $0-56
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ s+24(FP), DX
	VMOVUPS (DX), Y10     // s
	MOVQ m0+32(FP), DX
	VMOVUPS (DX), Y11     // m0
	VBROADCASTSS hi+40(FP), Y12
	MOVQ sums+48(FP), R8
	MOVL $0x4B400000, AX
	VMOVD AX, X13
	VBROADCASTSS X13, Y13
	VXORPS Y14, Y14, Y14  // 0
	VXORPS Y0, Y0, Y0     // sr
	VXORPS Y1, Y1, Y1     // srl
	VXORPS Y2, Y2, Y2     // srr

aloop:
	VBROADCASTSS (SI), Y5 // v
	VBROADCASTSS (DI), Y6 // w
	VSUBPS Y11, Y5, Y7    // v - m0
	VMULPS Y10, Y7, Y7    // y
	VADDPS Y13, Y7, Y8
	VSUBPS Y13, Y8, Y8
	VMINPS Y12, Y8, Y8
	VMAXPS Y14, Y8, Y8    // l
	VSUBPS Y8, Y7, Y7     // r
	VMULPS Y7, Y6, Y5     // wr
	VADDPS Y5, Y0, Y0
	VMULPS Y8, Y5, Y9     // wr*l
	VADDPS Y9, Y1, Y1
	VMULPS Y7, Y5, Y9     // wr*r
	VADDPS Y9, Y2, Y2
	ADDQ $4, SI
	ADDQ $4, DI
	DECQ CX
	JNZ aloop

	VMOVUPS Y0, (R8)
	VMOVUPS Y1, 32(R8)
	VMOVUPS Y2, 64(R8)
	VZEROUPPER
	RET

// func symFixed8AVX2(x, w *float32, n uintptr, ds, id *[8]float32, lo, hi float32, e *[8]float32)
//
// symFixed8: eight stored scales, one per float32 lane, in the generic loop's order and
// operations: l = clamp((x*id + 1.5*2^23) - 1.5*2^23, lo, hi), diff = x - ds*l,
// e += (w*diff)*diff (each product rounded). n > 0.
TEXT ·symFixed8AVX2(SB), NOSPLIT, $0-56
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ ds+24(FP), DX
	VMOVUPS (DX), Y10     // ds
	MOVQ id+32(FP), DX
	VMOVUPS (DX), Y14     // id
	VBROADCASTSS lo+40(FP), Y11
	VBROADCASTSS hi+44(FP), Y12
	MOVQ e+48(FP), R8
	MOVL $0x4B400000, AX
	VMOVD AX, X13
	VBROADCASTSS X13, Y13
	VXORPS Y0, Y0, Y0

floop:
	VBROADCASTSS (SI), Y3 // v
	VBROADCASTSS (DI), Y4 // w
	VMULPS Y14, Y3, Y5    // v*id
	VADDPS Y13, Y5, Y6
	VSUBPS Y13, Y6, Y6
	VMINPS Y12, Y6, Y6
	VMAXPS Y11, Y6, Y6    // l
	VMULPS Y6, Y10, Y7    // ds*l
	VSUBPS Y7, Y3, Y7     // diff
	VMULPS Y7, Y4, Y8     // w*diff
	VMULPS Y7, Y8, Y8     // *diff
	VADDPS Y8, Y0, Y0
	ADDQ $4, SI
	ADDQ $4, DI
	DECQ CX
	JNZ floop

	VMOVUPS Y0, (R8)
	VZEROUPPER
	RET

// func roundAway32AVX2(x *[32]float32, id float32, q *[32]byte)
//
// q[j] = int8(roundAway(x[j]*id)) for |x*id| < 128: t = trunc(x*id), then t+1 where the
// exact fraction x*id - t >= 0.5, t-1 where it is <= -0.5 (C's roundf).
TEXT ·roundAway32AVX2(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	VBROADCASTSS id+8(FP), Y10
	MOVQ q+16(FP), DI
	MOVL $0x3F000000, AX  // 0.5
	VMOVD AX, X11
	VBROADCASTSS X11, Y11
	MOVL $0xBF000000, AX  // -0.5
	VMOVD AX, X12
	VBROADCASTSS X12, Y12
	XORQ CX, CX

raloop:
	VMULPS (SI)(CX*4), Y10, Y0 // f = x*id
	VCVTTPS2DQ Y0, Y1          // t
	VCVTDQ2PS Y1, Y2
	VSUBPS Y2, Y0, Y2          // fraction
	VCMPPS $13, Y11, Y2, Y3    // fraction >= 0.5 (GE_OS)
	VCMPPS $2, Y12, Y2, Y4     // fraction <= -0.5 (LE_OS)
	VPSUBD Y3, Y1, Y1          // t+1 where up (mask -1)
	VPADDD Y4, Y1, Y1          // t-1 where down
	VMOVDQU Y1, Y5
	ADDQ $8, CX
	VMULPS (SI)(CX*4), Y10, Y0
	VCVTTPS2DQ Y0, Y1
	VCVTDQ2PS Y1, Y2
	VSUBPS Y2, Y0, Y2
	VCMPPS $13, Y11, Y2, Y3
	VCMPPS $2, Y12, Y2, Y4
	VPSUBD Y3, Y1, Y1
	VPADDD Y4, Y1, Y1
	VPACKSSDW Y1, Y5, Y5       // 16 int16, lanes interleaved by 128-bit halves
	VPERMQ $0xD8, Y5, Y5       // in order
	VEXTRACTI128 $1, Y5, X7
	VPACKSSWB X7, X5, X6       // 16 bytes in order
	VMOVDQU X6, (DI)
	ADDQ $16, DI
	ADDQ $8, CX
	CMPQ CX, $32
	JLT raloop

	VZEROUPPER
	RET

// func symErr2AVX2(x, w *float32, la, lb *[32]int8, da, db float32, out *[2]float64)
//
// symErr2: four values at a time in float64 lanes (value j in lane j%4): y = float32(l)*d,
// diff = float64(x) - float64(y), sum += (float64(w)*diff)*diff, for both blocks; each sum
// reduced as (0+2) + (1+3).
TEXT ·symErr2AVX2(SB), NOSPLIT, $0-48
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), DI
	MOVQ la+16(FP), R8
	MOVQ lb+24(FP), R9
	VBROADCASTSS da+32(FP), X10
	VBROADCASTSS db+36(FP), X11
	MOVQ out+40(FP), R10
	VXORPD Y0, Y0, Y0     // block a
	VXORPD Y1, Y1, Y1     // block b
	MOVQ $8, CX

eloop:
	VCVTPS2PD (SI), Y2    // x
	VCVTPS2PD (DI), Y3    // w
	VPMOVSXBD (R8), X4    // la
	VCVTDQ2PS X4, X4
	VMULPS X10, X4, X4    // ya
	VCVTPS2PD X4, Y4
	VSUBPD Y4, Y2, Y4     // diff a
	VMULPD Y4, Y3, Y5
	VMULPD Y4, Y5, Y5
	VADDPD Y5, Y0, Y0
	VPMOVSXBD (R9), X6    // lb
	VCVTDQ2PS X6, X6
	VMULPS X11, X6, X6    // yb
	VCVTPS2PD X6, Y6
	VSUBPD Y6, Y2, Y6     // diff b
	VMULPD Y6, Y3, Y7
	VMULPD Y6, Y7, Y7
	VADDPD Y7, Y1, Y1
	ADDQ $16, SI
	ADDQ $16, DI
	ADDQ $4, R8
	ADDQ $4, R9
	DECQ CX
	JNZ eloop

	VEXTRACTF128 $1, Y0, X2
	VADDPD X2, X0, X0     // (0+2) (1+3)
	VUNPCKHPD X0, X0, X2
	VADDSD X2, X0, X0
	VMOVSD X0, (R10)
	VEXTRACTF128 $1, Y1, X2
	VADDPD X2, X1, X1
	VUNPCKHPD X1, X1, X2
	VADDSD X2, X1, X1
	VMOVSD X1, 8(R10)
	VZEROUPPER
	RET

// func candT8AVX2(xT, wT *float32, n uintptr, p *candT, e *[8]float32, lt *float32)
//
// candT8: lane k is its own group of values xT[8*j+k], in the generic loop's order and
// operations: y = (x + dm)*id, l = clamp((y + 1.5*2^23) - 1.5*2^23, lo, hi), stored to lt,
// diff = x - (ds*l - dm), e += (w*diff)*diff (each product rounded). n > 0.
TEXT ·candT8AVX2(SB), NOSPLIT, $0-48
	MOVQ xT+0(FP), SI
	MOVQ wT+8(FP), DI
	MOVQ n+16(FP), CX
	MOVQ p+24(FP), DX
	VMOVUPS 0(DX), Y9     // dm
	VMOVUPS 32(DX), Y10   // ds
	VMOVUPS 64(DX), Y14   // id
	VMOVUPS 96(DX), Y11   // lo
	VMOVUPS 128(DX), Y12  // hi
	MOVQ e+32(FP), R8
	MOVQ lt+40(FP), R9
	MOVL $0x4B400000, AX
	VMOVD AX, X13
	VBROADCASTSS X13, Y13
	VXORPS Y0, Y0, Y0

tloop:
	VMOVUPS (SI), Y3      // x
	VADDPS Y9, Y3, Y5     // x + dm
	VMULPS Y14, Y5, Y5    // * id
	VADDPS Y13, Y5, Y6
	VSUBPS Y13, Y6, Y6
	VMINPS Y12, Y6, Y6
	VMAXPS Y11, Y6, Y6    // l
	VMOVUPS Y6, (R9)
	VMULPS Y6, Y10, Y7    // ds*l
	VSUBPS Y9, Y7, Y7     // - dm
	VSUBPS Y7, Y3, Y7     // diff
	VMULPS (DI), Y7, Y8   // w*diff
	VMULPS Y7, Y8, Y8     // *diff
	VADDPS Y8, Y0, Y0
	ADDQ $32, SI
	ADDQ $32, DI
	ADDQ $32, R9
	DECQ CX
	JNZ tloop

	VMOVUPS Y0, (R8)
	VZEROUPPER
	RET

// func q4RefAVX2(x *[32]float32, id float32, q *[16]byte)
//
// quantQ4_0's packed levels: l = min(15, trunc(x*id + 8.5)) (the product rounded before the
// sum), q[j] = l[j] | l[j+16]<<4.
TEXT ·q4RefAVX2(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	VBROADCASTSS id+8(FP), Y10
	MOVQ q+16(FP), DI
	MOVL $0x41080000, AX  // 8.5
	VMOVD AX, X11
	VBROADCASTSS X11, Y11
	MOVL $15, AX
	VMOVD AX, X12
	VPBROADCASTD X12, Y12
	VMULPS (SI), Y10, Y0
	VADDPS Y11, Y0, Y0
	VCVTTPS2DQ Y0, Y0
	VPMINSD Y12, Y0, Y0   // l[0:8]
	VMULPS 32(SI), Y10, Y1
	VADDPS Y11, Y1, Y1
	VCVTTPS2DQ Y1, Y1
	VPMINSD Y12, Y1, Y1   // l[8:16]
	VMULPS 64(SI), Y10, Y2
	VADDPS Y11, Y2, Y2
	VCVTTPS2DQ Y2, Y2
	VPMINSD Y12, Y2, Y2   // l[16:24]
	VMULPS 96(SI), Y10, Y3
	VADDPS Y11, Y3, Y3
	VCVTTPS2DQ Y3, Y3
	VPMINSD Y12, Y3, Y3   // l[24:32]
	VPSLLD $4, Y2, Y2
	VPSLLD $4, Y3, Y3
	VPOR Y2, Y0, Y0
	VPOR Y3, Y1, Y1
	VPACKUSDW Y1, Y0, Y0  // words 0-3, 8-11, 4-7, 12-15
	VPERMQ $0xD8, Y0, Y0  // in order
	VEXTRACTI128 $1, Y0, X1
	VPACKUSWB X1, X0, X0
	VMOVDQU X0, (DI)
	VZEROUPPER
	RET

// func symLevels32AVX2(x *[32]float32, id, lo, hi float32, L *[32]int8)
//
// L[j] = clamp(round(x[j]*id), lo, hi): the product rounded to float32, rounded to the nearest
// integer (ties to even) by adding and subtracting 1.5*2^23, clamped, packed to int8.
TEXT ·symLevels32AVX2(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	VBROADCASTSS id+8(FP), Y10
	VBROADCASTSS lo+12(FP), Y11
	VBROADCASTSS hi+16(FP), Y12
	MOVQ L+24(FP), DI
	MOVL $0x4B400000, AX
	VMOVD AX, X13
	VBROADCASTSS X13, Y13
	VMULPS (SI), Y10, Y0
	VMULPS 32(SI), Y10, Y1
	VMULPS 64(SI), Y10, Y2
	VMULPS 96(SI), Y10, Y3
	VADDPS Y13, Y0, Y0
	VADDPS Y13, Y1, Y1
	VADDPS Y13, Y2, Y2
	VADDPS Y13, Y3, Y3
	VSUBPS Y13, Y0, Y0
	VSUBPS Y13, Y1, Y1
	VSUBPS Y13, Y2, Y2
	VSUBPS Y13, Y3, Y3
	VMINPS Y12, Y0, Y0
	VMINPS Y12, Y1, Y1
	VMINPS Y12, Y2, Y2
	VMINPS Y12, Y3, Y3
	VMAXPS Y11, Y0, Y0
	VMAXPS Y11, Y1, Y1
	VMAXPS Y11, Y2, Y2
	VMAXPS Y11, Y3, Y3
	VCVTPS2DQ Y0, Y0
	VCVTPS2DQ Y1, Y1
	VCVTPS2DQ Y2, Y2
	VCVTPS2DQ Y3, Y3
	VPACKSSDW Y1, Y0, Y0  // words 0-3, 8-11, 4-7, 12-15
	VPACKSSDW Y3, Y2, Y2  // words 16-19, 24-27, 20-23, 28-31
	VPACKSSWB Y2, Y0, Y0  // bytes 0-3 8-11 16-19 24-27 | 4-7 12-15 20-23 28-31
	VMOVDQU sl32perm<>(SB), Y1
	VPERMD Y0, Y1, Y0
	VMOVDQU Y0, (DI)
	VZEROUPPER
	RET

DATA sl32perm<>+0(SB)/4, $0
DATA sl32perm<>+4(SB)/4, $4
DATA sl32perm<>+8(SB)/4, $1
DATA sl32perm<>+12(SB)/4, $5
DATA sl32perm<>+16(SB)/4, $2
DATA sl32perm<>+20(SB)/4, $6
DATA sl32perm<>+24(SB)/4, $3
DATA sl32perm<>+28(SB)/4, $7
GLOBL sl32perm<>(SB), RODATA|NOPTR, $32

// func absMaxFirst32AVX2(x *[32]float32) float32
//
// The value of largest magnitude among x[0:32], the first of equal magnitudes; +0 when all
// are zero.
TEXT ·absMaxFirst32AVX2(SB), NOSPLIT, $0-12
	MOVQ x+0(FP), SI
	VPCMPEQD Y15, Y15, Y15
	VPSRLD $1, Y15, Y15   // 0x7fffffff
	VANDPS (SI), Y15, Y0
	VANDPS 32(SI), Y15, Y1
	VANDPS 64(SI), Y15, Y2
	VANDPS 96(SI), Y15, Y3
	VMAXPS Y1, Y0, Y4
	VMAXPS Y3, Y2, Y5
	VMAXPS Y5, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VMAXPS X5, X4, X4
	VMOVHLPS X4, X4, X5
	VMAXPS X5, X4, X4
	VMOVSHDUP X4, X5
	VMAXSS X5, X4, X4     // largest magnitude
	VXORPS X6, X6, X6
	VUCOMISS X6, X4
	JEQ allzero
	VBROADCASTSS X4, Y4
	VCMPPS $0, Y4, Y0, Y0
	VCMPPS $0, Y4, Y1, Y1
	VCMPPS $0, Y4, Y2, Y2
	VCMPPS $0, Y4, Y3, Y3
	VMOVMSKPS Y0, AX
	VMOVMSKPS Y1, BX
	VMOVMSKPS Y2, CX
	VMOVMSKPS Y3, DX
	SHLL $8, BX
	SHLL $16, CX
	SHLL $24, DX
	ORL BX, AX
	ORL CX, AX
	ORL DX, AX
	BSFL AX, AX
	VMOVSS (SI)(AX*4), X0
	VMOVSS X0, ret+8(FP)
	VZEROUPPER
	RET

allzero:
	VMOVSS X6, ret+8(FP)
	VZEROUPPER
	RET
