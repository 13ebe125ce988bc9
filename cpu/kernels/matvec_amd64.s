//go:build !purego

#include "textflag.h"
#include "macros_amd64.h"

// Fused dequantize-and-dot of one activation row x with four weight rows (stride ws bytes),
// for generation. Each weight value is formed exactly as the dequantizers form it and enters
// the 16-lane accumulator of its row with one fused multiply-add in element order, so the
// results are bit-identical to dequantizing into a tile and running Dot1x4. Block scales are
// read through quant's half-to-float table (tab) with one broadcast load.
//
// Prefetching: each kernel prefetches the block it reads at the same place of the next four
// rows into L1 (PREFETCHT0) and, for Q4_0 and the K-quants, of the rows 32 further into L2
// (PREFETCHT1). L1 prefetches hold one of the core's few fill buffers until their line arrives,
// which probably kept a thread near 9 GB/s; the far L2 prefetches raised streaming by 10-15%
// (cpu/PERF.md).

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
	LEAQ    (BX*4), R12      // prefetch: the next four rows to L1, rows +32 to L2 (R12*8)
	ZERO4
	TESTQ   CX, CX
	JZ      q4x4done

q4x4loop:
	PREFETCHT0 (DI)(R12*1)
	PREFETCHT1 (DI)(R12*8)
	PREFETCHT0 (R8)(R12*1)
	PREFETCHT1 (R8)(R12*8)
	PREFETCHT0 (R9)(R12*1)
	PREFETCHT1 (R9)(R12*8)
	PREFETCHT0 (R10)(R12*1)
	PREFETCHT1 (R10)(R12*8)
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
	LEAQ         (BX*4), R12      // prefetch: the next four rows to L1, rows +32 to L2 (R12*8)
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
	PREFETCHT1 (DI)(R12*8)
	PREFETCHT0 64(DI)(R12*1)
	PREFETCHT1 64(DI)(R12*8)
	PREFETCHT0 128(DI)(R12*1)
	PREFETCHT1 128(DI)(R12*8)
	PREFETCHT0 192(DI)(R12*1)
	PREFETCHT1 192(DI)(R12*8)
	PREFETCHT0 (R8)(R12*1)
	PREFETCHT1 (R8)(R12*8)
	PREFETCHT0 64(R8)(R12*1)
	PREFETCHT1 64(R8)(R12*8)
	PREFETCHT0 128(R8)(R12*1)
	PREFETCHT1 128(R8)(R12*8)
	PREFETCHT0 192(R8)(R12*1)
	PREFETCHT1 192(R8)(R12*8)
	PREFETCHT0 (R9)(R12*1)
	PREFETCHT1 (R9)(R12*8)
	PREFETCHT0 64(R9)(R12*1)
	PREFETCHT1 64(R9)(R12*8)
	PREFETCHT0 128(R9)(R12*1)
	PREFETCHT1 128(R9)(R12*8)
	PREFETCHT0 192(R9)(R12*1)
	PREFETCHT1 192(R9)(R12*8)
	PREFETCHT0 (R10)(R12*1)
	PREFETCHT1 (R10)(R12*8)
	PREFETCHT0 64(R10)(R12*1)
	PREFETCHT1 64(R10)(R12*8)
	PREFETCHT0 128(R10)(R12*1)
	PREFETCHT1 128(R10)(R12*8)
	PREFETCHT0 192(R10)(R12*1)
	PREFETCHT1 192(R10)(R12*8)
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

