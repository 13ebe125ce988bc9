//go:build !purego

#include "textflag.h"
#include "macros_amd64.h"

// The Llama family's RMSNorm and RoPE kernels, AVX-512 (Z registers) and AVX2 (Y registers).
// Every one computes exactly what the generic kernel of llama.go computes: squares in float64
// (exact, so the fused multiply-add rounds as the generic add), products and sums rounded
// separately (no fused multiply-add in RoPE).

// rope2x: for the normal mode, the indexes that spread cos[0..8) to the pairs' lanes.
DATA rope2x<>+0(SB)/4, $0
DATA rope2x<>+4(SB)/4, $0
DATA rope2x<>+8(SB)/4, $1
DATA rope2x<>+12(SB)/4, $1
DATA rope2x<>+16(SB)/4, $2
DATA rope2x<>+20(SB)/4, $2
DATA rope2x<>+24(SB)/4, $3
DATA rope2x<>+28(SB)/4, $3
DATA rope2x<>+32(SB)/4, $4
DATA rope2x<>+36(SB)/4, $4
DATA rope2x<>+40(SB)/4, $5
DATA rope2x<>+44(SB)/4, $5
DATA rope2x<>+48(SB)/4, $6
DATA rope2x<>+52(SB)/4, $6
DATA rope2x<>+56(SB)/4, $7
DATA rope2x<>+60(SB)/4, $7
GLOBL rope2x<>(SB), RODATA|NOPTR, $64

// func squareLanesAVX512(acc *[16]float64, x *float32, n uintptr) // n a multiple of 16, > 0
// acc[l] += x[i]² (float64) for i ≡ l (mod 16), in increasing i.
TEXT ·squareLanesAVX512(SB), NOSPLIT, $0-24
	MOVQ    acc+0(FP), DI
	MOVQ    x+8(FP), SI
	MOVQ    n+16(FP), CX
	VMOVUPD (DI), Z0
	VMOVUPD 64(DI), Z1
	SHRQ    $4, CX

sqloop:
	VCVTPS2PD   (SI), Z2
	VCVTPS2PD   32(SI), Z3
	VFMADD231PD Z2, Z2, Z0
	VFMADD231PD Z3, Z3, Z1
	ADDQ        $64, SI
	DECQ        CX
	JNZ         sqloop
	VMOVUPD     Z0, (DI)
	VMOVUPD     Z1, 64(DI)
	VZEROUPPER
	RET

// func scaleRowAVX512(dst, x *float32, n uintptr, s float32) // n a multiple of 16, > 0
TEXT ·scaleRowAVX512(SB), NOSPLIT, $0-28
	MOVQ         dst+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS s+24(FP), Z1
	SHRQ         $4, CX

scloop:
	VMULPS  (SI), Z1, Z0
	VMOVUPS Z0, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DI
	DECQ    CX
	JNZ     scloop
	VZEROUPPER
	RET

// func scaleMulRowAVX512(dst, x, w *float32, n uintptr, s float32) // n a multiple of 16, > 0
// dst = (x*s)*w, two roundings.
TEXT ·scaleMulRowAVX512(SB), NOSPLIT, $0-36
	MOVQ         dst+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         w+16(FP), DX
	MOVQ         n+24(FP), CX
	VBROADCASTSS s+32(FP), Z1
	SHRQ         $4, CX

smloop:
	VMULPS  (SI), Z1, Z0
	VMULPS  (DX), Z0, Z0
	VMOVUPS Z0, (DI)
	ADDQ    $64, SI
	ADDQ    $64, DX
	ADDQ    $64, DI
	DECQ    CX
	JNZ     smloop
	VZEROUPPER
	RET

// func ropeNormalAVX512(dst, x, cos, sin *float32, n uintptr) // n values, a multiple of 16, > 0
// Eight pairs per step: C = (c0 c0 c1 c1 ...), S likewise, X' = x with each pair swapped;
// dst = x*C + (X'*S with the even lanes negated): x0 c - x1 s, x1 c + x0 s.
TEXT ·ropeNormalAVX512(SB), NOSPLIT, $0-40
	MOVQ         dst+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         cos+16(FP), R8
	MOVQ         sin+24(FP), R9
	MOVQ         n+32(FP), CX
	VMOVDQU32    rope2x<>(SB), Z7
	MOVQ         $0x80000000, AX // sign bit of the even float32 lanes
	VPBROADCASTQ AX, Z6
	SHRQ         $4, CX

rnloop:
	VMOVUPS     (R8), Y2
	VPERMPS     Z2, Z7, Z2       // C
	VMOVUPS     (R9), Y3
	VPERMPS     Z3, Z7, Z3       // S
	VMOVUPS     (SI), Z0
	VPERMILPS   $0xb1, Z0, Z1    // pairs swapped
	VMULPS      Z2, Z0, Z0
	VMULPS      Z3, Z1, Z1
	VXORPS      Z6, Z1, Z1
	VADDPS      Z1, Z0, Z0
	VMOVUPS     Z0, (DI)
	ADDQ        $32, R8
	ADDQ        $32, R9
	ADDQ        $64, SI
	ADDQ        $64, DI
	DECQ        CX
	JNZ         rnloop
	VZEROUPPER
	RET

