//go:build amd64 && !purego

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