// Q6_K with AVX512_VBMI and GFNI (matvecQ6_Kx4VBMI): the same values and order, formed in
// fewer instructions. Per half and row, the 6-bit quants of 64 positions are assembled as bytes
// q in one register: A holds values l and 32+l (l < 32) of the half, the low nibbles of ql[0:64]
// (kept by a bit select) with qh[l]'s bits 0-1 (lower 32 bytes) or 2-3 (upper) moved to bits 4-5
// by a GF(2) affine map; B values 64+l and 96+l, the high nibbles (word shift) with bits 4-5 or
// 6-7. Then, 16 at a time, VPERMB merges each q into byte 2 of the float32 bits 0x4b000000, so
// the lane holds F = 2^23 + q*2^16 exactly, and one fused multiply-subtract makes the weight:
// F*s - s*K with s = d*scale*2^-16 and K = 2^23 + 2^21, an exact real s*2^16*(q-32) =
// d*scale*(q-32). That is the dequantizer's value: d*scale (an f16 significand of 11 bits times
// an 8-bit integer) times q-32 (6 bits) fits in float32's 24 bits, so the dequantizer's product
// is exact too, and so are s and s*K (powers of two; K has three significant bits). A zero weight
// may differ in sign, which no accumulator can see (a lane sum that starts at +0 is never -0).
// A block whose d is infinite or NaN would give NaN here where the dequantizer gives +-Inf: the
// kernel checks every d and returns false before using one, and the caller then runs
// matvecQ6_Kx4AVX512.

// Q6VW(Q, IDX, SC, X, acc): 16 values, the quant bytes of Q picked by IDX, scale s at SC(SP)
// and s*K at SC+64(SP), x in X. Z17 = 0x4b000000 in every lane; K2 selects byte 2 of each.
#define Q6VW(Q, IDX, SC, X, acc) \
	VMOVDQA64        Z17, Z28 ; \
	VPERMB           Q, IDX, K2, Z28 ; \
	VBROADCASTSS     SC+64(SP), Z29 ; \
	VFMSUB231PS.BCST SC(SP), Z28, Z29 ; \
	VFMADD231PS      X, Z29, acc

// Q6VHALF(p, QL, QH, SC, acc): one half (128 values) of a row's super-block into acc. Z12 =
// 0x0f in every byte, Z14/Z15 the affine maps for A/B, Z18/Z19/Z30/Z31 the VPERMB indexes of
// bytes 0-15, 16-31, 32-47, 48-63.
#define Q6VHALF(p, QL, QH, SC, acc) \
	VMOVDQU64       QL(p), Z4 ; \
	VBROADCASTI64X4 QH(p), Z5 ; \
	VGF2P8AFFINEQB  $0, Z14, Z5, Z6 ; \
	VPTERNLOGD      $0xd8, Z12, Z4, Z6 ; \
	VGF2P8AFFINEQB  $0, Z15, Z5, Z8 ; \
	VPSRLW          $4, Z4, Z9 ; \
	VPTERNLOGD      $0xd8, Z12, Z9, Z8 ; \
	Q6VW(Z6, Z18, SC, Z20, acc) ; \
	Q6VW(Z6, Z19, SC+4, Z21, acc) ; \
	Q6VW(Z6, Z30, SC+8, Z22, acc) ; \
	Q6VW(Z6, Z31, SC+12, Z23, acc) ; \
	Q6VW(Z8, Z18, SC+16, Z24, acc) ; \
	Q6VW(Z8, Z19, SC+20, Z25, acc) ; \
	Q6VW(Z8, Z30, SC+24, Z26, acc) ; \
	Q6VW(Z8, Z31, SC+28, Z27, acc)

// Q6VSCALES(p, SC): the row's 16 scales s = d*scales[i]*2^-16 at SC(SP) and s*K at
// SC+64(SP) (Z13 = 2^-16, Z16 = K); jumps to q6vdecline if d is not finite.
#define Q6VSCALES(p, SC) \
	MOVWLZX      208(p), R11 ; \
	MOVL         R11, AX ; \
	ANDL         $0x7c00, AX ; \
	CMPL         AX, $0x7c00 ; \
	JEQ          q6vdecline ; \
	VBROADCASTSS (DX)(R11*4), Z4 ; \
	VPMOVSXBD    192(p), Z5 ; \
	VCVTDQ2PS    Z5, Z5 ; \
	VMULPS       Z4, Z5, Z5 ; \
	VMULPS       Z13, Z5, Z5 ; \
	VMOVUPS      Z5, SC(SP) ; \
	VMULPS       Z16, Z5, Z5 ; \
	VMOVUPS      Z5, SC+64(SP)

