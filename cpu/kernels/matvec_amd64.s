//go:build !purego

#include "textflag.h"
#include "macros_amd64.h"

// Fused dequantize-and-dot of one activation row x with four weight rows (stride ws bytes),
// for generation. Each weight value is formed exactly as the dequantizers form it and enters
// the 16-lane accumulator of its row with one fused multiply-add in element order, so the
// results are bit-identical to dequantizing into a tile and running Dot1x4. Block scales are
// read through quant's half-to-float table (tab) with one broadcast load.

// func matvecF16x4AVX512(x *float32, w *byte, ws, n uintptr, out *[4]float32) // n multiple of 16
TEXT ·matvecF16x4AVX512(SB), NOSPLIT, $0-40
	MOVQ  x+0(FP), SI
	MOVQ  w+8(FP), DI
	MOVQ  ws+16(FP), DX
	MOVQ  n+24(FP), CX
	LEAQ  (DI)(DX*1), R8
	LEAQ  (R8)(DX*1), R9
	LEAQ  (R9)(DX*1), R10
	LEAQ  (R10)(DX*1), R11   // the next four rows, prefetched as these are read
	LEAQ  (R11)(DX*1), R12
	LEAQ  (R12)(DX*1), R13
	LEAQ  (R13)(DX*1), R14
	ZERO4
	SHRQ  $4, CX
	XORQ  AX, AX             // w byte offset; x offset is 2*AX
	TESTQ CX, CX
	JZ    f16x4done

f16x4loop:
	PREFETCHT0  (R11)(AX*1)
	PREFETCHT0  (R12)(AX*1)
	PREFETCHT0  (R13)(AX*1)
	PREFETCHT0  (R14)(AX*1)
	VMOVUPS     (SI)(AX*2), Z4
	VCVTPH2PS   (DI)(AX*1), Z5
	VCVTPH2PS   (R8)(AX*1), Z6
	VCVTPH2PS   (R9)(AX*1), Z7
	VCVTPH2PS   (R10)(AX*1), Z8
	VFMADD231PS Z4, Z5, Z0
	VFMADD231PS Z4, Z6, Z1
	VFMADD231PS Z4, Z7, Z2
	VFMADD231PS Z4, Z8, Z3
	ADDQ        $32, AX
	DECQ        CX
	JNZ         f16x4loop

f16x4done:
	STORE4(out+32(FP))
	VZEROUPPER
	RET

// ROWQ8(p, acc): one Q8_0 block of the row at p: d*q for q in 2(p)..33(p), times x (Z4, Z5).
#define ROWQ8(p, acc) \
	MOVWLZX      (p), R11 ; \
	VBROADCASTSS (DX)(R11*4), Z6 ; \
	VPMOVSXBD    2(p), Z7 ; \
	VPMOVSXBD    18(p), Z8 ; \
	VCVTDQ2PS    Z7, Z7 ; \
	VCVTDQ2PS    Z8, Z8 ; \
	VMULPS       Z6, Z7, Z7 ; \
	VMULPS       Z6, Z8, Z8 ; \
	VFMADD231PS  Z4, Z7, acc ; \
	VFMADD231PS  Z5, Z8, acc

// func matvecQ8_0x4AVX512(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32)
TEXT ·matvecQ8_0x4AVX512(SB), NOSPLIT, $0-48
	MOVQ  x+0(FP), SI
	MOVQ  w+8(FP), DI
	MOVQ  ws+16(FP), BX
	MOVQ  nb+24(FP), CX
	MOVQ  tab+40(FP), DX
	LEAQ  (DI)(BX*1), R8
	LEAQ  (R8)(BX*1), R9
	LEAQ  (R9)(BX*1), R10
	LEAQ  (BX*4), R12        // prefetch distance: the next four rows
	ZERO4
	TESTQ CX, CX
	JZ    q8x4done

q8x4loop:
	PREFETCHT0 (DI)(R12*1)
	PREFETCHT0 (R8)(R12*1)
	PREFETCHT0 (R9)(R12*1)
	PREFETCHT0 (R10)(R12*1)
	VMOVUPS (SI), Z4
	VMOVUPS 64(SI), Z5
	ROWQ8(DI, Z0)
	ROWQ8(R8, Z1)
	ROWQ8(R9, Z2)
	ROWQ8(R10, Z3)
	ADDQ    $128, SI
	ADDQ    $34, DI
	ADDQ    $34, R8
	ADDQ    $34, R9
	ADDQ    $34, R10
	DECQ    CX
	JNZ     q8x4loop

