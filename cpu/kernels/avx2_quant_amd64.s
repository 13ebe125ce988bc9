//go:build !purego

#include "textflag.h"
#include "macros_amd64.h"

// The AVX2 tier's dequantizers and fused dequantize-and-dot 1x4 kernels (256-bit registers,
// no AVX-512). Values are formed exactly as package quant's generic code forms them: an
// integer converted exactly, times the block's float32 scale, minus its float32 offset where
// the format has one, with no fused multiply-add (bit-exact). Block scales are read through
// quant's half-to-float table (tab), as the AVX-512 tier does.
//
// The fused kernels keep each row's 16 lanes in two registers, lanes 0-7 (elements i with
// i mod 16 < 8) and 8-15, and feed every weight vector of 8 values into its half with one
// fused multiply-add, in element order; REDUCE8x2 then sums them with the package's tree.
// So they are bit-identical to dequantizing into a tile and running Dot1x4, on AVX2 as on
// AVX-512. Accumulators: Y0/Y1 (row 0), Y2/Y3, Y4/Y5, Y6/Y7 (row 3); the rows are at DI,
// R8, R9, R10, x at SI.

// BCASTD(v, X, Y): the 32-bit constant v in every lane of Y (uses AX).
#define BCASTD(v, X, Y) \
	MOVL         $v, AX ; \
	VMOVD        AX, X ; \
	VPBROADCASTD X, Y

// KSCALES(p, SC, XA, YA, XB, YB, YC): the Q4_K/Q5_K super-block at p's eight sub-block scales
// d*sc[s] (float32) at SC(SP) and offsets dmin*m[s] at SC+32(SP), the 6-bit fields unpacked
// as ggml's utmp trick does. Uses AX, BX, R11-R13 and three vector registers.
#define KSCALES(p, SC, XA, YA, XB, YB, YC) \
	MOVL         4(p), R11 ; \
	MOVL         8(p), R12 ; \
	MOVL         12(p), R13 ; \
	MOVL         R13, AX ; \
	SHRL         $4, AX ; \
	ANDL         $0x0f0f0f0f, AX ; \
	MOVL         R12, BX ; \
	SHRL         $6, BX ; \
	ANDL         $0x03030303, BX ; \
	SHLL         $4, BX ; \
	ORL          BX, AX ; \
	MOVL         R12, BX ; \
	ANDL         $0x3f3f3f3f, BX ; \
	ANDL         $0x0f0f0f0f, R13 ; \
	MOVL         R11, R12 ; \
	SHRL         $6, R12 ; \
	ANDL         $0x03030303, R12 ; \
	SHLL         $4, R12 ; \
	ORL          R12, R13 ; \
	ANDL         $0x3f3f3f3f, R11 ; \
	VMOVD        R11, XA ; \
	VPINSRD      $1, R13, XA, XA ; \
	VPINSRD      $2, BX, XA, XA ; \
	VPINSRD      $3, AX, XA, XA ; \
	VPMOVZXBD    XA, YB ; \
	VPSHUFD      $0xee, XA, XA ; \
	VPMOVZXBD    XA, YA ; \
	VCVTDQ2PS    YB, YB ; \
	VCVTDQ2PS    YA, YA ; \
	MOVWLZX      (p), R11 ; \
	VBROADCASTSS (DX)(R11*4), YC ; \
	VMULPS       YC, YB, YB ; \
	MOVWLZX      2(p), R11 ; \
	VBROADCASTSS (DX)(R11*4), YC ; \
	VMULPS       YC, YA, YA ; \
	VMOVUPS      YB, SC(SP) ; \
	VMOVUPS      YA, SC+32(SP)

// ---------------------------------------------------------------------------------------
// Dequantizers.

// func dequantQ8_0AVX2(dst *float32, src *byte, nb uintptr, tab *float32)
TEXT ·dequantQ8_0AVX2(SB), NOSPLIT, $0-32
	MOVQ  dst+0(FP), DI
	MOVQ  src+8(FP), SI
	MOVQ  nb+16(FP), CX
	MOVQ  tab+24(FP), DX
	TESTQ CX, CX
	JZ    dq8done

dq8loop:
	MOVWLZX      (SI), AX
	VBROADCASTSS (DX)(AX*4), Y8
	VPMOVSXBD    2(SI), Y0
	VPMOVSXBD    10(SI), Y1
	VPMOVSXBD    18(SI), Y2
	VPMOVSXBD    26(SI), Y3
	VCVTDQ2PS    Y0, Y0
	VCVTDQ2PS    Y1, Y1
	VCVTDQ2PS    Y2, Y2
	VCVTDQ2PS    Y3, Y3
	VMULPS       Y8, Y0, Y0
	VMULPS       Y8, Y1, Y1
	VMULPS       Y8, Y2, Y2
	VMULPS       Y8, Y3, Y3
	VMOVUPS      Y0, (DI)
	VMOVUPS      Y1, 32(DI)
	VMOVUPS      Y2, 64(DI)
	VMOVUPS      Y3, 96(DI)
	ADDQ         $34, SI
	ADDQ         $128, DI
	DECQ         CX
	JNZ          dq8loop

dq8done:
	VZEROUPPER
	RET

// func dequantQ4_0AVX2(dst *float32, src *byte, nb uintptr, tab *float32)
// Value j < 16 of a block: (b[2+j]&15 - 8)*d; value j+16: (b[2+j]>>4 - 8)*d.
TEXT ·dequantQ4_0AVX2(SB), NOSPLIT, $0-32
	MOVQ  dst+0(FP), DI
	MOVQ  src+8(FP), SI
	MOVQ  nb+16(FP), CX
	MOVQ  tab+24(FP), DX
	BCASTD(15, X15, Y15)
	BCASTD(8, X14, Y14)
	TESTQ CX, CX
	JZ    dq4done

