//go:build !purego

#include "textflag.h"
#include "macros_amd64.h"

// The AVX2 tier's 2x4 dot tile, GELU and attention kernels (256-bit registers). Dot products
// keep the package's 16 lanes in two halves (lanes 0-7, 8-15); GELU and exp follow the AVX-512
// tier's instruction sequence, with 2^n built in the exponent bits instead of VSCALEFPS.

// VEC8(name, bits): a 32-byte constant, bits in every float32 lane.
#define VEC8(name, bits) \
	DATA name<>+0(SB)/4, $bits ; \
	DATA name<>+4(SB)/4, $bits ; \
	DATA name<>+8(SB)/4, $bits ; \
	DATA name<>+12(SB)/4, $bits ; \
	DATA name<>+16(SB)/4, $bits ; \
	DATA name<>+20(SB)/4, $bits ; \
	DATA name<>+24(SB)/4, $bits ; \
	DATA name<>+28(SB)/4, $bits ; \
	GLOBL name<>(SB), RODATA|NOPTR, $32

VEC8(a2k1, 0xbfcc422a)   // k1 = -2 sqrt(2/pi)
VEC8(a2k2, 0xbd922279)   // k2 = k1 * 0.044715
VEC8(a2p100, 0x42c80000) // 100
VEC8(a2m100, 0xc2c80000) // -100
VEC8(a2log2e, 0x3fb8aa3b)
VEC8(a2c1, 0xbf318000)   // -C1
VEC8(a2c2, 0x395e8083)   // -C2
VEC8(a2p0, 0x39506967)
VEC8(a2p1, 0x3ab743ce)
VEC8(a2p2, 0x3c088908)
VEC8(a2p3, 0x3d2aa9c1)
VEC8(a2p4, 0x3e2aaaaa)
VEC8(a2p5, 0x3f000000)
VEC8(a2one, 0x3f800000)
VEC8(a2bias, 0x0000007f) // 127, the float32 exponent bias
VEC8(a2sign, 0x80000000) // the float32 sign bit

// REDUCEM(M, YH, XH, TX): REDUCE8x2 with lanes 0-7 in memory at M and 8-15 in YH: the sum of
// the 16 lanes in the low lane of XH, by the package's tree.
#define REDUCEM(M, YH, XH, TX) \
	VADDPS       M, YH, YH ; \
	VEXTRACTF128 $1, YH, TX ; \
	VADDPS       TX, XH, XH ; \
	VMOVHLPS     XH, XH, TX ; \
	VADDPS       TX, XH, XH ; \
	VMOVSHDUP    XH, TX ; \
	VADDSS       TX, XH, XH

// D24STEP(H): 8 elements (half H of a group of 16) of x rows SI, R8 times w rows DI, R11-R13;
// Y(4i+j) accumulates x row i times w row j.
#define D24STEP(H) \
	VMOVUPS     H(SI)(AX*1), Y8 ; \
	VMOVUPS     H(R8)(AX*1), Y9 ; \
	VMOVUPS     H(DI)(AX*1), Y10 ; \
	VFMADD231PS Y10, Y8, Y0 ; \
	VFMADD231PS Y10, Y9, Y4 ; \
	VMOVUPS     H(R11)(AX*1), Y11 ; \
	VFMADD231PS Y11, Y8, Y1 ; \
	VFMADD231PS Y11, Y9, Y5 ; \
	VMOVUPS     H(R12)(AX*1), Y12 ; \
	VFMADD231PS Y12, Y8, Y2 ; \
	VFMADD231PS Y12, Y9, Y6 ; \
	VMOVUPS     H(R13)(AX*1), Y13 ; \
	VFMADD231PS Y13, Y8, Y3 ; \
	VFMADD231PS Y13, Y9, Y7

