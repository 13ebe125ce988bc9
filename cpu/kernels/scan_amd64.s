//go:build !purego

#include "textflag.h"

// The sampler's scans over a vocabulary of logits (scan.go), AVX2.

// func maxAVX2(x *float32, n uintptr) (mx, zero float32) // n a positive multiple of 32
// Four running maxima and four sums of x*0 (0 for finite x, NaN for an infinity or a NaN; a
// NaN sum stays NaN). VMAXPS returns its second source when either is NaN: the running maximum
// is the second source, so a NaN in x never becomes the maximum (the zero sum reports it).
TEXT ·maxAVX2(SB), NOSPLIT, $0-24
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VMOVUPS (SI), Y0
	VMOVAPS Y0, Y1
	VMOVAPS Y0, Y2
	VMOVAPS Y0, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	VXORPS Y8, Y8, Y8 // zero
loop:
	VMOVUPS (SI), Y9
	VMOVUPS 32(SI), Y10
	VMOVUPS 64(SI), Y11
	VMOVUPS 96(SI), Y12
	VMAXPS Y0, Y9, Y0
	VMAXPS Y1, Y10, Y1
	VMAXPS Y2, Y11, Y2
	VMAXPS Y3, Y12, Y3
	VFMADD231PS Y8, Y9, Y4
	VFMADD231PS Y8, Y10, Y5
	VFMADD231PS Y8, Y11, Y6
	VFMADD231PS Y8, Y12, Y7
	ADDQ $128, SI
	SUBQ $32, CX
	JNZ loop
	VMAXPS Y1, Y0, Y0
	VMAXPS Y3, Y2, Y2
	VMAXPS Y2, Y0, Y0
	VADDPS Y5, Y4, Y4
	VADDPS Y7, Y6, Y6
	VADDPS Y6, Y4, Y4
	VEXTRACTF128 $1, Y0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0x4e, X0, X1
	VMAXPS X1, X0, X0
	VPERMILPS $0xb1, X0, X1
	VMAXPS X1, X0, X0
	VEXTRACTF128 $1, Y4, X5
	VADDPS X5, X4, X4
	VPERMILPS $0x4e, X4, X5
	VADDPS X5, X4, X4
	VPERMILPS $0xb1, X4, X5
	VADDPS X5, X4, X4
	VMOVSS X0, mx+16(FP)
	VMOVSS X4, zero+20(FP)
	VZEROUPPER
	RET

// func indexAVX2(x *float32, n uintptr, v float32) uintptr // n a positive multiple of 8
TEXT ·indexAVX2(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS v+16(FP), Y0
	XORQ AX, AX
loop:
	VCMPPS $0, (SI)(AX*4), Y0, Y1 // equal (ordered)
	VMOVMSKPS Y1, DX
	TESTL DX, DX
	JNZ found
	ADDQ $8, AX
	CMPQ AX, CX
	JB loop
	MOVQ CX, ret+24(FP)
	VZEROUPPER
	RET
found:
	BSFL DX, DX
	ADDQ DX, AX
	MOVQ AX, ret+24(FP)
	VZEROUPPER
	RET

// func atLeastMasksAVX2(x *float32, n uintptr, t float32, masks *uint64) // n a positive multiple of 64
// VCMPPS predicate 0x12 (LE_OQ) with t first: t <= x, false for NaN.
TEXT ·atLeastMasksAVX2(SB), NOSPLIT, $0-32
	MOVQ x+0(FP), SI
	MOVQ n+8(FP), CX
	VBROADCASTSS t+16(FP), Y0
	MOVQ masks+24(FP), DI
loop:
	VCMPPS $0x12, (SI), Y0, Y1
	VCMPPS $0x12, 32(SI), Y0, Y2
	VCMPPS $0x12, 64(SI), Y0, Y3
	VCMPPS $0x12, 96(SI), Y0, Y4
	VMOVMSKPS Y1, AX
	VMOVMSKPS Y2, BX
	VMOVMSKPS Y3, R8
	VMOVMSKPS Y4, R9
	SHLQ $8, BX
	SHLQ $16, R8
	SHLQ $24, R9
	ORQ BX, AX
	ORQ R8, AX
	ORQ R9, AX
	VCMPPS $0x12, 128(SI), Y0, Y1
	VCMPPS $0x12, 160(SI), Y0, Y2
	VCMPPS $0x12, 192(SI), Y0, Y3
	VCMPPS $0x12, 224(SI), Y0, Y4
	VMOVMSKPS Y1, BX
	VMOVMSKPS Y2, R8
	VMOVMSKPS Y3, R9
	VMOVMSKPS Y4, R10
	SHLQ $32, BX
	SHLQ $40, R8
	SHLQ $48, R9
	SHLQ $56, R10
	ORQ BX, AX
	ORQ R8, AX
	ORQ R9, AX
	ORQ R10, AX
	MOVQ AX, (DI)
	ADDQ $256, SI
	ADDQ $8, DI
	SUBQ $64, CX
	JNZ loop
	VZEROUPPER
	RET