// func ropeNeoXAVX512(dst, x, cos, sin *float32, h, n uintptr) // n pairs, a multiple of 16, > 0
// Pairs (x[i], x[i+h]), h in elements: dst[i] = x0 c - x1 s, dst[i+h] = x0 s + x1 c.
TEXT ·ropeNeoXAVX512(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ cos+16(FP), R8
	MOVQ sin+24(FP), R9
	MOVQ h+32(FP), DX
	SHLQ $2, DX
	MOVQ n+40(FP), CX
	SHRQ $4, CX

rxloop:
	VMOVUPS (R8), Z2           // C
	VMOVUPS (R9), Z3           // S
	VMOVUPS (SI), Z0           // x0
	VMOVUPS (SI)(DX*1), Z1     // x1
	VMULPS  Z2, Z0, Z4
	VMULPS  Z3, Z1, Z5
	VSUBPS  Z5, Z4, Z4
	VMOVUPS Z4, (DI)
	VMULPS  Z3, Z0, Z4
	VMULPS  Z2, Z1, Z5
	VADDPS  Z5, Z4, Z4
	VMOVUPS Z4, (DI)(DX*1)
	ADDQ    $64, R8
	ADDQ    $64, R9
	ADDQ    $64, SI
	ADDQ    $64, DI
	DECQ    CX
	JNZ     rxloop
	VZEROUPPER
	RET

// func squareLanesAVX2(acc *[16]float64, x *float32, n uintptr) // n a multiple of 16, > 0
// The 16 float64 lanes in four registers.
TEXT ·squareLanesAVX2(SB), NOSPLIT, $0-24
	MOVQ    acc+0(FP), DI
	MOVQ    x+8(FP), SI
	MOVQ    n+16(FP), CX
	VMOVUPD (DI), Y0
	VMOVUPD 32(DI), Y1
	VMOVUPD 64(DI), Y2
	VMOVUPD 96(DI), Y3
	SHRQ    $4, CX

sq2loop:
	VCVTPS2PD   (SI), Y4
	VCVTPS2PD   16(SI), Y5
	VCVTPS2PD   32(SI), Y6
	VCVTPS2PD   48(SI), Y7
	VFMADD231PD Y4, Y4, Y0
	VFMADD231PD Y5, Y5, Y1
	VFMADD231PD Y6, Y6, Y2
	VFMADD231PD Y7, Y7, Y3
	ADDQ        $64, SI
	DECQ        CX
	JNZ         sq2loop
	VMOVUPD     Y0, (DI)
	VMOVUPD     Y1, 32(DI)
	VMOVUPD     Y2, 64(DI)
	VMOVUPD     Y3, 96(DI)
	VZEROUPPER
	RET

// func scaleRowAVX2(dst, x *float32, n uintptr, s float32) // n a multiple of 8, > 0
TEXT ·scaleRowAVX2(SB), NOSPLIT, $0-28
	MOVQ         dst+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         n+16(FP), CX
	VBROADCASTSS s+24(FP), Y1
	SHRQ         $3, CX

sc2loop:
	VMULPS  (SI), Y1, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     sc2loop
	VZEROUPPER
	RET

// func scaleMulRowAVX2(dst, x, w *float32, n uintptr, s float32) // n a multiple of 8, > 0
TEXT ·scaleMulRowAVX2(SB), NOSPLIT, $0-36
	MOVQ         dst+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         w+16(FP), DX
	MOVQ         n+24(FP), CX
	VBROADCASTSS s+32(FP), Y1
	SHRQ         $3, CX

sm2loop:
	VMULPS  (SI), Y1, Y0
	VMULPS  (DX), Y0, Y0
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	DECQ    CX
	JNZ     sm2loop
	VZEROUPPER
	RET

// func ropeNormalAVX2(dst, x, cos, sin *float32, n uintptr) // n values, a multiple of 8, > 0
// As ropeNormalAVX512, four pairs per step.
TEXT ·ropeNormalAVX2(SB), NOSPLIT, $0-40
	MOVQ         dst+0(FP), DI
	MOVQ         x+8(FP), SI
	MOVQ         cos+16(FP), R8
	MOVQ         sin+24(FP), R9
	MOVQ         n+32(FP), CX
	VMOVDQU      rope2x<>(SB), Y7
	MOVQ         $0x80000000, AX
	VMOVQ        AX, X6
	VPBROADCASTQ X6, Y6
	SHRQ         $3, CX

rn2loop:
	VMOVUPS   (R8), X2
	VPERMPS   Y2, Y7, Y2
	VMOVUPS   (R9), X3
	VPERMPS   Y3, Y7, Y3
	VMOVUPS   (SI), Y0
	VPERMILPS $0xb1, Y0, Y1
	VMULPS    Y2, Y0, Y0
	VMULPS    Y3, Y1, Y1
	VXORPS    Y6, Y1, Y1
	VADDPS    Y1, Y0, Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, R8
	ADDQ      $16, R9
	ADDQ      $32, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       rn2loop
	VZEROUPPER
	RET

// func ropeNeoXAVX2(dst, x, cos, sin *float32, h, n uintptr) // n pairs, a multiple of 8, > 0
TEXT ·ropeNeoXAVX2(SB), NOSPLIT, $0-48
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ cos+16(FP), R8
	MOVQ sin+24(FP), R9
	MOVQ h+32(FP), DX
	SHLQ $2, DX
	MOVQ n+40(FP), CX
	SHRQ $3, CX

rx2loop:
	VMOVUPS (R8), Y2
	VMOVUPS (R9), Y3
	VMOVUPS (SI), Y0
	VMOVUPS (SI)(DX*1), Y1
	VMULPS  Y2, Y0, Y4
	VMULPS  Y3, Y1, Y5
	VSUBPS  Y5, Y4, Y4
	VMOVUPS Y4, (DI)
	VMULPS  Y3, Y0, Y4
	VMULPS  Y2, Y1, Y5
	VADDPS  Y5, Y4, Y4
	VMOVUPS Y4, (DI)(DX*1)
	ADDQ    $32, R8
	ADDQ    $32, R9
	ADDQ    $32, SI
	ADDQ    $32, DI
	DECQ    CX
	JNZ     rx2loop
	VZEROUPPER
	RET
