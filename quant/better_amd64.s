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