dq4loop:
	MOVWLZX      (SI), AX
	VBROADCASTSS (DX)(AX*4), Y8
	VPMOVZXBD    2(SI), Y0
	VPMOVZXBD    10(SI), Y1
	VPSRLD       $4, Y0, Y2
	VPSRLD       $4, Y1, Y3
	VPAND        Y15, Y0, Y0
	VPAND        Y15, Y1, Y1
	VPSUBD       Y14, Y0, Y0
	VPSUBD       Y14, Y1, Y1
	VPSUBD       Y14, Y2, Y2
	VPSUBD       Y14, Y3, Y3
	VCVTDQ2PS    Y0, Y0
	VCVTDQ2PS    Y1, Y1
	VCVTDQ2PS    Y2, Y2
	VCVTDQ2PS    Y3, Y3
	VMULPS       Y8, Y0, Y0
	VMULPS       Y8, Y1, Y1
	VMULPS       Y8, Y2, Y2
	VMULPS       Y8, Y3, Y3
	VMOVUPS      Y0, (DI)
	VMOVUPS      Y1, 32(DI)
	VMOVUPS      Y2, 64(DI)
	VMOVUPS      Y3, 96(DI)
	ADDQ         $18, SI
	ADDQ         $128, DI
	DECQ         CX
	JNZ          dq4loop

dq4done:
	VZEROUPPER
	RET

// DQ4KCHUNK(Q, SC, OFF): chunk c of a Q4_K super-block at SI: 64 values from the 32 qs bytes
// at Q(SI), low nibbles (sub-block 2c, scale SC(SP), offset SC+32(SP)) to OFF(DI), high
// nibbles (sub-block 2c+1) to OFF+128(DI): float32(d1*q) - m1.
#define DQ4KCHUNK(Q, SC, OFF) \
	VBROADCASTSS SC(SP), Y10 ; \
	VBROADCASTSS SC+32(SP), Y11 ; \
	VBROADCASTSS SC+4(SP), Y12 ; \
	VBROADCASTSS SC+36(SP), Y13 ; \
	VPMOVZXBD    Q(SI), Y0 ; \
	VPMOVZXBD    Q+8(SI), Y1 ; \
	VPMOVZXBD    Q+16(SI), Y2 ; \
	VPMOVZXBD    Q+24(SI), Y3 ; \
	VPSRLD       $4, Y0, Y4 ; \
	VPSRLD       $4, Y1, Y5 ; \
	VPSRLD       $4, Y2, Y6 ; \
	VPSRLD       $4, Y3, Y7 ; \
	VPAND        Y15, Y0, Y0 ; \
	VPAND        Y15, Y1, Y1 ; \
	VPAND        Y15, Y2, Y2 ; \
	VPAND        Y15, Y3, Y3 ; \
	VCVTDQ2PS    Y0, Y0 ; \
	VCVTDQ2PS    Y1, Y1 ; \
	VCVTDQ2PS    Y2, Y2 ; \
	VCVTDQ2PS    Y3, Y3 ; \
	VCVTDQ2PS    Y4, Y4 ; \
	VCVTDQ2PS    Y5, Y5 ; \
	VCVTDQ2PS    Y6, Y6 ; \
	VCVTDQ2PS    Y7, Y7 ; \
	VMULPS       Y10, Y0, Y0 ; \
	VMULPS       Y10, Y1, Y1 ; \
	VMULPS       Y10, Y2, Y2 ; \
	VMULPS       Y10, Y3, Y3 ; \
	VMULPS       Y12, Y4, Y4 ; \
	VMULPS       Y12, Y5, Y5 ; \
	VMULPS       Y12, Y6, Y6 ; \
	VMULPS       Y12, Y7, Y7 ; \
	VSUBPS       Y11, Y0, Y0 ; \
	VSUBPS       Y11, Y1, Y1 ; \
	VSUBPS       Y11, Y2, Y2 ; \
	VSUBPS       Y11, Y3, Y3 ; \
	VSUBPS       Y13, Y4, Y4 ; \
	VSUBPS       Y13, Y5, Y5 ; \
	VSUBPS       Y13, Y6, Y6 ; \
	VSUBPS       Y13, Y7, Y7 ; \
	VMOVUPS      Y0, OFF(DI) ; \
	VMOVUPS      Y1, OFF+32(DI) ; \
	VMOVUPS      Y2, OFF+64(DI) ; \
	VMOVUPS      Y3, OFF+96(DI) ; \
	VMOVUPS      Y4, OFF+128(DI) ; \
	VMOVUPS      Y5, OFF+160(DI) ; \
	VMOVUPS      Y6, OFF+192(DI) ; \
	VMOVUPS      Y7, OFF+224(DI)

// func dequantQ4_KAVX2(dst *float32, src *byte, nb uintptr, tab *float32)
// nb super-blocks (d dmin scales[12] qs[128]) of 256 values.
TEXT ·dequantQ4_KAVX2(SB), NOSPLIT, $64-32
	MOVQ  dst+0(FP), DI
	MOVQ  src+8(FP), SI
	MOVQ  nb+16(FP), CX
	MOVQ  tab+24(FP), DX
	BCASTD(15, X15, Y15)
	TESTQ CX, CX
	JZ    dq4kdone

