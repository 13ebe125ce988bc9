//go:build !purego

#include "textflag.h"

// The integer path's kernels (AVX-512 VNNI): see intdot.go for the arithmetic they share with
// the generic reference, bit for bit. VPDPBUSD multiplies the unsigned bytes of its second
// source (Go's middle operand: the weights, offset to unsigned) by the signed bytes of its
// first (the activations) and adds groups of four products to each int32 lane.

// TILEGROUP4 accumulates the integer sums of four activation rows with the 16 tile rows for
// the 4-element group g: ACC += W . broadcast(x[4g..4g+3]). Even groups go to Z4..Z7, odd ones
// to Z16..Z19 (two dependency chains per row; VPDPBUSD's latency would bound one).
#define TILEGROUP4(g, W, A0, A1, A2, A3) \
	VMOVDQU32         (g*64)(SI), W ; \
	VPDPBUSD.BCST     (g*4)(R8), W, A0 ; \
	VPDPBUSD.BCST     (g*4)(R8)(R9*1), W, A1 ; \
	VPDPBUSD.BCST     (g*4)(R8)(R9*2), W, A2 ; \
	VPDPBUSD.BCST     (g*4)(R8)(R13*1), W, A3

#define TILE4EVEN(g) TILEGROUP4(g, Z8, Z4, Z5, Z6, Z7)
#define TILE4ODD(g) TILEGROUP4(g, Z9, Z16, Z17, Z18, Z19)

// TILEGROUP8 is TILEGROUP4 for eight rows: rows 4..7 at AX instead of R8.
#define TILEGROUP8(g, W, A0, A1, A2, A3, A4, A5, A6, A7) \
	VMOVDQU32         (g*64)(SI), W ; \
	VPDPBUSD.BCST     (g*4)(R8), W, A0 ; \
	VPDPBUSD.BCST     (g*4)(R8)(R9*1), W, A1 ; \
	VPDPBUSD.BCST     (g*4)(R8)(R9*2), W, A2 ; \
	VPDPBUSD.BCST     (g*4)(R8)(R13*1), W, A3 ; \
	VPDPBUSD.BCST     (g*4)(AX), W, A4 ; \
	VPDPBUSD.BCST     (g*4)(AX)(R9*1), W, A5 ; \
	VPDPBUSD.BCST     (g*4)(AX)(R9*2), W, A6 ; \
	VPDPBUSD.BCST     (g*4)(AX)(R13*1), W, A7

#define TILE8EVEN(g) TILEGROUP8(g, Z24, Z8, Z9, Z10, Z11, Z12, Z13, Z14, Z15)
#define TILE8ODD(g) TILEGROUP8(g, Z25, Z16, Z17, Z18, Z19, Z20, Z21, Z22, Z23)

// FINISH turns a row's two integer accumulators into its block's float32 term and adds it:
// OUT = fma(float32(A + B) * dw (Z in W), dx (broadcast from xd), OUT).
#define FINISH(A, B, W, xd, OUT) \
	VPADDD    B, A, A ; \
	VCVTDQ2PS A, A ; \
	VMULPS    W, A, A ; \
	VFMADD231PS.BCST xd, A, OUT

// ROWS4 finishes one block of the streaming kernels: Y4..Y7 hold the int32 lane sums of rows
// 0..3; reduce them to one sum per row (X8), add the correction, scale by the rows' halves
// (at (SI) in each row) and by the activation's scale, accumulate into X0.
#define ROWS4 \
	VPHADDD      Y5, Y4, Y8 ; \
	VPHADDD      Y7, Y6, Y9 ; \
	VPHADDD      Y9, Y8, Y8 ; \
	VEXTRACTI128 $1, Y8, X9 ; \
	VPADDD       X9, X8, X8 ; \
	VPADDD.BCST  (R11), X8, X8 ; \
	VCVTDQ2PS    X8, X8 ; \
	VPINSRW      $0, (SI), X10, X10 ; \
	VPINSRW      $1, (SI)(BX*1), X10, X10 ; \
	VPINSRW      $2, (SI)(BX*2), X10, X10 ; \
	VPINSRW      $3, (SI)(R9*1), X10, X10 ; \
	VCVTPH2PS    X10, X10 ; \
	VMULPS       X10, X8, X8 ; \
	VFMADD231PS.BCST (R10), X8, X0

