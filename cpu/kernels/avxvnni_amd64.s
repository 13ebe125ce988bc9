//go:build !purego

#include "textflag.h"

// The integer path's kernels for CPUs with AVX-VNNI (VEX-encoded VPDPBUSD on 256-bit
// registers) and AVX2 but no AVX-512: Intel's client cores since Alder Lake. They follow the
// arithmetic of intdot.go bit for bit, as the AVX-512 VNNI kernels (vnni_amd64.s) do, with
// sixteen ymm registers instead of 32 zmm.

// VNNI256(s, u, d) is VPDPBUSD Yd += Yu . Ys by register numbers (0..15): Yu's unsigned bytes
// (the weights) times Ys's signed bytes (the activations), four products summed into each
// int32 lane. Go's assembler encodes VPDPBUSD only as EVEX (AVX-512 VL), which these CPUs
// lack, so this spells out the VEX form: C4 [R X B 00010] [W vvvv L pp] 50 /r, with
// ModRM.reg = d, VEX.vvvv = u (inverted), ModRM.rm = s; L = 1 (256 bits), pp = 01 (66).
#define VNNI256(s, u, d) \
	BYTE $0xC4 ; \
	BYTE $(0x42 | ((((d)>>3)^1)<<7) | ((((s)>>3)^1)<<5)) ; \
	BYTE $((((u)^15)<<3) | 0x05) ; \
	BYTE $0x50 ; \
	BYTE $(0xC0 | (((d)&7)<<3) | ((s)&7))

// AROWS4 finishes one block of the streaming kernels: Y4..Y7 hold the int32 lane sums of
// rows 0..3; reduce them to one sum per row (X8), add the correction, scale by the rows'
// halves (at (SI) in each row) and by the activation's scale, accumulate into X0.
#define AROWS4 \
	VPHADDD      Y5, Y4, Y8 ; \
	VPHADDD      Y7, Y6, Y9 ; \
	VPHADDD      Y9, Y8, Y8 ; \
	VEXTRACTI128 $1, Y8, X9 ; \
	VPADDD       X9, X8, X8 ; \
	VPBROADCASTD (R11), X11 ; \
	VPADDD       X11, X8, X8 ; \
	VCVTDQ2PS    X8, X8 ; \
	VPINSRW      $0, (SI), X10, X10 ; \
	VPINSRW      $1, (SI)(BX*1), X10, X10 ; \
	VPINSRW      $2, (SI)(BX*2), X10, X10 ; \
	VPINSRW      $3, (SI)(R9*1), X10, X10 ; \
	VCVTPH2PS    X10, X10 ; \
	VMULPS       X10, X8, X8 ; \
	VBROADCASTSS (R10), X11 ; \
	VFMADD231PS  X11, X8, X0

// The streaming kernels prefetch the same place of the next four rows into L1 (R12) and of
// the rows 32 on into L2 (R13), as the AVX-512 VNNI ones (vnni_amd64.s, ROWSPREFETCH).
#define AROWSPREFETCH(size) \
	PREFETCHT0 (R12) ; \
	PREFETCHT1 (R13) ; \
	PREFETCHT0 (R12)(BX*1) ; \
	PREFETCHT1 (R13)(BX*1) ; \
	PREFETCHT0 (R12)(BX*2) ; \
	PREFETCHT1 (R13)(BX*2) ; \
	PREFETCHT0 (R12)(R9*1) ; \
	PREFETCHT1 (R13)(R9*1) ; \
	ADDQ $size, R12 ; \
	ADDQ $size, R13

#define AROWSARGS \
	MOVQ x+0(FP), DI ; \
	MOVQ xd+8(FP), R10 ; \
	MOVQ xc+16(FP), R11 ; \
	MOVQ w+24(FP), SI ; \
	MOVQ ws+32(FP), BX ; \
	MOVQ nb+40(FP), CX ; \
	MOVQ out+48(FP), DX ; \
	LEAQ (BX)(BX*2), R9 ; \
	LEAQ (SI)(BX*4), R12 ; \
	MOVQ BX, R13 ; \
	SHLQ $5, R13 ; \
	ADDQ SI, R13 ; \
	VPXOR X0, X0, X0 ; \
	VPXOR X10, X10, X10