dq4kloop:
	KSCALES(SI, 0, X8, Y8, X9, Y9, Y10)
	DQ4KCHUNK(16, 0, 0)
	DQ4KCHUNK(48, 8, 256)
	DQ4KCHUNK(80, 16, 512)
	DQ4KCHUNK(112, 24, 768)
	ADDQ  $144, SI
	ADDQ  $1024, DI
	DECQ  CX
	JNZ   dq4kloop

dq4kdone:
	VZEROUPPER
	RET

// DQ5KHALF(Q, SC, OFF, NOP, NSRC): 32 values of a Q5_K super-block at SI: the nibbles of the
// qs bytes at Q(SI) (NOP NSRC: VPAND Y15 for the low ones, VPSRLD $4 for the high ones), each
// or'ed with the bit of qh[l] at position 4 of Y8-Y11 (then shifted right for the next
// sub-block), times the scale SC(SP) minus the offset SC+32(SP), to OFF(DI).
#define DQ5KHALF(Q, SC, OFF, NOP, NSRC) \
	VBROADCASTSS SC(SP), Y12 ; \
	VBROADCASTSS SC+32(SP), Y13 ; \
	VPMOVZXBD    Q(SI), Y0 ; \
	VPMOVZXBD    Q+8(SI), Y1 ; \
	VPMOVZXBD    Q+16(SI), Y2 ; \
	VPMOVZXBD    Q+24(SI), Y3 ; \
	NOP          NSRC, Y0, Y0 ; \
	NOP          NSRC, Y1, Y1 ; \
	NOP          NSRC, Y2, Y2 ; \
	NOP          NSRC, Y3, Y3 ; \
	VPAND        Y14, Y8, Y4 ; \
	VPAND        Y14, Y9, Y5 ; \
	VPAND        Y14, Y10, Y6 ; \
	VPAND        Y14, Y11, Y7 ; \
	VPOR         Y4, Y0, Y0 ; \
	VPOR         Y5, Y1, Y1 ; \
	VPOR         Y6, Y2, Y2 ; \
	VPOR         Y7, Y3, Y3 ; \
	VPSRLD       $1, Y8, Y8 ; \
	VPSRLD       $1, Y9, Y9 ; \
	VPSRLD       $1, Y10, Y10 ; \
	VPSRLD       $1, Y11, Y11 ; \
	VCVTDQ2PS    Y0, Y0 ; \
	VCVTDQ2PS    Y1, Y1 ; \
	VCVTDQ2PS    Y2, Y2 ; \
	VCVTDQ2PS    Y3, Y3 ; \
	VMULPS       Y12, Y0, Y0 ; \
	VMULPS       Y12, Y1, Y1 ; \
	VMULPS       Y12, Y2, Y2 ; \
	VMULPS       Y12, Y3, Y3 ; \
	VSUBPS       Y13, Y0, Y0 ; \
	VSUBPS       Y13, Y1, Y1 ; \
	VSUBPS       Y13, Y2, Y2 ; \
	VSUBPS       Y13, Y3, Y3 ; \
	VMOVUPS      Y0, OFF(DI) ; \
	VMOVUPS      Y1, OFF+32(DI) ; \
	VMOVUPS      Y2, OFF+64(DI) ; \
	VMOVUPS      Y3, OFF+96(DI)

// func dequantQ5_KAVX2(dst *float32, src *byte, nb uintptr, tab *float32)
// nb super-blocks (d dmin scales[12] qh[32] qs[128]) of 256 values; value l of chunk c has
// bit 2c of qh[l] as its fifth bit (low nibble), bit 2c+1 for value 32+l (high nibble).
TEXT ·dequantQ5_KAVX2(SB), NOSPLIT, $64-32
	MOVQ  dst+0(FP), DI
	MOVQ  src+8(FP), SI
	MOVQ  nb+16(FP), CX
	MOVQ  tab+24(FP), DX
	BCASTD(15, X15, Y15)
	BCASTD(16, X14, Y14)
	TESTQ CX, CX
	JZ    dq5kdone

dq5kloop:
	KSCALES(SI, 0, X8, Y8, X9, Y9, Y10)
	VPMOVZXBD 16(SI), Y8
	VPMOVZXBD 24(SI), Y9
	VPMOVZXBD 32(SI), Y10
	VPMOVZXBD 40(SI), Y11
	VPSLLD    $4, Y8, Y8
	VPSLLD    $4, Y9, Y9
	VPSLLD    $4, Y10, Y10
	VPSLLD    $4, Y11, Y11
	DQ5KHALF(48, 0, 0, VPAND, Y15)
	DQ5KHALF(48, 4, 128, VPSRLD, $4)
	DQ5KHALF(80, 8, 256, VPAND, Y15)
	DQ5KHALF(80, 12, 384, VPSRLD, $4)
	DQ5KHALF(112, 16, 512, VPAND, Y15)
	DQ5KHALF(112, 20, 640, VPSRLD, $4)
	DQ5KHALF(144, 24, 768, VPAND, Y15)
	DQ5KHALF(144, 28, 896, VPSRLD, $4)
	ADDQ      $176, SI
	ADDQ      $1024, DI
	DECQ      CX
	JNZ       dq5kloop

dq5kdone:
	VZEROUPPER
	RET