// The streaming kernels prefetch as the float path's MatVec4 kernels do (cpu/PERF.md, steps
// 4 and D): the rows of a 4-row group are short and the hardware prefetchers do not run ahead
// across them, so each block prefetches the same place of the next four rows into L1 (R12)
// and of the rows 32 on into L2 (R13). Prefetching along the same rows instead (8 blocks
// ahead) left generation ~30% slower than the float path's on Q4_0 (cpu/PERF.md, "Integer
// path, round 4").
#define ROWSPREFETCHARGS \
	LEAQ (SI)(BX*4), R12 ; \
	MOVQ BX, R13 ; \
	SHLQ $5, R13 ; \
	ADDQ SI, R13

#define ROWSPREFETCH(size) \
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

#define ROWSARGS \
	MOVQ x+0(FP), DI ; \
	MOVQ xd+8(FP), R10 ; \
	MOVQ xc+16(FP), R11 ; \
	MOVQ w+24(FP), SI ; \
	MOVQ ws+32(FP), BX ; \
	MOVQ nb+40(FP), CX ; \
	MOVQ out+48(FP), DX ; \
	LEAQ (BX)(BX*2), R9 ; \
	ROWSPREFETCHARGS ; \
	VPXORD X0, X0, X0 ; \
	VPXORD X10, X10, X10

// Q4NIB loads the 16 bytes of a Q4_0 block's nibbles at addr into Y as 32 unsigned bytes in
// element order (low nibbles: elements 0..15, high nibbles: 16..31); Y15 holds 0x0f bytes.
#define Q4NIB(addr, X, Y, XT) \
	VMOVDQU      addr, X ; \
	VPSRLW       $4, X, XT ; \
	VINSERTI128  $1, XT, Y, Y ; \
	VPAND        Y15, Y, Y

// The pair kernels (defined before any TEXT, as go vet reads the file): two activation rows
// (xs bytes apart; scales and corrections ds bytes apart) times four weight rows, each weight block loaded and unpacked once for both rows
// (Y2, Y3, Y12, Y13) with its rows' halves (X10); each activation row then takes exactly the
// single-row kernel's steps (PAIRROW is ROWS4 on those registers), so its results have that
// kernel's bits. Row 0 accumulates in X0, row 1 in X11; out rows os bytes apart.
#define PAIRARGS \
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
	ROWSPREFETCHARGS ; \
	VPXORD X0, X0, X0 ; \
	VPXORD X11, X11, X11 ; \
	VPXORD X10, X10, X10

// PAIRSCALES converts the four weight rows' halves at (SI) to float32 in X10.
#define PAIRSCALES \
	VPINSRW   $0, (SI), X10, X10 ; \
	VPINSRW   $1, (SI)(BX*1), X10, X10 ; \
	VPINSRW   $2, (SI)(BX*2), X10, X10 ; \
	VPINSRW   $3, (SI)(R9*1), X10, X10 ; \
	VCVTPH2PS X10, X10

// PAIRROW: one activation row's block (x at xa, correction at xc, scale at xd) times the
// four unpacked weight rows, into ACC, as ROWS4 does it.
#define PAIRROW(xa, xc, xd, ACC) \
	VMOVDQU      xa, Y1 ; \
	VPXOR        Y4, Y4, Y4 ; \
	VPXOR        Y5, Y5, Y5 ; \
	VPXOR        Y6, Y6, Y6 ; \
	VPXOR        Y7, Y7, Y7 ; \
	VPDPBUSD     Y1, Y2, Y4 ; \
	VPDPBUSD     Y1, Y3, Y5 ; \
	VPDPBUSD     Y1, Y12, Y6 ; \
	VPDPBUSD     Y1, Y13, Y7 ; \
	VPHADDD      Y5, Y4, Y8 ; \
	VPHADDD      Y7, Y6, Y9 ; \
	VPHADDD      Y9, Y8, Y8 ; \
	VEXTRACTI128 $1, Y8, X9 ; \
	VPADDD       X9, X8, X8 ; \
	VPADDD.BCST  xc, X8, X8 ; \
	VCVTDQ2PS    X8, X8 ; \
	VMULPS       X10, X8, X8 ; \
	VFMADD231PS.BCST xd, X8, ACC

