//go:build !purego

#include "textflag.h"
#include "macros_amd64.h"

// IQ4_NL and IQ4_XS (iq4_amd64.go). Both store 32-value blocks of 16 index bytes (value j in
// the low nibble of byte j, value j+16 in the high nibble), each value the block's float32
// scale times the level its index picks from the 16-entry table: IQ4_NL's scale is its half d
// (read through quant's half-to-float table, tab), IQ4_XS's is d*float32(ls-32) for the
// block's 6-bit code ls (XSSCALES). The kernels form the same float32 product as quant's
// dequantizer, so they are bit-exact; the fused ones feed each value to its row's 16 lanes in
// element order (see matvec_amd64.s), bit-identical to the tile path. Rows at DI, R8, R9, R10,
// x at SI.

// XSSCALES(p, SC): the 8 block scales of the IQ4_XS super-block at p (d | scales_h u16 |
// scales_l [4]byte) as float32 at SC(SP): ls = (scales_l >> 4ib & 15) | (scales_h >> 2ib & 3)
// << 4 by variable shifts of the broadcast fields, converted exactly and times d. R13 points at
// xsConsts (shifts 4ib, shifts 2ib, 15, 3, 32 in 8 lanes each). Uses R11, Y8-Y10.
#define XSSCALES(p, SC) \
	MOVWLZX      (p), R11 ; \
	VBROADCASTSS (DX)(R11*4), Y10 ; \
	VPBROADCASTD 4(p), Y8 ; \
	VPSRLVD      (R13), Y8, Y8 ; \
	VPAND        64(R13), Y8, Y8 ; \
	MOVWLZX      2(p), R11 ; \
	VMOVD        R11, X9 ; \
	VPBROADCASTD X9, Y9 ; \
	VPSRLVD      32(R13), Y9, Y9 ; \
	VPAND        96(R13), Y9, Y9 ; \
	VPSLLD       $4, Y9, Y9 ; \
	VPOR         Y9, Y8, Y8 ; \
	VPSUBD       128(R13), Y8, Y8 ; \
	VCVTDQ2PS    Y8, Y8 ; \
	VMULPS       Y10, Y8, Y8 ; \
	VMOVUPS      Y8, SC(SP)

// ---------------------------------------------------------------------------------------
// AVX-512: the block's 16 values scale*level are made once (Z6, from the float32 levels in
// Z13) and each index picks its value with VPERMPS (which reads the low 4 bits of each lane).

// NLVALUES(Q, Z): Z6 = the 16 values of the scale in Z, Q the address of the 16 index bytes;
// indices of values 0-15 in Z7, of 16-31 in Z8, then the values themselves.
#define NLVALUES(Q) \
	VPMOVZXBD Q, Z7 ; \
	VPSRLD    $4, Z7, Z8 ; \
	VPERMPS   Z6, Z7, Z7 ; \
	VPERMPS   Z6, Z8, Z8

// XSROW(p, k, S, acc): block k of the row at p's current super-block, scale at S(SP), x of the
// block in Z4/Z5.
#define XSROW(p, k, S, acc) \
	VMULPS.BCST S(SP), Z13, Z6 ; \
	NLVALUES(8+16*k(p)) ; \
	VFMADD231PS Z4, Z7, acc ; \
	VFMADD231PS Z5, Z8, acc

#define XSBLOCK(k) \
	VMOVUPS 128*k(SI), Z4 ; \
	VMOVUPS 128*k+64(SI), Z5 ; \
	XSROW(DI, k, 4*k, Z0) ; \
	XSROW(R8, k, 32+4*k, Z1) ; \
	XSROW(R9, k, 64+4*k, Z2) ; \
	XSROW(R10, k, 96+4*k, Z3)

// func matvecIQ4XSx4AVX512(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32, base *[16]float32, consts *[40]uint32)
// nb super-blocks of 256 values; the four rows' scales in the frame at 32r.
TEXT ·matvecIQ4XSx4AVX512(SB), NOSPLIT, $128-64
	MOVQ    x+0(FP), SI
	MOVQ    w+8(FP), DI
	MOVQ    ws+16(FP), BX
	MOVQ    nb+24(FP), CX
	MOVQ    tab+40(FP), DX
	MOVQ    base+48(FP), AX
	VMOVUPS (AX), Z13
	MOVQ    consts+56(FP), R13
	ROWS4(BX)
	ZERO4
	TESTQ   CX, CX
	JZ      xsx4done

xsx4loop:
	XSSCALES(DI, 0)
	XSSCALES(R8, 32)
	XSSCALES(R9, 64)
	XSSCALES(R10, 96)
	XSBLOCK(0)
	XSBLOCK(1)
	XSBLOCK(2)
	XSBLOCK(3)
	XSBLOCK(4)
	XSBLOCK(5)
	XSBLOCK(6)
	XSBLOCK(7)
	ADDQ    $1024, SI
	ADDQ    $136, DI
	ADDQ    $136, R8
	ADDQ    $136, R9
	ADDQ    $136, R10
	DECQ    CX
	JNZ     xsx4loop