// DQ6KGROUP(QL, QH, SC, OFF): 8 positions l of a Q6_K half: q1 = ql[l]&15 | (qh[l]&3)<<4 to
// OFF(DI), q2 = ql[l+32]&15 | (qh[l]>>2&3)<<4 to OFF+128, q3 = ql[l]>>4 | (qh[l]>>4&3)<<4 to
// OFF+256, q4 = ql[l+32]>>4 | (qh[l]>>6)<<4 to OFF+384, each (q-32) times its scale (SC(SP),
// SC+8, SC+16, SC+24). Constants: Y15 = 15, Y14 = 48, Y13 = 32.
#define DQ6KGROUP(QL, QH, SC, OFF) \
	VPMOVZXBD    QL(SI), Y0 ; \
	VPMOVZXBD    QL+32(SI), Y1 ; \
	VPMOVZXBD    QH(SI), Y2 ; \
	VPSRLD       $4, Y0, Y4 ; \
	VPSRLD       $4, Y1, Y5 ; \
	VPAND        Y15, Y0, Y0 ; \
	VPAND        Y15, Y1, Y1 ; \
	VPSLLD       $4, Y2, Y6 ; \
	VPAND        Y14, Y6, Y6 ; \
	VPOR         Y6, Y0, Y0 ; \
	VPSLLD       $2, Y2, Y6 ; \
	VPAND        Y14, Y6, Y6 ; \
	VPOR         Y6, Y1, Y1 ; \
	VPAND        Y14, Y2, Y6 ; \
	VPOR         Y6, Y4, Y4 ; \
	VPSRLD       $2, Y2, Y6 ; \
	VPAND        Y14, Y6, Y6 ; \
	VPOR         Y6, Y5, Y5 ; \
	VPSUBD       Y13, Y0, Y0 ; \
	VPSUBD       Y13, Y1, Y1 ; \
	VPSUBD       Y13, Y4, Y4 ; \
	VPSUBD       Y13, Y5, Y5 ; \
	VCVTDQ2PS    Y0, Y0 ; \
	VCVTDQ2PS    Y1, Y1 ; \
	VCVTDQ2PS    Y4, Y4 ; \
	VCVTDQ2PS    Y5, Y5 ; \
	VBROADCASTSS SC(SP), Y8 ; \
	VBROADCASTSS SC+8(SP), Y9 ; \
	VBROADCASTSS SC+16(SP), Y10 ; \
	VBROADCASTSS SC+24(SP), Y11 ; \
	VMULPS       Y8, Y0, Y0 ; \
	VMULPS       Y9, Y1, Y1 ; \
	VMULPS       Y10, Y4, Y4 ; \
	VMULPS       Y11, Y5, Y5 ; \
	VMOVUPS      Y0, OFF(DI) ; \
	VMOVUPS      Y1, OFF+128(DI) ; \
	VMOVUPS      Y4, OFF+256(DI) ; \
	VMOVUPS      Y5, OFF+384(DI)

// Q6SCALES(p, SC): the Q6_K super-block at p's 16 scales d*scales[i] as float32 at SC(SP).
#define Q6SCALES(p, SC) \
	MOVWLZX      208(p), R11 ; \
	VBROADCASTSS (DX)(R11*4), Y10 ; \
	VPMOVSXBD    192(p), Y8 ; \
	VPMOVSXBD    200(p), Y9 ; \
	VCVTDQ2PS    Y8, Y8 ; \
	VCVTDQ2PS    Y9, Y9 ; \
	VMULPS       Y10, Y8, Y8 ; \
	VMULPS       Y10, Y9, Y9 ; \
	VMOVUPS      Y8, SC(SP) ; \
	VMOVUPS      Y9, SC+32(SP)

// func dequantQ6_KAVX2(dst *float32, src *byte, nb uintptr, tab *float32)
// nb super-blocks (ql[128] qh[64] scales[16] d) of 256 values.
TEXT ·dequantQ6_KAVX2(SB), NOSPLIT, $64-32
	MOVQ  dst+0(FP), DI
	MOVQ  src+8(FP), SI
	MOVQ  nb+16(FP), CX
	MOVQ  tab+24(FP), DX
	BCASTD(15, X15, Y15)
	BCASTD(48, X14, Y14)
	BCASTD(32, X13, Y13)
	TESTQ CX, CX
	JZ    dq6kdone

dq6kloop:
	Q6SCALES(SI, 0)
	DQ6KGROUP(0, 128, 0, 0)
	DQ6KGROUP(8, 136, 0, 32)
	DQ6KGROUP(16, 144, 4, 64)
	DQ6KGROUP(24, 152, 4, 96)
	DQ6KGROUP(64, 160, 32, 512)
	DQ6KGROUP(72, 168, 32, 544)
	DQ6KGROUP(80, 176, 36, 576)
	DQ6KGROUP(88, 184, 36, 608)
	ADDQ  $210, SI
	ADDQ  $1024, DI
	DECQ  CX
	JNZ   dq6kloop

dq6kdone:
	VZEROUPPER
	RET

// ---------------------------------------------------------------------------------------
// Fused dequantize-and-dot, one activation row x with four weight rows ws bytes apart.

// func matvecF16x4AVX2(x *float32, w *byte, ws, n uintptr, out *[4]float32) // n multiple of 16
TEXT ·matvecF16x4AVX2(SB), NOSPLIT, $0-40
	MOVQ  x+0(FP), SI
	MOVQ  w+8(FP), DI
	MOVQ  ws+16(FP), DX
	MOVQ  n+24(FP), CX
	ROWS4(DX)
	ZERO8
	SHRQ  $4, CX
	XORQ  AX, AX             // w byte offset; x offset is 2*AX
	TESTQ CX, CX
	JZ    f16x4a2done