#define PAIRNEXT(size, loop) \
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

// Repacking 16 weight rows into an IntTile (intdot.go), one block at a time: Z0..Z7 hold the
// unsigned quants of row pairs (Zp = row 2p's 8 dwords, then row 2p+1's), TRANSPOSE16 turns
// them into Z8..Z15 = dword g of rows 0..15 for g = 0..7 (three rounds of VPERMT2D over
// pairs of registers; Z24..Z29 hold the index vectors), and STORE8 writes those to (DI).

#define PERM2(a, b, idx, dst) \
	VMOVDQA64 a, dst ; \
	VPERMT2D  b, idx, dst

#define TRANSPOSE16 \
	PERM2(Z0, Z1, Z24, Z8)  ; PERM2(Z0, Z1, Z25, Z9)  ; \
	PERM2(Z2, Z3, Z24, Z10) ; PERM2(Z2, Z3, Z25, Z11) ; \
	PERM2(Z4, Z5, Z24, Z12) ; PERM2(Z4, Z5, Z25, Z13) ; \
	PERM2(Z6, Z7, Z24, Z14) ; PERM2(Z6, Z7, Z25, Z15) ; \
	PERM2(Z8, Z10, Z26, Z0) ; PERM2(Z8, Z10, Z27, Z1) ; \
	PERM2(Z9, Z11, Z26, Z2) ; PERM2(Z9, Z11, Z27, Z3) ; \
	PERM2(Z12, Z14, Z26, Z4) ; PERM2(Z12, Z14, Z27, Z5) ; \
	PERM2(Z13, Z15, Z26, Z6) ; PERM2(Z13, Z15, Z27, Z7) ; \
	PERM2(Z0, Z4, Z28, Z8)  ; PERM2(Z0, Z4, Z29, Z9)  ; \
	PERM2(Z1, Z5, Z28, Z10) ; PERM2(Z1, Z5, Z29, Z11) ; \
	PERM2(Z2, Z6, Z28, Z12) ; PERM2(Z2, Z6, Z29, Z13) ; \
	PERM2(Z3, Z7, Z28, Z14) ; PERM2(Z3, Z7, Z29, Z15)

// SCALES16 gathers the half scales of the 16 rows' blocks at (SI) (Z22: the rows' byte
// offsets) and stores them as float32 at (DX).
#define SCALES16 \
	KXNORW     K1, K1, K1 ; \
	VPGATHERDD (SI)(Z22*1), K1, Z21 ; \
	VPMOVDW    Z21, Y21 ; \
	VCVTPH2PS  Y21, Z21 ; \
	VMOVUPS    Z21, (DX)

#define STORE8 \
	VMOVDQU32 Z8, (DI)     ; VMOVDQU32 Z9, 64(DI)   ; \
	VMOVDQU32 Z10, 128(DI) ; VMOVDQU32 Z11, 192(DI) ; \
	VMOVDQU32 Z12, 256(DI) ; VMOVDQU32 Z13, 320(DI) ; \
	VMOVDQU32 Z14, 384(DI) ; VMOVDQU32 Z15, 448(DI)

// Rows 4k..4k+3 of the 16 are at base (SI, R12, R13, BX for k = 0..3) + 0, R8, 2*R8, R9.
#define REPACKARGS \
	MOVQ tq+0(FP), DI ; \
	MOVQ td+8(FP), DX ; \
	MOVQ w+16(FP), SI ; \
	MOVQ ws+24(FP), R8 ; \
	MOVQ nb+32(FP), CX ; \
	MOVQ offs+48(FP), AX ; \
	VMOVDQU32 (AX), Z22 ; \
	MOVQ idx+40(FP), AX ; \
	VMOVDQU32 (AX), Z24 ; \
	VMOVDQU32 64(AX), Z25 ; \
	VMOVDQU32 128(AX), Z26 ; \
	VMOVDQU32 192(AX), Z27 ; \
	VMOVDQU32 256(AX), Z28 ; \
	VMOVDQU32 320(AX), Z29 ; \
	LEAQ (R8)(R8*2), R9 ; \
	LEAQ (SI)(R8*4), R12 ; \
	LEAQ (R12)(R8*4), R13 ; \
	LEAQ (R13)(R8*4), BX