xsx4done:
	STORE4(out+32(FP))
	VZEROUPPER
	RET

// func dequantIQ4NLAVX512(dst *float32, src *byte, nb uintptr, tab *float32, base *[16]float32)
TEXT ·dequantIQ4NLAVX512(SB), NOSPLIT, $0-40
	MOVQ    dst+0(FP), DI
	MOVQ    src+8(FP), SI
	MOVQ    nb+16(FP), CX
	MOVQ    tab+24(FP), DX
	MOVQ    base+32(FP), AX
	VMOVUPS (AX), Z13
	TESTQ   CX, CX
	JZ      dqnldone

dqnlloop:
	MOVWLZX     (SI), R11
	VMULPS.BCST (DX)(R11*4), Z13, Z6
	NLVALUES(2(SI))
	VMOVUPS     Z7, (DI)
	VMOVUPS     Z8, 64(DI)
	ADDQ        $18, SI
	ADDQ        $128, DI
	DECQ        CX
	JNZ         dqnlloop

dqnldone:
	VZEROUPPER
	RET

#define DQXSBLOCK(k) \
	VMULPS.BCST 4*k(SP), Z13, Z6 ; \
	NLVALUES(8+16*k(SI)) ; \
	VMOVUPS     Z7, 128*k(DI) ; \
	VMOVUPS     Z8, 128*k+64(DI)

// func dequantIQ4XSAVX512(dst *float32, src *byte, nb uintptr, tab *float32, base *[16]float32, consts *[40]uint32)
TEXT ·dequantIQ4XSAVX512(SB), NOSPLIT, $32-48
	MOVQ    dst+0(FP), DI
	MOVQ    src+8(FP), SI
	MOVQ    nb+16(FP), CX
	MOVQ    tab+24(FP), DX
	MOVQ    base+32(FP), AX
	VMOVUPS (AX), Z13
	MOVQ    consts+40(FP), R13
	TESTQ   CX, CX
	JZ      dqxsdone

dqxsloop:
	XSSCALES(SI, 0)
	DQXSBLOCK(0)
	DQXSBLOCK(1)
	DQXSBLOCK(2)
	DQXSBLOCK(3)
	DQXSBLOCK(4)
	DQXSBLOCK(5)
	DQXSBLOCK(6)
	DQXSBLOCK(7)
	ADDQ $136, SI
	ADDQ $1024, DI
	DECQ CX
	JNZ  dqxsloop

dqxsdone:
	VZEROUPPER
	RET

// ---------------------------------------------------------------------------------------
// AVX2: the indices pick their levels as bytes with VPSHUFB from the int8 table in X14 (X15 =
// 0x0f in every byte; the word shift's spill into the low nibble is masked off), which are
// widened 8 at a time, converted exactly and multiplied by the block's scale (Y11).

// LEVELS(Q): the 32 levels of the index bytes at Q as float32: values 0-7 in Y8, 8-15 in Y9,
// 16-23 in Y10, 24-31 in Y12 (uses X12, X13).
#define LEVELS(Q) \
	VMOVDQU   Q, X12 ; \
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
	VCVTDQ2PS Y12, Y12 ; \
	VMULPS    Y11, Y8, Y8 ; \
	VMULPS    Y11, Y9, Y9 ; \
	VMULPS    Y11, Y10, Y10 ; \
	VMULPS    Y11, Y12, Y12

// DOT32A2(XO, ACCL, ACCH): the 32 values of LEVELS times x at XO(SI) into a row's lanes.
#define DOT32A2(XO, ACCL, ACCH) \
	VFMADD231PS XO(SI), Y8, ACCL ; \
	VFMADD231PS XO+32(SI), Y9, ACCH ; \
	VFMADD231PS XO+64(SI), Y10, ACCL ; \
	VFMADD231PS XO+96(SI), Y12, ACCH

#define STORE32A2(O) \
	VMOVUPS Y8, O(DI) ; \
	VMOVUPS Y9, O+32(DI) ; \
	VMOVUPS Y10, O+64(DI) ; \
	VMOVUPS Y12, O+96(DI)

// NLSCALEA2(p): Y11 = the IQ4_NL block at p's half scale.
#define NLSCALEA2(p) \
	MOVWLZX      (p), R11 ; \
	VBROADCASTSS (DX)(R11*4), Y11

#define NLROWA2(p, ACCL, ACCH) \
	NLSCALEA2(p) ; \
	LEVELS(2(p)) ; \
	DOT32A2(0, ACCL, ACCH)

// NLCONSTS: the int8 levels (from AX) in X14, 0x0f bytes in X15.
#define NLCONSTS \
	VMOVDQU (AX), X14 ; \
	BCASTB(0x0f, X15, Y15)

// func matvecIQ4NLx4AVX2(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32, levels *[16]int8)
TEXT ·matvecIQ4NLx4AVX2(SB), NOSPLIT, $0-56
	MOVQ  x+0(FP), SI
	MOVQ  w+8(FP), DI
	MOVQ  ws+16(FP), BX
	MOVQ  nb+24(FP), CX
	MOVQ  tab+40(FP), DX
	MOVQ  levels+48(FP), AX
	NLCONSTS
	ROWS4(BX)
	ZERO8
	TESTQ CX, CX
	JZ    nlx4a2done