f16x4a2loop:
	VMOVUPS     (SI)(AX*2), Y8
	VMOVUPS     32(SI)(AX*2), Y9
	VCVTPH2PS   (DI)(AX*1), Y10
	VCVTPH2PS   16(DI)(AX*1), Y11
	VCVTPH2PS   (R8)(AX*1), Y12
	VCVTPH2PS   16(R8)(AX*1), Y13
	VFMADD231PS Y8, Y10, Y0
	VFMADD231PS Y9, Y11, Y1
	VFMADD231PS Y8, Y12, Y2
	VFMADD231PS Y9, Y13, Y3
	VCVTPH2PS   (R9)(AX*1), Y10
	VCVTPH2PS   16(R9)(AX*1), Y11
	VCVTPH2PS   (R10)(AX*1), Y12
	VCVTPH2PS   16(R10)(AX*1), Y13
	VFMADD231PS Y8, Y10, Y4
	VFMADD231PS Y9, Y11, Y5
	VFMADD231PS Y8, Y12, Y6
	VFMADD231PS Y9, Y13, Y7
	ADDQ        $32, AX
	DECQ        CX
	JNZ         f16x4a2loop

f16x4a2done:
	STORE4x2(out+32(FP))
	VZEROUPPER
	RET

// LOADX32: the block's 32 x values in Y8-Y11.
#define LOADX32 \
	VMOVUPS (SI), Y8 ; \
	VMOVUPS 32(SI), Y9 ; \
	VMOVUPS 64(SI), Y10 ; \
	VMOVUPS 96(SI), Y11

// ROWQ8A2(p, ACCL, ACCH): one Q8_0 block of the row at p: d*q for q in 2(p)..33(p), times x.
#define ROWQ8A2(p, ACCL, ACCH) \
	MOVWLZX      (p), R11 ; \
	VBROADCASTSS (DX)(R11*4), Y12 ; \
	VPMOVSXBD    2(p), Y13 ; \
	VPMOVSXBD    10(p), Y14 ; \
	VCVTDQ2PS    Y13, Y13 ; \
	VCVTDQ2PS    Y14, Y14 ; \
	VMULPS       Y12, Y13, Y13 ; \
	VMULPS       Y12, Y14, Y14 ; \
	VFMADD231PS  Y8, Y13, ACCL ; \
	VFMADD231PS  Y9, Y14, ACCH ; \
	VPMOVSXBD    18(p), Y13 ; \
	VPMOVSXBD    26(p), Y14 ; \
	VCVTDQ2PS    Y13, Y13 ; \
	VCVTDQ2PS    Y14, Y14 ; \
	VMULPS       Y12, Y13, Y13 ; \
	VMULPS       Y12, Y14, Y14 ; \
	VFMADD231PS  Y10, Y13, ACCL ; \
	VFMADD231PS  Y11, Y14, ACCH

// func matvecQ8_0x4AVX2(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32)
TEXT ·matvecQ8_0x4AVX2(SB), NOSPLIT, $0-48
	MOVQ  x+0(FP), SI
	MOVQ  w+8(FP), DI
	MOVQ  ws+16(FP), BX
	MOVQ  nb+24(FP), CX
	MOVQ  tab+40(FP), DX
	ROWS4(BX)
	ZERO8
	TESTQ CX, CX
	JZ    q8x4a2done

q8x4a2loop:
	LOADX32
	ROWQ8A2(DI, Y0, Y1)
	ROWQ8A2(R8, Y2, Y3)
	ROWQ8A2(R9, Y4, Y5)
	ROWQ8A2(R10, Y6, Y7)
	ADDQ  $128, SI
	ADDQ  $34, DI
	ADDQ  $34, R8
	ADDQ  $34, R9
	ADDQ  $34, R10
	DECQ  CX
	JNZ   q8x4a2loop

q8x4a2done:
	STORE4x2(out+32(FP))
	VZEROUPPER
	RET

// ROWQ4A2(p, B, ACCL, ACCH): one Q4_0 block: (q-8)*d, low nibbles of bytes 2(p).. for values
// 0-15, high nibbles for 16-31. The 32 q-8 are made as bytes (Y15 = 0x0f, Y14 = 0x08 in every
// byte; the word shift's spill is masked off), stored at B(SP) and widened 8 at a time.
#define ROWQ4A2(p, B, ACCL, ACCH) \
	VMOVDQU      2(p), X12 ; \
	VPAND        X15, X12, X13 ; \
	VPSRLW       $4, X12, X12 ; \
	VPAND        X15, X12, X12 ; \
	VPSUBB       X14, X13, X13 ; \
	VPSUBB       X14, X12, X12 ; \
	VMOVDQU      X13, B(SP) ; \
	VMOVDQU      X12, B+16(SP) ; \
	MOVWLZX      (p), R11 ; \
	VBROADCASTSS (DX)(R11*4), Y12 ; \
	VPMOVSXBD    B(SP), Y13 ; \
	VCVTDQ2PS    Y13, Y13 ; \
	VMULPS       Y12, Y13, Y13 ; \
	VFMADD231PS  Y8, Y13, ACCL ; \
	VPMOVSXBD    B+8(SP), Y13 ; \
	VCVTDQ2PS    Y13, Y13 ; \
	VMULPS       Y12, Y13, Y13 ; \
	VFMADD231PS  Y9, Y13, ACCH ; \
	VPMOVSXBD    B+16(SP), Y13 ; \
	VCVTDQ2PS    Y13, Y13 ; \
	VMULPS       Y12, Y13, Y13 ; \
	VFMADD231PS  Y10, Y13, ACCL ; \
	VPMOVSXBD    B+24(SP), Y13 ; \
	VCVTDQ2PS    Y13, Y13 ; \
	VMULPS       Y12, Y13, Y13 ; \
	VFMADD231PS  Y11, Y13, ACCH