q8x4done:
	STORE4(out+32(FP))
	VZEROUPPER
	RET

// ROWQ4(p, acc): one Q4_0 block: the 16 values (q-8)*d, q = 0..15, are made once (Z6) and
// each nibble picks its value with VPERMPS (which reads the index's low 4 bits).
#define ROWQ4(p, acc) \
	MOVWLZX      (p), R11 ; \
	VBROADCASTSS (DX)(R11*4), Z6 ; \
	VMULPS       Z13, Z6, Z6 ; \
	VPMOVZXBD    2(p), Z7 ; \
	VPSRLD       $4, Z7, Z8 ; \
	VPERMPS      Z6, Z7, Z7 ; \
	VPERMPS      Z6, Z8, Z8 ; \
	VFMADD231PS  Z4, Z7, acc ; \
	VFMADD231PS  Z5, Z8, acc

// func matvecQ4_0x4AVX512(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32, base *[16]float32)
TEXT ·matvecQ4_0x4AVX512(SB), NOSPLIT, $0-56
	MOVQ    x+0(FP), SI
	MOVQ    w+8(FP), DI
	MOVQ    ws+16(FP), BX
	MOVQ    nb+24(FP), CX
	MOVQ    tab+40(FP), DX
	MOVQ    base+48(FP), AX
	VMOVUPS (AX), Z13        // -8 .. 7
	LEAQ    (DI)(BX*1), R8
	LEAQ    (R8)(BX*1), R9
	LEAQ    (R9)(BX*1), R10
	LEAQ    (BX*4), R12      // prefetch distance: the next four rows
	ZERO4
	TESTQ   CX, CX
	JZ      q4x4done

q4x4loop:
	PREFETCHT0 (DI)(R12*1)
	PREFETCHT0 (R8)(R12*1)
	PREFETCHT0 (R9)(R12*1)
	PREFETCHT0 (R10)(R12*1)
	VMOVUPS (SI), Z4
	VMOVUPS 64(SI), Z5
	ROWQ4(DI, Z0)
	ROWQ4(R8, Z1)
	ROWQ4(R9, Z2)
	ROWQ4(R10, Z3)
	ADDQ    $128, SI
	ADDQ    $18, DI
	ADDQ    $18, R8
	ADDQ    $18, R9
	ADDQ    $18, R10
	DECQ    CX
	JNZ     q4x4loop

q4x4done:
	STORE4(out+32(FP))
	VZEROUPPER
	RET

// Q6_K: per super-block (ql[128] qh[64] scales[16] d, 256 values), each row's 16 sub-block
// scales d*scales[i] are made first (float32, in the frame); then each half (128 values) is
// assembled 32 positions l at a time: q1 = ql[l]&15 | (qh[l]&3)<<4 (value l), q2 = ql[l+32]&15
// | (qh[l]>>2&3)<<4 (l+32), q3 = ql[l]>>4 | (qh[l]>>4&3)<<4 (l+64), q4 = ql[l+32]>>4 |
// (qh[l]>>6)<<4 (l+96), each (q-32) times its scale, and the eight vectors enter the
// accumulator in element order. x in Z20..Z27.

// Q6HALF(p, QL, QH, SC, acc): one half (128 values) of a row's super-block into acc. The
// 6-bit values of all 32 positions are assembled on bytes (256-bit ops, byte masks Y12 = 0x0f,
// Y13 = 0x30, Y14 = 32), then widened 16 at a time in element order: q1 (values 0-31), q2
// (32-63), q3 (64-95), q4 (96-127), each 16 with its sub-block scale.
#define Q6WIDEN(Q, XQ, SC, XLO, XHI, acc) \
	VPMOVSXBD    XQ, Z28 ; \
	VEXTRACTI128 $1, Q, X7 ; \
	VPMOVSXBD    X7, Z29 ; \
	VCVTDQ2PS    Z28, Z28 ; \
	VCVTDQ2PS    Z29, Z29 ; \
	VMULPS.BCST  SC(SP), Z28, Z28 ; \
	VMULPS.BCST  SC+4(SP), Z29, Z29 ; \
	VFMADD231PS  XLO, Z28, acc ; \
	VFMADD231PS  XHI, Z29, acc

