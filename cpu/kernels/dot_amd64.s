//go:build !purego

#include "textflag.h"

// Float32 dot products in the package's summation order: 16 lanes accumulated with fused
// multiply-adds, then reduced by REDUCE16. Lengths are multiples of 16 (the Go wrappers add
// the tail); strides are in bytes.

// REDUCE16 sums the 16 lanes of Z (whose lower halves are Y and X) into the low lane of X with
// the fixed tree: s8 = lanes[0:8]+lanes[8:16], s4 = s8[0:4]+s8[4:8], then (s4[0]+s4[2]) +
// (s4[1]+s4[3]). TY/TX are a scratch register's halves.
#define REDUCE16(Z, Y, X, TY, TX) \
	VEXTRACTF32X8 $1, Z, TY ; \
	VADDPS        TY, Y, Y ; \
	VEXTRACTF32X4 $1, Y, TX ; \
	VADDPS        TX, X, X ; \
	VMOVHLPS      X, X, TX ; \
	VADDPS        TX, X, X ; \
	VMOVSHDUP     X, TX ; \
	VADDSS        TX, X, X

// REDUCE8x2 is REDUCE16 for 16 lanes held in two registers (lanes 0-7 in YL, 8-15 in YH).
#define REDUCE8x2(YL, XL, YH, TX) \
	VADDPS       YH, YL, YL ; \
	VEXTRACTF128 $1, YL, TX ; \
	VADDPS       TX, XL, XL ; \
	VMOVHLPS     XL, XL, TX ; \
	VADDPS       TX, XL, XL ; \
	VMOVSHDUP    XL, TX ; \
	VADDSS       TX, XL, XL

// func dotAVX512(a, b *float32, n uintptr) float32
TEXT ·dotAVX512(SB), NOSPLIT, $0-28
	MOVQ   a+0(FP), SI
	MOVQ   b+8(FP), DI
	MOVQ   n+16(FP), CX
	SHLQ   $2, CX
	XORQ   AX, AX
	VXORPS Z0, Z0, Z0
	TESTQ  CX, CX
	JZ     dotdone

dotloop:
	VMOVUPS     (SI)(AX*1), Z1
	VFMADD231PS (DI)(AX*1), Z1, Z0
	ADDQ        $64, AX
	CMPQ        AX, CX
	JB          dotloop

dotdone:
	REDUCE16(Z0, Y0, X0, Y1, X1)
	MOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func dot1x4AVX512(x, w *float32, ws, n uintptr, out *[4]float32)
TEXT ·dot1x4AVX512(SB), NOSPLIT, $0-40
	MOVQ   x+0(FP), SI
	MOVQ   w+8(FP), DI
	MOVQ   ws+16(FP), DX
	MOVQ   n+24(FP), CX
	LEAQ   (DI)(DX*1), R8
	LEAQ   (R8)(DX*1), R9
	LEAQ   (R9)(DX*1), R10
	SHLQ   $2, CX
	XORQ   AX, AX
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	TESTQ  CX, CX
	JZ     d14done

d14loop:
	VMOVUPS     (SI)(AX*1), Z4
	VFMADD231PS (DI)(AX*1), Z4, Z0
	VFMADD231PS (R8)(AX*1), Z4, Z1
	VFMADD231PS (R9)(AX*1), Z4, Z2
	VFMADD231PS (R10)(AX*1), Z4, Z3
	ADDQ        $64, AX
	CMPQ        AX, CX
	JB          d14loop

d14done:
	MOVQ out+32(FP), DI
	REDUCE16(Z0, Y0, X0, Y8, X8)
	REDUCE16(Z1, Y1, X1, Y8, X8)
	REDUCE16(Z2, Y2, X2, Y8, X8)
	REDUCE16(Z3, Y3, X3, Y8, X8)
	MOVSS X0, (DI)
	MOVSS X1, 4(DI)
	MOVSS X2, 8(DI)
	MOVSS X3, 12(DI)
	VZEROUPPER
	RET

