//go:build !purego

#include "textflag.h"
#include "macros_amd64.h"

// The AVX2 tier's kernels for BF16, Q4_1, Q5_0 and Q5_1: dequantizers (bit-exact with package
// quant) and fused dequantize-and-dot 1x4 kernels (bit-identical to the tile path), as in
// avx2_quant_amd64.s: each block's 32 quants are made as bytes (nibbles; Q5's fifth bits
// spread to one byte each by VPSHUFB and a compare), stored in the frame and widened 8 at a
// time; values are float32(q*d) + m (Q4_1, Q5_1) or (q-16)*d (Q5_0), no fused multiply-add.
// Fused kernels: accumulators Y0/Y1 (row 0) .. Y6/Y7 (row 3), rows at DI, R8, R9, R10, x at SI
// (memory operands), block scales through quant's half table at DX.

// Byte j of a2shuf selects byte j/8 of a broadcast dword (VPSHUFB works per 128-bit lane, and
// both lanes hold the dword); byte j of a2bits is 1<<(j%8).
DATA a2shuf<>+0(SB)/8, $0x0000000000000000
DATA a2shuf<>+8(SB)/8, $0x0101010101010101
DATA a2shuf<>+16(SB)/8, $0x0202020202020202
DATA a2shuf<>+24(SB)/8, $0x0303030303030303
GLOBL a2shuf<>(SB), RODATA|NOPTR, $32

DATA a2bits<>+0(SB)/8, $0x8040201008040201
DATA a2bits<>+8(SB)/8, $0x8040201008040201
DATA a2bits<>+16(SB)/8, $0x8040201008040201
DATA a2bits<>+24(SB)/8, $0x8040201008040201
GLOBL a2bits<>(SB), RODATA|NOPTR, $32

// ---------------------------------------------------------------------------------------
// BF16: a value is its 16 bits shifted to the top of a float32.

// func bf16ToF32AVX2(dst *float32, src *uint16, n uintptr) // n multiple of 8
TEXT ·bf16ToF32AVX2(SB), NOSPLIT, $0-24
	MOVQ  dst+0(FP), DI
	MOVQ  src+8(FP), SI
	MOVQ  n+16(FP), CX
	SHRQ  $3, CX
	TESTQ CX, CX
	JZ    bf16a2done

bf16a2loop:
	VPMOVZXWD (SI), Y0
	VPSLLD    $16, Y0, Y0
	VMOVUPS   Y0, (DI)
	ADDQ      $16, SI
	ADDQ      $32, DI
	DECQ      CX
	JNZ       bf16a2loop

bf16a2done:
	VZEROUPPER
	RET

// func matvecBF16x4AVX2(x *float32, w *byte, ws, n uintptr, out *[4]float32) // n multiple of 16
TEXT ·matvecBF16x4AVX2(SB), NOSPLIT, $0-40
	MOVQ  x+0(FP), SI
	MOVQ  w+8(FP), DI
	MOVQ  ws+16(FP), DX
	MOVQ  n+24(FP), CX
	ROWS4(DX)
	ZERO8
	SHRQ  $4, CX
	XORQ  AX, AX             // w byte offset; x offset is 2*AX
	TESTQ CX, CX
	JZ    bf16x4a2done

bf16x4a2loop:
	VMOVUPS     (SI)(AX*2), Y8
	VMOVUPS     32(SI)(AX*2), Y9
	VPMOVZXWD   (DI)(AX*1), Y10
	VPMOVZXWD   16(DI)(AX*1), Y11
	VPMOVZXWD   (R8)(AX*1), Y12
	VPMOVZXWD   16(R8)(AX*1), Y13
	VPSLLD      $16, Y10, Y10
	VPSLLD      $16, Y11, Y11
	VPSLLD      $16, Y12, Y12
	VPSLLD      $16, Y13, Y13
	VFMADD231PS Y8, Y10, Y0
	VFMADD231PS Y9, Y11, Y1
	VFMADD231PS Y8, Y12, Y2
	VFMADD231PS Y9, Y13, Y3
	VPMOVZXWD   (R9)(AX*1), Y10
	VPMOVZXWD   16(R9)(AX*1), Y11
	VPMOVZXWD   (R10)(AX*1), Y12
	VPMOVZXWD   16(R10)(AX*1), Y13
	VPSLLD      $16, Y10, Y10
	VPSLLD      $16, Y11, Y11
	VPSLLD      $16, Y12, Y12
	VPSLLD      $16, Y13, Y13
	VFMADD231PS Y8, Y10, Y4
	VFMADD231PS Y9, Y11, Y5
	VFMADD231PS Y8, Y12, Y6
	VFMADD231PS Y9, Y13, Y7
	ADDQ        $32, AX
	DECQ        CX
	JNZ         bf16x4a2loop

bf16x4a2done:
	STORE4x2(out+32(FP))
	VZEROUPPER
	RET