#define Q6HALF(p, QL, QH, SC, acc) \
	VMOVDQU      QL(p), Y4 ; \
	VMOVDQU      QL+32(p), Y5 ; \
	VMOVDQU      QH(p), Y6 ; \
	VPSLLW       $4, Y6, Y7 ; \
	VPAND        Y13, Y7, Y7 ; \
	VPAND        Y12, Y4, Y8 ; \
	VPOR         Y7, Y8, Y8 ; \
	VPSLLW       $2, Y6, Y7 ; \
	VPAND        Y13, Y7, Y7 ; \
	VPAND        Y12, Y5, Y9 ; \
	VPOR         Y7, Y9, Y9 ; \
	VPSRLW       $4, Y4, Y4 ; \
	VPAND        Y12, Y4, Y4 ; \
	VPAND        Y13, Y6, Y7 ; \
	VPOR         Y7, Y4, Y10 ; \
	VPSRLW       $4, Y5, Y5 ; \
	VPAND        Y12, Y5, Y5 ; \
	VPSRLW       $2, Y6, Y7 ; \
	VPAND        Y13, Y7, Y7 ; \
	VPOR         Y7, Y5, Y11 ; \
	VPSUBB       Y14, Y8, Y8 ; \
	VPSUBB       Y14, Y9, Y9 ; \
	VPSUBB       Y14, Y10, Y10 ; \
	VPSUBB       Y14, Y11, Y11 ; \
	Q6WIDEN(Y8, X8, SC, Z20, Z21, acc) ; \
	Q6WIDEN(Y9, X9, SC+8, Z22, Z23, acc) ; \
	Q6WIDEN(Y10, X10, SC+16, Z24, Z25, acc) ; \
	Q6WIDEN(Y11, X11, SC+24, Z26, Z27, acc)

// Q6SCALES(p, SC): the row's 16 scales d*scales[i] as float32 at SC(SP).
#define Q6SCALES(p, SC) \
	MOVWLZX      208(p), R11 ; \
	VBROADCASTSS (DX)(R11*4), Z4 ; \
	VPMOVSXBD    192(p), Z5 ; \
	VCVTDQ2PS    Z5, Z5 ; \
	VMULPS       Z4, Z5, Z5 ; \
	VMOVUPS      Z5, SC(SP)

#define LOADX(off) \
	VMOVUPS off(SI), Z20 ; \
	VMOVUPS off+64(SI), Z21 ; \
	VMOVUPS off+128(SI), Z22 ; \
	VMOVUPS off+192(SI), Z23 ; \
	VMOVUPS off+256(SI), Z24 ; \
	VMOVUPS off+320(SI), Z25 ; \
	VMOVUPS off+384(SI), Z26 ; \
	VMOVUPS off+448(SI), Z27

// func matvecQ6_Kx4AVX512(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32)
TEXT ·matvecQ6_Kx4AVX512(SB), NOSPLIT, $256-48
	MOVQ         x+0(FP), SI
	MOVQ         w+8(FP), DI
	MOVQ         ws+16(FP), BX
	MOVQ         nb+24(FP), CX
	MOVQ         tab+40(FP), DX
	LEAQ         (DI)(BX*1), R8
	LEAQ         (R8)(BX*1), R9
	LEAQ         (R9)(BX*1), R10
	LEAQ         (BX*4), R12      // prefetch distance: the next four rows
	MOVL         $0x0f, AX
	VPBROADCASTB AX, Y12
	MOVL         $0x30, AX
	VPBROADCASTB AX, Y13
	MOVL         $32, AX
	VPBROADCASTB AX, Y14
	ZERO4
	TESTQ        CX, CX
	JZ           q6x4done