// The pair kernels (vnni_amd64.s's, on 16 ymm registers): two activation rows (xs bytes
// apart; scales and corrections ds bytes apart) times four weight rows unpacked once (Y2, Y3,
// Y12, Y13) with their halves (X10); each row then takes AROWS4's steps (APAIRROW, with Y14
// for the broadcasts), so its results have the one-row kernel's bits. Row 0 accumulates in X0,
// row 1 in X11; out rows os bytes apart.
#define APAIRARGS \
	MOVQ x+0(FP), DI ; \
	MOVQ xs+8(FP), R8 ; \
	MOVQ xd+16(FP), R10 ; \
	MOVQ xc+24(FP), R11 ; \
	MOVQ ds+32(FP), R14 ; \
	MOVQ w+40(FP), SI ; \
	MOVQ ws+48(FP), BX ; \
	MOVQ nb+56(FP), CX ; \
	MOVQ out+64(FP), DX ; \
	LEAQ (BX)(BX*2), R9 ; \
	LEAQ (SI)(BX*4), R12 ; \
	MOVQ BX, R13 ; \
	SHLQ $5, R13 ; \
	ADDQ SI, R13 ; \
	VPXOR X0, X0, X0 ; \
	VPXOR X11, X11, X11 ; \
	VPXOR X10, X10, X10

#define APAIRSCALES \
	VPINSRW   $0, (SI), X10, X10 ; \
	VPINSRW   $1, (SI)(BX*1), X10, X10 ; \
	VPINSRW   $2, (SI)(BX*2), X10, X10 ; \
	VPINSRW   $3, (SI)(R9*1), X10, X10 ; \
	VCVTPH2PS X10, X10

#define APAIRROW(xa, xc, xd, ACC) \
	VMOVDQU      xa, Y1 ; \
	VPXOR        Y4, Y4, Y4 ; \
	VPXOR        Y5, Y5, Y5 ; \
	VPXOR        Y6, Y6, Y6 ; \
	VPXOR        Y7, Y7, Y7 ; \
	VNNI256(1, 2, 4) ; \
	VNNI256(1, 3, 5) ; \
	VNNI256(1, 12, 6) ; \
	VNNI256(1, 13, 7) ; \
	VPHADDD      Y5, Y4, Y8 ; \
	VPHADDD      Y7, Y6, Y9 ; \
	VPHADDD      Y9, Y8, Y8 ; \
	VEXTRACTI128 $1, Y8, X9 ; \
	VPADDD       X9, X8, X8 ; \
	VPBROADCASTD xc, X14 ; \
	VPADDD       X14, X8, X8 ; \
	VCVTDQ2PS    X8, X8 ; \
	VMULPS       X10, X8, X8 ; \
	VBROADCASTSS xd, X14 ; \
	VFMADD231PS  X14, X8, ACC

#define APAIRNEXT(size, loop) \
	ADDQ $size, SI ; \
	ADDQ $32, DI ; \
	ADDQ $4, R10 ; \
	ADDQ $4, R11 ; \
	DECQ CX ; \
	JNZ  loop ; \
	MOVQ os+72(FP), AX ; \
	VMOVUPS X0, (DX) ; \
	VMOVUPS X11, (DX)(AX*1) ; \
	VZEROUPPER ; \
	RET

// The repack kernels' arguments (defined before any TEXT, as go vet reads the file): rows
// 0..3 are at SI + 0, R8, 2*R8, R9; rows 4..7 at R12 + the same.
#define AREPACKARGS \
	MOVQ tq+0(FP), DI ; \
	MOVQ td+8(FP), DX ; \
	MOVQ w+16(FP), SI ; \
	MOVQ ws+24(FP), R8 ; \
	MOVQ nb+32(FP), CX ; \
	LEAQ (R8)(R8*2), R9 ; \
	LEAQ (SI)(R8*4), R12

