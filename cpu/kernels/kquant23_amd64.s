//go:build !purego

#include "textflag.h"

// Q2_K and Q3_K super-blocks (256 values) into float32, bit-exact with quant's generic code.
// Go computes the 16 per-sub-block float32 scales (and Q2_K's offsets); these loops make the
// 2-bit (Q2_K) or 3-bit (Q3_K) quants of 32 positions l at a time: for chunk c (128 values)
// and shift j, values 128c+32j+l come from bits 2j..2j+1 of q[32c+l] (and, for Q3_K, bit
// 4c+j of hmask[l]); positions 0-15 use sub-block scale 8c+2j, 16-31 use 8c+2j+1.

// func dequantQ2_KAVX512(dst *float32, q *byte, dm *[32]float32)
// dm[s] = d*(scales[s]&15), dm[16+s] = dmin*(scales[s]>>4); value = float32(dm[s]*q) - dm[16+s].
TEXT ·dequantQ2_KAVX512(SB), NOSPLIT, $0-24
	MOVQ         dst+0(FP), DI
	MOVQ         q+8(FP), SI
	MOVQ         dm+16(FP), DX
	MOVL         $3, AX
	VPBROADCASTD AX, Z15
	MOVQ         $2, CX

q2kchunk:
	VPMOVZXBD (SI), Z0
	VPMOVZXBD 16(SI), Z1
	MOVQ      $4, BX

q2kshift:
	VPANDD      Z15, Z0, Z2
	VPANDD      Z15, Z1, Z3
	VCVTDQ2PS   Z2, Z2
	VCVTDQ2PS   Z3, Z3
	VMULPS.BCST (DX), Z2, Z2
	VMULPS.BCST 4(DX), Z3, Z3
	VSUBPS.BCST 64(DX), Z2, Z2
	VSUBPS.BCST 68(DX), Z3, Z3
	VMOVUPS     Z2, (DI)
	VMOVUPS     Z3, 64(DI)
	VPSRLD      $2, Z0, Z0
	VPSRLD      $2, Z1, Z1
	ADDQ        $128, DI
	ADDQ        $8, DX
	DECQ        BX
	JNZ         q2kshift
	ADDQ        $32, SI
	DECQ        CX
	JNZ         q2kchunk
	VZEROUPPER
	RET

// func dequantQ3_KAVX512(dst *float32, b *byte, sc *[16]float32, base *[16]float32)
// b: hmask[32] qs[64] ...; sc[s] = d*scale[s]; value = sc[s] * base[q | hbit<<2] (base holds
// -4..3 for indexes 0..7).
TEXT ·dequantQ3_KAVX512(SB), NOSPLIT, $0-32
	MOVQ         dst+0(FP), DI
	MOVQ         b+8(FP), SI
	MOVQ         sc+16(FP), DX
	MOVQ         base+24(FP), AX
	VMOVUPS      (AX), Z13
	MOVL         $3, AX
	VPBROADCASTD AX, Z15
	MOVL         $1, AX
	VPBROADCASTD AX, Z14
	VPMOVZXBD    (SI), Z4      // hmask[0:16]
	VPMOVZXBD    16(SI), Z5    // hmask[16:32]
	ADDQ         $32, SI       // qs
	MOVQ         $2, CX

q3kchunk:
	VPMOVZXBD (SI), Z0
	VPMOVZXBD 16(SI), Z1
	MOVQ      $4, BX

q3kshift:
	VPANDD      Z15, Z0, Z2
	VPANDD      Z15, Z1, Z3
	VPANDD      Z14, Z4, Z6
	VPANDD      Z14, Z5, Z7
	VPSLLD      $2, Z6, Z6
	VPSLLD      $2, Z7, Z7
	VPORD       Z6, Z2, Z2
	VPORD       Z7, Z3, Z3
	VPERMPS     Z13, Z2, Z2
	VPERMPS     Z13, Z3, Z3
	VMULPS.BCST (DX), Z2, Z2
	VMULPS.BCST 4(DX), Z3, Z3
	VMOVUPS     Z2, (DI)
	VMOVUPS     Z3, 64(DI)
	VPSRLD      $2, Z0, Z0
	VPSRLD      $2, Z1, Z1
	VPSRLD      $1, Z4, Z4
	VPSRLD      $1, Z5, Z5
	ADDQ        $128, DI
	ADDQ        $8, DX
	DECQ        BX
	JNZ         q3kshift
	ADDQ        $32, SI
	DECQ        CX
	JNZ         q3kchunk
	VZEROUPPER
	RET
