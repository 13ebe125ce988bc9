//go:build !purego

#include "textflag.h"

// The integer path's kernels (AVX-512 VNNI): see intdot.go for the arithmetic they share with
// the generic reference, bit for bit. VPDPBUSD multiplies the unsigned bytes of its second
// source (Go's middle operand: the weights, offset to unsigned) by the signed bytes of its
// first (the activations) and adds groups of four products to each int32 lane.

// TILEROW accumulates the integer sums of activation row (x)(idx) with the 16 tile rows
// for one 4-element group: ACC += W . broadcast(x[4g..4g+3]).
#define TILEGROUP(g) \
	VMOVDQU32         (g*64)(SI), Z8 ; \
	VPDPBUSD.BCST     (g*4)(R8), Z8, Z4 ; \
	VPDPBUSD.BCST     (g*4)(R8)(R9*1), Z8, Z5 ; \
	VPDPBUSD.BCST     (g*4)(R8)(R9*2), Z8, Z6 ; \
	VPDPBUSD.BCST     (g*4)(R8)(R13*1), Z8, Z7

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

#define ROWSARGS \
	MOVQ x+0(FP), DI ; \
	MOVQ xd+8(FP), R10 ; \
	MOVQ xc+16(FP), R11 ; \
	MOVQ w+24(FP), SI ; \
	MOVQ ws+32(FP), BX ; \
	MOVQ nb+40(FP), CX ; \
	MOVQ out+48(FP), DX ; \
	LEAQ (BX)(BX*2), R9 ; \
	VPXORD X0, X0, X0 ; \
	VPXORD X10, X10, X10

// Q4NIB loads the 16 bytes of a Q4_0 block's nibbles at addr into Y as 32 unsigned bytes in
// element order (low nibbles: elements 0..15, high nibbles: 16..31); Y15 holds 0x0f bytes.
#define Q4NIB(addr, X, Y, XT) \
	VMOVDQU      addr, X ; \
	VPSRLW       $4, X, XT ; \
	VINSERTI128  $1, XT, Y, Y ; \
	VPAND        Y15, Y, Y

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
	TILEGROUP(0)
	TILEGROUP(1)
	TILEGROUP(2)
	TILEGROUP(3)
	TILEGROUP(4)
	TILEGROUP(5)
	TILEGROUP(6)
	TILEGROUP(7)
	VMOVUPS   (DI), Z9
	VCVTDQ2PS Z4, Z4
	VCVTDQ2PS Z5, Z5
	VCVTDQ2PS Z6, Z6
	VCVTDQ2PS Z7, Z7
	VMULPS    Z9, Z4, Z4
	VMULPS    Z9, Z5, Z5
	VMULPS    Z9, Z6, Z6
	VMULPS    Z9, Z7, Z7
	VFMADD231PS.BCST (R10), Z4, Z0
	VFMADD231PS.BCST (R10)(R12*1), Z5, Z1
	VFMADD231PS.BCST (R10)(R12*2), Z6, Z2
	VFMADD231PS.BCST (R10)(AX*1), Z7, Z3
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
	PREFETCHT0 (34*8)(SI)
	PREFETCHT0 (34*8)(SI)(BX*1)
	PREFETCHT0 (34*8)(SI)(BX*2)
	PREFETCHT0 (34*8)(SI)(R9*1)
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
	PREFETCHT0 (18*8)(SI)
	PREFETCHT0 (18*8)(SI)(BX*1)
	PREFETCHT0 (18*8)(SI)(BX*2)
	PREFETCHT0 (18*8)(SI)(R9*1)
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