// func intRowsQ8_0x4AVXVNNI(x *byte, xd *float32, xc *int32, w *byte, ws, nb uintptr, out *[4]float32)
// One activation row times four Q8_0 weight rows ws bytes apart; nb >= 1 blocks.
TEXT ·intRowsQ8_0x4AVXVNNI(SB), NOSPLIT, $0-56
	AROWSARGS
	MOVL $0x80808080, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15

aq8loop:
	AROWSPREFETCH(34)
	VMOVDQU (DI), Y1
	VPXOR   Y4, Y4, Y4
	VPXOR   Y5, Y5, Y5
	VPXOR   Y6, Y6, Y6
	VPXOR   Y7, Y7, Y7
	VPXOR   2(SI), Y15, Y12
	VNNI256(1, 12, 4)
	VPXOR   2(SI)(BX*1), Y15, Y13
	VNNI256(1, 13, 5)
	VPXOR   2(SI)(BX*2), Y15, Y12
	VNNI256(1, 12, 6)
	VPXOR   2(SI)(R9*1), Y15, Y13
	VNNI256(1, 13, 7)
	AROWS4
	ADDQ $34, SI
	ADDQ $32, DI
	ADDQ $4, R10
	ADDQ $4, R11
	DECQ CX
	JNZ  aq8loop
	VMOVUPS X0, (DX)
	VZEROUPPER
	RET

// AQ4NIB loads the 16 bytes of a Q4_0 block's nibbles at addr into Y as 32 unsigned bytes in
// element order (low nibbles: elements 0..15, high nibbles: 16..31); Y15 holds 0x0f bytes.
#define AQ4NIB(addr, X, Y, XT) \
	VMOVDQU      addr, X ; \
	VPSRLW       $4, X, XT ; \
	VINSERTI128  $1, XT, Y, Y ; \
	VPAND        Y15, Y, Y

// func intRowsQ4_0x4AVXVNNI(x *byte, xd *float32, xc *int32, w *byte, ws, nb uintptr, out *[4]float32)
// One activation row times four Q4_0 weight rows ws bytes apart; nb >= 1 blocks.
TEXT ·intRowsQ4_0x4AVXVNNI(SB), NOSPLIT, $0-56
	AROWSARGS
	MOVL $0x0f0f0f0f, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15

aq4loop:
	AROWSPREFETCH(18)
	VMOVDQU (DI), Y1
	VPXOR   Y4, Y4, Y4
	VPXOR   Y5, Y5, Y5
	VPXOR   Y6, Y6, Y6
	VPXOR   Y7, Y7, Y7
	AQ4NIB(2(SI), X12, Y12, X14)
	VNNI256(1, 12, 4)
	AQ4NIB(2(SI)(BX*1), X13, Y13, X14)
	VNNI256(1, 13, 5)
	AQ4NIB(2(SI)(BX*2), X12, Y12, X14)
	VNNI256(1, 12, 6)
	AQ4NIB(2(SI)(R9*1), X13, Y13, X14)
	VNNI256(1, 13, 7)
	AROWS4
	ADDQ $18, SI
	ADDQ $32, DI
	ADDQ $4, R10
	ADDQ $4, R11
	DECQ CX
	JNZ  aq4loop
	VMOVUPS X0, (DX)
	VZEROUPPER
	RET

// func intRowsQ8_0x4x2AVXVNNI(x *byte, xs uintptr, xd *float32, xc *int32, ds uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr)
// Activation rows 0 and 1 times four Q8_0 weight rows ws bytes apart; nb >= 1 blocks.
TEXT ·intRowsQ8_0x4x2AVXVNNI(SB), NOSPLIT, $0-80
	APAIRARGS
	MOVL $0x80808080, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15