q6x4loop:
	PREFETCHT0 (DI)(R12*1)
	PREFETCHT0 64(DI)(R12*1)
	PREFETCHT0 128(DI)(R12*1)
	PREFETCHT0 192(DI)(R12*1)
	PREFETCHT0 (R8)(R12*1)
	PREFETCHT0 64(R8)(R12*1)
	PREFETCHT0 128(R8)(R12*1)
	PREFETCHT0 192(R8)(R12*1)
	PREFETCHT0 (R9)(R12*1)
	PREFETCHT0 64(R9)(R12*1)
	PREFETCHT0 128(R9)(R12*1)
	PREFETCHT0 192(R9)(R12*1)
	PREFETCHT0 (R10)(R12*1)
	PREFETCHT0 64(R10)(R12*1)
	PREFETCHT0 128(R10)(R12*1)
	PREFETCHT0 192(R10)(R12*1)
	Q6SCALES(DI, 0)
	Q6SCALES(R8, 64)
	Q6SCALES(R9, 128)
	Q6SCALES(R10, 192)
	LOADX(0)
	Q6HALF(DI, 0, 128, 0, Z0)
	Q6HALF(R8, 0, 128, 64, Z1)
	Q6HALF(R9, 0, 128, 128, Z2)
	Q6HALF(R10, 0, 128, 192, Z3)
	LOADX(512)
	Q6HALF(DI, 64, 160, 32, Z0)
	Q6HALF(R8, 64, 160, 96, Z1)
	Q6HALF(R9, 64, 160, 160, Z2)
	Q6HALF(R10, 64, 160, 224, Z3)
	ADDQ         $1024, SI
	ADDQ         $210, DI
	ADDQ         $210, R8
	ADDQ         $210, R9
	ADDQ         $210, R10
	DECQ         CX
	JNZ          q6x4loop

q6x4done:
	STORE4(out+32(FP))
	VZEROUPPER
	RET

// Q4_K: per super-block (d dmin scales[12] qs[128], 256 values), each row's 8 sub-block
// scales d*sc and offsets dmin*m are made first (float32, in the frame: scales at SC, offsets
// at SC+32), unpacking the 6-bit fields as ggml's utmp trick does. Then for each chunk c of
// 64 values, the 16 values d*q - m of sub-blocks 2c (low nibbles) and 2c+1 (high nibbles)
// are made once (from the base 0..15 in Z13) and each nibble picks its value with VPERMPS.

// K4SCALES(p, SC): uses AX, BX, R11-R13, Z5-Z7; K1 selects lanes 8-15.
#define K4SCALES(p, SC) \
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
	SHLQ         $32, R13 ; \
	ORQ          R13, R11 ; \
	SHLQ         $32, AX ; \
	ORQ          AX, BX ; \
	VMOVQ        R11, X5 ; \
	VPINSRQ      $1, BX, X5, X5 ; \
	VPMOVZXBD    X5, Z5 ; \
	VCVTDQ2PS    Z5, Z5 ; \
	MOVWLZX      (p), R11 ; \
	VBROADCASTSS (DX)(R11*4), Z6 ; \
	MOVWLZX      2(p), R11 ; \
	VBROADCASTSS (DX)(R11*4), K1, Z6 ; \
	VMULPS       Z6, Z5, Z5 ; \
	VMOVUPS      Z5, SC(SP)

// K4CHUNK(p, Q, SC, acc): 64 values from qs bytes at Q(p); SC points at this chunk's first
// scale (offsets 32 bytes further).
#define K4CHUNK(p, Q, SC, acc) \
	VPMOVZXBD    Q(p), Z6 ; \
	VPMOVZXBD    Q+16(p), Z7 ; \
	VPSRLD       $4, Z6, Z8 ; \
	VPSRLD       $4, Z7, Z9 ; \
	VMULPS.BCST  SC(SP), Z13, Z10 ; \
	VSUBPS.BCST  SC+32(SP), Z10, Z10 ; \
	VMULPS.BCST  SC+4(SP), Z13, Z11 ; \
	VSUBPS.BCST  SC+36(SP), Z11, Z11 ; \
	VPERMPS      Z10, Z6, Z6 ; \
	VPERMPS      Z10, Z7, Z7 ; \
	VPERMPS      Z11, Z8, Z8 ; \
	VPERMPS      Z11, Z9, Z9 ; \
	VFMADD231PS  Z20, Z6, acc ; \
	VFMADD231PS  Z21, Z7, acc ; \
	VFMADD231PS  Z22, Z8, acc ; \
	VFMADD231PS  Z23, Z9, acc

