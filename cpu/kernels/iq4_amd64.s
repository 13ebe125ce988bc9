//go:build !purego

#include "textflag.h"
#include "macros_amd64.h"

// IQ4_NL and IQ4_XS (iq4_amd64.go). Both formats are 32-value blocks of 16 index bytes (value j
// in the low nibble of byte j, value j+16 in the high nibble) with one float32 scale per
// block, made by the Go wrapper exactly as quant's dequantizer makes it (IQ4_NL: the half d;
// IQ4_XS: d*(ls-32)) and stored in sc. The blocks come in groups of nsub (IQ4_NL 1, IQ4_XS 8)
// whose index bytes are contiguous, gstride bytes from one group to the next; w points at the
// first group's first index byte. Each value is the block's scale times the level its index
// picks from the 16-entry table, the same float32 product as the dequantizer's, so the kernels
// are bit-exact; the fused ones feed it to the 16-lane accumulators in element order (see
// matvec_amd64.s), which they load from and store back to acc (row r's 16 lanes at 16r) so
// that a row can be processed a chunk at a time; the wrapper reduces them.

// ---------------------------------------------------------------------------------------
// AVX-512: the block's 16 values scale*level are made once (Z6 from the float32 table in Z13)
// and each index picks its value with VPERMPS (which reads the low 4 bits of each lane).

// IQ4ROW(p, S, acc): the block at (p)(R14) of one row, scale at S(R12), x in Z4/Z5.
#define IQ4ROW(p, S, acc) \
	VMULPS.BCST S(R12), Z13, Z6 ; \
	VPMOVZXBD   (p)(R14*1), Z7 ; \
	VPSRLD      $4, Z7, Z8 ; \
	VPERMPS     Z6, Z7, Z7 ; \
	VPERMPS     Z6, Z8, Z8 ; \
	VFMADD231PS Z4, Z7, acc ; \
	VFMADD231PS Z5, Z8, acc

// func matvecIQ4x4AVX512(x *float32, w *byte, ws, ng, nsub, gstride uintptr, sc *float32, acc *[64]float32, base *[16]float32)
// sc holds the four rows' scales block by block: block s of row r at 4*(4s+r).
TEXT ·matvecIQ4x4AVX512(SB), NOSPLIT, $0-72
	MOVQ    x+0(FP), SI
	MOVQ    w+8(FP), DI
	MOVQ    ws+16(FP), BX
	MOVQ    ng+24(FP), CX
	MOVQ    nsub+32(FP), R13
	MOVQ    gstride+40(FP), DX
	MOVQ    sc+48(FP), R12
	MOVQ    acc+56(FP), AX
	VMOVUPS (AX), Z0
	VMOVUPS 64(AX), Z1
	VMOVUPS 128(AX), Z2
	VMOVUPS 192(AX), Z3
	MOVQ    base+64(FP), AX
	VMOVUPS (AX), Z13
	ROWS4(BX)
	TESTQ   CX, CX
	JZ      iq4x4done

iq4x4group:
	XORQ R14, R14
	MOVQ R13, R11

iq4x4block:
	VMOVUPS (SI), Z4
	VMOVUPS 64(SI), Z5
	IQ4ROW(DI, 0, Z0)
	IQ4ROW(R8, 4, Z1)
	IQ4ROW(R9, 8, Z2)
	IQ4ROW(R10, 12, Z3)
	ADDQ    $128, SI
	ADDQ    $16, R12
	ADDQ    $16, R14
	DECQ    R11
	JNZ     iq4x4block
	ADDQ    DX, DI
	ADDQ    DX, R8
	ADDQ    DX, R9
	ADDQ    DX, R10
	DECQ    CX
	JNZ     iq4x4group

iq4x4done:
	MOVQ    acc+56(FP), AX
	VMOVUPS Z0, (AX)
	VMOVUPS Z1, 64(AX)
	VMOVUPS Z2, 128(AX)
	VMOVUPS Z3, 192(AX)
	VZEROUPPER
	RET