apq8loop:
	AROWSPREFETCH(34)
	VPXOR 2(SI), Y15, Y2
	VPXOR 2(SI)(BX*1), Y15, Y3
	VPXOR 2(SI)(BX*2), Y15, Y12
	VPXOR 2(SI)(R9*1), Y15, Y13
	APAIRSCALES
	APAIRROW((DI), (R11), (R10), X0)
	APAIRROW((DI)(R8*1), (R11)(R14*1), (R10)(R14*1), X11)
	APAIRNEXT(34, apq8loop)

// func intRowsQ4_0x4x2AVXVNNI(x *byte, xs uintptr, xd *float32, xc *int32, ds uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr)
// Activation rows 0 and 1 times four Q4_0 weight rows ws bytes apart; nb >= 1 blocks.
TEXT ·intRowsQ4_0x4x2AVXVNNI(SB), NOSPLIT, $0-80
	APAIRARGS
	MOVL $0x0f0f0f0f, AX
	VMOVD AX, X15
	VPBROADCASTD X15, Y15

apq4loop:
	AROWSPREFETCH(18)
	AQ4NIB(2(SI), X2, Y2, X14)
	AQ4NIB(2(SI)(BX*1), X3, Y3, X14)
	AQ4NIB(2(SI)(BX*2), X12, Y12, X14)
	AQ4NIB(2(SI)(R9*1), X13, Y13, X14)
	APAIRSCALES
	APAIRROW((DI), (R11), (R10), X0)
	APAIRROW((DI)(R8*1), (R11)(R14*1), (R10)(R14*1), X11)
	APAIRNEXT(18, apq4loop)

// AGROUP accumulates the integer sums of four activation rows with eight tile rows for the
// 4-element group g: Y12 = the rows' unsigned quants, Y13 = broadcast x[4g..4g+3] of each
// row in turn. Even groups go to Y4..Y7, odd ones to Y8..Y11 (two dependency chains per row).
#define AGROUP(g, A0, A1, A2, A3) \
	VMOVDQU      (g*64)(SI), Y12 ; \
	VPBROADCASTD (g*4)(R8), Y13 ; \
	VNNI256(13, 12, A0) ; \
	VPBROADCASTD (g*4)(R8)(R9*1), Y13 ; \
	VNNI256(13, 12, A1) ; \
	VPBROADCASTD (g*4)(R8)(R9*2), Y13 ; \
	VNNI256(13, 12, A2) ; \
	VPBROADCASTD (g*4)(R8)(R13*1), Y13 ; \
	VNNI256(13, 12, A3)

#define AEVEN(g) AGROUP(g, 4, 5, 6, 7)
#define AODD(g) AGROUP(g, 8, 9, 10, 11)

// AFINISH turns a row's two integer accumulators into its block's float32 term and adds it:
// OUT = fma(float32(A + B) * dw (Y14), dx (broadcast from xd), OUT).
#define AFINISH(A, B, xd, OUT) \
	VPADDD       B, A, A ; \
	VCVTDQ2PS    A, A ; \
	VMULPS       Y14, A, A ; \
	VBROADCASTSS xd, Y15 ; \
	VFMADD231PS  Y15, A, OUT

// func intTile4x8AVXVNNI(tq *byte, td *float32, nb uintptr, x *byte, xs uintptr, xd *float32, xc *int32, ds uintptr, out *float32, os uintptr)
// Four activation rows (xs bytes apart; scales and corrections ds bytes apart) times eight
// rows of a repacked tile: the 32 bytes at tq+g*64 of each block's group g (tq points at
// rows 0..7 or 8..15 of the 16), scales at td (8 of each block's 16); out rows os bytes
// apart, 8 float32 each.
TEXT ·intTile4x8AVXVNNI(SB), NOSPLIT, $0-80
	MOVQ tq+0(FP), SI
	MOVQ td+8(FP), DI
	MOVQ nb+16(FP), CX
	MOVQ x+24(FP), R8
	MOVQ xs+32(FP), R9
	MOVQ xd+40(FP), R10
	MOVQ xc+48(FP), R11
	MOVQ ds+56(FP), R12
	MOVQ out+64(FP), DX
	MOVQ os+72(FP), BX
	LEAQ (R9)(R9*2), R13
	LEAQ (R12)(R12*2), AX
	VPXOR Y0, Y0, Y0
	VPXOR Y1, Y1, Y1
	VPXOR Y2, Y2, Y2
	VPXOR Y3, Y3, Y3
	TESTQ CX, CX
	JZ    atiledone