// q6vAff: the GF(2) affine maps (one 8x8 bit matrix per qword) moving qh's bits 0-1 (lower 32
// bytes) or 2-3 (upper) to bits 4-5 (A), then bits 4-5 or 6-7 (B); other bits 0.
DATA q6vAff<>+0(SB)/8, $0x01020000
DATA q6vAff<>+8(SB)/8, $0x01020000
DATA q6vAff<>+16(SB)/8, $0x01020000
DATA q6vAff<>+24(SB)/8, $0x01020000
DATA q6vAff<>+32(SB)/8, $0x04080000
DATA q6vAff<>+40(SB)/8, $0x04080000
DATA q6vAff<>+48(SB)/8, $0x04080000
DATA q6vAff<>+56(SB)/8, $0x04080000
DATA q6vAff<>+64(SB)/8, $0x10200000
DATA q6vAff<>+72(SB)/8, $0x10200000
DATA q6vAff<>+80(SB)/8, $0x10200000
DATA q6vAff<>+88(SB)/8, $0x10200000
DATA q6vAff<>+96(SB)/8, $0x40800000
DATA q6vAff<>+104(SB)/8, $0x40800000
DATA q6vAff<>+112(SB)/8, $0x40800000
DATA q6vAff<>+120(SB)/8, $0x40800000
GLOBL q6vAff<>(SB), RODATA|NOPTR, $128

// q6vPerm: VPERMB indexes putting quant byte 16k+i in byte 2 of dword i (k = 0..3).
DATA q6vPerm<>+0(SB)/8, $0x0001000000000000
DATA q6vPerm<>+8(SB)/8, $0x0003000000020000
DATA q6vPerm<>+16(SB)/8, $0x0005000000040000
DATA q6vPerm<>+24(SB)/8, $0x0007000000060000
DATA q6vPerm<>+32(SB)/8, $0x0009000000080000
DATA q6vPerm<>+40(SB)/8, $0x000b0000000a0000
DATA q6vPerm<>+48(SB)/8, $0x000d0000000c0000
DATA q6vPerm<>+56(SB)/8, $0x000f0000000e0000
DATA q6vPerm<>+64(SB)/8, $0x0011000000100000
DATA q6vPerm<>+72(SB)/8, $0x0013000000120000
DATA q6vPerm<>+80(SB)/8, $0x0015000000140000
DATA q6vPerm<>+88(SB)/8, $0x0017000000160000
DATA q6vPerm<>+96(SB)/8, $0x0019000000180000
DATA q6vPerm<>+104(SB)/8, $0x001b0000001a0000
DATA q6vPerm<>+112(SB)/8, $0x001d0000001c0000
DATA q6vPerm<>+120(SB)/8, $0x001f0000001e0000
DATA q6vPerm<>+128(SB)/8, $0x0021000000200000
DATA q6vPerm<>+136(SB)/8, $0x0023000000220000
DATA q6vPerm<>+144(SB)/8, $0x0025000000240000
DATA q6vPerm<>+152(SB)/8, $0x0027000000260000
DATA q6vPerm<>+160(SB)/8, $0x0029000000280000
DATA q6vPerm<>+168(SB)/8, $0x002b0000002a0000
DATA q6vPerm<>+176(SB)/8, $0x002d0000002c0000
DATA q6vPerm<>+184(SB)/8, $0x002f0000002e0000
DATA q6vPerm<>+192(SB)/8, $0x0031000000300000
DATA q6vPerm<>+200(SB)/8, $0x0033000000320000
DATA q6vPerm<>+208(SB)/8, $0x0035000000340000
DATA q6vPerm<>+216(SB)/8, $0x0037000000360000
DATA q6vPerm<>+224(SB)/8, $0x0039000000380000
DATA q6vPerm<>+232(SB)/8, $0x003b0000003a0000
DATA q6vPerm<>+240(SB)/8, $0x003d0000003c0000
DATA q6vPerm<>+248(SB)/8, $0x003f0000003e0000
GLOBL q6vPerm<>(SB), RODATA|NOPTR, $256

