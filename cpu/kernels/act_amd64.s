//go:build !purego

#include "textflag.h"
#include "macros_amd64.h"

// DIVEXP_CONSTS loads what DIVEXP reads: the clamp bounds, Cody-Waite's log2(e), C1, C2, Cephes'
// degree-5 polynomial and 1 (Z18, Z19, Z22-Z31).
#define DIVEXP_CONSTS \
	BCAST(0x42c80000, Z22) ; \
	BCAST(0xc2c80000, Z23) ; \
	BCAST(0x3fb8aa3b, Z24) ; \
	BCAST(0xbf318000, Z25) ; \
	BCAST(0x395e8083, Z26) ; \
	BCAST(0x39506967, Z27) ; \
	BCAST(0x3ab743ce, Z28) ; \
	BCAST(0x3c088908, Z29) ; \
	BCAST(0x3d2aa9c1, Z30) ; \
	BCAST(0x3e2aaaaa, Z31) ; \
	BCAST(0x3f000000, Z19) ; \
	BCAST(0x3f800000, Z18)

// DIVEXP sets Z0 = Z0 / (1 + exp(Z2)), Z2 clamped to [-100, 100] (exp overflows to +Inf above
// 88.7: the result is then -0 or 0): n = round(v log2 e), r = v - n C1 - n C2,
// e = p(r) r^2 + r + 1, scaled by 2^n with VSCALEFPS; the division rounds once. Z3-Z7 scratch.
#define DIVEXP \
	VMINPS      Z22, Z2, Z2 ; \
	VMAXPS      Z23, Z2, Z2 ; \
	VMULPS      Z24, Z2, Z3 ; \
	VRNDSCALEPS $0, Z3, Z3 ; \
	VMOVAPS     Z2, Z4 ; \
	VFMADD231PS Z25, Z3, Z4 ; \
	VFMADD231PS Z26, Z3, Z4 ; \
	VMOVAPS     Z27, Z5 ; \
	VFMADD213PS Z28, Z4, Z5 ; \
	VFMADD213PS Z29, Z4, Z5 ; \
	VFMADD213PS Z30, Z4, Z5 ; \
	VFMADD213PS Z31, Z4, Z5 ; \
	VFMADD213PS Z19, Z4, Z5 ; \
	VMULPS      Z4, Z4, Z6 ; \
	VADDPS      Z18, Z4, Z7 ; \
	VFMADD231PS Z6, Z5, Z7 ; \
	VSCALEFPS   Z3, Z7, Z7 ; \
	VADDPS      Z18, Z7, Z7 ; \
	VDIVPS      Z7, Z0, Z0

// func geluAVX512(dst, x *float32, n uintptr) // n multiple of 16
// gelu(x) = 0.5x(1+tanh(u)), u = sqrt(2/pi)(x+0.044715x^3), computed as x/(1+exp(-2u)) with
// -2u = x(k1 + k2 x^2) clamped to [-100, 100], and exp by Cody-Waite reduction, Cephes' degree-5
// polynomial and VSCALEFPS (about 1 ulp); the division is exact-rounded. Agrees with the
// float64 reference to a few float32 ulps.
TEXT ·geluAVX512(SB), NOSPLIT, $0-24
	MOVQ dst+0(FP), DI
	MOVQ x+8(FP), SI
	MOVQ n+16(FP), CX
	BCAST(0xbfcc422a, Z20) // k1 = -2 sqrt(2/pi)
	BCAST(0xbd922279, Z21) // k2 = k1 * 0.044715
	DIVEXP_CONSTS
	SHRQ  $4, CX
	TESTQ CX, CX
	JZ    geludone

geluloop:
	VMOVUPS      (SI), Z0
	VMULPS       Z0, Z0, Z1          // x^2
	VMOVAPS      Z20, Z2
	VFMADD231PS  Z21, Z1, Z2         // k1 + k2 x^2
	VMULPS       Z0, Z2, Z2          // v = -2u
	DIVEXP                           // x / (1 + exp(-2u))
	VMOVUPS      Z0, (DI)
	ADDQ         $64, SI
	ADDQ         $64, DI
	DECQ         CX
	JNZ          geluloop

geludone:
	VZEROUPPER
	RET

// func layerNormAVX512(dst, x, w, b *float32, n uintptr, eps float32) // n multiple of 16, > 0
// Two passes for the mean and the variance (float32, 16 lanes), then
// dst = (x-mean)*rstd*w + b.
TEXT ·layerNormAVX512(SB), NOSPLIT, $0-44
	MOVQ      dst+0(FP), DI
	MOVQ      x+8(FP), SI
	MOVQ      w+16(FP), R8
	MOVQ      b+24(FP), R9
	MOVQ      n+32(FP), CX
	SHRQ      $4, CX
	VXORPS    Z0, Z0, Z0
	MOVQ      SI, AX
	MOVQ      CX, DX

lnsum:
	VADDPS (AX), Z0, Z0
	ADDQ   $64, AX
	DECQ   DX
	JNZ    lnsum
	REDUCE16(Z0, Y0, X0, Y1, X1)
	MOVQ      n+32(FP), AX
	VCVTSI2SSQ AX, X2, X2        // n as float32
	VDIVSS    X2, X0, X0          // mean
	VBROADCASTSS X0, Z3
	VXORPS    Z0, Z0, Z0
	MOVQ      SI, AX
	MOVQ      CX, DX

lnvar:
	VMOVUPS     (AX), Z4
	VSUBPS      Z3, Z4, Z4
	VFMADD231PS Z4, Z4, Z0
	ADDQ        $64, AX
	DECQ        DX
	JNZ         lnvar
	REDUCE16(Z0, Y0, X0, Y1, X1)
	VDIVSS      X2, X0, X0        // variance
	VADDSS      eps+40(FP), X0, X0
	VSQRTSS     X0, X0, X0
	MOVL        $0x3f800000, AX
	VMOVD       AX, X5
	VDIVSS      X0, X5, X5        // rstd
	VBROADCASTSS X5, Z5

lnout:
	VMOVUPS     (SI), Z4
	VSUBPS      Z3, Z4, Z4
	VMULPS      Z5, Z4, Z4
	VMULPS      (R8), Z4, Z4
	VADDPS      (R9), Z4, Z4
	VMOVUPS     Z4, (DI)
	ADDQ        $64, SI
	ADDQ        $64, R8
	ADDQ        $64, R9
	ADDQ        $64, DI
	DECQ        CX
	JNZ         lnout
	VZEROUPPER
	RET

// func swiGLUAVX512(dst, gate, up *float32, n uintptr) // n a multiple of 16, > 0
// dst = g / (1 + exp(-g)) * up, exp as in geluAVX512 with its argument -g clamped to
// [-100, 100] (for g < -88.7 exp overflows to +Inf and the result is -0 times up).
TEXT ·swiGLUAVX512(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ up+16(FP), DX
	MOVQ n+24(FP), CX
	BCAST(0x80000000, Z21) // sign bit
	DIVEXP_CONSTS
	SHRQ $4, CX

sgloop:
	VMOVUPS      (SI), Z0
	VXORPS       Z21, Z0, Z2         // v = -g
	DIVEXP                           // silu(g) = g / (1 + exp(-g))
	VMULPS       (DX), Z0, Z0        // * up
	VMOVUPS      Z0, (DI)
	ADDQ         $64, SI
	ADDQ         $64, DX
	ADDQ         $64, DI
	DECQ         CX
	JNZ          sgloop
	VZEROUPPER
	RET