atileloop:
	// Each row's integer sum starts from its block's correction -off * Σ x.
	VPBROADCASTD (R11), Y4
	VPBROADCASTD (R11)(R12*1), Y5
	VPBROADCASTD (R11)(R12*2), Y6
	VPBROADCASTD (R11)(AX*1), Y7
	VPXOR Y8, Y8, Y8
	VPXOR Y9, Y9, Y9
	VPXOR Y10, Y10, Y10
	VPXOR Y11, Y11, Y11
	AEVEN(0)
	AODD(1)
	AEVEN(2)
	AODD(3)
	AEVEN(4)
	AODD(5)
	AEVEN(6)
	AODD(7)
	VMOVUPS (DI), Y14
	AFINISH(Y4, Y8, (R10), Y0)
	AFINISH(Y5, Y9, (R10)(R12*1), Y1)
	AFINISH(Y6, Y10, (R10)(R12*2), Y2)
	AFINISH(Y7, Y11, (R10)(AX*1), Y3)
	ADDQ $512, SI
	ADDQ $64, DI
	ADDQ $32, R8
	ADDQ $4, R10
	ADDQ $4, R11
	DECQ CX
	JNZ  atileloop

atiledone:
	VMOVUPS Y0, (DX)
	VMOVUPS Y1, (DX)(BX*1)
	VMOVUPS Y2, (DX)(BX*2)
	LEAQ    (BX)(BX*2), BX
	VMOVUPS Y3, (DX)(BX*1)
	VZEROUPPER
	RET

// Repacking eight weight rows (half of an IntTile's 16) one block at a time: Y0..Y7 hold
// the unsigned quants of rows 0..7 (8 dwords each: groups 0..7), TRANSPOSE8 turns them into
// Y8..Y15 = group g of rows 0..7 for g = 0..7, and ASTORE8 writes those 64 bytes apart.
#define TRANSPOSE8 \
	VPUNPCKLDQ Y1, Y0, Y8 ; VPUNPCKHDQ Y1, Y0, Y9 ; \
	VPUNPCKLDQ Y3, Y2, Y10 ; VPUNPCKHDQ Y3, Y2, Y11 ; \
	VPUNPCKLDQ Y5, Y4, Y12 ; VPUNPCKHDQ Y5, Y4, Y13 ; \
	VPUNPCKLDQ Y7, Y6, Y14 ; VPUNPCKHDQ Y7, Y6, Y15 ; \
	VPUNPCKLQDQ Y10, Y8, Y0 ; VPUNPCKHQDQ Y10, Y8, Y1 ; \
	VPUNPCKLQDQ Y11, Y9, Y2 ; VPUNPCKHQDQ Y11, Y9, Y3 ; \
	VPUNPCKLQDQ Y14, Y12, Y4 ; VPUNPCKHQDQ Y14, Y12, Y5 ; \
	VPUNPCKLQDQ Y15, Y13, Y6 ; VPUNPCKHQDQ Y15, Y13, Y7 ; \
	VPERM2I128 $0x20, Y4, Y0, Y8 ; VPERM2I128 $0x31, Y4, Y0, Y12 ; \
	VPERM2I128 $0x20, Y5, Y1, Y9 ; VPERM2I128 $0x31, Y5, Y1, Y13 ; \
	VPERM2I128 $0x20, Y6, Y2, Y10 ; VPERM2I128 $0x31, Y6, Y2, Y14 ; \
	VPERM2I128 $0x20, Y7, Y3, Y11 ; VPERM2I128 $0x31, Y7, Y3, Y15