// func dot2x4AVX2(x *float32, xs uintptr, w *float32, ws, n uintptr, out *float32, os uintptr)
// out[i*os + 4j] = dot(x row i, w row j) for i < 2, j < 4 (strides in bytes; n > 0 a multiple
// of 16). Two passes over k, lanes 0-7 of all eight products (kept in the frame), then lanes
// 8-15: eight accumulators, and six loads per eight fused multiply-adds.
TEXT ·dot2x4AVX2(SB), NOSPLIT, $256-56
	MOVQ x+0(FP), SI
	MOVQ xs+8(FP), BX
	MOVQ w+16(FP), DI
	MOVQ ws+24(FP), DX
	MOVQ n+32(FP), CX
	LEAQ (SI)(BX*1), R8
	LEAQ (DI)(DX*1), R11
	LEAQ (R11)(DX*1), R12
	LEAQ (R12)(DX*1), R13
	SHLQ $2, CX
	ZERO8
	XORQ AX, AX

d24lo:
	D24STEP(0)
	ADDQ $64, AX
	CMPQ AX, CX
	JB   d24lo
	VMOVUPS Y0, 0(SP)
	VMOVUPS Y1, 32(SP)
	VMOVUPS Y2, 64(SP)
	VMOVUPS Y3, 96(SP)
	VMOVUPS Y4, 128(SP)
	VMOVUPS Y5, 160(SP)
	VMOVUPS Y6, 192(SP)
	VMOVUPS Y7, 224(SP)
	ZERO8
	XORQ    AX, AX

d24hi:
	D24STEP(32)
	ADDQ $64, AX
	CMPQ AX, CX
	JB   d24hi
	MOVQ out+40(FP), DI
	MOVQ os+48(FP), DX
	REDUCEM(0(SP), Y0, X0, X8)
	REDUCEM(32(SP), Y1, X1, X8)
	REDUCEM(64(SP), Y2, X2, X8)
	REDUCEM(96(SP), Y3, X3, X8)
	MOVSS X0, (DI)
	MOVSS X1, 4(DI)
	MOVSS X2, 8(DI)
	MOVSS X3, 12(DI)
	ADDQ  DX, DI
	REDUCEM(128(SP), Y4, X4, X8)
	REDUCEM(160(SP), Y5, X5, X8)
	REDUCEM(192(SP), Y6, X6, X8)
	REDUCEM(224(SP), Y7, X7, X8)
	MOVSS X4, (DI)
	MOVSS X5, 4(DI)
	MOVSS X6, 8(DI)
	MOVSS X7, 12(DI)
	VZEROUPPER
	RET

// EXP2N(V, N, E, T0, T1): E = exp(V) (V clamped to [-100, 100] by the caller) as the AVX-512
// tier computes it: n = round(V log2 e), r = V - n C1 - n C2, e = p(r) r^2 + r + 1, then
// e 2^n, here as (e 2^(n>>1)) 2^(n - n>>1): the first product is exact and the second
// rounds once, as VSCALEFPS does (overflow to +Inf, gradual underflow). N, T0, T1 scratch.
#define EXP2N(V, N, E, T0, T1) \
	VMULPS       a2log2e<>(SB), V, N ; \
	VROUNDPS     $0, N, N ; \
	VMOVAPS      V, T0 ; \
	VFMADD231PS  a2c1<>(SB), N, T0 ; \
	VFMADD231PS  a2c2<>(SB), N, T0 ; \
	VMOVUPS      a2p0<>(SB), E ; \
	VFMADD213PS  a2p1<>(SB), T0, E ; \
	VFMADD213PS  a2p2<>(SB), T0, E ; \
	VFMADD213PS  a2p3<>(SB), T0, E ; \
	VFMADD213PS  a2p4<>(SB), T0, E ; \
	VFMADD213PS  a2p5<>(SB), T0, E ; \
	VMULPS       T0, T0, T1 ; \
	VADDPS       a2one<>(SB), T0, T0 ; \
	VFMADD213PS  T0, T1, E ; \
	VCVTPS2DQ    N, N ; \
	VPSRAD       $1, N, T0 ; \
	VPSUBD       T0, N, N ; \
	VPADDD       a2bias<>(SB), T0, T0 ; \
	VPADDD       a2bias<>(SB), N, N ; \
	VPSLLD       $23, T0, T0 ; \
	VPSLLD       $23, N, N ; \
	VMULPS       T0, E, E ; \
	VMULPS       N, E, E