// func matvecQ6_Kx4VBMI(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32) bool
TEXT ·matvecQ6_Kx4VBMI(SB), NOSPLIT, $512-49
	MOVQ         x+0(FP), SI
	MOVQ         w+8(FP), DI
	MOVQ         ws+16(FP), BX
	MOVQ         nb+24(FP), CX
	MOVQ         tab+40(FP), DX
	LEAQ         (DI)(BX*1), R8
	LEAQ         (R8)(BX*1), R9
	LEAQ         (R9)(BX*1), R10
	LEAQ         (BX*4), R12      // prefetch: the next four rows to L1, rows +32 to L2 (R12*8)
	MOVL         $0x0f, AX
	VPBROADCASTB AX, Z12
	MOVL         $0x37800000, AX  // 2^-16
	VPBROADCASTD AX, Z13
	MOVL         $0x4b200000, AX  // K = 2^23+2^21
	VPBROADCASTD AX, Z16
	MOVL         $0x4b000000, AX  // 2^23
	VPBROADCASTD AX, Z17
	VMOVDQU64    q6vAff<>+0(SB), Z14
	VMOVDQU64    q6vAff<>+64(SB), Z15
	VMOVDQU64    q6vPerm<>+0(SB), Z18
	VMOVDQU64    q6vPerm<>+64(SB), Z19
	VMOVDQU64    q6vPerm<>+128(SB), Z30
	VMOVDQU64    q6vPerm<>+192(SB), Z31
	MOVQ         $0x4444444444444444, AX
	KMOVQ        AX, K2
	ZERO4
	TESTQ        CX, CX
	JZ           q6vdone

q6vloop:
	PREFETCHT0 (DI)(R12*1)
	PREFETCHT1 (DI)(R12*8)
	PREFETCHT0 64(DI)(R12*1)
	PREFETCHT1 64(DI)(R12*8)
	PREFETCHT0 128(DI)(R12*1)
	PREFETCHT1 128(DI)(R12*8)
	PREFETCHT0 192(DI)(R12*1)
	PREFETCHT1 192(DI)(R12*8)
	PREFETCHT0 (R8)(R12*1)
	PREFETCHT1 (R8)(R12*8)
	PREFETCHT0 64(R8)(R12*1)
	PREFETCHT1 64(R8)(R12*8)
	PREFETCHT0 128(R8)(R12*1)
	PREFETCHT1 128(R8)(R12*8)
	PREFETCHT0 192(R8)(R12*1)
	PREFETCHT1 192(R8)(R12*8)
	PREFETCHT0 (R9)(R12*1)
	PREFETCHT1 (R9)(R12*8)
	PREFETCHT0 64(R9)(R12*1)
	PREFETCHT1 64(R9)(R12*8)
	PREFETCHT0 128(R9)(R12*1)
	PREFETCHT1 128(R9)(R12*8)
	PREFETCHT0 192(R9)(R12*1)
	PREFETCHT1 192(R9)(R12*8)
	PREFETCHT0 (R10)(R12*1)
	PREFETCHT1 (R10)(R12*8)
	PREFETCHT0 64(R10)(R12*1)
	PREFETCHT1 64(R10)(R12*8)
	PREFETCHT0 128(R10)(R12*1)
	PREFETCHT1 128(R10)(R12*8)
	PREFETCHT0 192(R10)(R12*1)
	PREFETCHT1 192(R10)(R12*8)
	Q6VSCALES(DI, 0)
	Q6VSCALES(R8, 128)
	Q6VSCALES(R9, 256)
	Q6VSCALES(R10, 384)
	LOADX(0)
	Q6VHALF(DI, 0, 128, 0, Z0)
	Q6VHALF(R8, 0, 128, 128, Z1)
	Q6VHALF(R9, 0, 128, 256, Z2)
	Q6VHALF(R10, 0, 128, 384, Z3)
	LOADX(512)
	Q6VHALF(DI, 64, 160, 32, Z0)
	Q6VHALF(R8, 64, 160, 160, Z1)
	Q6VHALF(R9, 64, 160, 288, Z2)
	Q6VHALF(R10, 64, 160, 416, Z3)
	ADDQ         $1024, SI
	ADDQ         $210, DI
	ADDQ         $210, R8
	ADDQ         $210, R9
	ADDQ         $210, R10
	DECQ         CX
	JNZ          q6vloop