nlx4a2loop:
	NLROWA2(DI, Y0, Y1)
	NLROWA2(R8, Y2, Y3)
	NLROWA2(R9, Y4, Y5)
	NLROWA2(R10, Y6, Y7)
	ADDQ  $128, SI
	ADDQ  $18, DI
	ADDQ  $18, R8
	ADDQ  $18, R9
	ADDQ  $18, R10
	DECQ  CX
	JNZ   nlx4a2loop

nlx4a2done:
	STORE4x2(out+32(FP))
	VZEROUPPER
	RET

// func dequantIQ4NLAVX2(dst *float32, src *byte, nb uintptr, tab *float32, levels *[16]int8)
TEXT ·dequantIQ4NLAVX2(SB), NOSPLIT, $0-40
	MOVQ  dst+0(FP), DI
	MOVQ  src+8(FP), SI
	MOVQ  nb+16(FP), CX
	MOVQ  tab+24(FP), DX
	MOVQ  levels+32(FP), AX
	NLCONSTS
	TESTQ CX, CX
	JZ    dqnla2done

dqnla2loop:
	NLSCALEA2(SI)
	LEVELS(2(SI))
	STORE32A2(0)
	ADDQ  $18, SI
	ADDQ  $128, DI
	DECQ  CX
	JNZ   dqnla2loop

dqnla2done:
	VZEROUPPER
	RET

// XSROWA2(p, k, S, ACCL, ACCH): block k of the row at p's super-block, scale at S(SP).
#define XSROWA2(p, k, S, ACCL, ACCH) \
	VBROADCASTSS S(SP), Y11 ; \
	LEVELS(8+16*k(p)) ; \
	DOT32A2(128*k, ACCL, ACCH)

#define XSBLOCKA2(k) \
	XSROWA2(DI, k, 4*k, Y0, Y1) ; \
	XSROWA2(R8, k, 32+4*k, Y2, Y3) ; \
	XSROWA2(R9, k, 64+4*k, Y4, Y5) ; \
	XSROWA2(R10, k, 96+4*k, Y6, Y7)

// func matvecIQ4XSx4AVX2(x *float32, w *byte, ws, nb uintptr, out *[4]float32, tab *float32, levels *[16]int8, consts *[40]uint32)
TEXT ·matvecIQ4XSx4AVX2(SB), NOSPLIT, $128-64
	MOVQ  x+0(FP), SI
	MOVQ  w+8(FP), DI
	MOVQ  ws+16(FP), BX
	MOVQ  nb+24(FP), CX
	MOVQ  tab+40(FP), DX
	MOVQ  levels+48(FP), AX
	NLCONSTS
	MOVQ  consts+56(FP), R13
	ROWS4(BX)
	ZERO8
	TESTQ CX, CX
	JZ    xsx4a2done

xsx4a2loop:
	XSSCALES(DI, 0)
	XSSCALES(R8, 32)
	XSSCALES(R9, 64)
	XSSCALES(R10, 96)
	XSBLOCKA2(0)
	XSBLOCKA2(1)
	XSBLOCKA2(2)
	XSBLOCKA2(3)
	XSBLOCKA2(4)
	XSBLOCKA2(5)
	XSBLOCKA2(6)
	XSBLOCKA2(7)
	ADDQ  $1024, SI
	ADDQ  $136, DI
	ADDQ  $136, R8
	ADDQ  $136, R9
	ADDQ  $136, R10
	DECQ  CX
	JNZ   xsx4a2loop

xsx4a2done:
	STORE4x2(out+32(FP))
	VZEROUPPER
	RET

#define DQXSBLOCKA2(k) \
	VBROADCASTSS 4*k(SP), Y11 ; \
	LEVELS(8+16*k(SI)) ; \
	STORE32A2(128*k)

// func dequantIQ4XSAVX2(dst *float32, src *byte, nb uintptr, tab *float32, levels *[16]int8, consts *[40]uint32)
TEXT ·dequantIQ4XSAVX2(SB), NOSPLIT, $32-48
	MOVQ  dst+0(FP), DI
	MOVQ  src+8(FP), SI
	MOVQ  nb+16(FP), CX
	MOVQ  tab+24(FP), DX
	MOVQ  levels+32(FP), AX
	NLCONSTS
	MOVQ  consts+40(FP), R13
	TESTQ CX, CX
	JZ    dqxsa2done

dqxsa2loop:
	XSSCALES(SI, 0)
	DQXSBLOCKA2(0)
	DQXSBLOCKA2(1)
	DQXSBLOCKA2(2)
	DQXSBLOCKA2(3)
	DQXSBLOCKA2(4)
	DQXSBLOCKA2(5)
	DQXSBLOCKA2(6)
	DQXSBLOCKA2(7)
	ADDQ  $136, SI
	ADDQ  $1024, DI
	DECQ  CX
	JNZ   dqxsa2loop

dqxsa2done:
	VZEROUPPER
	RET