// ---------------------------------------------------------------------------------------
// Quants of one 32-value block as bytes at B(SP): value j < 16 from the low nibble of qs[j],
// value 16+j from its high nibble. Constants: Y15 = 0x0f, Y12 = 0x10 in every byte, Y14 =
// a2shuf, Y13 = a2bits. Temporaries Y8-Y10.

// NIBBLES(p, QS): the 32 nibbles of the 16 qs bytes at QS(p) in Y9.
#define NIBBLES(p, QS) \
	VMOVDQU     QS(p), X9 ; \
	VPSRLW      $4, X9, X10 ; \
	VPAND       X15, X9, X9 ; \
	VPAND       X15, X10, X10 ; \
	VINSERTI128 $1, X10, Y9, Y9

// FIFTH(p, QH): Y8 byte j = 16 if bit j of the 32-bit qh at QH(p) is set, else 0.
#define FIFTH(p, QH) \
	VPBROADCASTD QH(p), Y8 ; \
	VPSHUFB      Y14, Y8, Y8 ; \
	VPAND        Y13, Y8, Y8 ; \
	VPCMPEQB     Y13, Y8, Y8 ; \
	VPAND        Y12, Y8, Y8

// Q41BYTES, Q50BYTES, Q51BYTES(p, B): one block's quants (Q5_0's minus 16, signed) at B(SP).
#define Q41BYTES(p, B) \
	NIBBLES(p, 4) ; \
	VMOVDQU Y9, B(SP)

#define Q50BYTES(p, B) \
	NIBBLES(p, 6) ; \
	FIFTH(p, 2) ; \
	VPOR    Y8, Y9, Y9 ; \
	VPSUBB  Y12, Y9, Y9 ; \
	VMOVDQU Y9, B(SP)

#define Q51BYTES(p, B) \
	NIBBLES(p, 8) ; \
	FIFTH(p, 4) ; \
	VPOR    Y8, Y9, Y9 ; \
	VMOVDQU Y9, B(SP)

// SCALEDM(p): Y10 = d (half at 0(p)), Y11 = m (half at 2(p)).
#define SCALEDM(p) \
	MOVWLZX      (p), R11 ; \
	VBROADCASTSS (DX)(R11*4), Y10 ; \
	MOVWLZX      2(p), R11 ; \
	VBROADCASTSS (DX)(R11*4), Y11

// VDM(B, V): V = float32(q*d) + m for the 8 unsigned quants at B(SP).
#define VDM(B, V) \
	VPMOVZXBD B(SP), V ; \
	VCVTDQ2PS V, V ; \
	VMULPS    Y10, V, V ; \
	VADDPS    Y11, V, V

// VD(B, V): V = q*d for the 8 signed quants at B(SP).
#define VD(B, V) \
	VPMOVSXBD B(SP), V ; \
	VCVTDQ2PS V, V ; \
	VMULPS    Y10, V, V

// ROWDM(p, BYTES, B, ACCL, ACCH): one block of the row at p (Q4_1, Q5_1) into its accumulators.
#define ROWDM(p, BYTES, B, ACCL, ACCH) \
	BYTES(p, B) ; \
	SCALEDM(p) ; \
	VDM(B, Y8) ; \
	VFMADD231PS (SI), Y8, ACCL ; \
	VDM(B+8, Y8) ; \
	VFMADD231PS 32(SI), Y8, ACCH ; \
	VDM(B+16, Y8) ; \
	VFMADD231PS 64(SI), Y8, ACCL ; \
	VDM(B+24, Y8) ; \
	VFMADD231PS 96(SI), Y8, ACCH

// ROWD(p, BYTES, B, ACCL, ACCH): the same for Q5_0.
#define ROWD(p, BYTES, B, ACCL, ACCH) \
	BYTES(p, B) ; \
	MOVWLZX      (p), R11 ; \
	VBROADCASTSS (DX)(R11*4), Y10 ; \
	VD(B, Y8) ; \
	VFMADD231PS (SI), Y8, ACCL ; \
	VD(B+8, Y8) ; \
	VFMADD231PS 32(SI), Y8, ACCH ; \
	VD(B+16, Y8) ; \
	VFMADD231PS 64(SI), Y8, ACCL ; \
	VD(B+24, Y8) ; \
	VFMADD231PS 96(SI), Y8, ACCH

// SETUP32: after the arguments are loaded (go vet checks them only outside macros).
#define SETUP32 \
	ROWS4(BX) ; \
	BCASTB(0x0f, X15, Y15) ; \
	BCASTB(0x10, X12, Y12) ; \
	VMOVDQU a2shuf<>(SB), Y14 ; \
	VMOVDQU a2bits<>(SB), Y13 ; \
	ZERO8

// MATVEC32(ROW, BYTES, size, loop, done, out): the loop over nb blocks of size bytes; the quants of rows
// 0 and 2 go to the frame at 0, rows 1 and 3 at 32.
#define MATVEC32(ROW, BYTES, size, loop, done, out) \
	TESTQ CX, CX ; \
	JZ    done ; \