q6vdone:
	STORE4(out+32(FP))
	VZEROUPPER
	MOVB         $1, ret+48(FP)
	RET

q6vdecline:
	VZEROUPPER
	MOVB         $0, ret+48(FP)
	RET

// Q4_K: per super-block (d dmin scales[12] qs[128], 256 values), each row's 8 sub-block
// scales d*sc and offsets dmin*m are made first (float32, in the frame: scales at SC, offsets
// at SC+32), unpacking the 6-bit fields as ggml's utmp trick does. Then for each chunk c of
// 64 values, the 16 values d*q - m of sub-blocks 2c (low nibbles) and 2c+1 (high nibbles)
// are made once (from the base 0..15 in Z13, one fused multiply-subtract each: d*q is exact,
// see Q5_K) and each nibble picks its value with VPERMPS.

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
	VBROADCASTSS SC+32(SP), Z10 ; \
	VFMSUB231PS.BCST SC(SP), Z13, Z10 ; \
	VBROADCASTSS SC+36(SP), Z11 ; \
	VFMSUB231PS.BCST SC+4(SP), Z13, Z11 ; \
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
	LEAQ    (BX*4), R14      // prefetch: the next four rows to L1, rows +32 to L2 (R14*8)
	MOVL    $0xff00, AX
	KMOVW   AX, K1
	ZERO4
	TESTQ   CX, CX
	JZ      k4x4done

k4x4loop:
	PREFETCH4x192
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
// 16); values are q*scale - offset, converted and scaled per vector with one fused
// multiply-subtract: scale*q is exact (an 11-bit f16 significand times a 6-bit scale times a
// 5-bit q fits in 24 bits), so rounding once equals the dequantizer's rounding of the
// difference. (The same holds for Q4_K's tables.)

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
	VBROADCASTSS SC(SP), Z10 ; \
	VBROADCASTSS SC+4(SP), Z11 ; \
	VFMSUB213PS.BCST SC+32(SP), Z10, Z6 ; \
	VFMSUB213PS.BCST SC+32(SP), Z10, Z7 ; \
	VFMSUB213PS.BCST SC+36(SP), Z11, Z8 ; \
	VFMSUB213PS.BCST SC+36(SP), Z11, Z9 ; \
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
	LEAQ         (BX*4), R14      // prefetch: the next four rows to L1, rows +32 to L2 (R14*8)
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
	PREFETCH4x192
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

// Q5_K with AVX512_VBMI and GFNI (matvecQ5_Kx4VBMI): each value picked from a 32-entry table of
// its sub-block, d*sc*q - dmin*m for q = 0..31 (two registers, made with one fused
// multiply-subtract each: exact as above), by VPERMI2PS with the 5-bit q as index. Per chunk c
// and row the 64 indexes are assembled as bytes in one register: qs[32c:32c+32] in both halves,
// the upper half shifted right by 4 (low nibbles below, high nibbles above; higher bits do not
// matter, VPERMI2PS reads bits 0-4), bit 4 from qh[l]'s bit 2c (lower half) or 2c+1 (upper)
// moved there by a GF(2) affine map; VPERMB spreads them to the dwords 16 at a time.

