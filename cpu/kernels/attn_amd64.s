//go:build !purego

#include "textflag.h"
#include "macros_amd64.h"

// func scoresAVX512(out, q, k *float32, ks, n, d uintptr)
// out[j] = dot(q, k[j*ks bytes ...]) over d (a multiple of 16) elements, in Dot's order.
TEXT ·scoresAVX512(SB), NOSPLIT, $0-48
	MOVQ  out+0(FP), DI
	MOVQ  q+8(FP), SI
	MOVQ  k+16(FP), DX
	MOVQ  ks+24(FP), BX
	MOVQ  n+32(FP), CX
	MOVQ  d+40(FP), R8
	SHLQ  $2, R8
	TESTQ CX, CX
	JZ    scdone

scrow:
	VXORPS Z0, Z0, Z0
	XORQ   AX, AX

scinner:
	VMOVUPS     (SI)(AX*1), Z1
	VFMADD231PS (DX)(AX*1), Z1, Z0
	ADDQ        $64, AX
	CMPQ        AX, R8
	JB          scinner
	REDUCE16(Z0, Y0, X0, Y2, X2)
	MOVSS       X0, (DI)
	ADDQ        $4, DI
	ADDQ        BX, DX
	DECQ        CX
	JNZ         scrow

scdone:
	VZEROUPPER
	RET

// func expSumAVX512(s *float32, n uintptr, scale, mx float32) float32
// s[j] = exp(scale*s[j] - mx) for j < n (a multiple of 16); returns their sum (16 lanes, then
// the fixed reduction). exp as in geluAVX512 (Cody-Waite, Cephes polynomial, VSCALEFPS).
TEXT ·expSumAVX512(SB), NOSPLIT, $0-28
	MOVQ         s+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS scale+16(FP), Z16
	VBROADCASTSS mx+20(FP), Z17
	BCAST(0xc2c80000, Z23) // -100
	BCAST(0x3fb8aa3b, Z24) // log2(e)
	BCAST(0xbf318000, Z25) // -C1
	BCAST(0x395e8083, Z26) // -C2
	BCAST(0x39506967, Z27) // p0
	BCAST(0x3ab743ce, Z28) // p1
	BCAST(0x3c088908, Z29) // p2
	BCAST(0x3d2aa9c1, Z30) // p3
	BCAST(0x3e2aaaaa, Z31) // p4
	BCAST(0x3f000000, Z19) // p5
	BCAST(0x3f800000, Z18) // 1
	VXORPS       Z0, Z0, Z0
	SHRQ         $4, CX
	TESTQ        CX, CX
	JZ           exdone

exloop:
	VMOVUPS     (SI), Z2
	VFMSUB213PS Z17, Z16, Z2     // v = scale*s - mx
	VMAXPS      Z23, Z2, Z2
	VMULPS      Z24, Z2, Z3
	VRNDSCALEPS $0, Z3, Z3
	VMOVAPS     Z2, Z4
	VFMADD231PS Z25, Z3, Z4
	VFMADD231PS Z26, Z3, Z4
	VMOVAPS     Z27, Z5
	VFMADD213PS Z28, Z4, Z5
	VFMADD213PS Z29, Z4, Z5
	VFMADD213PS Z30, Z4, Z5
	VFMADD213PS Z31, Z4, Z5
	VFMADD213PS Z19, Z4, Z5
	VMULPS      Z4, Z4, Z6
	VADDPS      Z18, Z4, Z7
	VFMADD231PS Z6, Z5, Z7
	VSCALEFPS   Z3, Z7, Z7
	VMOVUPS     Z7, (SI)
	VADDPS      Z7, Z0, Z0
	ADDQ        $64, SI
	DECQ        CX
	JNZ         exloop

exdone:
	REDUCE16(Z0, Y0, X0, Y1, X1)
	MOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func weightedSum64AVX512(out, p, v *float32, vs, n uintptr)
// out[i] = sum over j < n, in order, of p[j]*v[j*vs bytes + i], for i < 64.
TEXT ·weightedSum64AVX512(SB), NOSPLIT, $0-40
	MOVQ   out+0(FP), DI
	MOVQ   p+8(FP), SI
	MOVQ   v+16(FP), DX
	MOVQ   vs+24(FP), BX
	MOVQ   n+32(FP), CX
	VXORPS Z0, Z0, Z0
	VXORPS Z1, Z1, Z1
	VXORPS Z2, Z2, Z2
	VXORPS Z3, Z3, Z3
	TESTQ  CX, CX
	JZ     wsdone

wsloop:
	VBROADCASTSS (SI), Z4
	VFMADD231PS  (DX), Z4, Z0
	VFMADD231PS  64(DX), Z4, Z1
	VFMADD231PS  128(DX), Z4, Z2
	VFMADD231PS  192(DX), Z4, Z3
	ADDQ         $4, SI
	ADDQ         BX, DX
	DECQ         CX
	JNZ          wsloop

wsdone:
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	VZEROUPPER
	RET