#define ASTORE8 \
	VMOVDQU Y8, (DI)     ; VMOVDQU Y9, 64(DI)   ; \
	VMOVDQU Y10, 128(DI) ; VMOVDQU Y11, 192(DI) ; \
	VMOVDQU Y12, 256(DI) ; VMOVDQU Y13, 320(DI) ; \
	VMOVDQU Y14, 384(DI) ; VMOVDQU Y15, 448(DI)

// ASCALES8 converts the half scales of the eight rows' blocks (rows at SI and R12, + 0, R8,
// 2*R8, R9) to float32 at (DX).
#define ASCALES8 \
	VPINSRW   $0, (SI), X8, X8 ; \
	VPINSRW   $1, (SI)(R8*1), X8, X8 ; \
	VPINSRW   $2, (SI)(R8*2), X8, X8 ; \
	VPINSRW   $3, (SI)(R9*1), X8, X8 ; \
	VPINSRW   $4, (R12), X8, X8 ; \
	VPINSRW   $5, (R12)(R8*1), X8, X8 ; \
	VPINSRW   $6, (R12)(R8*2), X8, X8 ; \
	VPINSRW   $7, (R12)(R9*1), X8, X8 ; \
	VCVTPH2PS X8, Y8 ; \
	VMOVUPS   Y8, (DX)

// The repack kernels prefetch the same block of the next tile's rows (the
// eight rows 16 on: R10, R11 + 0, R8, 2*R8, R9), as the AVX-512 ones do (vnni_amd64.s,
// REPACKPREFETCH): generation's weights come from memory, in more side-by-side streams than
// the hardware prefetchers follow.
#define AREPACKPREFETCHARGS \
	MOVQ R8, R10 ; \
	SHLQ $4, R10 ; \
	LEAQ (R12)(R10*1), R11 ; \
	ADDQ SI, R10

#define AREPACKPREFETCH(size) \
	PREFETCHT0 (R10) ; PREFETCHT0 (R10)(R8*1) ; PREFETCHT0 (R10)(R8*2) ; PREFETCHT0 (R10)(R9*1) ; \
	PREFETCHT0 (R11) ; PREFETCHT0 (R11)(R8*1) ; PREFETCHT0 (R11)(R8*2) ; PREFETCHT0 (R11)(R9*1) ; \
	ADDQ $size, R10 ; ADDQ $size, R11

// AQ8ROW loads the quants of the row at a into Y, sign bits flipped (AX: 0x80 bytes).
#define AQ8ROW(a, Y) \
	VPXOR a, Y15, Y

// func repackQ8_0x8AVXVNNI(tq *byte, td *float32, w *byte, ws, nb uintptr)
// Eight Q8_0 rows ws bytes apart into the half tile at tq (group g of each block at +g*64)
// and their scales at td (16 floats apart per block).
TEXT ·repackQ8_0x8AVXVNNI(SB), NOSPLIT, $0-40
	AREPACKARGS
	AREPACKPREFETCHARGS
	MOVL $0x80808080, AX

arq8loop:
	AREPACKPREFETCH(34)
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15
	AQ8ROW(2(SI), Y0)
	AQ8ROW(2(SI)(R8*1), Y1)
	AQ8ROW(2(SI)(R8*2), Y2)
	AQ8ROW(2(SI)(R9*1), Y3)
	AQ8ROW(2(R12), Y4)
	AQ8ROW(2(R12)(R8*1), Y5)
	AQ8ROW(2(R12)(R8*2), Y6)
	AQ8ROW(2(R12)(R9*1), Y7)
	TRANSPOSE8
	ASTORE8
	ASCALES8
	ADDQ $64, DX
	ADDQ $34, SI
	ADDQ $34, R12
	ADDQ $512, DI
	DECQ CX
	JNZ  arq8loop
	VZEROUPPER
	RET