// REPACKPREFETCH prefetches the same block of the next tile's 16 rows (rows 16..31: R10, R11,
// R14, AX + 0, R8, 2*R8, R9), which the next repack reads: in generation the weights come from
// memory, and sixteen short rows read side by side are more streams than the hardware
// prefetchers follow. Set up by REPACKPREFETCHARGS (after AX's last other use).
#define REPACKPREFETCHARGS \
	LEAQ (BX)(R8*4), R10 ; \
	LEAQ (R10)(R8*4), R11 ; \
	LEAQ (R11)(R8*4), R14 ; \
	LEAQ (R14)(R8*4), AX

#define REPACKPREFETCH(size) \
	PREFETCHT0 (R10) ; PREFETCHT0 (R10)(R8*1) ; PREFETCHT0 (R10)(R8*2) ; PREFETCHT0 (R10)(R9*1) ; \
	PREFETCHT0 (R11) ; PREFETCHT0 (R11)(R8*1) ; PREFETCHT0 (R11)(R8*2) ; PREFETCHT0 (R11)(R9*1) ; \
	PREFETCHT0 (R14) ; PREFETCHT0 (R14)(R8*1) ; PREFETCHT0 (R14)(R8*2) ; PREFETCHT0 (R14)(R9*1) ; \
	PREFETCHT0 (AX) ; PREFETCHT0 (AX)(R8*1) ; PREFETCHT0 (AX)(R8*2) ; PREFETCHT0 (AX)(R9*1) ; \
	ADDQ $size, R10 ; ADDQ $size, R11 ; ADDQ $size, R14 ; ADDQ $size, AX

// Q8PAIR loads the quants of rows at a and b into Z, sign bits flipped (Z30: 0x80 bytes).
#define Q8PAIR(a, b, Y, Z) \
	VMOVDQU      a, Y ; \
	VINSERTI64X4 $1, b, Z, Z ; \
	VPXORD       Z30, Z, Z

// Q4ROW loads a Q4_0 block's 16 bytes at a as its 32 nibbles in element order (masked later).
#define Q4ROW(a, X, Y) \
	VMOVDQU     a, X ; \
	VPSRLW      $4, X, X15 ; \
	VINSERTI128 $1, X15, Y, Y

// Q4PAIR: rows at a and b into Z (Z30: 0x0f bytes; Y14, X15 scratch).
#define Q4PAIR(a, b, X, Y, Z) \
	Q4ROW(a, X, Y) ; \
	Q4ROW(b, X14, Y14) ; \
	VINSERTI64X4 $1, Y14, Z, Z ; \
	VPANDD       Z30, Z, Z

// func intTile4VNNI(tq *byte, td *float32, nb uintptr, x *byte, xs uintptr, xd *float32, xc *int32, ds uintptr, out *float32, os uintptr)
// Four activation rows (xs bytes apart; scales and corrections ds bytes apart) times the 16
// rows of a repacked tile; out rows os bytes apart, 16 float32 each.
TEXT ·intTile4VNNI(SB), NOSPLIT, $0-80
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
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	TESTQ CX, CX
	JZ    tiledone

tileloop:
	// Each row's integer sum starts from its block's correction -off * Σ x.
	VPBROADCASTD (R11), Z4
	VPBROADCASTD (R11)(R12*1), Z5
	VPBROADCASTD (R11)(R12*2), Z6
	VPBROADCASTD (R11)(AX*1), Z7
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	TILE4EVEN(0)
	TILE4ODD(1)
	TILE4EVEN(2)
	TILE4ODD(3)
	TILE4EVEN(4)
	TILE4ODD(5)
	TILE4EVEN(6)
	TILE4ODD(7)
	VMOVUPS (DI), Z10
	FINISH(Z4, Z16, Z10, (R10), Z0)
	FINISH(Z5, Z17, Z10, (R10)(R12*1), Z1)
	FINISH(Z6, Z18, Z10, (R10)(R12*2), Z2)
	FINISH(Z7, Z19, Z10, (R10)(AX*1), Z3)
	ADDQ $512, SI
	ADDQ $64, DI
	ADDQ $32, R8
	ADDQ $4, R10
	ADDQ $4, R11
	DECQ CX
	JNZ  tileloop