// func dot4x4AVX512(x *float32, xs uintptr, w *float32, ws, n uintptr, out *float32, os uintptr)
TEXT ·dot4x4AVX512(SB), NOSPLIT, $0-56
	MOVQ   x+0(FP), SI
	MOVQ   xs+8(FP), BX
	MOVQ   w+16(FP), DI
	MOVQ   ws+24(FP), DX
	MOVQ   n+32(FP), CX
	LEAQ   (SI)(BX*1), R8
	LEAQ   (R8)(BX*1), R9
	LEAQ   (R9)(BX*1), R10
	LEAQ   (DI)(DX*1), R11
	LEAQ   (R11)(DX*1), R12
	LEAQ   (R12)(DX*1), R13
	SHLQ   $2, CX
	XORQ   AX, AX
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	VXORPS Z4, Z4, Z4
	VXORPS Z5, Z5, Z5
	VXORPS Z6, Z6, Z6
	VXORPS Z7, Z7, Z7
	VXORPS Z8, Z8, Z8
	VXORPS Z9, Z9, Z9
	VXORPS Z10, Z10, Z10
	VXORPS Z11, Z11, Z11
	VXORPS Z12, Z12, Z12
	VXORPS Z13, Z13, Z13
	VXORPS Z14, Z14, Z14
	VXORPS Z15, Z15, Z15
	TESTQ  CX, CX
	JZ     d44done

d44loop:
	VMOVUPS     (DI)(AX*1), Z16
	VMOVUPS     (R11)(AX*1), Z17
	VMOVUPS     (R12)(AX*1), Z18
	VMOVUPS     (R13)(AX*1), Z19
	VMOVUPS     (SI)(AX*1), Z20
	VFMADD231PS Z16, Z20, Z0
	VFMADD231PS Z17, Z20, Z1
	VFMADD231PS Z18, Z20, Z2
	VFMADD231PS Z19, Z20, Z3
	VMOVUPS     (R8)(AX*1), Z21
	VFMADD231PS Z16, Z21, Z4
	VFMADD231PS Z17, Z21, Z5
	VFMADD231PS Z18, Z21, Z6
	VFMADD231PS Z19, Z21, Z7
	VMOVUPS     (R9)(AX*1), Z22
	VFMADD231PS Z16, Z22, Z8
	VFMADD231PS Z17, Z22, Z9
	VFMADD231PS Z18, Z22, Z10
	VFMADD231PS Z19, Z22, Z11
	VMOVUPS     (R10)(AX*1), Z23
	VFMADD231PS Z16, Z23, Z12
	VFMADD231PS Z17, Z23, Z13
	VFMADD231PS Z18, Z23, Z14
	VFMADD231PS Z19, Z23, Z15
	ADDQ        $64, AX
	CMPQ        AX, CX
	JB          d44loop

d44done:
	MOVQ out+40(FP), DI
	MOVQ os+48(FP), DX
	REDUCE16(Z0, Y0, X0, Y16, X16)
	REDUCE16(Z1, Y1, X1, Y16, X16)
	REDUCE16(Z2, Y2, X2, Y16, X16)
	REDUCE16(Z3, Y3, X3, Y16, X16)
	MOVSS X0, (DI)
	MOVSS X1, 4(DI)
	MOVSS X2, 8(DI)
	MOVSS X3, 12(DI)
	ADDQ  DX, DI
	REDUCE16(Z4, Y4, X4, Y16, X16)
	REDUCE16(Z5, Y5, X5, Y16, X16)
	REDUCE16(Z6, Y6, X6, Y16, X16)
	REDUCE16(Z7, Y7, X7, Y16, X16)
	MOVSS X4, (DI)
	MOVSS X5, 4(DI)
	MOVSS X6, 8(DI)
	MOVSS X7, 12(DI)
	ADDQ  DX, DI
	REDUCE16(Z8, Y8, X8, Y16, X16)
	REDUCE16(Z9, Y9, X9, Y16, X16)
	REDUCE16(Z10, Y10, X10, Y16, X16)
	REDUCE16(Z11, Y11, X11, Y16, X16)
	MOVSS X8, (DI)
	MOVSS X9, 4(DI)
	MOVSS X10, 8(DI)
	MOVSS X11, 12(DI)
	ADDQ  DX, DI
	REDUCE16(Z12, Y12, X12, Y16, X16)
	REDUCE16(Z13, Y13, X13, Y16, X16)
	REDUCE16(Z14, Y14, X14, Y16, X16)
	REDUCE16(Z15, Y15, X15, Y16, X16)
	MOVSS X12, (DI)
	MOVSS X13, 4(DI)
	MOVSS X14, 8(DI)
	MOVSS X15, 12(DI)
	VZEROUPPER
	RET