// AQ4ROW loads a Q4_0 block's 16 bytes at a as its 32 nibbles in element order into Y
// (Y15: 0x0f bytes; X14 scratch).
#define AQ4ROW(a, X, Y) \
	VMOVDQU     a, X ; \
	VPSRLW      $4, X, X14 ; \
	VINSERTI128 $1, X14, Y, Y ; \
	VPAND       Y15, Y, Y

// func repackQ4_0x8AVXVNNI(tq *byte, td *float32, w *byte, ws, nb uintptr)
// repackQ8_0x8AVXVNNI for Q4_0 rows (u = the nibble).
TEXT ·repackQ4_0x8AVXVNNI(SB), NOSPLIT, $0-40
	AREPACKARGS
	AREPACKPREFETCHARGS
	MOVL $0x0f0f0f0f, AX

arq4loop:
	AREPACKPREFETCH(18)
	VMOVD        AX, X15
	VPBROADCASTD X15, Y15
	AQ4ROW(2(SI), X0, Y0)
	AQ4ROW(2(SI)(R8*1), X1, Y1)
	AQ4ROW(2(SI)(R8*2), X2, Y2)
	AQ4ROW(2(SI)(R9*1), X3, Y3)
	AQ4ROW(2(R12), X4, Y4)
	AQ4ROW(2(R12)(R8*1), X5, Y5)
	AQ4ROW(2(R12)(R8*2), X6, Y6)
	AQ4ROW(2(R12)(R9*1), X7, Y7)
	TRANSPOSE8
	ASTORE8
	ASCALES8
	ADDQ $64, DX
	ADDQ $18, SI
	ADDQ $18, R12
	ADDQ $512, DI
	DECQ CX
	JNZ  arq4loop
	VZEROUPPER
	RET

// AROUND rounds the float32 lanes of Y half away from zero to int32 (C's roundf, for
// |values| < 2^31): truncate, then step away from zero where the fraction is at least one
// half. Y11 = 0.5, Y12 = -0.5; Y4..Y6 scratch.
#define AROUND(Y) \
	VCVTTPS2DQ Y, Y4 ; \
	VCVTDQ2PS  Y4, Y5 ; \
	VSUBPS     Y5, Y, Y5 ; \
	VCMPPS     $0x0d, Y11, Y5, Y6 ; \
	VPSUBD     Y6, Y4, Y4 ; \
	VCMPPS     $0x02, Y12, Y5, Y6 ; \
	VPADDD     Y6, Y4, Y4 ; \
	VMOVDQU    Y4, Y

// ANOTFINITE ors into Y8 the lanes of Y that are NaN or Inf: !(|x| <= MaxFloat32).
#define ANOTFINITE(Y) \
	VANDPS Y9, Y, Y4 ; \
	VCMPPS $0x16, Y10, Y4, Y5 ; \
	VORPS  Y5, Y8, Y8

// func quantActAVXVNNI(x *float32, nb uintptr, q *byte, d *float32, c *int32, off int32) (bad uint32)
// Quantizes nb blocks of 32 values as quantizeActGeneric; bad is nonzero if a value was
// not finite (the outputs are then meaningless).
TEXT ·quantActAVXVNNI(SB), NOSPLIT, $0-52
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ q+16(FP), DI
	MOVQ d+24(FP), DX
	MOVQ c+32(FP), R8
	MOVL off+40(FP), R9
	NEGL R9
	VPXOR Y8, Y8, Y8              // lanes that met a value not finite
	MOVL $0x7fffffff, AX
	VMOVD AX, X9
	VPBROADCASTD X9, Y9           // abs mask
	MOVL $0x7f7fffff, AX
	VMOVD AX, X10
	VPBROADCASTD X10, Y10         // MaxFloat32
	MOVL $0x3f000000, AX
	VMOVD AX, X11
	VPBROADCASTD X11, Y11         // 0.5
	MOVL $0xbf000000, AX
	VMOVD AX, X12
	VPBROADCASTD X12, Y12         // -0.5
	MOVQ $·aPackOrder(SB), AX
	VMOVDQU (AX), Y13             // dword order after the two packs
	TESTQ CX, CX
	JZ    aqadone