// K5VTAB(SC, T0, T1): the tables of the sub-block whose scale is at SC(SP) (offset SC+32).
// Z13 = 0..15, Z16 = 16..31.
#define K5VTAB(SC, T0, T1) \
	VBROADCASTSS     SC+32(SP), T0 ; \
	VFMSUB231PS.BCST SC(SP), Z13, T0 ; \
	VBROADCASTSS     SC+32(SP), T1 ; \
	VFMSUB231PS.BCST SC(SP), Z16, T1

// K5VPICK(Q, IDX, T0, T1, X, acc): 16 values, the index bytes of Q picked by IDX.
#define K5VPICK(Q, IDX, T0, T1, X, acc) \
	VPERMB      Q, IDX, Z28 ; \
	VPERMI2PS   T1, T0, Z28 ; \
	VFMADD231PS X, Z28, acc

// K5VCHUNK(p, c, SC, acc): chunk c of the row at p. Z12 = 0x0f in every byte, Z15 the word
// shifts (0 below, 4 above), Z18/Z19/Z30/Z31 the VPERMB indexes of bytes 0-15 .. 48-63.
#define K5VCHUNK(p, c, SC, acc) \
	VBROADCASTI64X4 48+32*c(p), Z4 ; \
	VBROADCASTI64X4 16(p), Z5 ; \
	VPSRLVW         Z15, Z4, Z4 ; \
	VGF2P8AFFINEQB  $0, k5vAff<>+64*c(SB), Z5, Z6 ; \
	VPTERNLOGD      $0xd8, Z12, Z4, Z6 ; \
	K5VTAB(SC, Z8, Z9) ; \
	K5VTAB(SC+4, Z10, Z11) ; \
	K5VPICK(Z6, Z18, Z8, Z9, Z20, acc) ; \
	K5VPICK(Z6, Z19, Z8, Z9, Z21, acc) ; \
	K5VPICK(Z6, Z30, Z10, Z11, Z22, acc) ; \
	K5VPICK(Z6, Z31, Z10, Z11, Z23, acc)

#define K5VALLROWS(c) \
	LOADX4(256*c) ; \
	K5VCHUNK(DI, c, 0+8*c, Z0) ; \
	K5VCHUNK(R8, c, 64+8*c, Z1) ; \
	K5VCHUNK(R9, c, 128+8*c, Z2) ; \
	K5VCHUNK(R10, c, 192+8*c, Z3)

// k5vAff: per chunk c, the affine maps moving qh's bit 2c (lower 32 bytes) or 2c+1 (upper) to bit 4.
DATA k5vAff<>+0(SB)/8, $0x01000000
DATA k5vAff<>+8(SB)/8, $0x01000000
DATA k5vAff<>+16(SB)/8, $0x01000000
DATA k5vAff<>+24(SB)/8, $0x01000000
DATA k5vAff<>+32(SB)/8, $0x02000000
DATA k5vAff<>+40(SB)/8, $0x02000000
DATA k5vAff<>+48(SB)/8, $0x02000000
DATA k5vAff<>+56(SB)/8, $0x02000000
DATA k5vAff<>+64(SB)/8, $0x04000000
DATA k5vAff<>+72(SB)/8, $0x04000000
DATA k5vAff<>+80(SB)/8, $0x04000000
DATA k5vAff<>+88(SB)/8, $0x04000000
DATA k5vAff<>+96(SB)/8, $0x08000000
DATA k5vAff<>+104(SB)/8, $0x08000000
DATA k5vAff<>+112(SB)/8, $0x08000000
DATA k5vAff<>+120(SB)/8, $0x08000000
DATA k5vAff<>+128(SB)/8, $0x10000000
DATA k5vAff<>+136(SB)/8, $0x10000000
DATA k5vAff<>+144(SB)/8, $0x10000000
DATA k5vAff<>+152(SB)/8, $0x10000000
DATA k5vAff<>+160(SB)/8, $0x20000000
DATA k5vAff<>+168(SB)/8, $0x20000000
DATA k5vAff<>+176(SB)/8, $0x20000000
DATA k5vAff<>+184(SB)/8, $0x20000000
DATA k5vAff<>+192(SB)/8, $0x40000000
DATA k5vAff<>+200(SB)/8, $0x40000000
DATA k5vAff<>+208(SB)/8, $0x40000000
DATA k5vAff<>+216(SB)/8, $0x40000000
DATA k5vAff<>+224(SB)/8, $0x80000000
DATA k5vAff<>+232(SB)/8, $0x80000000
DATA k5vAff<>+240(SB)/8, $0x80000000
DATA k5vAff<>+248(SB)/8, $0x80000000
GLOBL k5vAff<>(SB), RODATA|NOPTR, $256