// func geluAVX2(dst, x *float32, n uintptr) // n multiple of 8
// As geluAVX512: x / (1 + exp(-2u)), -2u = x(k1 + k2 x^2) clamped to [-100, 100].
TEXT ·geluAVX2(SB), NOSPLIT, $0-24
	MOVQ  dst+0(FP), DI
	MOVQ  x+8(FP), SI
	MOVQ  n+16(FP), CX
	SHRQ  $3, CX
	TESTQ CX, CX
	JZ    gelua2done

gelua2loop:
	VMOVUPS     (SI), Y0
	VMULPS      Y0, Y0, Y1              // x^2
	VMOVUPS     a2k1<>(SB), Y2
	VFMADD231PS a2k2<>(SB), Y1, Y2      // k1 + k2 x^2
	VMULPS      Y0, Y2, Y2              // v = -2u
	VMINPS      a2p100<>(SB), Y2, Y2
	VMAXPS      a2m100<>(SB), Y2, Y2
	EXP2N(Y2, Y3, Y7, Y4, Y6)
	VADDPS      a2one<>(SB), Y7, Y7     // 1 + exp(-2u)
	VDIVPS      Y7, Y0, Y0              // x / (1 + exp(-2u))
	VMOVUPS     Y0, (DI)
	ADDQ        $32, SI
	ADDQ        $32, DI
	DECQ        CX
	JNZ         gelua2loop

gelua2done:
	VZEROUPPER
	RET

// func swiGLUAVX2(dst, gate, up *float32, n uintptr) // n a multiple of 8, > 0
// As swiGLUAVX512: g / (1 + exp(-g)) * up, -g clamped to [-100, 100].
TEXT ·swiGLUAVX2(SB), NOSPLIT, $0-32
	MOVQ dst+0(FP), DI
	MOVQ gate+8(FP), SI
	MOVQ up+16(FP), DX
	MOVQ n+24(FP), CX
	SHRQ $3, CX

sga2loop:
	VMOVUPS (SI), Y0
	VXORPS  a2sign<>(SB), Y0, Y2    // v = -g
	VMINPS  a2p100<>(SB), Y2, Y2
	VMAXPS  a2m100<>(SB), Y2, Y2
	EXP2N(Y2, Y3, Y7, Y4, Y6)
	VADDPS  a2one<>(SB), Y7, Y7     // 1 + exp(-g)
	VDIVPS  Y7, Y0, Y0              // silu(g)
	VMULPS  (DX), Y0, Y0            // * up
	VMOVUPS Y0, (DI)
	ADDQ    $32, SI
	ADDQ    $32, DX
	ADDQ    $32, DI
	DECQ    CX
	JNZ     sga2loop
	VZEROUPPER
	RET

// func expSumAVX2(s *float32, n uintptr, scale, mx float32) float32
// s[j] = exp(scale*s[j] - mx) for j < n (a multiple of 16), the argument clamped to
// [-100, 100]; returns their sum in 16 lanes (two registers), then the fixed reduction.
TEXT ·expSumAVX2(SB), NOSPLIT, $0-28
	MOVQ         s+0(FP), SI
	MOVQ         n+8(FP), CX
	VBROADCASTSS scale+16(FP), Y14
	VBROADCASTSS mx+20(FP), Y15
	VXORPS       Y0, Y0, Y0
	VXORPS       Y1, Y1, Y1
	SHRQ         $4, CX
	TESTQ        CX, CX
	JZ           exa2done

exa2loop:
	VMOVUPS     (SI), Y2
	VMOVUPS     32(SI), Y8
	VFMSUB213PS Y15, Y14, Y2          // v = scale*s - mx
	VFMSUB213PS Y15, Y14, Y8
	VMAXPS      a2m100<>(SB), Y2, Y2
	VMAXPS      a2m100<>(SB), Y8, Y8
	VMINPS      a2p100<>(SB), Y2, Y2
	VMINPS      a2p100<>(SB), Y8, Y8
	EXP2N(Y2, Y3, Y7, Y4, Y6)
	EXP2N(Y8, Y9, Y13, Y10, Y12)
	VMOVUPS     Y7, (SI)
	VMOVUPS     Y13, 32(SI)
	VADDPS      Y7, Y0, Y0
	VADDPS      Y13, Y1, Y1
	ADDQ        $64, SI
	DECQ        CX
	JNZ         exa2loop

