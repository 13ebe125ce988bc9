//go:build !purego

#include "textflag.h"

// Dequantization into float32, bit-exact with the generic code in package quant: each value
// is formed with the same single float32 operations (an integer converted exactly, times the
// block's float32 scale, minus its float32 offset where the format has one). No fused
// multiply-adds here: they would round differently.

// HALF2SS loads the half at addr and broadcasts it as float32 to all lanes of Z (via X).
#define HALF2SS(addr, X, Z) \
	VPBROADCASTW addr, X ; \
	VCVTPH2PS    X, X ; \
	VBROADCASTSS X, Z

// func f16ToF32AVX512(dst *float32, src *uint16, n uintptr) // n multiple of 16
TEXT ·f16ToF32AVX512(SB), NOSPLIT, $0-24
	MOVQ  dst+0(FP), DI
	MOVQ  src+8(FP), SI
	MOVQ  n+16(FP), CX
	SHRQ  $4, CX
	TESTQ CX, CX
	JZ    f16done

f16loop:
	VCVTPH2PS (SI), Z0
	VMOVUPS   Z0, (DI)
	ADDQ      $32, SI
	ADDQ      $64, DI
	DECQ      CX
	JNZ       f16loop

f16done:
	VZEROUPPER
	RET

// func f16ToF32AVX2(dst *float32, src *uint16, n uintptr) // n multiple of 8
TEXT ·f16ToF32AVX2(SB), NOSPLIT, $0-24
	MOVQ  dst+0(FP), DI
	MOVQ  src+8(FP), SI
	MOVQ  n+16(FP), CX
	SHRQ  $3, CX
	TESTQ CX, CX
	JZ    f16a2done

f16a2loop:
	VCVTPH2PS (SI), Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       f16a2loop

f16a2done:
	VZEROUPPER
	RET

// func dequantQ8_0AVX512(dst *float32, src *byte, nb uintptr) // nb blocks of 32
TEXT ·dequantQ8_0AVX512(SB), NOSPLIT, $0-24
	MOVQ  dst+0(FP), DI
	MOVQ  src+8(FP), SI
	MOVQ  nb+16(FP), CX
	TESTQ CX, CX
	JZ    q80done

q80loop:
	HALF2SS((SI), X1, Z1)
	VPMOVSXBD 2(SI), Z2
	VPMOVSXBD 18(SI), Z3
	VCVTDQ2PS Z2, Z2
	VCVTDQ2PS Z3, Z3
	VMULPS    Z1, Z2, Z2
	VMULPS    Z1, Z3, Z3
	VMOVUPS   Z2, (DI)
	VMOVUPS   Z3, 64(DI)
	ADDQ      $34, SI
	ADDQ      $128, DI
	DECQ      CX
	JNZ       q80loop

q80done:
	VZEROUPPER
	RET

// func dequantQ4_0AVX512(dst *float32, src *byte, nb uintptr) // nb blocks of 32
TEXT ·dequantQ4_0AVX512(SB), NOSPLIT, $0-24
	MOVQ         dst+0(FP), DI
	MOVQ         src+8(FP), SI
	MOVQ         nb+16(FP), CX
	MOVL         $15, AX
	VPBROADCASTD AX, Z15
	MOVL         $8, AX
	VPBROADCASTD AX, Z14
	TESTQ        CX, CX
	JZ           q40done

q40loop:
	HALF2SS((SI), X1, Z1)
	VPMOVZXBD 2(SI), Z2
	VPSRLD    $4, Z2, Z3
	VPANDD    Z15, Z2, Z2
	VPSUBD    Z14, Z2, Z2
	VPSUBD    Z14, Z3, Z3
	VCVTDQ2PS Z2, Z2
	VCVTDQ2PS Z3, Z3
	VMULPS    Z1, Z2, Z2
	VMULPS    Z1, Z3, Z3
	VMOVUPS   Z2, (DI)
	VMOVUPS   Z3, 64(DI)
	ADDQ      $18, SI
	ADDQ      $128, DI
	DECQ      CX
	JNZ       q40loop

q40done:
	VZEROUPPER
	RET