tiledone:
	VMOVUPS Z0, (DX)
	VMOVUPS Z1, (DX)(BX*1)
	VMOVUPS Z2, (DX)(BX*2)
	LEAQ    (BX)(BX*2), BX
	VMOVUPS Z3, (DX)(BX*1)
	VZEROUPPER
	RET

// func intRowsQ8_0x4VNNI(x *byte, xd *float32, xc *int32, w *byte, ws, nb uintptr, out *[4]float32)
// One activation row times four Q8_0 weight rows ws bytes apart; nb >= 1 blocks.
TEXT ·intRowsQ8_0x4VNNI(SB), NOSPLIT, $0-56
	ROWSARGS
	MOVL $0x80808080, AX
	VPBROADCASTD AX, Y15

q8loop:
	ROWSPREFETCH(34)
	VMOVDQU (DI), Y1
	VPXOR   Y4, Y4, Y4
	VPXOR   Y5, Y5, Y5
	VPXOR   Y6, Y6, Y6
	VPXOR   Y7, Y7, Y7
	VPXORD  2(SI), Y15, Y12
	VPDPBUSD Y1, Y12, Y4
	VPXORD  2(SI)(BX*1), Y15, Y13
	VPDPBUSD Y1, Y13, Y5
	VPXORD  2(SI)(BX*2), Y15, Y12
	VPDPBUSD Y1, Y12, Y6
	VPXORD  2(SI)(R9*1), Y15, Y13
	VPDPBUSD Y1, Y13, Y7
	ROWS4
	ADDQ $34, SI
	ADDQ $32, DI
	ADDQ $4, R10
	ADDQ $4, R11
	DECQ CX
	JNZ  q8loop
	VMOVUPS X0, (DX)
	VZEROUPPER
	RET

// func intRowsQ4_0x4VNNI(x *byte, xd *float32, xc *int32, w *byte, ws, nb uintptr, out *[4]float32)
// One activation row times four Q4_0 weight rows ws bytes apart; nb >= 1 blocks.
TEXT ·intRowsQ4_0x4VNNI(SB), NOSPLIT, $0-56
	ROWSARGS
	MOVL $0x0f0f0f0f, AX
	VPBROADCASTD AX, Y15

q4loop:
	ROWSPREFETCH(18)
	VMOVDQU (DI), Y1
	VPXOR   Y4, Y4, Y4
	VPXOR   Y5, Y5, Y5
	VPXOR   Y6, Y6, Y6
	VPXOR   Y7, Y7, Y7
	Q4NIB(2(SI), X12, Y12, X14)
	VPDPBUSD Y1, Y12, Y4
	Q4NIB(2(SI)(BX*1), X13, Y13, X14)
	VPDPBUSD Y1, Y13, Y5
	Q4NIB(2(SI)(BX*2), X12, Y12, X14)
	VPDPBUSD Y1, Y12, Y6
	Q4NIB(2(SI)(R9*1), X13, Y13, X14)
	VPDPBUSD Y1, Y13, Y7
	ROWS4
	ADDQ $18, SI
	ADDQ $32, DI
	ADDQ $4, R10
	ADDQ $4, R11
	DECQ CX
	JNZ  q4loop
	VMOVUPS X0, (DX)
	VZEROUPPER
	RET

// func intRowsQ8_0x4x2VNNI(x *byte, xs uintptr, xd *float32, xc *int32, ds uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr)
// Activation rows 0 and 1 times four Q8_0 weight rows ws bytes apart; nb >= 1 blocks.
TEXT ·intRowsQ8_0x4x2VNNI(SB), NOSPLIT, $0-80
	PAIRARGS
	MOVL $0x80808080, AX
	VPBROADCASTD AX, Y15

pq8loop:
	ROWSPREFETCH(34)
	VPXORD 2(SI), Y15, Y2
	VPXORD 2(SI)(BX*1), Y15, Y3
	VPXORD 2(SI)(BX*2), Y15, Y12
	VPXORD 2(SI)(R9*1), Y15, Y13
	PAIRSCALES
	PAIRROW((DI), (R11), (R10), X0)
	PAIRROW((DI)(R8*1), (R11)(R14*1), (R10)(R14*1), X11)
	PAIRNEXT(34, pq8loop)

