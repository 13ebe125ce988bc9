// Macros shared by the AVX-512 and AVX2 kernels of this package (#include "macros_amd64.h").

// REDUCE16 sums the 16 lanes of Z (whose lower halves are Y and X) into the low lane of X with
// the package's fixed tree: s8 = lanes[0:8]+lanes[8:16], s4 = s8[0:4]+s8[4:8], then
// (s4[0]+s4[2]) + (s4[1]+s4[3]). TY/TX are a scratch register's halves.
#define REDUCE16(Z, Y, X, TY, TX) \
	VEXTRACTF32X8 $1, Z, TY ; \
	VADDPS        TY, Y, Y ; \
	VEXTRACTF32X4 $1, Y, TX ; \
	VADDPS        TX, X, X ; \
	VMOVHLPS      X, X, TX ; \
	VADDPS        TX, X, X ; \
	VMOVSHDUP     X, TX ; \
	VADDSS        TX, X, X

// REDUCE8x2 is REDUCE16 for 16 lanes held in two registers (lanes 0-7 in YL, 8-15 in YH).
#define REDUCE8x2(YL, XL, YH, TX) \
	VADDPS       YH, YL, YL ; \
	VEXTRACTF128 $1, YL, TX ; \
	VADDPS       TX, XL, XL ; \
	VMOVHLPS     XL, XL, TX ; \
	VADDPS       TX, XL, XL ; \
	VMOVSHDUP    XL, TX ; \
	VADDSS       TX, XL, XL

// ZERO4 clears the four row accumulators Z0-Z3 of the fused kernels.
#define ZERO4 \
	VXORPS Z0, Z0, Z0 ; \
	VXORPS Z1, Z1, Z1 ; \
	VXORPS Z2, Z2, Z2 ; \
	VXORPS Z3, Z3, Z3

// STORE4 reduces Z0-Z3 and stores them as out[0..3] (uses DI, Z16).
#define STORE4(out) \
	MOVQ out, DI ; \
	REDUCE16(Z0, Y0, X0, Y16, X16) ; \
	REDUCE16(Z1, Y1, X1, Y16, X16) ; \
	REDUCE16(Z2, Y2, X2, Y16, X16) ; \
	REDUCE16(Z3, Y3, X3, Y16, X16) ; \
	MOVSS X0, (DI) ; \
	MOVSS X1, 4(DI) ; \
	MOVSS X2, 8(DI) ; \
	MOVSS X3, 12(DI)

// BCAST broadcasts the 32-bit constant bits to all lanes of Z (uses AX).
#define BCAST(bits, Z) MOVL $bits, AX; VPBROADCASTD AX, Z

// ZERO8 clears the AVX2 fused kernels' accumulators Y0-Y7 (two registers per row).
#define ZERO8 \
	VXORPS Y0, Y0, Y0 ; \
	VXORPS Y1, Y1, Y1 ; \
	VXORPS Y2, Y2, Y2 ; \
	VXORPS Y3, Y3, Y3 ; \
	VXORPS Y4, Y4, Y4 ; \
	VXORPS Y5, Y5, Y5 ; \
	VXORPS Y6, Y6, Y6 ; \
	VXORPS Y7, Y7, Y7

// STORE4x2 reduces the four rows' register pairs and stores them as out[0..3] (uses DI, X8).
#define STORE4x2(out) \
	MOVQ out, DI ; \
	REDUCE8x2(Y0, X0, Y1, X8) ; \
	REDUCE8x2(Y2, X2, Y3, X8) ; \
	REDUCE8x2(Y4, X4, Y5, X8) ; \
	REDUCE8x2(Y6, X6, Y7, X8) ; \
	MOVSS X0, (DI) ; \
	MOVSS X2, 4(DI) ; \
	MOVSS X4, 8(DI) ; \
	MOVSS X6, 12(DI)

// ROWS4(ws): DI = w, R8, R9, R10 the next three rows ws bytes apart.
#define ROWS4(ws) \
	LEAQ (DI)(ws*1), R8 ; \
	LEAQ (R8)(ws*1), R9 ; \
	LEAQ (R9)(ws*1), R10

// BCASTB(v, X, Y): the byte v in every byte of Y (uses AX).
#define BCASTB(v, X, Y) \
	MOVL         $v, AX ; \
	VMOVD        AX, X ; \
	VPBROADCASTB X, Y

// PREFETCH4x192 prefetches the next 192 bytes of the four rows DI, R8, R9, R10 of the K-quant
// kernels: R14 bytes ahead into L1 and 8*R14 ahead into L2 (R14 = four rows' stride).
#define PREFETCH4x192 \
	PREFETCHT0 (DI)(R14*1) ; PREFETCHT1 (DI)(R14*8) ; \
	PREFETCHT0 64(DI)(R14*1) ; PREFETCHT1 64(DI)(R14*8) ; \
	PREFETCHT0 128(DI)(R14*1) ; PREFETCHT1 128(DI)(R14*8) ; \
	PREFETCHT0 (R8)(R14*1) ; PREFETCHT1 (R8)(R14*8) ; \
	PREFETCHT0 64(R8)(R14*1) ; PREFETCHT1 64(R8)(R14*8) ; \
	PREFETCHT0 128(R8)(R14*1) ; PREFETCHT1 128(R8)(R14*8) ; \
	PREFETCHT0 (R9)(R14*1) ; PREFETCHT1 (R9)(R14*8) ; \
	PREFETCHT0 64(R9)(R14*1) ; PREFETCHT1 64(R9)(R14*8) ; \
	PREFETCHT0 128(R9)(R14*1) ; PREFETCHT1 128(R9)(R14*8) ; \
	PREFETCHT0 (R10)(R14*1) ; PREFETCHT1 (R10)(R14*8) ; \
	PREFETCHT0 64(R10)(R14*1) ; PREFETCHT1 64(R10)(R14*8) ; \
	PREFETCHT0 128(R10)(R14*1) ; PREFETCHT1 128(R10)(R14*8)