// func dequantQ4_KAVX512(dst *float32, qs *byte, dm *[16]float32)
// One Q4_K super-block's 256 values from its 128 quant bytes; dm holds, for each 32-value
// sub-block s, the scale d*sc[s] at 2s and the offset dmin*m[s] at 2s+1. Value l of chunk c
// (64 values): low nibble of qs[32c+l] for sub-block 2c, high nibble for 2c+1.
TEXT ·dequantQ4_KAVX512(SB), NOSPLIT, $0-24
	MOVQ         dst+0(FP), DI
	MOVQ         qs+8(FP), SI
	MOVQ         dm+16(FP), DX
	MOVL         $15, AX
	VPBROADCASTD AX, Z15
	MOVQ         $4, CX

q4kloop:
	VBROADCASTSS (DX), Z10
	VBROADCASTSS 4(DX), Z11
	VBROADCASTSS 8(DX), Z12
	VBROADCASTSS 12(DX), Z13
	VPMOVZXBD    (SI), Z0
	VPMOVZXBD    16(SI), Z1
	VPSRLD       $4, Z0, Z2
	VPSRLD       $4, Z1, Z3
	VPANDD       Z15, Z0, Z0
	VPANDD       Z15, Z1, Z1
	VCVTDQ2PS    Z0, Z0
	VCVTDQ2PS    Z1, Z1
	VCVTDQ2PS    Z2, Z2
	VCVTDQ2PS    Z3, Z3
	VMULPS       Z10, Z0, Z0
	VMULPS       Z10, Z1, Z1
	VMULPS       Z12, Z2, Z2
	VMULPS       Z12, Z3, Z3
	VSUBPS       Z11, Z0, Z0
	VSUBPS       Z11, Z1, Z1
	VSUBPS       Z13, Z2, Z2
	VSUBPS       Z13, Z3, Z3
	VMOVUPS      Z0, (DI)
	VMOVUPS      Z1, 64(DI)
	VMOVUPS      Z2, 128(DI)
	VMOVUPS      Z3, 192(DI)
	ADDQ         $32, SI
	ADDQ         $256, DI
	ADDQ         $16, DX
	DECQ         CX
	JNZ          q4kloop
	VZEROUPPER
	RET