// func intRowsQ4_0x4x2VNNI(x *byte, xs uintptr, xd *float32, xc *int32, ds uintptr, w *byte, ws, nb uintptr, out *float32, os uintptr)
// Activation rows 0 and 1 times four Q4_0 weight rows ws bytes apart; nb >= 1 blocks.
TEXT ·intRowsQ4_0x4x2VNNI(SB), NOSPLIT, $0-80
	PAIRARGS
	MOVL $0x0f0f0f0f, AX
	VPBROADCASTD AX, Y15

pq4loop:
	ROWSPREFETCH(18)
	Q4NIB(2(SI), X2, Y2, X14)
	Q4NIB(2(SI)(BX*1), X3, Y3, X14)
	Q4NIB(2(SI)(BX*2), X12, Y12, X14)
	Q4NIB(2(SI)(R9*1), X13, Y13, X14)
	PAIRSCALES
	PAIRROW((DI), (R11), (R10), X0)
	PAIRROW((DI)(R8*1), (R11)(R14*1), (R10)(R14*1), X11)
	PAIRNEXT(18, pq4loop)

// func repackQ8_0x16VNNI(tq *byte, td *float32, w *byte, ws, nb uintptr, idx *[6][16]int32, offs *[16]int32)
TEXT ·repackQ8_0x16VNNI(SB), NOSPLIT, $0-56
	REPACKARGS
	MOVL $0x80808080, AX
	VPBROADCASTD AX, Z30
	REPACKPREFETCHARGS

rq8loop:
	REPACKPREFETCH(34)
	Q8PAIR(2(SI), 2(SI)(R8*1), Y0, Z0)
	Q8PAIR(2(SI)(R8*2), 2(SI)(R9*1), Y1, Z1)
	Q8PAIR(2(R12), 2(R12)(R8*1), Y2, Z2)
	Q8PAIR(2(R12)(R8*2), 2(R12)(R9*1), Y3, Z3)
	Q8PAIR(2(R13), 2(R13)(R8*1), Y4, Z4)
	Q8PAIR(2(R13)(R8*2), 2(R13)(R9*1), Y5, Z5)
	Q8PAIR(2(BX), 2(BX)(R8*1), Y6, Z6)
	Q8PAIR(2(BX)(R8*2), 2(BX)(R9*1), Y7, Z7)
	TRANSPOSE16
	STORE8
	SCALES16
	ADDQ $64, DX
	ADDQ $34, SI
	ADDQ $34, R12
	ADDQ $34, R13
	ADDQ $34, BX
	ADDQ $512, DI
	DECQ CX
	JNZ  rq8loop
	VZEROUPPER
	RET

// func repackQ4_0x16VNNI(tq *byte, td *float32, w *byte, ws, nb uintptr, idx *[6][16]int32, offs *[16]int32)
TEXT ·repackQ4_0x16VNNI(SB), NOSPLIT, $0-56
	REPACKARGS
	MOVL $0x0f0f0f0f, AX
	VPBROADCASTD AX, Z30
	REPACKPREFETCHARGS

rq4loop:
	REPACKPREFETCH(18)
	Q4PAIR(2(SI), 2(SI)(R8*1), X0, Y0, Z0)
	Q4PAIR(2(SI)(R8*2), 2(SI)(R9*1), X1, Y1, Z1)
	Q4PAIR(2(R12), 2(R12)(R8*1), X2, Y2, Z2)
	Q4PAIR(2(R12)(R8*2), 2(R12)(R9*1), X3, Y3, Z3)
	Q4PAIR(2(R13), 2(R13)(R8*1), X4, Y4, Z4)
	Q4PAIR(2(R13)(R8*2), 2(R13)(R9*1), X5, Y5, Z5)
	Q4PAIR(2(BX), 2(BX)(R8*1), X6, Y6, Z6)
	Q4PAIR(2(BX)(R8*2), 2(BX)(R9*1), X7, Y7, Z7)
	TRANSPOSE16
	STORE8
	SCALES16
	ADDQ $64, DX
	ADDQ $18, SI
	ADDQ $18, R12
	ADDQ $18, R13
	ADDQ $18, BX
	ADDQ $512, DI
	DECQ CX
	JNZ  rq4loop
	VZEROUPPER
	RET