// func matvecQ4_0x4AVX2(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32)
TEXT ·matvecQ4_0x4AVX2(SB), NOSPLIT, $64-48
	MOVQ  x+0(FP), SI
	MOVQ  w+8(FP), DI
	MOVQ  ws+16(FP), BX
	MOVQ  nb+24(FP), CX
	MOVQ  tab+40(FP), DX
	ROWS4(BX)
	BCASTB(0x0f, X15, Y15)
	BCASTB(0x08, X14, Y14)
	ZERO8
	TESTQ CX, CX
	JZ    q4x4a2done

q4x4a2loop:
	LOADX32
	ROWQ4A2(DI, 0, Y0, Y1)
	ROWQ4A2(R8, 32, Y2, Y3)
	ROWQ4A2(R9, 0, Y4, Y5)
	ROWQ4A2(R10, 32, Y6, Y7)
	ADDQ  $128, SI
	ADDQ  $18, DI
	ADDQ  $18, R8
	ADDQ  $18, R9
	ADDQ  $18, R10
	DECQ  CX
	JNZ   q4x4a2loop

q4x4a2done:
	STORE4x2(out+32(FP))
	VZEROUPPER
	RET

// PREFETCH4x3 / PREFETCH4x4: prefetch the block at the same place of the next four rows
// (R14 = four row strides ahead), three or four cache lines each.
#define PREFETCH4x3 \
	PREFETCHT0 (DI)(R14*1) ; \
	PREFETCHT0 64(DI)(R14*1) ; \
	PREFETCHT0 128(DI)(R14*1) ; \
	PREFETCHT0 (R8)(R14*1) ; \
	PREFETCHT0 64(R8)(R14*1) ; \
	PREFETCHT0 128(R8)(R14*1) ; \
	PREFETCHT0 (R9)(R14*1) ; \
	PREFETCHT0 64(R9)(R14*1) ; \
	PREFETCHT0 128(R9)(R14*1) ; \
	PREFETCHT0 (R10)(R14*1) ; \
	PREFETCHT0 64(R10)(R14*1) ; \
	PREFETCHT0 128(R10)(R14*1)

#define PREFETCH4x4 \
	PREFETCH4x3 ; \
	PREFETCHT0 192(DI)(R14*1) ; \
	PREFETCHT0 192(R8)(R14*1) ; \
	PREFETCHT0 192(R9)(R14*1) ; \
	PREFETCHT0 192(R10)(R14*1)

// Q4_K and Q5_K: per super-block, each row's scales and offsets are made first (KSCALES, in
// the frame at 64r); then, chunk by chunk (64 values: sub-block 2c from the low nibbles of
// 32 qs bytes, 2c+1 from the high ones) and row by row, the quants are made 32 at a time with
// byte operations (word shifts, whose spill into the neighbouring byte the masks remove) and
// stored in the frame (at 256), then widened from there 8 at a time and entered in element
// order: float32(d*q) - m (Y12, Y13 the sub-block's scale and offset), times x (from memory).

// KV(B, XO, ACC): 8 quants (bytes at B(SP)) times Y12 minus Y13, times x at XO(SI). The
// scale times q is exact (an 11-bit f16 significand, a 6-bit scale and a q of at most 5 bits
// fit in float32's 24), so one fused multiply-subtract rounds as the dequantizer's product and
// difference do.
#define KV(B, XO, ACC) \
	VPMOVZXBD   B(SP), Y8 ; \
	VCVTDQ2PS   Y8, Y8 ; \
	VFMSUB213PS Y13, Y12, Y8 ; \
	VFMADD231PS XO(SI), Y8, ACC

// KSUB(B, SC, XO, ACCL, ACCH): one sub-block's 32 values (scale SC(SP), offset SC+32(SP)).
#define KSUB(B, SC, XO, ACCL, ACCH) \
	VBROADCASTSS SC(SP), Y12 ; \
	VBROADCASTSS SC+32(SP), Y13 ; \
	KV(B, XO, ACCL) ; \
	KV(B+8, XO+32, ACCH) ; \
	KV(B+16, XO+64, ACCL) ; \
	KV(B+24, XO+96, ACCH)

// K4BYTES(p, Q, B): the low nibbles of the 32 qs bytes at Q(p) to B(SP), the high ones to
// B+32(SP) (Y15 = 0x0f in every byte).
#define K4BYTES(p, Q, B) \
	VMOVDQU Q(p), Y8 ; \
	VPAND   Y15, Y8, Y9 ; \
	VPSRLW  $4, Y8, Y10 ; \
	VPAND   Y15, Y10, Y10 ; \
	VMOVDQU Y9, B(SP) ; \
	VMOVDQU Y10, B+32(SP)

#define K4ROWCHUNK(p, Q, SC, XO, B, ACCL, ACCH) \
	K4BYTES(p, Q, B) ; \
	KSUB(B, SC, XO, ACCL, ACCH) ; \
	KSUB(B+32, SC+4, XO+128, ACCL, ACCH)

// The quants of rows 0 and 2 go to the frame at 256, rows 1 and 3 at 320.
#define K4CHUNK4(c) \
	K4ROWCHUNK(DI, 16+32*c, 8*c, 256*c, 256, Y0, Y1) ; \
	K4ROWCHUNK(R8, 16+32*c, 64+8*c, 256*c, 320, Y2, Y3) ; \
	K4ROWCHUNK(R9, 16+32*c, 128+8*c, 256*c, 256, Y4, Y5) ; \
	K4ROWCHUNK(R10, 16+32*c, 192+8*c, 256*c, 320, Y6, Y7)