exa2done:
	REDUCE8x2(Y0, X0, Y1, X2)
	MOVSS X0, ret+24(FP)
	VZEROUPPER
	RET

// func scoresAVX2(out, q, k *float32, ks, n, d uintptr)
// out[j] = dot(q, k[j*ks bytes ...]) over d (a multiple of 16) elements, in Dot's order.
TEXT ·scoresAVX2(SB), NOSPLIT, $0-48
	MOVQ  out+0(FP), DI
	MOVQ  q+8(FP), SI
	MOVQ  k+16(FP), DX
	MOVQ  ks+24(FP), BX
	MOVQ  n+32(FP), CX
	MOVQ  d+40(FP), R8
	SHLQ  $2, R8
	TESTQ CX, CX
	JZ    sca2done

sca2row:
	VXORPS Y0, Y0, Y0
	VXORPS Y1, Y1, Y1
	XORQ   AX, AX

sca2inner:
	VMOVUPS     (SI)(AX*1), Y2
	VMOVUPS     32(SI)(AX*1), Y3
	VFMADD231PS (DX)(AX*1), Y2, Y0
	VFMADD231PS 32(DX)(AX*1), Y3, Y1
	ADDQ        $64, AX
	CMPQ        AX, R8
	JB          sca2inner
	REDUCE8x2(Y0, X0, Y1, X2)
	MOVSS       X0, (DI)
	ADDQ        $4, DI
	ADDQ        BX, DX
	DECQ        CX
	JNZ         sca2row

sca2done:
	VZEROUPPER
	RET

// func scores64AVX2(out, q, k *float32, ks, n uintptr)
// scoresAVX2 for d = 64 (GPT-2's head size), q held in Y8-Y15.
TEXT ·scores64AVX2(SB), NOSPLIT, $0-40
	MOVQ    out+0(FP), DI
	MOVQ    q+8(FP), SI
	MOVQ    k+16(FP), DX
	MOVQ    ks+24(FP), BX
	MOVQ    n+32(FP), CX
	VMOVUPS (SI), Y8
	VMOVUPS 32(SI), Y9
	VMOVUPS 64(SI), Y10
	VMOVUPS 96(SI), Y11
	VMOVUPS 128(SI), Y12
	VMOVUPS 160(SI), Y13
	VMOVUPS 192(SI), Y14
	VMOVUPS 224(SI), Y15
	TESTQ   CX, CX
	JZ      sc64done

sc64row:
	VXORPS      Y0, Y0, Y0
	VXORPS      Y1, Y1, Y1
	VFMADD231PS (DX), Y8, Y0
	VFMADD231PS 32(DX), Y9, Y1
	VFMADD231PS 64(DX), Y10, Y0
	VFMADD231PS 96(DX), Y11, Y1
	VFMADD231PS 128(DX), Y12, Y0
	VFMADD231PS 160(DX), Y13, Y1
	VFMADD231PS 192(DX), Y14, Y0
	VFMADD231PS 224(DX), Y15, Y1
	REDUCE8x2(Y0, X0, Y1, X2)
	MOVSS       X0, (DI)
	ADDQ        $4, DI
	ADDQ        BX, DX
	DECQ        CX
	JNZ         sc64row

sc64done:
	VZEROUPPER
	RET

// func weightedSum64AVX2(out, p, v *float32, vs, n uintptr)
// out[i] = sum over j < n, in order, of p[j]*v[j*vs bytes + i], for i < 64.
TEXT ·weightedSum64AVX2(SB), NOSPLIT, $0-40
	MOVQ  out+0(FP), DI
	MOVQ  p+8(FP), SI
	MOVQ  v+16(FP), DX
	MOVQ  vs+24(FP), BX
	MOVQ  n+32(FP), CX
	ZERO8
	TESTQ CX, CX
	JZ    wsa2done

wsa2loop:
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
	JNZ          wsa2loop

wsa2done:
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