// func quantActVNNI(x *float32, nb uintptr, q *byte, d *float32, c *int32, off int32) (bad uint16)
// Quantizes nb blocks of 32 values as quantizeActGeneric; bad is nonzero if a value was
// not finite (the outputs are then meaningless).
TEXT ·quantActVNNI(SB), NOSPLIT, $0-50
	MOVQ x+0(FP), SI
	MOVQ nb+8(FP), CX
	MOVQ q+16(FP), DI
	MOVQ d+24(FP), DX
	MOVQ c+32(FP), R8
	MOVL off+40(FP), R9
	NEGL R9
	MOVL $0x7fffffff, AX
	VPBROADCASTD AX, Z31          // abs mask
	MOVL $0x7f7fffff, AX
	VPBROADCASTD AX, Z30          // MaxFloat32
	MOVL $0x3f000000, AX
	VPBROADCASTD AX, Z29          // 0.5
	MOVL $0xbf000000, AX
	VPBROADCASTD AX, Z28          // -0.5
	MOVL $1, AX
	VPBROADCASTD AX, Z27          // int 1
	MOVL $0x42fe0000, AX
	VMOVD AX, X14                 // 127.0
	MOVL $0x3f800000, AX
	VMOVD AX, X13                 // 1.0
	VPXOR  X15, X15, X15          // 0.0
	KXORW K3, K3, K3
	TESTQ CX, CX
	JZ    qadone

qaloop:
	VMOVUPS (SI), Z0
	VMOVUPS 64(SI), Z1
	VANDPS  Z31, Z0, Z2
	VANDPS  Z31, Z1, Z3
	VCMPPS  $0x16, Z30, Z2, K2    // !(|x| <= MaxFloat32): NaN or Inf
	KORW    K2, K3, K3
	VCMPPS  $0x16, Z30, Z3, K2
	KORW    K2, K3, K3
	VMAXPS  Z3, Z2, Z4
	VEXTRACTF64X4 $1, Z4, Y5
	VMAXPS  Y5, Y4, Y4
	VEXTRACTF128 $1, Y4, X5
	VMAXPS  X5, X4, X4
	VPERMILPS $0x4e, X4, X5
	VMAXPS  X5, X4, X4
	VPERMILPS $0xb1, X4, X5
	VMAXPS  X5, X4, X4            // amax in every lane
	VDIVSS  X14, X4, X6           // d = amax / 127
	VDIVSS  X6, X13, X7           // 1/d
	VCMPSS  $4, X15, X6, X8       // d != 0
	VANDPS  X8, X7, X7            // id = d != 0 ? 1/d : 0
	VCVTPS2PH $0, X6, X9          // the stored half, nearest even
	VCVTPH2PS X9, X9
	VMOVSS  X9, (DX)
	VBROADCASTSS X7, Z7
	VMULPS  Z7, Z0, Z0
	VMULPS  Z7, Z1, Z1
	// roundf: truncate, then step away from zero where the fraction is at least one half.
	VCVTTPS2DQ Z0, Z10
	VCVTTPS2DQ Z1, Z11
	VCVTDQ2PS Z10, Z16
	VCVTDQ2PS Z11, Z17
	VSUBPS  Z16, Z0, Z16
	VSUBPS  Z17, Z1, Z17
	VCMPPS  $0x0d, Z29, Z16, K4   // fraction >= 0.5
	VCMPPS  $0x02, Z28, Z16, K5   // fraction <= -0.5
	VPADDD  Z27, Z10, K4, Z10
	VPSUBD  Z27, Z10, K5, Z10
	VCMPPS  $0x0d, Z29, Z17, K4
	VCMPPS  $0x02, Z28, Z17, K5
	VPADDD  Z27, Z11, K4, Z11
	VPSUBD  Z27, Z11, K5, Z11
	VPMOVDB Z10, (DI)
	VPMOVDB Z11, 16(DI)
	// The correction -off * Σ q.
	VPADDD  Z11, Z10, Z10
	VEXTRACTI64X4 $1, Z10, Y11
	VPADDD  Y11, Y10, Y10
	VEXTRACTI128 $1, Y10, X11
	VPADDD  X11, X10, X10
	VPSHUFD $0x4e, X10, X11
	VPADDD  X11, X10, X10
	VPSHUFD $0xb1, X10, X11
	VPADDD  X11, X10, X10
	VMOVD   X10, AX
	IMULL   R9, AX
	MOVL    AX, (R8)
	ADDQ $128, SI
	ADDQ $32, DI
	ADDQ $4, DX
	ADDQ $4, R8
	DECQ CX
	JNZ  qaloop