#define KSCALES4 \
	KSCALES(DI, 0, X8, Y8, X9, Y9, Y10) ; \
	KSCALES(R8, 64, X8, Y8, X9, Y9, Y10) ; \
	KSCALES(R9, 128, X8, Y8, X9, Y9, Y10) ; \
	KSCALES(R10, 192, X8, Y8, X9, Y9, Y10)

// func matvecQ4_Kx4AVX2(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32)
TEXT ·matvecQ4_Kx4AVX2(SB), NOSPLIT, $384-48
	MOVQ  x+0(FP), SI
	MOVQ  w+8(FP), DI
	MOVQ  ws+16(FP), BX
	MOVQ  nb+24(FP), CX
	MOVQ  tab+40(FP), DX
	ROWS4(BX)
	LEAQ  (BX*4), R14 // prefetch distance: the next four rows
	BCASTB(0x0f, X15, Y15)
	ZERO8
	TESTQ CX, CX
	JZ    k4x4a2done

k4x4a2loop:
	PREFETCH4x3
	KSCALES4
	K4CHUNK4(0)
	K4CHUNK4(1)
	K4CHUNK4(2)
	K4CHUNK4(3)
	ADDQ  $1024, SI
	ADDQ  $144, DI
	ADDQ  $144, R8
	ADDQ  $144, R9
	ADDQ  $144, R10
	DECQ  CX
	JNZ   k4x4a2loop

k4x4a2done:
	STORE4x2(out+32(FP))
	VZEROUPPER
	RET

// K5BYTES(p, Q, LOP, LSH, HOP, HSH, B): chunk c of the Q5_K row at p: the 32 low nibbles of
// the qs bytes at Q(p) with bit 2c of qh (moved to bit 4 by LOP LSH) to B(SP), the high
// nibbles with bit 2c+1 (HOP HSH) to B+32(SP). Y15 = 0x0f, Y14 = 0x10 in every byte.
#define K5BYTES(p, Q, LOP, LSH, HOP, HSH, B) \
	VMOVDQU Q(p), Y8 ; \
	VMOVDQU 16(p), Y9 ; \
	VPAND   Y15, Y8, Y10 ; \
	LOP     LSH, Y9, Y11 ; \
	VPAND   Y14, Y11, Y11 ; \
	VPOR    Y11, Y10, Y10 ; \
	VMOVDQU Y10, B(SP) ; \
	VPSRLW  $4, Y8, Y10 ; \
	VPAND   Y15, Y10, Y10 ; \
	HOP     HSH, Y9, Y11 ; \
	VPAND   Y14, Y11, Y11 ; \
	VPOR    Y11, Y10, Y10 ; \
	VMOVDQU Y10, B+32(SP)

#define K5ROWCHUNK(p, Q, SC, XO, LOP, LSH, HOP, HSH, B, ACCL, ACCH) \
	K5BYTES(p, Q, LOP, LSH, HOP, HSH, B) ; \
	KSUB(B, SC, XO, ACCL, ACCH) ; \
	KSUB(B+32, SC+4, XO+128, ACCL, ACCH)

// The quants of rows 0 and 2 go to the frame at 256, rows 1 and 3 at 320.
#define K5CHUNK4(c, LOP, LSH, HOP, HSH) \
	K5ROWCHUNK(DI, 48+32*c, 8*c, 256*c, LOP, LSH, HOP, HSH, 256, Y0, Y1) ; \
	K5ROWCHUNK(R8, 48+32*c, 64+8*c, 256*c, LOP, LSH, HOP, HSH, 320, Y2, Y3) ; \
	K5ROWCHUNK(R9, 48+32*c, 128+8*c, 256*c, LOP, LSH, HOP, HSH, 256, Y4, Y5) ; \
	K5ROWCHUNK(R10, 48+32*c, 192+8*c, 256*c, LOP, LSH, HOP, HSH, 320, Y6, Y7)

// func matvecQ5_Kx4AVX2(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32)
TEXT ·matvecQ5_Kx4AVX2(SB), NOSPLIT, $384-48
	MOVQ  x+0(FP), SI
	MOVQ  w+8(FP), DI
	MOVQ  ws+16(FP), BX
	MOVQ  nb+24(FP), CX
	MOVQ  tab+40(FP), DX
	ROWS4(BX)
	LEAQ  (BX*4), R14 // prefetch distance: the next four rows
	BCASTB(0x0f, X15, Y15)
	BCASTB(0x10, X14, Y14)
	ZERO8
	TESTQ CX, CX
	JZ    k5x4a2done

k5x4a2loop:
	PREFETCH4x3
	KSCALES4
	K5CHUNK4(0, VPSLLW, $4, VPSLLW, $3)
	K5CHUNK4(1, VPSLLW, $2, VPSLLW, $1)
	K5CHUNK4(2, VPSLLW, $0, VPSRLW, $1)
	K5CHUNK4(3, VPSRLW, $2, VPSRLW, $3)
	ADDQ  $1024, SI
	ADDQ  $176, DI
	ADDQ  $176, R8
	ADDQ  $176, R9
	ADDQ  $176, R10
	DECQ  CX
	JNZ   k5x4a2loop

k5x4a2done:
	STORE4x2(out+32(FP))
	VZEROUPPER
	RET

// Q6_K: per super-block each row's 16 scales are made first (Q6SCALES, in the frame at 64r).
// Then, per half h (128 values) and row, the four quant vectors of its 32 positions l, minus
// 32 (see DQ6KGROUP), are made as bytes (Q6BYTES) and enter the accumulators 8 values at a
// time in element order: value 128h + 32t + l is q_t[l] times scale 8h + l/16 + 2t.