#define LOADX4(off) \
	VMOVUPS off(SI), Z20 ; \
	VMOVUPS off+64(SI), Z21 ; \
	VMOVUPS off+128(SI), Z22 ; \
	VMOVUPS off+192(SI), Z23

#define K4ALLROWS(c) \
	LOADX4(256*c) ; \
	K4CHUNK(DI, 16+32*c, 0+8*c, Z0) ; \
	K4CHUNK(R8, 16+32*c, 64+8*c, Z1) ; \
	K4CHUNK(R9, 16+32*c, 128+8*c, Z2) ; \
	K4CHUNK(R10, 16+32*c, 192+8*c, Z3)

// func matvecQ4_Kx4AVX512(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32, base *[16]float32)
TEXT ·matvecQ4_Kx4AVX512(SB), NOSPLIT, $256-56
	MOVQ    x+0(FP), SI
	MOVQ    w+8(FP), DI
	MOVQ    ws+16(FP), BX
	MOVQ    nb+24(FP), CX
	MOVQ    tab+40(FP), DX
	MOVQ    base+48(FP), AX
	VMOVUPS (AX), Z13         // 0 .. 15
	LEAQ    (DI)(BX*1), R8
	LEAQ    (R8)(BX*1), R9
	LEAQ    (R9)(BX*1), R10
	LEAQ    (BX*4), R14      // prefetch distance: the next four rows
	MOVL    $0xff00, AX
	KMOVW   AX, K1
	ZERO4
	TESTQ   CX, CX
	JZ      k4x4done

k4x4loop:
	PREFETCHT0 (DI)(R14*1)
	PREFETCHT0 64(DI)(R14*1)
	PREFETCHT0 128(DI)(R14*1)
	PREFETCHT0 (R8)(R14*1)
	PREFETCHT0 64(R8)(R14*1)
	PREFETCHT0 128(R8)(R14*1)
	PREFETCHT0 (R9)(R14*1)
	PREFETCHT0 64(R9)(R14*1)
	PREFETCHT0 128(R9)(R14*1)
	PREFETCHT0 (R10)(R14*1)
	PREFETCHT0 64(R10)(R14*1)
	PREFETCHT0 128(R10)(R14*1)
	K4SCALES(DI, 0)
	K4SCALES(R8, 64)
	K4SCALES(R9, 128)
	K4SCALES(R10, 192)
	K4ALLROWS(0)
	K4ALLROWS(1)
	K4ALLROWS(2)
	K4ALLROWS(3)
	ADDQ    $1024, SI
	ADDQ    $144, DI
	ADDQ    $144, R8
	ADDQ    $144, R9
	ADDQ    $144, R10
	DECQ    CX
	JNZ     k4x4loop

k4x4done:
	STORE4(out+32(FP))
	VZEROUPPER
	RET

// Q5_K: as Q4_K plus a fifth bit per value: bit 2c of qh[l] for the low nibble of chunk c,
// bit 2c+1 for the high one. Each row's qh[0:32] is widened once per super-block and shifted
// left by 4 (Zh0, Zh1), so the bit the next sub-block needs sits at position 4 (mask Z14 =
// 16); values are q*scale - offset, converted and scaled per vector.