// func dequantIQ4AVX512(dst *float32, w *byte, ng, nsub, gstride uintptr, sc *float32, base *[16]float32)
// sc holds one scale per block, in order.
TEXT ·dequantIQ4AVX512(SB), NOSPLIT, $0-56
	MOVQ    dst+0(FP), DI
	MOVQ    w+8(FP), SI
	MOVQ    ng+16(FP), CX
	MOVQ    nsub+24(FP), R13
	MOVQ    gstride+32(FP), DX
	MOVQ    sc+40(FP), R12
	MOVQ    base+48(FP), AX
	VMOVUPS (AX), Z13
	TESTQ   CX, CX
	JZ      dqiq4done

dqiq4group:
	XORQ R14, R14
	MOVQ R13, R11

dqiq4block:
	VMULPS.BCST (R12), Z13, Z6
	VPMOVZXBD   (SI)(R14*1), Z7
	VPSRLD      $4, Z7, Z8
	VPERMPS     Z6, Z7, Z7
	VPERMPS     Z6, Z8, Z8
	VMOVUPS     Z7, (DI)
	VMOVUPS     Z8, 64(DI)
	ADDQ        $4, R12
	ADDQ        $16, R14
	ADDQ        $128, DI
	DECQ        R11
	JNZ         dqiq4block
	ADDQ        DX, SI
	DECQ        CX
	JNZ         dqiq4group

dqiq4done:
	VZEROUPPER
	RET

// ---------------------------------------------------------------------------------------
// AVX2: the indices pick their levels as bytes with VPSHUFB from the int8 table in X14 (X15 =
// 0x0f in every byte; the word shift's spill into the low nibble is masked off), which are
// widened 8 at a time, converted exactly and multiplied by the block's scale.

// IQ4LEVELS(p): the 32 levels of the block at (p)(R14) as int32, values 0-7 in Y8, 8-15 in
// Y9, 16-23 in Y10, 24-31 in Y12 (uses X12, X13).
#define IQ4LEVELS(p) \
	VMOVDQU   (p)(R14*1), X12 ; \
	VPAND     X15, X12, X13 ; \
	VPSRLW    $4, X12, X12 ; \
	VPAND     X15, X12, X12 ; \
	VPSHUFB   X13, X14, X13 ; \
	VPSHUFB   X12, X14, X12 ; \
	VPMOVSXBD X13, Y8 ; \
	VPSRLDQ   $8, X13, X13 ; \
	VPMOVSXBD X13, Y9 ; \
	VPMOVSXBD X12, Y10 ; \
	VPSRLDQ   $8, X12, X12 ; \
	VPMOVSXBD X12, Y12 ; \
	VCVTDQ2PS Y8, Y8 ; \
	VCVTDQ2PS Y9, Y9 ; \
	VCVTDQ2PS Y10, Y10 ; \
	VCVTDQ2PS Y12, Y12

// IQ4SCALE(S): the levels of IQ4LEVELS times the scale at S(R12) (uses Y11).
#define IQ4SCALE(S) \
	VBROADCASTSS S(R12), Y11 ; \
	VMULPS       Y11, Y8, Y8 ; \
	VMULPS       Y11, Y9, Y9 ; \
	VMULPS       Y11, Y10, Y10 ; \
	VMULPS       Y11, Y12, Y12

// IQ4ROWA2(p, S, ACCL, ACCH): one block of one row into its accumulator pair, x at SI.
#define IQ4ROWA2(p, S, ACCL, ACCH) \
	IQ4LEVELS(p) ; \
	IQ4SCALE(S) ; \
	VFMADD231PS (SI), Y8, ACCL ; \
	VFMADD231PS 32(SI), Y9, ACCH ; \
	VFMADD231PS 64(SI), Y10, ACCL ; \
	VFMADD231PS 96(SI), Y12, ACCH