// func maxAVX512(s *float32, n uintptr) float32 // n multiple of 16, > 0
TEXT ·maxAVX512(SB), NOSPLIT, $0-20
	MOVQ    s+0(FP), SI
	MOVQ    n+8(FP), CX
	VMOVUPS (SI), Z0
	ADDQ    $64, SI
	SHRQ    $4, CX
	DECQ    CX
	JZ      mxdone

mxloop:
	VMAXPS (SI), Z0, Z0
	ADDQ   $64, SI
	DECQ   CX
	JNZ    mxloop

mxdone:
	VEXTRACTF32X8 $1, Z0, Y1
	VMAXPS        Y1, Y0, Y0
	VEXTRACTF128  $1, Y0, X1
	VMAXPS        X1, X0, X0
	VMOVHLPS      X0, X0, X1
	VMAXPS        X1, X0, X0
	VMOVSHDUP     X0, X1
	VMAXSS        X1, X0, X0
	MOVSS         X0, ret+16(FP)
	VZEROUPPER
	RET

// func addAVX512(dst, a, b *float32, n uintptr) // n multiple of 16
TEXT ·addAVX512(SB), NOSPLIT, $0-32
	MOVQ  dst+0(FP), DI
	MOVQ  a+8(FP), SI
	MOVQ  b+16(FP), DX
	MOVQ  n+24(FP), CX
	SHRQ  $4, CX
	TESTQ CX, CX
	JZ    adddone

addloop:
	VMOVUPS (SI), Z0
	VADDPS  (DX), Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DX
	ADDQ    $64, DI
	DECQ    CX
	JNZ     addloop

adddone:
	VZEROUPPER
	RET

// func weightedSumAdd64AVX512(out, p, v *float32, vs, n uintptr)
// out[i] += p[j]*v[j*vs bytes + i] for j < n in order, for i < 64: weightedSum64AVX512 starting
// from out instead of zero, so that a sum taken block by block (a paged KV cache) is
// bit-identical to one call over all the rows.
TEXT ·weightedSumAdd64AVX512(SB), NOSPLIT, $0-40
	MOVQ    out+0(FP), DI
	MOVQ    p+8(FP), SI
	MOVQ    v+16(FP), DX
	MOVQ    vs+24(FP), BX
	MOVQ    n+32(FP), CX
	VMOVUPS (DI), Z0
	VMOVUPS 64(DI), Z1
	VMOVUPS 128(DI), Z2
	VMOVUPS 192(DI), Z3
	TESTQ   CX, CX
	JZ      wsadone

wsaloop:
	VBROADCASTSS (SI), Z4
	VFMADD231PS  (DX), Z4, Z0
	VFMADD231PS  64(DX), Z4, Z1
	VFMADD231PS  128(DX), Z4, Z2
	VFMADD231PS  192(DX), Z4, Z3
	ADDQ         $4, SI
	ADDQ         BX, DX
	DECQ         CX
	JNZ          wsaloop

wsadone:
	VMOVUPS Z0, (DI)
	VMOVUPS Z1, 64(DI)
	VMOVUPS Z2, 128(DI)
	VMOVUPS Z3, 192(DI)
	VZEROUPPER
	RET

// func weightedSumAdd64AVX2(out, p, v *float32, vs, n uintptr)
// weightedSum64AVX2 starting from out instead of zero (see weightedSumAdd64AVX512).
TEXT ·weightedSumAdd64AVX2(SB), NOSPLIT, $0-40
	MOVQ    out+0(FP), DI
	MOVQ    p+8(FP), SI
	MOVQ    v+16(FP), DX
	MOVQ    vs+24(FP), BX
	MOVQ    n+32(FP), CX
	VMOVUPS (DI), Y0
	VMOVUPS 32(DI), Y1
	VMOVUPS 64(DI), Y2
	VMOVUPS 96(DI), Y3
	VMOVUPS 128(DI), Y4
	VMOVUPS 160(DI), Y5
	VMOVUPS 192(DI), Y6
	VMOVUPS 224(DI), Y7
	TESTQ   CX, CX
	JZ      wsa2adone

wsa2aloop:
	VBROADCASTSS (SI), Y8
	VFMADD231PS  (DX), Y8, Y0
	VFMADD231PS  32(DX), Y8, Y1
	VFMADD231PS  64(DX), Y8, Y2
	VFMADD231PS  96(DX), Y8, Y3
	VFMADD231PS  128(DX), Y8, Y4
	VFMADD231PS  160(DX), Y8, Y5
	VFMADD231PS  192(DX), Y8, Y6
	VFMADD231PS  224(DX), Y8, Y7
	ADDQ         $4, SI
	ADDQ         BX, DX
	DECQ         CX
	JNZ          wsa2aloop

wsa2adone:
	VMOVUPS Y0, (DI)
	VMOVUPS Y1, 32(DI)
	VMOVUPS Y2, 64(DI)
	VMOVUPS Y3, 96(DI)
	VMOVUPS Y4, 128(DI)
	VMOVUPS Y5, 160(DI)
	VMOVUPS Y6, 192(DI)
	VMOVUPS Y7, 224(DI)
	VZEROUPPER
	RET