aqaloop:
	VMOVUPS (SI), Y0
	VMOVUPS 32(SI), Y1
	VMOVUPS 64(SI), Y2
	VMOVUPS 96(SI), Y3
	ANOTFINITE(Y0)
	ANOTFINITE(Y1)
	ANOTFINITE(Y2)
	ANOTFINITE(Y3)
	VANDPS  Y9, Y0, Y4
	VANDPS  Y9, Y1, Y5
	VMAXPS  Y5, Y4, Y4
	VANDPS  Y9, Y2, Y5
	VANDPS  Y9, Y3, Y6
	VMAXPS  Y6, Y5, Y5
	VMAXPS  Y5, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VMAXPS  X5, X4, X4
	VPERMILPS $0x4e, X4, X5
	VMAXPS  X5, X4, X4
	VPERMILPS $0xb1, X4, X5
	VMAXPS  X5, X4, X4            // amax in every lane
	MOVL    $0x42fe0000, AX
	VMOVD   AX, X14               // 127.0
	VDIVSS  X14, X4, X6           // d = amax / 127
	MOVL    $0x3f800000, AX
	VMOVD   AX, X14               // 1.0
	VDIVSS  X6, X14, X7           // 1/d
	VXORPS  X14, X14, X14
	VCMPSS  $4, X14, X6, X5       // d != 0
	VANDPS  X5, X7, X7            // id = d != 0 ? 1/d : 0
	VCVTPS2PH $0, X6, X5          // the stored half, nearest even
	VCVTPH2PS X5, X5
	VMOVSS  X5, (DX)
	VBROADCASTSS X7, Y7
	VMULPS  Y7, Y0, Y0
	VMULPS  Y7, Y1, Y1
	VMULPS  Y7, Y2, Y2
	VMULPS  Y7, Y3, Y3
	AROUND(Y0)
	AROUND(Y1)
	AROUND(Y2)
	AROUND(Y3)
	// The correction -off * Σ q.
	VPADDD  Y1, Y0, Y4
	VPADDD  Y3, Y2, Y5
	VPADDD  Y5, Y4, Y4
	VEXTRACTI128 $1, Y4, X5
	VPADDD  X5, X4, X4
	VPSHUFD $0x4e, X4, X5
	VPADDD  X5, X4, X4
	VPSHUFD $0xb1, X4, X5
	VPADDD  X5, X4, X4
	VMOVD   X4, AX
	IMULL   R9, AX
	MOVL    AX, (R8)
	// int32 -> int8 (|q| <= 127: no saturation), then the dwords back in element order.
	VPACKSSDW Y1, Y0, Y0
	VPACKSSDW Y3, Y2, Y2
	VPACKSSWB Y2, Y0, Y0
	VPERMD    Y0, Y13, Y0
	VMOVDQU   Y0, (DI)
	ADDQ $128, SI
	ADDQ $32, DI
	ADDQ $4, DX
	ADDQ $4, R8
	DECQ CX
	JNZ  aqaloop

aqadone:
	VMOVMSKPS Y8, AX
	MOVL  AX, bad+48(FP)
	VZEROUPPER
	RET

// aPackOrder: after VPACKSSDW and VPACKSSWB, the 128-bit lanes hold the element groups of
// four (dwords) 0, 2, 4, 6 and 1, 3, 5, 7; VPERMD with these indices puts them in order.
DATA ·aPackOrder+0(SB)/4, $0
DATA ·aPackOrder+4(SB)/4, $4
DATA ·aPackOrder+8(SB)/4, $1
DATA ·aPackOrder+12(SB)/4, $5
DATA ·aPackOrder+16(SB)/4, $2
DATA ·aPackOrder+20(SB)/4, $6
DATA ·aPackOrder+24(SB)/4, $3
DATA ·aPackOrder+28(SB)/4, $7
GLOBL ·aPackOrder(SB), RODATA|NOPTR, $32