// k5vPerm: VPERMB indexes putting byte 16k+i in byte 0 of dword i (k = 0..3).
DATA k5vPerm<>+0(SB)/8, $0x0000000100000000
DATA k5vPerm<>+8(SB)/8, $0x0000000300000002
DATA k5vPerm<>+16(SB)/8, $0x0000000500000004
DATA k5vPerm<>+24(SB)/8, $0x0000000700000006
DATA k5vPerm<>+32(SB)/8, $0x0000000900000008
DATA k5vPerm<>+40(SB)/8, $0x0000000b0000000a
DATA k5vPerm<>+48(SB)/8, $0x0000000d0000000c
DATA k5vPerm<>+56(SB)/8, $0x0000000f0000000e
DATA k5vPerm<>+64(SB)/8, $0x0000001100000010
DATA k5vPerm<>+72(SB)/8, $0x0000001300000012
DATA k5vPerm<>+80(SB)/8, $0x0000001500000014
DATA k5vPerm<>+88(SB)/8, $0x0000001700000016
DATA k5vPerm<>+96(SB)/8, $0x0000001900000018
DATA k5vPerm<>+104(SB)/8, $0x0000001b0000001a
DATA k5vPerm<>+112(SB)/8, $0x0000001d0000001c
DATA k5vPerm<>+120(SB)/8, $0x0000001f0000001e
DATA k5vPerm<>+128(SB)/8, $0x0000002100000020
DATA k5vPerm<>+136(SB)/8, $0x0000002300000022
DATA k5vPerm<>+144(SB)/8, $0x0000002500000024
DATA k5vPerm<>+152(SB)/8, $0x0000002700000026
DATA k5vPerm<>+160(SB)/8, $0x0000002900000028
DATA k5vPerm<>+168(SB)/8, $0x0000002b0000002a
DATA k5vPerm<>+176(SB)/8, $0x0000002d0000002c
DATA k5vPerm<>+184(SB)/8, $0x0000002f0000002e
DATA k5vPerm<>+192(SB)/8, $0x0000003100000030
DATA k5vPerm<>+200(SB)/8, $0x0000003300000032
DATA k5vPerm<>+208(SB)/8, $0x0000003500000034
DATA k5vPerm<>+216(SB)/8, $0x0000003700000036
DATA k5vPerm<>+224(SB)/8, $0x0000003900000038
DATA k5vPerm<>+232(SB)/8, $0x0000003b0000003a
DATA k5vPerm<>+240(SB)/8, $0x0000003d0000003c
DATA k5vPerm<>+248(SB)/8, $0x0000003f0000003e
GLOBL k5vPerm<>(SB), RODATA|NOPTR, $256