loop: ; \
	ROW(DI, BYTES, 0, Y0, Y1) ; \
	ROW(R8, BYTES, 32, Y2, Y3) ; \
	ROW(R9, BYTES, 0, Y4, Y5) ; \
	ROW(R10, BYTES, 32, Y6, Y7) ; \
	ADDQ  $128, SI ; \
	ADDQ  $size, DI ; \
	ADDQ  $size, R8 ; \
	ADDQ  $size, R9 ; \
	ADDQ  $size, R10 ; \
	DECQ  CX ; \
	JNZ   loop ; \
done: ; \
	STORE4x2(out) ; \
	VZEROUPPER ; \
	RET

// func matvecQ4_1x4AVX2(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32)
TEXT ·matvecQ4_1x4AVX2(SB), NOSPLIT, $64-48
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), DI
	MOVQ ws+16(FP), BX
	MOVQ nb+24(FP), CX
	MOVQ tab+40(FP), DX
	SETUP32
	MATVEC32(ROWDM, Q41BYTES, 20, q41x4a2loop, q41x4a2done, out+32(FP))

// func matvecQ5_0x4AVX2(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32)
TEXT ·matvecQ5_0x4AVX2(SB), NOSPLIT, $64-48
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), DI
	MOVQ ws+16(FP), BX
	MOVQ nb+24(FP), CX
	MOVQ tab+40(FP), DX
	SETUP32
	MATVEC32(ROWD, Q50BYTES, 22, q50x4a2loop, q50x4a2done, out+32(FP))

// func matvecQ5_1x4AVX2(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32)
TEXT ·matvecQ5_1x4AVX2(SB), NOSPLIT, $64-48
	MOVQ x+0(FP), SI
	MOVQ w+8(FP), DI
	MOVQ ws+16(FP), BX
	MOVQ nb+24(FP), CX
	MOVQ tab+40(FP), DX
	SETUP32
	MATVEC32(ROWDM, Q51BYTES, 24, q51x4a2loop, q51x4a2done, out+32(FP))

// Dequantizers: nb blocks from SI to DI.

#define DQSETUP \
	BCASTB(0x0f, X15, Y15) ; \
	BCASTB(0x10, X12, Y12) ; \
	VMOVDQU a2shuf<>(SB), Y14 ; \
	VMOVDQU a2bits<>(SB), Y13

#define DQDM(BYTES) \
	BYTES(SI, 0) ; \
	SCALEDM(SI) ; \
	VDM(0, Y0) ; \
	VDM(8, Y1) ; \
	VDM(16, Y2) ; \
	VDM(24, Y3)

#define DQD(BYTES) \
	BYTES(SI, 0) ; \
	MOVWLZX      (SI), R11 ; \
	VBROADCASTSS (DX)(R11*4), Y10 ; \
	VD(0, Y0) ; \
	VD(8, Y1) ; \
	VD(16, Y2) ; \
	VD(24, Y3)

#define DEQUANT32(BLOCK, BYTES, size, loop, done) \
	TESTQ CX, CX ; \
	JZ    done ; \
loop: ; \
	BLOCK(BYTES) ; \
	VMOVUPS Y0, (DI) ; \
	VMOVUPS Y1, 32(DI) ; \
	VMOVUPS Y2, 64(DI) ; \
	VMOVUPS Y3, 96(DI) ; \
	ADDQ    $size, SI ; \
	ADDQ    $128, DI ; \
	DECQ    CX ; \
	JNZ     loop ; \
done: ; \
	VZEROUPPER ; \
	RET

// func dequantQ4_1AVX2(dst *float32, src *byte, nb uintptr, tab *float32)
TEXT ·dequantQ4_1AVX2(SB), NOSPLIT, $32-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ nb+16(FP), CX
	MOVQ tab+24(FP), DX
	DQSETUP
	DEQUANT32(DQDM, Q41BYTES, 20, dq41a2loop, dq41a2done)

// func dequantQ5_0AVX2(dst *float32, src *byte, nb uintptr, tab *float32)
TEXT ·dequantQ5_0AVX2(SB), NOSPLIT, $32-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ nb+16(FP), CX
	MOVQ tab+24(FP), DX
	DQSETUP
	DEQUANT32(DQD, Q50BYTES, 22, dq50a2loop, dq50a2done)

// func dequantQ5_1AVX2(dst *float32, src *byte, nb uintptr, tab *float32)
TEXT ·dequantQ5_1AVX2(SB), NOSPLIT, $32-32
	MOVQ dst+0(FP), DI
	MOVQ src+8(FP), SI
	MOVQ nb+16(FP), CX
	MOVQ tab+24(FP), DX
	DQSETUP
	DEQUANT32(DQDM, Q51BYTES, 24, dq51a2loop, dq51a2done)