qadone:
	KMOVW K3, AX
	MOVW  AX, bad+48(FP)
	VZEROUPPER
	RET

// func intTile8VNNI(tq *byte, td *float32, nb uintptr, x *byte, xs uintptr, xd *float32, xc *int32, ds uintptr, out *float32, os uintptr)
// intTile4VNNI for eight activation rows.
TEXT ·intTile8VNNI(SB), NOSPLIT, $0-80
	MOVQ tq+0(FP), SI
	MOVQ td+8(FP), DI
	MOVQ nb+16(FP), CX
	MOVQ x+24(FP), R8
	MOVQ xs+32(FP), R9
	MOVQ xd+40(FP), R10
	MOVQ xc+48(FP), R11
	MOVQ ds+56(FP), R12
	LEAQ (R9)(R9*2), R13
	LEAQ (R8)(R9*4), AX
	LEAQ (R10)(R12*4), R14
	LEAQ (R11)(R12*4), DX
	LEAQ (R12)(R12*2), BX
	VPXORD Z0, Z0, Z0
	VPXORD Z1, Z1, Z1
	VPXORD Z2, Z2, Z2
	VPXORD Z3, Z3, Z3
	VPXORD Z4, Z4, Z4
	VPXORD Z5, Z5, Z5
	VPXORD Z6, Z6, Z6
	VPXORD Z7, Z7, Z7
	TESTQ CX, CX
	JZ    tile8done

tile8loop:
	VPBROADCASTD (R11), Z8
	VPBROADCASTD (R11)(R12*1), Z9
	VPBROADCASTD (R11)(R12*2), Z10
	VPBROADCASTD (R11)(BX*1), Z11
	VPBROADCASTD (DX), Z12
	VPBROADCASTD (DX)(R12*1), Z13
	VPBROADCASTD (DX)(R12*2), Z14
	VPBROADCASTD (DX)(BX*1), Z15
	VPXORD Z16, Z16, Z16
	VPXORD Z17, Z17, Z17
	VPXORD Z18, Z18, Z18
	VPXORD Z19, Z19, Z19
	VPXORD Z20, Z20, Z20
	VPXORD Z21, Z21, Z21
	VPXORD Z22, Z22, Z22
	VPXORD Z23, Z23, Z23
	TILE8EVEN(0)
	TILE8ODD(1)
	TILE8EVEN(2)
	TILE8ODD(3)
	TILE8EVEN(4)
	TILE8ODD(5)
	TILE8EVEN(6)
	TILE8ODD(7)
	VMOVUPS (DI), Z26
	FINISH(Z8, Z16, Z26, (R10), Z0)
	FINISH(Z9, Z17, Z26, (R10)(R12*1), Z1)
	FINISH(Z10, Z18, Z26, (R10)(R12*2), Z2)
	FINISH(Z11, Z19, Z26, (R10)(BX*1), Z3)
	FINISH(Z12, Z20, Z26, (R14), Z4)
	FINISH(Z13, Z21, Z26, (R14)(R12*1), Z5)
	FINISH(Z14, Z22, Z26, (R14)(R12*2), Z6)
	FINISH(Z15, Z23, Z26, (R14)(BX*1), Z7)
	ADDQ $512, SI
	ADDQ $64, DI
	ADDQ $32, R8
	ADDQ $32, AX
	ADDQ $4, R10
	ADDQ $4, R11
	ADDQ $4, R14
	ADDQ $4, DX
	DECQ CX
	JNZ  tile8loop

tile8done:
	MOVQ out+64(FP), DX
	MOVQ os+72(FP), BX
	LEAQ (BX)(BX*2), CX
	VMOVUPS Z0, (DX)
	VMOVUPS Z1, (DX)(BX*1)
	VMOVUPS Z2, (DX)(BX*2)
	VMOVUPS Z3, (DX)(CX*1)
	LEAQ    (DX)(BX*4), DX
	VMOVUPS Z4, (DX)
	VMOVUPS Z5, (DX)(BX*1)
	VMOVUPS Z6, (DX)(BX*2)
	VMOVUPS Z7, (DX)(CX*1)
	VZEROUPPER
	RET