// K5CHUNK(p, Q, SC, H0, H1, acc)
#define K5CHUNK(p, Q, SC, H0, H1, acc) \
	VPMOVZXBD    Q(p), Z6 ; \
	VPMOVZXBD    Q+16(p), Z7 ; \
	VPSRLD       $4, Z6, Z8 ; \
	VPSRLD       $4, Z7, Z9 ; \
	VPANDD       Z15, Z6, Z6 ; \
	VPANDD       Z15, Z7, Z7 ; \
	VPANDD       Z14, H0, Z10 ; \
	VPANDD       Z14, H1, Z11 ; \
	VPORD        Z10, Z6, Z6 ; \
	VPORD        Z11, Z7, Z7 ; \
	VPSRLD       $1, H0, H0 ; \
	VPSRLD       $1, H1, H1 ; \
	VPANDD       Z14, H0, Z10 ; \
	VPANDD       Z14, H1, Z11 ; \
	VPORD        Z10, Z8, Z8 ; \
	VPORD        Z11, Z9, Z9 ; \
	VPSRLD       $1, H0, H0 ; \
	VPSRLD       $1, H1, H1 ; \
	VCVTDQ2PS    Z6, Z6 ; \
	VCVTDQ2PS    Z7, Z7 ; \
	VCVTDQ2PS    Z8, Z8 ; \
	VCVTDQ2PS    Z9, Z9 ; \
	VMULPS.BCST  SC(SP), Z6, Z6 ; \
	VMULPS.BCST  SC(SP), Z7, Z7 ; \
	VMULPS.BCST  SC+4(SP), Z8, Z8 ; \
	VMULPS.BCST  SC+4(SP), Z9, Z9 ; \
	VSUBPS.BCST  SC+32(SP), Z6, Z6 ; \
	VSUBPS.BCST  SC+32(SP), Z7, Z7 ; \
	VSUBPS.BCST  SC+36(SP), Z8, Z8 ; \
	VSUBPS.BCST  SC+36(SP), Z9, Z9 ; \
	VFMADD231PS  Z20, Z6, acc ; \
	VFMADD231PS  Z21, Z7, acc ; \
	VFMADD231PS  Z22, Z8, acc ; \
	VFMADD231PS  Z23, Z9, acc

#define K5QH(p, H0, H1) \
	VPMOVZXBD 16(p), H0 ; \
	VPMOVZXBD 32(p), H1 ; \
	VPSLLD    $4, H0, H0 ; \
	VPSLLD    $4, H1, H1

#define K5ALLROWS(c) \
	LOADX4(256*c) ; \
	K5CHUNK(DI, 48+32*c, 0+8*c, Z24, Z25, Z0) ; \
	K5CHUNK(R8, 48+32*c, 64+8*c, Z26, Z27, Z1) ; \
	K5CHUNK(R9, 48+32*c, 128+8*c, Z28, Z29, Z2) ; \
	K5CHUNK(R10, 48+32*c, 192+8*c, Z30, Z31, Z3)

// func matvecQ5_Kx4AVX512(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32)
TEXT ·matvecQ5_Kx4AVX512(SB), NOSPLIT, $256-48
	MOVQ         x+0(FP), SI
	MOVQ         w+8(FP), DI
	MOVQ         ws+16(FP), BX
	MOVQ         nb+24(FP), CX
	MOVQ         tab+40(FP), DX
	LEAQ         (DI)(BX*1), R8
	LEAQ         (R8)(BX*1), R9
	LEAQ         (R9)(BX*1), R10
	LEAQ         (BX*4), R14      // prefetch distance: the next four rows
	MOVL         $0xff00, AX
	KMOVW        AX, K1
	MOVL         $15, AX
	VPBROADCASTD AX, Z15
	MOVL         $16, AX
	VPBROADCASTD AX, Z14
	ZERO4
	TESTQ        CX, CX
	JZ           k5x4done

k5x4loop:
	PREFETCHT0 (DI)(R14*1)
	PREFETCHT0 64(DI)(R14*1)
	PREFETCHT0 128(DI)(R14*1)
	PREFETCHT0 (R8)(R14*1)
	PREFETCHT0 64(R8)(R14*1)
	PREFETCHT0 128(R8)(R14*1)
	PREFETCHT0 (R9)(R14*1)
	PREFETCHT0 64(R9)(R14*1)
	PREFETCHT0 128(R9)(R14*1)
	PREFETCHT0 (R10)(R14*1)
	PREFETCHT0 64(R10)(R14*1)
	PREFETCHT0 128(R10)(R14*1)
	K4SCALES(DI, 0)
	K4SCALES(R8, 64)
	K4SCALES(R9, 128)
	K4SCALES(R10, 192)
	K5QH(DI, Z24, Z25)
	K5QH(R8, Z26, Z27)
	K5QH(R9, Z28, Z29)
	K5QH(R10, Z30, Z31)
	K5ALLROWS(0)
	K5ALLROWS(1)
	K5ALLROWS(2)
	K5ALLROWS(3)
	ADDQ         $1024, SI
	ADDQ         $176, DI
	ADDQ         $176, R8
	ADDQ         $176, R9
	ADDQ         $176, R10
	DECQ         CX
	JNZ          k5x4loop

k5x4done:
	STORE4(out+32(FP))
	VZEROUPPER
	RET