// Q6BYTES(p, QL, QH, B): ql bytes QL(p).. (64), qh bytes QH(p).. (32): q1-32 .. q4-32 as
// signed bytes at B(SP), B+32, B+64, B+96. Y15 = 0x0f, Y14 = 0x30, Y13 = 0x20 in every byte.
#define Q6BYTES(p, QL, QH, B) \
	VMOVDQU QL(p), Y8 ; \
	VMOVDQU QL+32(p), Y9 ; \
	VMOVDQU QH(p), Y10 ; \
	VPAND   Y15, Y8, Y11 ; \
	VPSLLW  $4, Y10, Y12 ; \
	VPAND   Y14, Y12, Y12 ; \
	VPOR    Y12, Y11, Y11 ; \
	VPSUBB  Y13, Y11, Y11 ; \
	VMOVDQU Y11, B(SP) ; \
	VPAND   Y15, Y9, Y11 ; \
	VPSLLW  $2, Y10, Y12 ; \
	VPAND   Y14, Y12, Y12 ; \
	VPOR    Y12, Y11, Y11 ; \
	VPSUBB  Y13, Y11, Y11 ; \
	VMOVDQU Y11, B+32(SP) ; \
	VPSRLW  $4, Y8, Y11 ; \
	VPAND   Y15, Y11, Y11 ; \
	VPAND   Y14, Y10, Y12 ; \
	VPOR    Y12, Y11, Y11 ; \
	VPSUBB  Y13, Y11, Y11 ; \
	VMOVDQU Y11, B+64(SP) ; \
	VPSRLW  $4, Y9, Y11 ; \
	VPAND   Y15, Y11, Y11 ; \
	VPSRLW  $2, Y10, Y12 ; \
	VPAND   Y14, Y12, Y12 ; \
	VPOR    Y12, Y11, Y11 ; \
	VPSUBB  Y13, Y11, Y11 ; \
	VMOVDQU Y11, B+96(SP)

// Q6V2(B, SC, XO, ACCL, ACCH): 16 values: the signed quants at B(SP) times the scale at SC(SP),
// times x at XO(SI).
#define Q6V2(B, SC, XO, ACCL, ACCH) \
	VBROADCASTSS SC(SP), Y9 ; \
	VPMOVSXBD    B(SP), Y8 ; \
	VPMOVSXBD    B+8(SP), Y10 ; \
	VCVTDQ2PS    Y8, Y8 ; \
	VCVTDQ2PS    Y10, Y10 ; \
	VMULPS       Y9, Y8, Y8 ; \
	VMULPS       Y9, Y10, Y10 ; \
	VFMADD231PS  XO(SI), Y8, ACCL ; \
	VFMADD231PS  XO+32(SI), Y10, ACCH

// Q6T(B, SC, XO, ACCL, ACCH): output t's 32 values (B = quants, SC = 64r + 32h + 8t,
// XO = 512h + 128t).
#define Q6T(B, SC, XO, ACCL, ACCH) \
	Q6V2(B, SC, XO, ACCL, ACCH) ; \
	Q6V2(B+16, SC+4, XO+64, ACCL, ACCH)

#define Q6ROWHALF(p, QL, QH, SC, XO, B, ACCL, ACCH) \
	Q6BYTES(p, QL, QH, B) ; \
	Q6T(B, SC, XO, ACCL, ACCH) ; \
	Q6T(B+32, SC+8, XO+128, ACCL, ACCH) ; \
	Q6T(B+64, SC+16, XO+256, ACCL, ACCH) ; \
	Q6T(B+96, SC+24, XO+384, ACCL, ACCH)

// The quants of rows 0 and 2 go to the frame at 256, rows 1 and 3 at 384.
#define Q6HALF4(QL, QH, SC, XO) \
	Q6ROWHALF(DI, QL, QH, SC, XO, 256, Y0, Y1) ; \
	Q6ROWHALF(R8, QL, QH, 64+SC, XO, 384, Y2, Y3) ; \
	Q6ROWHALF(R9, QL, QH, 128+SC, XO, 256, Y4, Y5) ; \
	Q6ROWHALF(R10, QL, QH, 192+SC, XO, 384, Y6, Y7)

// func matvecQ6_Kx4AVX2(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32)
TEXT ·matvecQ6_Kx4AVX2(SB), NOSPLIT, $512-48
	MOVQ  x+0(FP), SI
	MOVQ  w+8(FP), DI
	MOVQ  ws+16(FP), BX
	MOVQ  nb+24(FP), CX
	MOVQ  tab+40(FP), DX
	ROWS4(BX)
	LEAQ  (BX*4), R14 // prefetch distance: the next four rows
	BCASTB(0x0f, X15, Y15)
	BCASTB(0x30, X14, Y14)
	BCASTB(0x20, X13, Y13)
	ZERO8
	TESTQ CX, CX
	JZ    q6x4a2done

q6x4a2loop:
	PREFETCH4x4
	Q6SCALES(DI, 0)
	Q6SCALES(R8, 64)
	Q6SCALES(R9, 128)
	Q6SCALES(R10, 192)
	Q6HALF4(0, 128, 0, 0)
	Q6HALF4(64, 160, 32, 512)
	ADDQ  $1024, SI
	ADDQ  $210, DI
	ADDQ  $210, R8
	ADDQ  $210, R9
	ADDQ  $210, R10
	DECQ  CX
	JNZ   q6x4a2loop

q6x4a2done:
	STORE4x2(out+32(FP))
	VZEROUPPER
	RET