// func matvecIQ4x4AVX2(x *float32, w *byte, ws, ng, nsub, gstride uintptr, sc *float32, acc *[64]float32, tab *[16]int8)
// Row r's lanes 0-7 at acc[16r:], 8-15 at acc[16r+8:].
TEXT ·matvecIQ4x4AVX2(SB), NOSPLIT, $0-72
	MOVQ    x+0(FP), SI
	MOVQ    w+8(FP), DI
	MOVQ    ws+16(FP), BX
	MOVQ    ng+24(FP), CX
	MOVQ    nsub+32(FP), R13
	MOVQ    gstride+40(FP), DX
	MOVQ    sc+48(FP), R12
	MOVQ    acc+56(FP), AX
	VMOVUPS (AX), Y0
	VMOVUPS 32(AX), Y1
	VMOVUPS 64(AX), Y2
	VMOVUPS 96(AX), Y3
	VMOVUPS 128(AX), Y4
	VMOVUPS 160(AX), Y5
	VMOVUPS 192(AX), Y6
	VMOVUPS 224(AX), Y7
	MOVQ    tab+64(FP), AX
	VMOVDQU (AX), X14
	BCASTB(0x0f, X15, Y15)
	ROWS4(BX)
	TESTQ   CX, CX
	JZ      iq4x4a2done

iq4x4a2group:
	XORQ R14, R14
	MOVQ R13, R11

iq4x4a2block:
	IQ4ROWA2(DI, 0, Y0, Y1)
	IQ4ROWA2(R8, 4, Y2, Y3)
	IQ4ROWA2(R9, 8, Y4, Y5)
	IQ4ROWA2(R10, 12, Y6, Y7)
	ADDQ $128, SI
	ADDQ $16, R12
	ADDQ $16, R14
	DECQ R11
	JNZ  iq4x4a2block
	ADDQ DX, DI
	ADDQ DX, R8
	ADDQ DX, R9
	ADDQ DX, R10
	DECQ CX
	JNZ  iq4x4a2group

iq4x4a2done:
	MOVQ    acc+56(FP), AX
	VMOVUPS Y0, (AX)
	VMOVUPS Y1, 32(AX)
	VMOVUPS Y2, 64(AX)
	VMOVUPS Y3, 96(AX)
	VMOVUPS Y4, 128(AX)
	VMOVUPS Y5, 160(AX)
	VMOVUPS Y6, 192(AX)
	VMOVUPS Y7, 224(AX)
	VZEROUPPER
	RET

// func dequantIQ4AVX2(dst *float32, w *byte, ng, nsub, gstride uintptr, sc *float32, tab *[16]int8)
TEXT ·dequantIQ4AVX2(SB), NOSPLIT, $0-56
	MOVQ    dst+0(FP), DI
	MOVQ    w+8(FP), SI
	MOVQ    ng+16(FP), CX
	MOVQ    nsub+24(FP), R13
	MOVQ    gstride+32(FP), DX
	MOVQ    sc+40(FP), R12
	MOVQ    tab+48(FP), AX
	VMOVDQU (AX), X14
	BCASTB(0x0f, X15, Y15)
	TESTQ   CX, CX
	JZ      dqiq4a2done

dqiq4a2group:
	XORQ R14, R14
	MOVQ R13, R11

dqiq4a2block:
	IQ4LEVELS(SI)
	IQ4SCALE(0)
	VMOVUPS Y8, (DI)
	VMOVUPS Y9, 32(DI)
	VMOVUPS Y10, 64(DI)
	VMOVUPS Y12, 96(DI)
	ADDQ    $4, R12
	ADDQ    $16, R14
	ADDQ    $128, DI
	DECQ    R11
	JNZ     dqiq4a2block
	ADDQ    DX, SI
	DECQ    CX
	JNZ     dqiq4a2group

dqiq4a2done:
	VZEROUPPER
	RET