// func dequantQ5_KAVX512(dst *float32, qs, qh *byte, dm *[16]float32)
// As Q4_K, plus a fifth bit: bit 2c of qh[l] for the low nibble of chunk c, bit 2c+1 for the
// high one.
TEXT ·dequantQ5_KAVX512(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	MOVQ         qs+8(FP), SI
	MOVQ         qh+16(FP), BX
	MOVQ         dm+24(FP), DX
	MOVL         $15, AX
	VPBROADCASTD AX, Z15
	MOVL         $16, AX
	VPBROADCASTD AX, Z14
	VPMOVZXBD    (BX), Z8      // qh[0:16]
	VPMOVZXBD    16(BX), Z9    // qh[16:32]
	VPSLLD       $4, Z8, Z8    // bit b of qh now at b+4: chunk c's bits are at 2c+4, 2c+5
	VPSLLD       $4, Z9, Z9
	MOVQ         $4, CX

q5kloop:
	VBROADCASTSS (DX), Z10
	VBROADCASTSS 4(DX), Z11
	VBROADCASTSS 8(DX), Z12
	VBROADCASTSS 12(DX), Z13
	VPMOVZXBD    (SI), Z0
	VPMOVZXBD    16(SI), Z1
	VPSRLD       $4, Z0, Z2
	VPSRLD       $4, Z1, Z3
	VPANDD       Z15, Z0, Z0
	VPANDD       Z15, Z1, Z1
	VPANDD       Z14, Z8, Z4   // bit 2c (now at 4) of qh[0:16], as 16
	VPANDD       Z14, Z9, Z5
	VPORD        Z4, Z0, Z0
	VPORD        Z5, Z1, Z1
	VPSRLD       $1, Z8, Z8    // next bit to position 4
	VPSRLD       $1, Z9, Z9
	VPANDD       Z14, Z8, Z4
	VPANDD       Z14, Z9, Z5
	VPORD        Z4, Z2, Z2
	VPORD        Z5, Z3, Z3
	VPSRLD       $1, Z8, Z8
	VPSRLD       $1, Z9, Z9
	VCVTDQ2PS    Z0, Z0
	VCVTDQ2PS    Z1, Z1
	VCVTDQ2PS    Z2, Z2
	VCVTDQ2PS    Z3, Z3
	VMULPS       Z10, Z0, Z0
	VMULPS       Z10, Z1, Z1
	VMULPS       Z12, Z2, Z2
	VMULPS       Z12, Z3, Z3
	VSUBPS       Z11, Z0, Z0
	VSUBPS       Z11, Z1, Z1
	VSUBPS       Z13, Z2, Z2
	VSUBPS       Z13, Z3, Z3
	VMOVUPS      Z0, (DI)
	VMOVUPS      Z1, 64(DI)
	VMOVUPS      Z2, 128(DI)
	VMOVUPS      Z3, 192(DI)
	ADDQ         $32, SI
	ADDQ         $256, DI
	ADDQ         $16, DX
	DECQ         CX
	JNZ          q5kloop
	VZEROUPPER
	RET

// func dequantQ6_KAVX512(dst *float32, b *byte, sc *[16]float32)
// One Q6_K super-block (ql[128] qh[64] scales[16] d): sc[i] = d*scales[i] as float32. In each
// half h (128 values), for l < 32: q1 = ql[l]&15 | (qh[l]&3)<<4 -> y[l], q2 = ql[l+32]&15 |
// (qh[l]>>2&3)<<4 -> y[l+32], q3 = ql[l]>>4 | (qh[l]>>4&3)<<4 -> y[l+64], q4 = ql[l+32]>>4 |
// (qh[l]>>6)<<4 -> y[l+96]; value = sc[8h + l/16 + 2t] * (q-32) for output t.
TEXT ·dequantQ6_KAVX512(SB), NOSPLIT, $0-24
	MOVQ         dst+0(FP), DI
	MOVQ         b+8(FP), SI
	MOVQ         sc+16(FP), DX
	MOVL         $15, AX
	VPBROADCASTD AX, Z15
	MOVL         $48, AX        // 3<<4
	VPBROADCASTD AX, Z14
	MOVL         $32, AX
	VPBROADCASTD AX, Z13
	LEAQ         128(SI), BX    // qh
	MOVQ         $4, CX         // 2 halves x 2 groups of 16 l

q6kloop:
	VPMOVZXBD    (SI), Z0       // ql[l]
	VPMOVZXBD    32(SI), Z1     // ql[l+32]
	VPMOVZXBD    (BX), Z2       // qh[l]
	VPSRLD       $4, Z0, Z4     // ql[l]>>4
	VPSRLD       $4, Z1, Z5
	VPANDD       Z15, Z0, Z0
	VPANDD       Z15, Z1, Z1
	VPSLLD       $4, Z2, Z6     // (qh&3)<<4
	VPANDD       Z14, Z6, Z6
	VPORD        Z6, Z0, Z0
	VPSLLD       $2, Z2, Z6     // (qh>>2&3)<<4
	VPANDD       Z14, Z6, Z6
	VPORD        Z6, Z1, Z1
	VPANDD       Z14, Z2, Z6    // (qh>>4&3)<<4
	VPORD        Z6, Z4, Z4
	VPSRLD       $2, Z2, Z6     // (qh>>6)<<4
	VPANDD       Z14, Z6, Z6
	VPORD        Z6, Z5, Z5
	VPSUBD       Z13, Z0, Z0
	VPSUBD       Z13, Z1, Z1
	VPSUBD       Z13, Z4, Z4
	VPSUBD       Z13, Z5, Z5
	VCVTDQ2PS    Z0, Z0
	VCVTDQ2PS    Z1, Z1
	VCVTDQ2PS    Z4, Z4
	VCVTDQ2PS    Z5, Z5
	VBROADCASTSS (DX), Z8
	VBROADCASTSS 8(DX), Z9
	VBROADCASTSS 16(DX), Z10
	VBROADCASTSS 24(DX), Z11
	VMULPS       Z8, Z0, Z0
	VMULPS       Z9, Z1, Z1
	VMULPS       Z10, Z4, Z4
	VMULPS       Z11, Z5, Z5
	VMOVUPS      Z0, (DI)
	VMOVUPS      Z1, 128(DI)
	VMOVUPS      Z4, 256(DI)
	VMOVUPS      Z5, 384(DI)
	// next group of 16 l: l/16 advances the scale index by one
	ADDQ         $16, SI
	ADDQ         $16, BX
	ADDQ         $64, DI
	ADDQ         $4, DX
	DECQ         CX
	TESTQ        $1, CX
	JNZ          q6knext
	// after two groups: next half (ql += 64, qh += 32, y += 128 values, scales += 8)
	ADDQ         $32, SI
	ADDQ         $384, DI
	ADDQ         $24, DX

q6knext:
	TESTQ CX, CX
	JNZ   q6kloop
	VZEROUPPER
	RET