// k5vShift: per-word right shifts, 0 in the lower 32 bytes, 4 in the upper.
DATA k5vShift<>+0(SB)/8, $0x0000000000000000
DATA k5vShift<>+8(SB)/8, $0x0000000000000000
DATA k5vShift<>+16(SB)/8, $0x0000000000000000
DATA k5vShift<>+24(SB)/8, $0x0000000000000000
DATA k5vShift<>+32(SB)/8, $0x0004000400040004
DATA k5vShift<>+40(SB)/8, $0x0004000400040004
DATA k5vShift<>+48(SB)/8, $0x0004000400040004
DATA k5vShift<>+56(SB)/8, $0x0004000400040004
GLOBL k5vShift<>(SB), RODATA|NOPTR, $64

// k5vBase: 0 .. 31.
DATA k5vBase<>+0(SB)/8, $0x3f80000000000000
DATA k5vBase<>+8(SB)/8, $0x4040000040000000
DATA k5vBase<>+16(SB)/8, $0x40a0000040800000
DATA k5vBase<>+24(SB)/8, $0x40e0000040c00000
DATA k5vBase<>+32(SB)/8, $0x4110000041000000
DATA k5vBase<>+40(SB)/8, $0x4130000041200000
DATA k5vBase<>+48(SB)/8, $0x4150000041400000
DATA k5vBase<>+56(SB)/8, $0x4170000041600000
DATA k5vBase<>+64(SB)/8, $0x4188000041800000
DATA k5vBase<>+72(SB)/8, $0x4198000041900000
DATA k5vBase<>+80(SB)/8, $0x41a8000041a00000
DATA k5vBase<>+88(SB)/8, $0x41b8000041b00000
DATA k5vBase<>+96(SB)/8, $0x41c8000041c00000
DATA k5vBase<>+104(SB)/8, $0x41d8000041d00000
DATA k5vBase<>+112(SB)/8, $0x41e8000041e00000
DATA k5vBase<>+120(SB)/8, $0x41f8000041f00000
GLOBL k5vBase<>(SB), RODATA|NOPTR, $128

// func matvecQ5_Kx4VBMI(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32)
TEXT ·matvecQ5_Kx4VBMI(SB), NOSPLIT, $256-48
	MOVQ         x+0(FP), SI
	MOVQ         w+8(FP), DI
	MOVQ         ws+16(FP), BX
	MOVQ         nb+24(FP), CX
	MOVQ         tab+40(FP), DX
	LEAQ         (DI)(BX*1), R8
	LEAQ         (R8)(BX*1), R9
	LEAQ         (R9)(BX*1), R10
	LEAQ         (BX*4), R14      // prefetch: the next four rows to L1, rows +32 to L2 (R14*8)
	MOVL         $0xff00, AX
	KMOVW        AX, K1
	MOVL         $0x0f, AX
	VPBROADCASTB AX, Z12
	VMOVUPS      k5vBase<>+0(SB), Z13
	VMOVUPS      k5vBase<>+64(SB), Z16
	VMOVDQU64    k5vShift<>+0(SB), Z15
	VMOVDQU64    k5vPerm<>+0(SB), Z18
	VMOVDQU64    k5vPerm<>+64(SB), Z19
	VMOVDQU64    k5vPerm<>+128(SB), Z30
	VMOVDQU64    k5vPerm<>+192(SB), Z31
	ZERO4
	TESTQ        CX, CX
	JZ           k5vdone

k5vloop:
	PREFETCH4x192
	K4SCALES(DI, 0)
	K4SCALES(R8, 64)
	K4SCALES(R9, 128)
	K4SCALES(R10, 192)
	K5VALLROWS(0)
	K5VALLROWS(1)
	K5VALLROWS(2)
	K5VALLROWS(3)
	ADDQ         $1024, SI
	ADDQ         $176, DI
	ADDQ         $176, R8
	ADDQ         $176, R9
	ADDQ         $176, R10
	DECQ         CX
	JNZ          k5vloop

k5vdone:
	STORE4(out+32(FP))
	VZEROUPPER
	RET