// func dotAVX2(a, b *float32, n uintptr) float32
TEXT ·dotAVX2(SB), NOSPLIT, $0-28
	MOVQ   a+0(FP), SI
	MOVQ   b+8(FP), DI
	MOVQ   n+16(FP), CX
	SHLQ   $2, CX
	XORQ   AX, AX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	TESTQ  CX, CX
	JZ     a2dotdone

a2dotloop:
	VMOVUPS     (SI)(AX*1), Y2
	VMOVUPS     32(SI)(AX*1), Y3
	VFMADD231PS (DI)(AX*1), Y2, Y0
	VFMADD231PS 32(DI)(AX*1), Y3, Y1
	ADDQ        $64, AX
	CMPQ        AX, CX
	JB          a2dotloop

a2dotdone:
	REDUCE8x2(Y0, X0, Y1, X2)
	MOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func dot1x4AVX2(x, w *float32, ws, n uintptr, out *[4]float32)
TEXT ·dot1x4AVX2(SB), NOSPLIT, $0-40
	MOVQ   x+0(FP), SI
	MOVQ   w+8(FP), DI
	MOVQ   ws+16(FP), DX
	MOVQ   n+24(FP), CX
	LEAQ   (DI)(DX*1), R8
	LEAQ   (R8)(DX*1), R9
	LEAQ   (R9)(DX*1), R10
	SHLQ   $2, CX
	XORQ   AX, AX
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	VXORPS Y2, Y2, Y2
	VXORPS Y3, Y3, Y3
	VXORPS Y4, Y4, Y4
	VXORPS Y5, Y5, Y5
	VXORPS Y6, Y6, Y6
	VXORPS Y7, Y7, Y7
	TESTQ  CX, CX
	JZ     a214done

a214loop:
	VMOVUPS     (SI)(AX*1), Y8
	VMOVUPS     32(SI)(AX*1), Y9
	VFMADD231PS (DI)(AX*1), Y8, Y0
	VFMADD231PS 32(DI)(AX*1), Y9, Y1
	VFMADD231PS (R8)(AX*1), Y8, Y2
	VFMADD231PS 32(R8)(AX*1), Y9, Y3
	VFMADD231PS (R9)(AX*1), Y8, Y4
	VFMADD231PS 32(R9)(AX*1), Y9, Y5
	VFMADD231PS (R10)(AX*1), Y8, Y6
	VFMADD231PS 32(R10)(AX*1), Y9, Y7
	ADDQ        $64, AX
	CMPQ        AX, CX
	JB          a214loop

a214done:
	MOVQ out+32(FP), DI
	REDUCE8x2(Y0, X0, Y1, X8)
	REDUCE8x2(Y2, X2, Y3, X8)
	REDUCE8x2(Y4, X4, Y5, X8)
	REDUCE8x2(Y6, X6, Y7, X8)
	MOVSS X0, (DI)
	MOVSS X2, 4(DI)
	MOVSS X4, 8(DI)
	MOVSS X6, 12(DI)
	VZEROUPPER
	RET
