// gorun's CUDA kernels. Compiled to PTX by gen.sh (go generate) and embedded in the Go package;
// the driver JIT-compiles the PTX for the GPU at load. Every kernel takes row strides in
// elements, so views (q/k/v slices of the fused QKV rows) need no copies.
//
// Weight types are in GGUF (ggml) block layout, dequantized element by element by dq<T>: each
// warp lane reads its own element of a block, so the lanes of a warp read neighbouring bytes.

#include <cuda_fp16.h>
#include <mma.h>
#include <stdint.h>

// ggml type ids (T_F32, T_Q4_K, ...), generated from quant.Type by gentypes
#include "types.h"

// status bits set by kernels that meet bad input
#define ST_BAD_ID 1
#define ST_BAD_POS 2

__device__ __forceinline__ float ldh(const uint8_t *p) {
	return __half2float(__ushort_as_half(*(const unsigned short *)p));
}

__device__ __forceinline__ void scale_min_k4(int j, const uint8_t *q, int &d, int &m) {
	if (j < 4) {
		d = q[j] & 63;
		m = q[j + 4] & 63;
	} else {
		d = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
		m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
	}
}

// dq returns element k of a row of type T.
template <int T> __device__ __forceinline__ float dq(const uint8_t *row, int k);

template <> __device__ __forceinline__ float dq<T_F32>(const uint8_t *row, int k) {
	return ((const float *)row)[k];
}
template <> __device__ __forceinline__ float dq<T_F16>(const uint8_t *row, int k) {
	return ldh(row + 2 * k);
}
template <> __device__ __forceinline__ float dq<T_Q4_0>(const uint8_t *row, int k) {
	const uint8_t *b = row + (k >> 5) * 18;
	int j = k & 31;
	int q = b[2 + (j & 15)];
	q = j < 16 ? (q & 15) : (q >> 4);
	return (float)(q - 8) * ldh(b);
}
template <> __device__ __forceinline__ float dq<T_Q4_1>(const uint8_t *row, int k) {
	const uint8_t *b = row + (k >> 5) * 20;
	int j = k & 31;
	int q = b[4 + (j & 15)];
	q = j < 16 ? (q & 15) : (q >> 4);
	return (float)q * ldh(b) + ldh(b + 2);
}
template <> __device__ __forceinline__ float dq<T_Q5_0>(const uint8_t *row, int k) {
	const uint8_t *b = row + (k >> 5) * 22;
	int j = k & 31;
	uint32_t qh = (uint32_t)b[2] | ((uint32_t)b[3] << 8) | ((uint32_t)b[4] << 16) | ((uint32_t)b[5] << 24);
	int q = b[6 + (j & 15)];
	q = (j < 16 ? (q & 15) : (q >> 4)) | (((qh >> j) & 1) << 4);
	return (float)(q - 16) * ldh(b);
}
template <> __device__ __forceinline__ float dq<T_Q5_1>(const uint8_t *row, int k) {
	const uint8_t *b = row + (k >> 5) * 24;
	int j = k & 31;
	uint32_t qh = *(const uint32_t *)(b + 4);
	int q = b[8 + (j & 15)];
	q = (j < 16 ? (q & 15) : (q >> 4)) | (((qh >> j) & 1) << 4);
	return (float)q * ldh(b) + ldh(b + 2);
}
template <> __device__ __forceinline__ float dq<T_Q8_0>(const uint8_t *row, int k) {
	const uint8_t *b = row + (k >> 5) * 34;
	return (float)(int8_t)b[2 + (k & 31)] * ldh(b);
}
template <> __device__ __forceinline__ float dq<T_Q4_K>(const uint8_t *row, int k) {
	const uint8_t *b = row + (k >> 8) * 144;
	int r = k & 255, c = r >> 6, l = r & 31, hi = (r >> 5) & 1;
	int sc, mn;
	scale_min_k4(2 * c + hi, b + 4, sc, mn);
	int q = b[16 + 32 * c + l];
	q = hi ? (q >> 4) : (q & 15);
	return ldh(b) * (float)sc * (float)q - ldh(b + 2) * (float)mn;
}
template <> __device__ __forceinline__ float dq<T_Q5_K>(const uint8_t *row, int k) {
	const uint8_t *b = row + (k >> 8) * 176;
	int r = k & 255, c = r >> 6, l = r & 31, hi = (r >> 5) & 1;
	int sc, mn;
	scale_min_k4(2 * c + hi, b + 4, sc, mn);
	int q = b[48 + 32 * c + l];
	q = (hi ? (q >> 4) : (q & 15)) | (((b[16 + l] >> (2 * c + hi)) & 1) << 4);
	return ldh(b) * (float)sc * (float)q - ldh(b + 2) * (float)mn;
}
template <> __device__ __forceinline__ float dq<T_Q6_K>(const uint8_t *row, int k) {
	const uint8_t *b = row + (k >> 8) * 210;
	int r = k & 255, h = r >> 7, rr = r & 127, quarter = rr >> 5, l = rr & 31;
	const uint8_t *ql = b + 64 * h, *qh = b + 128 + 32 * h;
	const int8_t *sc = (const int8_t *)(b + 192 + 8 * h);
	int lo = ql[l + ((quarter & 1) ? 32 : 0)];
	lo = (quarter & 2) ? (lo >> 4) : (lo & 15);
	int q = lo | (((qh[l] >> (2 * quarter)) & 3) << 4);
	return ldh(b + 208) * (float)sc[(l >> 4) + 2 * quarter] * (float)(q - 32);
}

template <> __device__ __forceinline__ float dq<T_BF16>(const uint8_t *row, int k) {
	return __uint_as_float((uint32_t)((const unsigned short *)row)[k] << 16);
}
// Q2_K: scales[16] | qs[64] | d | dmin (84 bytes). Element k's 2 bits are bits 2j of qs[32c + l]
// (c = half, j = quarter of the half, l < 32); its 4-bit scale and min are in
// scales[8c + 2j + (l >= 16)]. The products are rounded before the subtraction (__fmul_rn: no
// fused multiply-add), as quant's dequantizer computes float32(dl*q) - ml.
__device__ __forceinline__ float q2_val(float d, float dmin, int sc, int q) {
	return __fsub_rn(__fmul_rn(d * (float)(sc & 15), (float)q), __fmul_rn(dmin, (float)(sc >> 4)));
}
template <> __device__ __forceinline__ float dq<T_Q2_K>(const uint8_t *row, int k) {
	const uint8_t *b = row + (k >> 8) * 84;
	int r = k & 255, c = r >> 7, j = (r >> 5) & 3, l = r & 31;
	int q = (b[16 + 32 * c + l] >> (2 * j)) & 3;
	return q2_val(ldh(b + 80), ldh(b + 82), b[8 * c + 2 * j + (l >> 4)], q);
}
// Q3_K: hmask[32] | qs[64] | scales[12] | d (110 bytes). Element k's level is its 2 bits of qs
// (as Q2_K) plus 4 when its hmask bit (bit 4c + j of hmask[l]) is set, minus 4; its sub-block
// scale is the 6-bit signed q3_scale(8c + 2j + (l >= 16)).
__device__ __forceinline__ int q3_scale(const uint8_t *s, int j) {
	int lo = j < 8 ? (s[j] & 15) : (s[j - 8] >> 4);
	int hi = (s[8 + (j & 3)] >> (2 * (j >> 2))) & 3;
	return (lo | (hi << 4)) - 32;
}
template <> __device__ __forceinline__ float dq<T_Q3_K>(const uint8_t *row, int k) {
	const uint8_t *b = row + (k >> 8) * 110;
	int r = k & 255, c = r >> 7, j = (r >> 5) & 3, l = r & 31;
	int q = ((b[32 + 32 * c + l] >> (2 * j)) & 3) | (((b[l] >> (4 * c + j)) & 1) << 2);
	return ldh(b + 108) * (float)q3_scale(b + 96, 8 * c + 2 * j + (l >> 4)) * (float)(q - 4);
}
// IQ4_NL and IQ4_XS: 4-bit indices into ggml's kvalues_iq4nl {-127, -104, -83, -65, -49, -35,
// -22, -10, 1, 13, 25, 38, 53, 69, 89, 113}, picked from the table packed in four words with
// two byte permutes (no memory access; lanes index it independently).
__device__ __forceinline__ float iq4_level(int q) {
	uint32_t lo = __byte_perm(0xBFAD9881u, 0xF6EADDCFu, q & 7), hi = __byte_perm(0x26190D01u, 0x71594535u, q & 7);
	return (float)(int8_t)((q & 8) ? hi : lo);
}
// IQ4_NL: d | qs[16] (18 bytes, Q4_0's nibble order).
template <> __device__ __forceinline__ float dq<T_IQ4_NL>(const uint8_t *row, int k) {
	const uint8_t *b = row + (k >> 5) * 18;
	int j = k & 31;
	int q = b[2 + (j & 15)];
	q = j < 16 ? (q & 15) : (q >> 4);
	return ldh(b) * iq4_level(q);
}
// IQ4_XS: d | scales_h (u16) | scales_l[4] | qs[128] (136 bytes); block ib (32 values) has the
// scale d*(ls-32), ls its 6-bit code (low nibble in scales_l[ib/2], high bits 2ib of scales_h),
// and its 16 index bytes at 8 + 16ib in IQ4_NL's order.
__device__ __forceinline__ float iq4xs_scale(const uint8_t *b, int ib) {
	int h = b[2] | (b[3] << 8);
	int ls = ((b[4 + (ib >> 1)] >> (4 * (ib & 1))) & 15) | (((h >> (2 * ib)) & 3) << 4);
	return ldh(b) * (float)(ls - 32);
}
template <> __device__ __forceinline__ float dq<T_IQ4_XS>(const uint8_t *row, int k) {
	const uint8_t *b = row + (k >> 8) * 136;
	int r = k & 255, ib = r >> 5, j = r & 31;
	int q = b[8 + 16 * ib + (j & 15)];
	q = j < 16 ? (q & 15) : (q >> 4);
	return iq4xs_scale(b, ib) * iq4_level(q);
}

__device__ __forceinline__ float gelu(float x) {
	const float c = 0.7978845608028654f;
	return 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x)));
}

// silu(x) = x / (1 + exp(-x)) in double, rounded once (as the CPU's kernels.SwiGLU).
__device__ __forceinline__ float silu(float x) {
	double d = x;
	return (float)(d / (1.0 + exp(-d)));
}

// glu is the SwiGLU of a gate/up pair whose other half is r: silu(r) * v (act 2: v is the up
// half) or silu(v) * r (act 3: v is the gate half). Not inlined (unless GLU_INLINE): the double
// exp would otherwise sit in every product kernel's epilogue (registers, code size).
#ifdef GLU_INLINE
__device__ __forceinline__
#else
__device__ __noinline__
#endif
float glu(float v, float r, int act) {
	return act == 2 ? silu(r) * v : silu(v) * r;
}

// The last step of an epilogue, with r the element of the second operand res (has: res is
// given): + r (act 0, 1), or the SwiGLU with r (act 2, 3: glu).
__device__ __forceinline__ float fin(float v, float r, bool has, int act) {
	if (act >= 2) return glu(v, r, act);
	return has ? r + v : v;
}

// epilogue of a matrix product: + bias[n], then GELU (act 1), then + res[m][n] or the SwiGLU
// with res (act 2, 3; fin)
__device__ __forceinline__ float epi(float v, int n, int m, const float *bias, const float *res, int ldres, int act) {
	if (bias) v += bias[n];
	if (act == 1) v = gelu(v);
	return fin(v, res ? res[(size_t)m * ldres + n] : 0.0f, res != nullptr, act);
}

__device__ __forceinline__ float warp_sum(float v) {
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	return v;
}

__device__ __forceinline__ float warp_max(float v) {
#pragma unroll
	for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
	return v;
}

// ---- chunk dequantization: the 32 elements of chunk c (elements 32c..32c+31) of a row ----
// Every supported type divides a row into whole 32-element chunks (the K-quants' 256-element
// super-blocks into 8); a lane dequantizes a whole chunk with wide, independent loads.

__device__ __forceinline__ uint32_t ld16x2(const uint8_t *p) { // 4 bytes at a 2-byte aligned address
	const unsigned short *h = (const unsigned short *)p;
	return (uint32_t)h[0] | ((uint32_t)h[1] << 16);
}

template <int T> __device__ __forceinline__ void dq32(const uint8_t *__restrict__ row, int c, float *w);

template <> __device__ __forceinline__ void dq32<T_F32>(const uint8_t *__restrict__ row, int c, float *w) {
	const float4 *p = (const float4 *)(row + 128 * c);
#pragma unroll
	for (int i = 0; i < 8; i++) {
		float4 v = p[i];
		w[4 * i] = v.x, w[4 * i + 1] = v.y, w[4 * i + 2] = v.z, w[4 * i + 3] = v.w;
	}
}
template <> __device__ __forceinline__ void dq32<T_F16>(const uint8_t *__restrict__ row, int c, float *w) {
	const uint4 *p = (const uint4 *)(row + 64 * c);
#pragma unroll
	for (int i = 0; i < 4; i++) {
		uint4 v = p[i];
		uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
		for (int j = 0; j < 4; j++) {
			w[8 * i + 2 * j] = __half2float(__ushort_as_half((unsigned short)(u[j] & 0xffff)));
			w[8 * i + 2 * j + 1] = __half2float(__ushort_as_half((unsigned short)(u[j] >> 16)));
		}
	}
}
template <> __device__ __forceinline__ void dq32<T_Q8_0>(const uint8_t *__restrict__ row, int c, float *w) {
	const uint8_t *b = row + 34 * c;
	float d = ldh(b);
#pragma unroll
	for (int i = 0; i < 8; i++) {
		uint32_t u = ld16x2(b + 2 + 4 * i);
#pragma unroll
		for (int j = 0; j < 4; j++) w[4 * i + j] = (float)(int8_t)(u >> (8 * j)) * d;
	}
}
template <> __device__ __forceinline__ void dq32<T_Q4_0>(const uint8_t *__restrict__ row, int c, float *w) {
	const uint8_t *b = row + 18 * c;
	float d = ldh(b);
#pragma unroll
	for (int i = 0; i < 4; i++) {
		uint32_t u = ld16x2(b + 2 + 4 * i);
#pragma unroll
		for (int j = 0; j < 4; j++) {
			int q = (u >> (8 * j)) & 0xff;
			w[4 * i + j] = (float)((q & 15) - 8) * d;
			w[16 + 4 * i + j] = (float)((q >> 4) - 8) * d;
		}
	}
}
template <> __device__ __forceinline__ void dq32<T_Q4_1>(const uint8_t *__restrict__ row, int c, float *w) {
	const uint8_t *b = row + 20 * c;
	float d = ldh(b), m = ldh(b + 2);
	const uint32_t *qs = (const uint32_t *)(b + 4);
#pragma unroll
	for (int i = 0; i < 4; i++) {
		uint32_t u = qs[i];
#pragma unroll
		for (int j = 0; j < 4; j++) {
			int q = (u >> (8 * j)) & 0xff;
			w[4 * i + j] = (float)(q & 15) * d + m;
			w[16 + 4 * i + j] = (float)(q >> 4) * d + m;
		}
	}
}
template <> __device__ __forceinline__ void dq32<T_Q5_0>(const uint8_t *__restrict__ row, int c, float *w) {
	const uint8_t *b = row + 22 * c;
	float d = ldh(b);
	uint32_t qh = ld16x2(b + 2);
#pragma unroll
	for (int i = 0; i < 4; i++) {
		uint32_t u = ld16x2(b + 6 + 4 * i);
#pragma unroll
		for (int j = 0; j < 4; j++) {
			int e = 4 * i + j, q = (u >> (8 * j)) & 0xff;
			int h0 = (int)((qh >> e) & 1), h1 = (int)((qh >> (e + 16)) & 1);
			w[e] = (float)(((q & 15) | (h0 << 4)) - 16) * d;
			w[16 + e] = (float)(((q >> 4) | (h1 << 4)) - 16) * d;
		}
	}
}
template <> __device__ __forceinline__ void dq32<T_Q5_1>(const uint8_t *__restrict__ row, int c, float *w) {
	const uint8_t *b = row + 24 * c;
	float d = ldh(b), m = ldh(b + 2);
	uint32_t qh = *(const uint32_t *)(b + 4);
	const uint32_t *qs = (const uint32_t *)(b + 8);
#pragma unroll
	for (int i = 0; i < 4; i++) {
		uint32_t u = qs[i];
#pragma unroll
		for (int j = 0; j < 4; j++) {
			int e = 4 * i + j, q = (u >> (8 * j)) & 0xff;
			w[e] = (float)((q & 15) | (((qh >> e) & 1) << 4)) * d + m;
			w[16 + e] = (float)((q >> 4) | (((qh >> (e + 16)) & 1) << 4)) * d + m;
		}
	}
}
template <> __device__ __forceinline__ void dq32<T_Q4_K>(const uint8_t *__restrict__ row, int c, float *w) {
	const uint8_t *b = row + 144 * (c >> 3);
	int j = c & 7, p = j >> 1, hi = j & 1;
	int sc, mn;
	scale_min_k4(j, b + 4, sc, mn);
	float d = ldh(b) * (float)sc, m = ldh(b + 2) * (float)mn;
	const uint4 *qs = (const uint4 *)(b + 16 + 32 * p);
#pragma unroll
	for (int i = 0; i < 2; i++) {
		uint4 v = qs[i];
		uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
		for (int k = 0; k < 16; k++) {
			int q = (u[k >> 2] >> (8 * (k & 3))) & 0xff;
			q = hi ? (q >> 4) : (q & 15);
			w[16 * i + k] = d * (float)q - m;
		}
	}
}
template <> __device__ __forceinline__ void dq32<T_Q5_K>(const uint8_t *__restrict__ row, int c, float *w) {
	const uint8_t *b = row + 176 * (c >> 3);
	int j = c & 7, p = j >> 1, hi = j & 1;
	int sc, mn;
	scale_min_k4(j, b + 4, sc, mn);
	float d = ldh(b) * (float)sc, m = ldh(b + 2) * (float)mn;
	const uint4 *qs = (const uint4 *)(b + 48 + 32 * p);
	const uint4 *qh = (const uint4 *)(b + 16);
#pragma unroll
	for (int i = 0; i < 2; i++) {
		uint4 v = qs[i], h = qh[i];
		uint32_t u[4] = {v.x, v.y, v.z, v.w}, uh[4] = {h.x, h.y, h.z, h.w};
#pragma unroll
		for (int k = 0; k < 16; k++) {
			int q = (u[k >> 2] >> (8 * (k & 3))) & 0xff;
			int qb = (uh[k >> 2] >> (8 * (k & 3))) & 0xff;
			q = (hi ? (q >> 4) : (q & 15)) | (((qb >> j) & 1) << 4);
			w[16 * i + k] = d * (float)q - m;
		}
	}
}
template <> __device__ __forceinline__ void dq32<T_Q6_K>(const uint8_t *__restrict__ row, int c, float *w) {
	const uint8_t *b = row + 210 * (c >> 3);
	int j = c & 7, h = j >> 2, quarter = j & 3;
	const uint8_t *ql = b + 64 * h + ((quarter & 1) ? 32 : 0), *qh = b + 128 + 32 * h;
	const int8_t *sc = (const int8_t *)(b + 192 + 8 * h);
	float d = ldh(b + 208);
	float d0 = d * (float)sc[2 * quarter], d1 = d * (float)sc[2 * quarter + 1];
	int shl = (quarter & 2) ? 4 : 0, shh = 2 * quarter;
#pragma unroll
	for (int i = 0; i < 8; i++) {
		uint32_t ul = ld16x2(ql + 4 * i), uh = ld16x2(qh + 4 * i);
#pragma unroll
		for (int k = 0; k < 4; k++) {
			int lo = ((ul >> (8 * k)) >> shl) & 15;
			int hb = ((uh >> (8 * k)) >> shh) & 3;
			w[4 * i + k] = (i < 4 ? d0 : d1) * (float)((lo | (hb << 4)) - 32);
		}
	}
}

template <> __device__ __forceinline__ void dq32<T_BF16>(const uint8_t *__restrict__ row, int c, float *w) {
	const uint4 *p = (const uint4 *)(row + 64 * c);
#pragma unroll
	for (int i = 0; i < 4; i++) {
		uint4 v = p[i];
		uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
		for (int j = 0; j < 4; j++) {
			w[8 * i + 2 * j] = __uint_as_float(u[j] << 16);
			w[8 * i + 2 * j + 1] = __uint_as_float(u[j] & 0xffff0000u);
		}
	}
}
// Q2_K chunk c: quarter j = c&3 of half h = (c>>2)&1 of super-block c>>3: bits 2j of the 32 qs
// bytes of its half (4-byte loads: 84-byte super-blocks keep rows 4-byte aligned); scales
// 8h + 2j (values 0-15) and 8h + 2j + 1 (16-31).
template <> __device__ __forceinline__ void dq32<T_Q2_K>(const uint8_t *__restrict__ row, int c, float *w) {
	const uint8_t *b = row + 84 * (c >> 3);
	int h = (c >> 2) & 1, j = c & 3;
	float d = ldh(b + 80), dmin = ldh(b + 82);
	int s0 = b[8 * h + 2 * j], s1 = b[8 * h + 2 * j + 1];
	const uint32_t *qs = (const uint32_t *)(b + 16 + 32 * h);
#pragma unroll
	for (int i = 0; i < 8; i++) {
		uint32_t u = qs[i] >> (2 * j);
#pragma unroll
		for (int k = 0; k < 4; k++) w[4 * i + k] = q2_val(d, dmin, i < 4 ? s0 : s1, (u >> (8 * k)) & 3);
	}
}
// Q3_K chunk c: as Q2_K's, plus the hmask bit 4h + j of each of the 32 hmask bytes (2-byte
// loads: rows are only 2-byte aligned).
template <> __device__ __forceinline__ void dq32<T_Q3_K>(const uint8_t *__restrict__ row, int c, float *w) {
	const uint8_t *b = row + 110 * (c >> 3);
	int h = (c >> 2) & 1, j = c & 3;
	float d = ldh(b + 108);
	float d0 = d * (float)q3_scale(b + 96, 8 * h + 2 * j), d1 = d * (float)q3_scale(b + 96, 8 * h + 2 * j + 1);
#pragma unroll
	for (int i = 0; i < 8; i++) {
		uint32_t u = ld16x2(b + 32 + 32 * h + 4 * i) >> (2 * j), m = ld16x2(b + 4 * i) >> (4 * h + j);
#pragma unroll
		for (int k = 0; k < 4; k++) {
			int q = ((u >> (8 * k)) & 3) | (((m >> (8 * k)) & 1) << 2);
			w[4 * i + k] = (i < 4 ? d0 : d1) * (float)(q - 4);
		}
	}
}
template <> __device__ __forceinline__ void dq32<T_IQ4_NL>(const uint8_t *__restrict__ row, int c, float *w) {
	const uint8_t *b = row + 18 * c;
	float d = ldh(b);
#pragma unroll
	for (int i = 0; i < 4; i++) {
		uint32_t u = ld16x2(b + 2 + 4 * i);
#pragma unroll
		for (int j = 0; j < 4; j++) {
			int q = (u >> (8 * j)) & 0xff;
			w[4 * i + j] = d * iq4_level(q & 15);
			w[16 + 4 * i + j] = d * iq4_level(q >> 4);
		}
	}
}
// IQ4_XS chunk c: block c&7 of super-block c>>3 (4-byte loads: 136-byte super-blocks keep rows
// 4-byte aligned).
template <> __device__ __forceinline__ void dq32<T_IQ4_XS>(const uint8_t *__restrict__ row, int c, float *w) {
	const uint8_t *b = row + 136 * (c >> 3);
	int ib = c & 7;
	float d = iq4xs_scale(b, ib);
	const uint32_t *qs = (const uint32_t *)(b + 8 + 16 * ib);
#pragma unroll
	for (int i = 0; i < 4; i++) {
		uint32_t u = qs[i];
#pragma unroll
		for (int j = 0; j < 4; j++) {
			int q = (u >> (8 * j)) & 0xff;
			w[4 * i + j] = d * iq4_level(q & 15);
			w[16 + 4 * i + j] = d * iq4_level(q >> 4);
		}
	}
}

// ---- chunk dot products for one activation row: dot32<T>(row, c, x) = sum over the 32
// elements of chunk c of w[k] * x[k]. The generic form dequantizes (dq32) and multiplies; the
// formats that dominate decoding instead sum q * x over each scale group and multiply by the
// scale once, and turn a level byte into a float without a conversion instruction: the byte
// placed (PRMT) under the exponent of 2^23 gives 2^23 + b exactly, and one subtraction removes
// 2^23 and the format's offset. About 4 instructions per element instead of 10-12; the sums are
// ordered differently from the dequantize-then-multiply form (within float32 rounding).
__device__ __forceinline__ float lvl(uint32_t q, int k, float off) {
	return __int_as_float(__byte_perm(q, 0x4B000000u, 0x7650u | (uint32_t)k)) - off;
}

template <int T> __device__ __forceinline__ float dot32(const uint8_t *__restrict__ row, int c, const float4 *x) {
	float w[32];
	dq32<T>(row, c, w);
	float s = 0.0f;
#pragma unroll
	for (int i = 0; i < 8; i++) {
		float4 v = x[i];
		s += w[4 * i] * v.x + w[4 * i + 1] * v.y + w[4 * i + 2] * v.z + w[4 * i + 3] * v.w;
	}
	return s;
}

// x4 element k of the float4 array
__device__ __forceinline__ float xe(const float4 &v, int k) { return k == 0 ? v.x : (k == 1 ? v.y : (k == 2 ? v.z : v.w)); }

template <> __device__ __forceinline__ float dot32<T_Q4_0>(const uint8_t *__restrict__ row, int c, const float4 *x) {
	const uint8_t *b = row + 18 * c;
	float d = ldh(b);
	float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
	for (int i = 0; i < 4; i++) {
		uint32_t u = ld16x2(b + 2 + 4 * i);
		uint32_t lo = u & 0x0F0F0F0Fu, hi = (u >> 4) & 0x0F0F0F0Fu;
		float4 a = x[i], h = x[4 + i];
#pragma unroll
		for (int k = 0; k < 4; k++) {
			s0 += lvl(lo, k, 8388616.0f) * xe(a, k);
			s1 += lvl(hi, k, 8388616.0f) * xe(h, k);
		}
	}
	return d * (s0 + s1);
}

template <> __device__ __forceinline__ float dot32<T_Q8_0>(const uint8_t *__restrict__ row, int c, const float4 *x) {
	const uint8_t *b = row + 34 * c;
	float d = ldh(b);
	float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
	for (int i = 0; i < 8; i++) {
		uint32_t u = ld16x2(b + 2 + 4 * i) ^ 0x80808080u; // int8 + 128 as unsigned bytes
		float4 a = x[i];
#pragma unroll
		for (int k = 0; k < 4; k++) {
			float v = lvl(u, k, 8388736.0f) * xe(a, k);
			if (i & 1) s1 += v; else s0 += v;
		}
	}
	return d * (s0 + s1);
}

template <> __device__ __forceinline__ float dot32<T_Q6_K>(const uint8_t *__restrict__ row, int c, const float4 *x) {
	const uint8_t *b = row + 210 * (c >> 3);
	int j = c & 7, h = j >> 2, quarter = j & 3;
	const uint8_t *ql = b + 64 * h + ((quarter & 1) ? 32 : 0), *qh = b + 128 + 32 * h;
	const int8_t *sc = (const int8_t *)(b + 192 + 8 * h);
	float d = ldh(b + 208);
	int shl = (quarter & 2) ? 4 : 0, shh = 2 * quarter;
	float s0 = 0.0f, s1 = 0.0f;
#pragma unroll
	for (int i = 0; i < 8; i++) {
		uint32_t ul = ld16x2(ql + 4 * i), uh = ld16x2(qh + 4 * i);
		uint32_t q = ((ul >> shl) & 0x0F0F0F0Fu) | (((uh >> shh) & 0x03030303u) << 4);
		float4 a = x[i];
#pragma unroll
		for (int k = 0; k < 4; k++) {
			float v = lvl(q, k, 8388640.0f) * xe(a, k);
			if (i < 4) s0 += v; else s1 += v;
		}
	}
	return d * (float)sc[2 * quarter] * s0 + d * (float)sc[2 * quarter + 1] * s1;
}

// ---- matrix-vector: one warp per weight row, each lane a whole 32-element chunk at a time,
// up to MV_MAXM activation rows ----

#define MV_MAXM 8

template <int T>
__device__ __forceinline__ void mv_body(const uint8_t *__restrict__ W, int wrow, const float *__restrict__ X, int ldx,
		float *__restrict__ Y, int ldy, int N, int M, int K, const float *bias, const float *res, int ldres, int act) {
	int n = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	int lane = threadIdx.x & 31;
	if (n >= N) return;
	const uint8_t *row = W + (size_t)n * wrow;
	// More than MV_MAXM rows (a batched decode step of many sequences): groups of MV_MAXM, each
	// row computed exactly as in a launch of its own.
	for (int m0 = 0; m0 < M; m0 += MV_MAXM) {
	int Mg = min(M - m0, MV_MAXM);
	const float *Xg = X + (size_t)m0 * ldx;
	float acc[MV_MAXM];
#pragma unroll
	for (int m = 0; m < MV_MAXM; m++) acc[m] = 0.0f;
	int chunks = K >> 5;
	for (int c = lane; c < chunks; c += 32) {
		float w[32];
		dq32<T>(row, c, w);
#pragma unroll
		for (int m = 0; m < MV_MAXM; m++) {
			if (m < Mg) {
				const float4 *x = (const float4 *)(Xg + (size_t)m * ldx + 32 * c);
				float s = 0.0f;
#pragma unroll
				for (int i = 0; i < 8; i++) {
					float4 v = x[i];
					s += w[4 * i] * v.x + w[4 * i + 1] * v.y + w[4 * i + 2] * v.z + w[4 * i + 3] * v.w;
				}
				acc[m] += s;
			}
		}
	}
	float out = 0.0f;
#pragma unroll
	for (int m = 0; m < MV_MAXM; m++) {
		float s = warp_sum(acc[m]);
		if (lane == m) out = s;
	}
	if (lane < Mg) Y[(size_t)(m0 + lane) * ldy + n] = epi(out, n, m0 + lane, bias, res, ldres, act);
	}
}

// mvs: the mat-vec with each warp's weight rows first copied to shared memory with coalesced
// loads (the chunks of neighbouring lanes are 18..210 bytes apart, so reading them straight from
// global memory touches many more cache sectors than bytes used). A warp takes R (1..4)
// consecutive rows, all staged before any is computed (more bytes in flight). R * wrow <=
// MVS_BYTES.
#define MVS_BYTES 3456
// stage_copy copies n words to shared memory, the loads of B words per lane issued before any
// is stored (one memory latency per batch instead of one per word).
template <typename U, int B>
__device__ __forceinline__ void stage_copy(U *dst, const U *__restrict__ src, int n, int lane) {
	for (int base = 0; base < n; base += 32 * B) {
		U r[B];
#pragma unroll
		for (int j = 0; j < B; j++) {
			int i = base + lane + 32 * j;
			if (i < n) r[j] = src[i];
		}
#pragma unroll
		for (int j = 0; j < B; j++) {
			int i = base + lane + 32 * j;
			if (i < n) dst[i] = r[j];
		}
	}
}

// stage_rows copies bytes of weight rows from g to shared memory with the widest loads their
// alignment allows (8-byte loads take four 630-byte Q6_K rows, the vocabulary's, in one batch).
__device__ __forceinline__ void stage_rows(uint8_t *st, const uint8_t *__restrict__ g, int bytes, int lane) {
	if ((((size_t)g | bytes) & 15) == 0) {
		stage_copy<uint4, 8>((uint4 *)st, (const uint4 *)g, bytes >> 4, lane);
	} else if ((((size_t)g | bytes) & 7) == 0) {
		stage_copy<uint2, 10>((uint2 *)st, (const uint2 *)g, bytes >> 3, lane);
	} else if ((((size_t)g | bytes) & 3) == 0) {
		stage_copy<uint32_t, 16>((uint32_t *)st, (const uint32_t *)g, bytes >> 2, lane);
	} else {
		stage_copy<unsigned short, 16>((unsigned short *)st, (const unsigned short *)g, bytes >> 1, lane);
	}
}

// The staging memory is dynamic: wstride bytes (R * wrow rounded up to 16) per warp.
template <int T>
__device__ __forceinline__ void mvs_body(const uint8_t *__restrict__ W, int wrow, const float *__restrict__ X, int ldx,
		float *__restrict__ Y, int ldy, int N, int M, int K, const float *bias, const float *res, int ldres, int act, int R,
		int wstride, int xsm) {
	extern __shared__ __align__(16) uint8_t stage[];
	int nw = blockDim.x >> 5, wid = threadIdx.x >> 5, lane = threadIdx.x & 31;
	int row0 = (blockIdx.x * nw + wid) * R;
	bool active = row0 < N;
	uint8_t *st = stage + wid * wstride;
	int rows = active ? min(R, N - row0) : 0;
	if (active) {
		const uint8_t *g = W + (size_t)row0 * wrow;
		int bytes = rows * wrow;
		stage_rows(st, g, bytes, lane);
	}
	// With xsm (one activation row), the block copies it to shared memory once, 4 floats of
	// padding after every 32 so that the lanes' float4 reads of their chunks hit different banks.
	float *xs = (float *)(stage + nw * wstride);
	if (xsm) {
		for (int k = threadIdx.x; k < K; k += blockDim.x) xs[k + (k >> 5) * 4] = X[k];
		__syncthreads();
	}
	if (!active) return;
	__syncwarp();
	int chunks = K >> 5;
	for (int r = 0; r < rows; r++) {
		int n = row0 + r;
		const uint8_t *row = st + r * wrow;
		// More than MV_MAXM rows: groups of MV_MAXM, each row computed as in a launch of its own.
		for (int m0 = 0; m0 < M; m0 += MV_MAXM) {
		int Mg = min(M - m0, MV_MAXM);
		const float *Xg = X + (size_t)m0 * ldx;
		float acc[MV_MAXM];
#pragma unroll
		for (int m = 0; m < MV_MAXM; m++) acc[m] = 0.0f;
		for (int c = lane; c < chunks; c += 32) {
			if (Mg == 1) {
				acc[0] += dot32<T>(row, c, xsm ? (const float4 *)(xs + 36 * c) : (const float4 *)(Xg + 32 * c));
				continue;
			}
			float w[32];
			dq32<T>(row, c, w);
#pragma unroll
			for (int m = 0; m < MV_MAXM; m++) {
				if (m < Mg) {
					const float4 *x = xsm ? (const float4 *)(xs + 36 * c) : (const float4 *)(Xg + (size_t)m * ldx + 32 * c);
					float s = 0.0f;
#pragma unroll
					for (int i = 0; i < 8; i++) {
						float4 v = x[i];
						s += w[4 * i] * v.x + w[4 * i + 1] * v.y + w[4 * i + 2] * v.z + w[4 * i + 3] * v.w;
					}
					acc[m] += s;
				}
			}
		}
		float out = 0.0f;
#pragma unroll
		for (int m = 0; m < MV_MAXM; m++) {
			float s = warp_sum(acc[m]);
			if (lane == m) out = s;
		}
		if (lane < Mg) Y[(size_t)(m0 + lane) * ldy + n] = epi(out, n, m0 + lane, bias, res, ldres, act);
		}
	}
}

// mvsln: mvs for one activation row that is the input of a layer norm (eps, optional lnw, lnb):
// every block normalizes the row itself (the statistics in double, as layer_norm) into shared
// memory while its warps' weight rows are being staged, which saves the layer norm's launch in
// a decode step. One row per warp (R = 1), K <= LN_MAXE * 256. The normalized row is stored
// with 4 floats of padding after every 32, so that the lanes' float4 reads of their chunks fall
// into different banks.
#define LN_MAXE 8

__device__ __forceinline__ double block_sum(double v, double *red) {
	int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
	for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
	if (lane == 0) red[wid] = v;
	__syncthreads();
	double t = 0;
	for (int w = 0; w < nw; w++) t += red[w];
	__syncthreads();
	return t;
}

// block_sum2 sums two values over the block at once (one barrier round instead of two).
__device__ __forceinline__ void block_sum2(double &a, double &b, double *red) {
	int lane = threadIdx.x & 31, wid = threadIdx.x >> 5, nw = blockDim.x >> 5;
	for (int o = 16; o > 0; o >>= 1) {
		a += __shfl_xor_sync(0xffffffffu, a, o);
		b += __shfl_xor_sync(0xffffffffu, b, o);
	}
	if (lane == 0) red[wid] = a, red[32 + wid] = b;
	__syncthreads();
	a = 0, b = 0;
	for (int w = 0; w < nw; w++) a += red[w], b += red[32 + w];
}

// norm_row writes the layer norm of the row X (K <= LN_MAXE * blockDim.x elements) into xs
// with 4 floats of padding after every 32 (so that lanes reading their chunks' float4s hit
// different banks). One pass: the sum and the sum of squares in double (exact enough for float
// rows: the cancellation in E[x^2] - mean^2 loses ~1e-16 * mean^2/var), one barrier round; the
// norm's weight and bias are loaded with the row, not after the reduction. The caller
// synchronizes before reading xs.
__device__ __forceinline__ void norm_row(const float *__restrict__ X, int K, const float *__restrict__ lnw,
		const float *__restrict__ lnb, float eps, float *xs, double *red, int rms) {
	int tid = threadIdx.x, bd = blockDim.x;
	float v[LN_MAXE], gw[LN_MAXE], gb[LN_MAXE];
	double s = 0, q = 0;
#pragma unroll
	for (int i = 0; i < LN_MAXE; i++) {
		int k = tid + i * bd;
		v[i] = k < K ? X[k] : 0.0f;
		gw[i] = lnw && k < K ? lnw[k] : 1.0f;
		gb[i] = lnb && k < K ? lnb[k] : 0.0f;
	}
#pragma unroll
	for (int i = 0; i < LN_MAXE; i++) s += v[i], q += (double)v[i] * v[i];
	block_sum2(s, q, red);
	double mean = s / K, rstd = 1.0 / sqrt(max(q / K - mean * mean, 0.0) + (double)eps);
	// RMS norm (rms_norm's arithmetic): the scale rounded to float once, x * scale * w in float
	float rscale = (float)(1.0 / sqrt(q / K + (double)eps));
#pragma unroll
	for (int i = 0; i < LN_MAXE; i++) {
		int k = tid + i * bd;
		if (k < K) {
			float o = rms ? v[i] * rscale : (float)(((double)v[i] - mean) * rstd);
			if (lnw) o *= gw[i];
			if (lnb) o += gb[i];
			xs[k + (k >> 5) * 4] = o;
		}
	}
}

template <int T>
__device__ __forceinline__ void mvsln_body(const uint8_t *__restrict__ W, int wrow, const float *__restrict__ X,
		float *__restrict__ Y, int N, int K, const float *bias, const float *res, int act, int wstride,
		const float *lnw, const float *lnb, float eps, int rms) {
	extern __shared__ __align__(16) uint8_t stage[];
	__shared__ double red2[64];
	int tid = threadIdx.x, wid = tid >> 5, lane = tid & 31, bd = blockDim.x;
	int n = blockIdx.x * (bd >> 5) + wid;
	bool active = n < N;
	uint8_t *st = stage + wid * wstride;
	float *xs = (float *)(stage + (bd >> 5) * wstride);
	// the epilogue's operands now, not after the product: a cold line is a DRAM round trip
	float bv = 0.0f, rv = 0.0f;
	if (active && lane == 0) {
		if (bias) bv = bias[n];
		if (res) rv = res[n];
	}
	if (active) {
		const uint8_t *g = W + (size_t)n * wrow;
		stage_rows(st, g, wrow, lane);
	}
	norm_row(X, K, lnw, lnb, eps, xs, red2, rms);
	__syncthreads();
	if (!active) return;
	float acc = 0.0f;
	for (int c = lane; c < (K >> 5); c += 32) acc += dot32<T>(st, c, (const float4 *)(xs + 36 * c));
	acc = warp_sum(acc);
	if (lane == 0) {
		float v = acc + bv;
		if (act == 1) v = gelu(v);
		Y[n] = fin(v, rv, res != nullptr, act);
	}
}

// mvsln3: mvsln for two or three products of the same normalized row (Llama's Q, K and V;
// one weight type and row length), in one launch: the blocks take the rows of p0, then p1,
// then p2 (N = 0 when absent), each row computed exactly as mvsln computes it.
struct LnProd {
	const uint8_t *W;
	float *Y;
	const float *bias;
	int N;
};

template <int T>
__device__ __forceinline__ void mvsln3_body(LnProd p0, LnProd p1, LnProd p2, int wrow, const float *__restrict__ X,
		int K, int wstride, const float *lnw, const float *lnb, float eps, int rms) {
	extern __shared__ __align__(16) uint8_t stage[];
	__shared__ double red2[64];
	int tid = threadIdx.x, wid = tid >> 5, lane = tid & 31, bd = blockDim.x;
	int n = blockIdx.x * (bd >> 5) + wid;
	LnProd p = p0;
	if (n >= p.N) {
		n -= p.N, p = p1;
		if (n >= p.N) n -= p.N, p = p2;
	}
	bool active = n < p.N;
	uint8_t *st = stage + wid * wstride;
	float *xs = (float *)(stage + (bd >> 5) * wstride);
	float bv = 0.0f;
	if (active && lane == 0 && p.bias) bv = p.bias[n];
	if (active) stage_rows(st, p.W + (size_t)n * wrow, wrow, lane);
	norm_row(X, K, lnw, lnb, eps, xs, red2, rms);
	__syncthreads();
	if (!active) return;
	float acc = 0.0f;
	for (int c = lane; c < (K >> 5); c += 32) acc += dot32<T>(st, c, (const float4 *)(xs + 36 * c));
	acc = warp_sum(acc);
	if (lane == 0) p.Y[n] = acc + bv;
}

// mvsp: the staged mat-vec for long outputs (the vocabulary) of one activation row, pipelined:
// a warp walks several groups of R rows (grid-stride), and while it computes one group from
// shared memory the next group is already on its way there (cp.async, no registers held), so
// the memory latency is paid once per warp instead of once per group. Two staging buffers of
// wstride bytes per warp; u (16, 8 or 4) is the copy unit, dividing the weight address and the
// size of a group of R rows.
__device__ __forceinline__ void cp_async(void *dst, const void *src, int u) {
	unsigned d = (unsigned)__cvta_generic_to_shared(dst);
	if (u == 16)
		asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(d), "l"(src));
	else if (u == 8)
		asm volatile("cp.async.ca.shared.global [%0], [%1], 8;\n" ::"r"(d), "l"(src));
	else
		asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" ::"r"(d), "l"(src));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
__device__ __forceinline__ void cp_async_wait1() { asm volatile("cp.async.wait_group 1;\n" ::); }
__device__ __forceinline__ void cp_async_wait0() { asm volatile("cp.async.wait_group 0;\n" ::); }

// stage_async copies bytes (even) asynchronously in units of u, the last bytes short of a unit
// (a partial last group of rows) with plain 2-byte loads and stores.
__device__ __forceinline__ void stage_async(uint8_t *dst, const uint8_t *src, int bytes, int u, int lane) {
	int full = bytes & ~(u - 1);
	for (int i = lane * u; i < full; i += 32 * u) cp_async(dst + i, src + i, u);
	for (int i = full + 2 * lane; i < bytes; i += 64) *(unsigned short *)(dst + i) = *(const unsigned short *)(src + i);
}

template <int T>
__device__ __forceinline__ void mvsp_body(const uint8_t *__restrict__ W, int wrow, const float *__restrict__ X,
		float *__restrict__ Y, int N, int K, const float *bias, const float *res, int act, int R, int wstride, int u) {
	extern __shared__ __align__(16) uint8_t stage[];
	int nw = blockDim.x >> 5, wid = threadIdx.x >> 5, lane = threadIdx.x & 31;
	uint8_t *buf[2] = {stage + wid * 2 * wstride, stage + wid * 2 * wstride + wstride};
	float *xs = (float *)(stage + nw * 2 * wstride);
	int groups = (N + R - 1) / R, step = gridDim.x * nw, g = blockIdx.x * nw + wid;
	if (g < groups) stage_async(buf[0], W + (size_t)g * R * wrow, min(R, N - g * R) * wrow, u, lane);
	cp_async_commit();
	for (int k = threadIdx.x; k < K; k += blockDim.x) xs[k + (k >> 5) * 4] = X[k];
	__syncthreads();
	int chunks = K >> 5;
	for (int i = 0; g < groups; g += step, i++) {
		int gn = g + step;
		if (gn < groups) stage_async(buf[(i + 1) & 1], W + (size_t)gn * R * wrow, min(R, N - gn * R) * wrow, u, lane);
		cp_async_commit();
		cp_async_wait1(); // this lane's copies of group g are done ...
		__syncwarp();     // ... and every lane's
		const uint8_t *cur = buf[i & 1];
		int rows = min(R, N - g * R);
		for (int r = 0; r < rows; r++) {
			float acc = 0.0f;
			for (int c = lane; c < chunks; c += 32) acc += dot32<T>(cur + r * wrow, c, (const float4 *)(xs + 36 * c));
			acc = warp_sum(acc);
			if (lane == 0) Y[g * R + r] = epi(acc, g * R + r, 0, bias, res, 0, act);
		}
		__syncwarp(); // the buffer is refilled in the next iteration but one
	}
	cp_async_wait0();
}

// mvd: the decode mat-vec (one activation row) without staging, for short outputs: a decode
// step's products are 0.3-1.7 MB each, too small to reach the memory bandwidth, so what counts
// is how many dependent memory round trips a warp makes and how many SMs have work. Lanes read
// their chunks straight from global memory (no barrier before the weights are in flight), the
// epilogue's bias and residual are fetched at entry, and WR warps share a row (each a
// contiguous slice of its chunks, partial sums added through shared memory) so that long rows
// (K = 3072) still give every lane one chunk. A block is WR * RPB warps: RPB rows. With ln
// (mvsln's fusion) every block first normalizes the input row into shared memory (statistics
// in double, as layer_norm); measured slower than mvsln, so only GORUN_CUDA_MVD=2 uses it.
template <int T>
__device__ __forceinline__ void mvd_body(const uint8_t *__restrict__ W, int wrow, const float *__restrict__ X,
		float *__restrict__ Y, int N, int K, const float *__restrict__ bias, const float *__restrict__ res, int act,
		int WR, int ln, const float *__restrict__ lnw, const float *__restrict__ lnb, float eps, int rms) {
	extern __shared__ __align__(16) float xs[]; // with ln: K + K/8 floats
	__shared__ float part[32];
	__shared__ double red[64];
	int tid = threadIdx.x, wid = tid >> 5, lane = tid & 31, nw = blockDim.x >> 5;
	int n = blockIdx.x * (nw / WR) + wid / WR, p = wid % WR;
	bool active = n < N;
	bool head = active && p == 0 && lane == 0;
	float bv = 0.0f, rv = 0.0f;
	if (head) {
		if (bias) bv = bias[n];
		if (res) rv = res[n];
	}
	int C = K >> 5, c1 = (p + 1) * C / WR;
	int c = p * C / WR + lane;
	const uint8_t *row = W + (size_t)(active ? n : 0) * wrow;
	bool has = active && c < c1;
	if (ln) {
		norm_row(X, K, lnw, lnb, eps, xs, red, rms);
		__syncthreads();
	}
	float acc = 0.0f;
	for (; has && c < c1; c += 32) acc += dot32<T>(row, c, ln ? (const float4 *)(xs + 36 * c) : (const float4 *)(X + 32 * c));
	acc = warp_sum(acc);
	if (WR > 1) {
		if (lane == 0) part[wid] = acc;
		__syncthreads();
		if (head)
			for (int q = 1; q < WR; q++) acc += part[wid + q];
	}
	if (head) {
		float v = acc + bv;
		if (act == 1) v = gelu(v);
		Y[n] = fin(v, rv, res != nullptr, act);
	}
}

// ---- mvq: the mat-vec for a few activation rows with four lanes per 32-element chunk ----
// For weight rows too long for the staged kernels (Llama-1B's f16 rows of 2048, every type's
// rows of 8192). When a lane takes a whole chunk (mvd), the lanes' activation loads are 128
// bytes apart (a float4 load instruction touches 32 cache lines) and their weight loads 34..64
// bytes apart. Here a lane takes a quarter of a chunk (8 elements) and a warp step 8 whole
// chunks: the activation loads of a step cover 1 KiB contiguously and the weight loads the
// chunks' bytes contiguously. Each lane sums its quarter in a fixed order and multiplies by the
// scale, adds its chunks in order; the warp sum and the WR warps' partials follow a fixed
// order, so a row's result does not depend on how many activation rows are computed together
// (a batched decode step gives each sequence its solo bits) nor on the unroll U. Measured on
// the H100 (cuda/NOTES.md): faster than mvd for such rows, slower than the staged kernels
// (mvsln, mvsp) for rows that fit them, and slower with the norm fused (every block redoing it)
// than after a norm launch of its own; the K-quants' quarters (scales per quarter) lost to mvd.

// Quarter<T> holds one lane's quarter of a chunk in registers: load reads it, dot multiplies it
// by the chunk's 32 activations x (elements j's quarter covers, as the type lays them out).
template <int T> struct Quarter;

// sum8 is the dot of w0..w7 with a (elements 0-3) and b (4-7), in one order.
__device__ __forceinline__ float sum8(const float *w, float4 a, float4 b) {
	float s = w[0] * a.x;
	s = fmaf(w[1], a.y, s), s = fmaf(w[2], a.z, s), s = fmaf(w[3], a.w, s);
	s = fmaf(w[4], b.x, s), s = fmaf(w[5], b.y, s), s = fmaf(w[6], b.z, s), s = fmaf(w[7], b.w, s);
	return s;
}

// lvl8 turns the 8 bytes lo, hi into floats minus off (lvl).
__device__ __forceinline__ void lvl8(uint32_t lo, uint32_t hi, float off, float *w) {
#pragma unroll
	for (int k = 0; k < 4; k++) w[k] = lvl(lo, k, off), w[4 + k] = lvl(hi, k, off);
}

template <> struct Quarter<T_F32> {
	float4 a, b;
	int j;
	__device__ __forceinline__ void load(const uint8_t *__restrict__ row, int c, int jj) {
		j = jj;
		const float4 *p = (const float4 *)(row + 128 * c + 32 * j);
		a = p[0], b = p[1];
	}
	__device__ __forceinline__ float dot(const float *x) const {
		float w[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
		return sum8(w, *(const float4 *)(x + 8 * j), *(const float4 *)(x + 8 * j + 4));
	}
};

template <> struct Quarter<T_F16> {
	uint4 v;
	int j;
	__device__ __forceinline__ void load(const uint8_t *__restrict__ row, int c, int jj) {
		j = jj;
		v = *(const uint4 *)(row + 64 * c + 16 * j);
	}
	__device__ __forceinline__ float dot(const float *x) const {
		uint32_t u[4] = {v.x, v.y, v.z, v.w};
		float w[8];
#pragma unroll
		for (int i = 0; i < 4; i++) {
			w[2 * i] = __half2float(__ushort_as_half((unsigned short)(u[i] & 0xffff)));
			w[2 * i + 1] = __half2float(__ushort_as_half((unsigned short)(u[i] >> 16)));
		}
		return sum8(w, *(const float4 *)(x + 8 * j), *(const float4 *)(x + 8 * j + 4));
	}
};

template <> struct Quarter<T_BF16> {
	uint4 v;
	int j;
	__device__ __forceinline__ void load(const uint8_t *__restrict__ row, int c, int jj) {
		j = jj;
		v = *(const uint4 *)(row + 64 * c + 16 * j);
	}
	__device__ __forceinline__ float dot(const float *x) const {
		uint32_t u[4] = {v.x, v.y, v.z, v.w};
		float w[8];
#pragma unroll
		for (int i = 0; i < 4; i++) w[2 * i] = __uint_as_float(u[i] << 16), w[2 * i + 1] = __uint_as_float(u[i] & 0xffff0000u);
		return sum8(w, *(const float4 *)(x + 8 * j), *(const float4 *)(x + 8 * j + 4));
	}
};

// Q8_0: 34-byte blocks (a half scale, 32 int8); quarter j is bytes 8j..8j+7.
template <> struct Quarter<T_Q8_0> {
	float d;
	uint32_t lo, hi;
	int j;
	__device__ __forceinline__ void load(const uint8_t *__restrict__ row, int c, int jj) {
		j = jj;
		const uint8_t *b = row + 34 * c;
		d = ldh(b), lo = ld16x2(b + 2 + 8 * j), hi = ld16x2(b + 6 + 8 * j);
	}
	__device__ __forceinline__ float dot(const float *x) const {
		float w[8];
		lvl8(lo ^ 0x80808080u, hi ^ 0x80808080u, 8388736.0f, w); // int8 + 128 as unsigned bytes
		return d * sum8(w, *(const float4 *)(x + 8 * j), *(const float4 *)(x + 8 * j + 4));
	}
};

// Q4_0: 18-byte blocks (a half scale, 16 bytes: element k in the low nibble of byte k, element
// 16 + k in its high nibble); quarter j is bytes 4j..4j+3, elements 4j..4j+3 and 16+4j..16+4j+3.
template <> struct Quarter<T_Q4_0> {
	float d;
	uint32_t u;
	int j;
	__device__ __forceinline__ void load(const uint8_t *__restrict__ row, int c, int jj) {
		j = jj;
		const uint8_t *b = row + 18 * c;
		d = ldh(b), u = ld16x2(b + 2 + 4 * j);
	}
	__device__ __forceinline__ float dot(const float *x) const {
		float w[8];
		lvl8(u & 0x0F0F0F0Fu, (u >> 4) & 0x0F0F0F0Fu, 8388616.0f, w);
		return d * sum8(w, *(const float4 *)(x + 4 * j), *(const float4 *)(x + 16 + 4 * j));
	}
};

#define MVQ_MAXU 4

// mvq_body: a block of 256 threads is 8 warps, WR warps per weight row (each a contiguous
// slice of the row's chunks), 8/WR rows per block. U (1, 2 or 4) chunks per lane are loaded
// before any is multiplied (bytes in flight).
template <int T>
__device__ __forceinline__ void mvq_body(const uint8_t *__restrict__ W, int wrow, const float *__restrict__ X, int ldx,
		float *__restrict__ Y, int ldy, int N, int M, int K, const float *__restrict__ bias,
		const float *__restrict__ res, int ldres, int act, int WR, int U) {
	__shared__ float part[MV_MAXM][8];
	int tid = threadIdx.x, wid = tid >> 5, lane = tid & 31, nw = blockDim.x >> 5;
	int n = blockIdx.x * (nw / WR) + wid / WR, p = wid % WR;
	bool active = n < N;
	int C = K >> 5, c0 = p * C / WR, c1 = (p + 1) * C / WR, g = lane >> 2, j = lane & 3;
	const uint8_t *row = W + (size_t)(active ? n : 0) * wrow;
	for (int m0 = 0; m0 < M; m0 += MV_MAXM) {
		int Mg = min(M - m0, MV_MAXM);
		float acc[MV_MAXM];
#pragma unroll
		for (int m = 0; m < MV_MAXM; m++) acc[m] = 0.0f;
		for (int c = c0 + g; active && c < c1; c += 8 * U) {
			Quarter<T> q[MVQ_MAXU];
#pragma unroll
			for (int u = 0; u < MVQ_MAXU; u++)
				if (u < U && c + 8 * u < c1) q[u].load(row, c + 8 * u, j);
#pragma unroll
			for (int u = 0; u < MVQ_MAXU; u++) {
				if (u >= U || c + 8 * u >= c1) break;
				int cu = c + 8 * u;
#pragma unroll
				for (int m = 0; m < MV_MAXM; m++)
					if (m < Mg) acc[m] += q[u].dot(X + (size_t)(m0 + m) * ldx + 32 * cu);
			}
		}
#pragma unroll
		for (int m = 0; m < MV_MAXM; m++) {
			float s = warp_sum(acc[m]);
			if (lane == 0 && m < Mg) part[m][wid] = s;
		}
		__syncthreads();
		if (active && p == 0 && lane < Mg) {
			float s = part[lane][wid];
			for (int q = 1; q < WR; q++) s += part[lane][wid + q];
			Y[(size_t)(m0 + lane) * ldy + n] = epi(s, n, m0 + lane, bias, res, ldres, act);
		}
		__syncthreads();
	}
}

#define INSTANTIATE_MVQ(T, name)                                                                               \
	extern "C" __global__ void __launch_bounds__(256) mvq_##name(const uint8_t *W, int wrow, const float *X,    \
			int ldx, float *Y, int ldy, int N, int M, int K, const float *bias, const float *res, int ldres,      \
			int act, int WR, int U) {                                                                          \
		mvq_body<T>(W, wrow, X, ldx, Y, ldy, N, M, K, bias, res, ldres, act, WR, U);                           \
	}

INSTANTIATE_MVQ(T_F32, f32)
INSTANTIATE_MVQ(T_F16, f16)
INSTANTIATE_MVQ(T_BF16, bf16)
INSTANTIATE_MVQ(T_Q8_0, q8_0)
INSTANTIATE_MVQ(T_Q4_0, q4_0)

// mv1: the element-by-element form, for rows whose chunks are not aligned for wide loads.
template <int T>
__device__ __forceinline__ void mv1_body(const uint8_t *__restrict__ W, int wrow, const float *__restrict__ X, int ldx,
		float *__restrict__ Y, int ldy, int N, int M, int K, const float *bias, const float *res, int ldres, int act) {
	int n = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	int lane = threadIdx.x & 31;
	if (n >= N) return;
	const uint8_t *row = W + (size_t)n * wrow;
	for (int m0 = 0; m0 < M; m0 += MV_MAXM) { // groups of MV_MAXM rows, as mv_body
	int Mg = min(M - m0, MV_MAXM);
	const float *Xg = X + (size_t)m0 * ldx;
	float acc[MV_MAXM];
#pragma unroll
	for (int m = 0; m < MV_MAXM; m++) acc[m] = 0.0f;
	for (int k = lane; k < K; k += 32) {
		float w = dq<T>(row, k);
#pragma unroll
		for (int m = 0; m < MV_MAXM; m++)
			if (m < Mg) acc[m] += w * Xg[(size_t)m * ldx + k];
	}
	float out = 0.0f;
#pragma unroll
	for (int m = 0; m < MV_MAXM; m++) {
		float s = warp_sum(acc[m]);
		if (lane == m) out = s;
	}
	if (lane < Mg) Y[(size_t)(m0 + lane) * ldy + n] = epi(out, n, m0 + lane, bias, res, ldres, act);
	}
}

// ---- tiled matrix product for many activation rows: 64 weight rows x 64 activation rows per
// block, weights dequantized into shared memory once per tile ----

#define BN 64
#define BM 64
#define BK 32

template <int T>
__device__ __forceinline__ void mm_body(const uint8_t *__restrict__ W, int wrow, const float *__restrict__ X, int ldx,
		float *__restrict__ Y, int ldy, int N, int M, int K, const float *bias, const float *res, int ldres, int act) {
	__shared__ float Ws[BK][BN + 4];
	__shared__ float Xs[BK][BM + 4];
	int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
	int n0 = blockIdx.x * BN, m0 = blockIdx.y * BM;
	float acc[4][4];
#pragma unroll
	for (int i = 0; i < 4; i++)
#pragma unroll
		for (int j = 0; j < 4; j++) acc[i][j] = 0.0f;
	for (int k0 = 0; k0 < K; k0 += BK) {
#pragma unroll
		for (int i = 0; i < (BN * BK) / 256; i++) {
			int e = tid + 256 * i, nl = e >> 5, kl = e & 31;
			int n = n0 + nl, k = k0 + kl;
			Ws[kl][nl] = (n < N && k < K) ? dq<T>(W + (size_t)n * wrow, k) : 0.0f;
		}
#pragma unroll
		for (int i = 0; i < (BM * BK) / 256; i++) {
			int e = tid + 256 * i, ml = e >> 5, kl = e & 31;
			int m = m0 + ml, k = k0 + kl;
			Xs[kl][ml] = (m < M && k < K) ? X[(size_t)m * ldx + k] : 0.0f;
		}
		__syncthreads();
#pragma unroll 8
		for (int kk = 0; kk < BK; kk++) {
			float a[4], b[4];
#pragma unroll
			for (int i = 0; i < 4; i++) a[i] = Ws[kk][tx + 16 * i];
#pragma unroll
			for (int j = 0; j < 4; j++) b[j] = Xs[kk][ty + 16 * j];
#pragma unroll
			for (int i = 0; i < 4; i++)
#pragma unroll
				for (int j = 0; j < 4; j++) acc[i][j] += a[i] * b[j];
		}
		__syncthreads();
	}
#pragma unroll
	for (int j = 0; j < 4; j++) {
		int m = m0 + ty + 16 * j;
		if (m >= M) continue;
#pragma unroll
		for (int i = 0; i < 4; i++) {
			int n = n0 + tx + 16 * i;
			if (n < N) Y[(size_t)m * ldy + n] = epi(acc[i][j], n, m, bias, res, ldres, act);
		}
	}
}

// mm2: the same tiles, with whole chunks dequantized per thread (wide loads, the scales decoded
// once per 32 elements) and 4x4 outputs per thread read from shared memory as float4. Needs
// K % 32 == 0 and 16-byte aligned weight and activation rows.
// TM activation rows per thread: 4 (64-row tiles); 2 (32-row tiles, for more blocks) measured
// slower on the 124M shapes, so only 4 is instantiated.
// Split K: block z covers K[z*Kc, (z+1)*Kc) and writes its partial sums to Y + z*M*ldy (the
// caller passes no epilogue and adds the parts with splitk_reduce).
template <int T, int TM>
__device__ __forceinline__ void mm2_body(const uint8_t *__restrict__ W, int wrow, const float *__restrict__ X, int ldx,
		float *__restrict__ Y, int ldy, int N, int M, int K, const float *bias, const float *res, int ldres, int act, int Kc) {
	const int BMT = 16 * TM;
	int kb = blockIdx.z * Kc, ke = min(K, kb + Kc);
	Y += (size_t)blockIdx.z * M * ldy;
	__shared__ __align__(16) float Ws[BK][BN + 4];
	__shared__ __align__(16) float Xs[BK][BMT + 4];
	int tid = threadIdx.x, tx = tid & 15, ty = tid >> 4;
	int n0 = blockIdx.x * BN, m0 = blockIdx.y * BMT;
	float acc[4][TM];
#pragma unroll
	for (int i = 0; i < 4; i++)
#pragma unroll
		for (int j = 0; j < TM; j++) acc[i][j] = 0.0f;
	for (int k0 = kb; k0 < ke; k0 += BK) {
		if (tid < BN) {
			int n = n0 + tid;
			float w[32];
			if (n < N) {
				dq32<T>(W + (size_t)n * wrow, k0 >> 5, w);
			} else {
#pragma unroll
				for (int e = 0; e < 32; e++) w[e] = 0.0f;
			}
#pragma unroll
			for (int e = 0; e < 32; e++) Ws[e][tid] = w[e];
		} else if (tid < BN + BMT) {
			int ml = tid - BN, m = m0 + ml;
			if (m < M) {
				const float4 *x = (const float4 *)(X + (size_t)m * ldx + k0);
#pragma unroll
				for (int i = 0; i < 8; i++) {
					float4 v = x[i];
					Xs[4 * i][ml] = v.x, Xs[4 * i + 1][ml] = v.y, Xs[4 * i + 2][ml] = v.z, Xs[4 * i + 3][ml] = v.w;
				}
			} else {
#pragma unroll
				for (int e = 0; e < 32; e++) Xs[e][ml] = 0.0f;
			}
		}
		__syncthreads();
#pragma unroll 8
		for (int kk = 0; kk < BK; kk++) {
			float4 a = *(const float4 *)&Ws[kk][4 * tx];
			float av[4] = {a.x, a.y, a.z, a.w}, bv[TM];
			if (TM == 4) {
				float4 b = *(const float4 *)&Xs[kk][4 * ty];
				bv[0] = b.x, bv[1] = b.y, bv[2 % TM] = b.z, bv[3 % TM] = b.w;
			} else {
				float2 b = *(const float2 *)&Xs[kk][2 * ty];
				bv[0] = b.x, bv[1] = b.y;
			}
#pragma unroll
			for (int i = 0; i < 4; i++)
#pragma unroll
				for (int j = 0; j < TM; j++) acc[i][j] += av[i] * bv[j];
		}
		__syncthreads();
	}
#pragma unroll
	for (int j = 0; j < TM; j++) {
		int m = m0 + TM * ty + j;
		if (m >= M) continue;
#pragma unroll
		for (int i = 0; i < 4; i++) {
			int n = n0 + 4 * tx + i;
			if (n < N) Y[(size_t)m * ldy + n] = epi(acc[i][j], n, m, bias, res, ldres, act);
		}
	}
}

// mmh: the tiled product on f16 tensor cores (mma 16x16x16, f32 accumulation) with both
// operands split in two f16 parts (x = hi + lo, lo = f16(x - hi)) and three products
// hi*hi + hi*lo + lo*hi, which keeps close to float32 accuracy (the dropped lo*lo term is
// ~2^-22 relative; lo parts of values below ~2^-3 lose bits as f16 subnormals, an absolute error
// of ~3e-8 per element) at a fraction of the SIMT kernel's time. f16 covers magnitudes up to
// 65504: the inputs of GPT-2's products (normalized rows, attention outputs, GELU outputs) and
// dequantized weights stay far below that. 64 weight rows x 64 activation rows per block, K in
// steps of 32; 8 warps of 16 x 32 outputs. The next step's weight chunk (threads 0..63) and
// activation half-rows (threads 64..191) are loaded into registers while the tensor cores work
// on the current one. Same requirements and split-K convention as mm2.
#define MH_LD 40
__device__ __forceinline__ uint32_t h2bits(__half2 h) { return *(uint32_t *)&h; }
// mh_split stores n (multiple of 8) floats as f16 hi and lo parts, 16 bytes at a time.
__device__ __forceinline__ void mh_split(const float *r, int n, __half *hi, __half *lo) {
#pragma unroll
	for (int e = 0; e < n; e += 8) {
		uint32_t uh[4], ul[4];
#pragma unroll
		for (int j = 0; j < 4; j++) {
			float a = r[e + 2 * j], b = r[e + 2 * j + 1];
			__half2 h = __floats2half2_rn(a, b);
			float2 back = __half22float2(h);
			uh[j] = h2bits(h);
			ul[j] = h2bits(__floats2half2_rn(a - back.x, b - back.y));
		}
		*(uint4 *)(hi + e) = make_uint4(uh[0], uh[1], uh[2], uh[3]);
		*(uint4 *)(lo + e) = make_uint4(ul[0], ul[1], ul[2], ul[3]);
	}
}

template <int T>
__device__ __forceinline__ void mmh_fetch(const uint8_t *__restrict__ W, int wrow, const float *__restrict__ X, int ldx,
		int N, int M, int n0, int m0, int k0, int tid, float *r) {
	if (tid < BN) {
		int n = n0 + tid;
		if (n < N) {
			dq32<T>(W + (size_t)n * wrow, k0 >> 5, r);
		} else {
#pragma unroll
			for (int e = 0; e < 32; e++) r[e] = 0.0f;
		}
	} else if (tid < BN + 2 * BM) {
		int t = tid - BN, m = m0 + (t >> 1), hf = t & 1;
		if (m < M) {
			const float4 *x = (const float4 *)(X + (size_t)m * ldx + k0 + 16 * hf);
#pragma unroll
			for (int i = 0; i < 4; i++) {
				float4 v = x[i];
				r[4 * i] = v.x, r[4 * i + 1] = v.y, r[4 * i + 2] = v.z, r[4 * i + 3] = v.w;
			}
		} else {
#pragma unroll
			for (int e = 0; e < 16; e++) r[e] = 0.0f;
		}
	}
}

template <int T>
__device__ __forceinline__ void mmh_body(const uint8_t *__restrict__ W, int wrow, const float *__restrict__ X, int ldx,
		float *__restrict__ Y, int ldy, int N, int M, int K, const float *bias, const float *res, int ldres, int act, int Kc) {
	using namespace nvcuda;
	int kb = blockIdx.z * Kc, ke = min(K, kb + Kc);
	Y += (size_t)blockIdx.z * M * ldy;
	// Staging (4 arrays of 64 x MH_LD halves), reused for the 64 x (BN + 4) float outputs.
	__shared__ __align__(32) uint8_t smem[4 * 64 * MH_LD * 2];
	__half(*Wh)[MH_LD] = (__half(*)[MH_LD])smem;
	__half(*Wl)[MH_LD] = Wh + 64;
	__half(*Xh)[MH_LD] = Wh + 128;
	__half(*Xl)[MH_LD] = Wh + 192;
	float(*Cs)[BN + 4] = (float(*)[BN + 4])smem;
	int tid = threadIdx.x, wid = tid >> 5;
	int n0 = blockIdx.x * BN, m0 = blockIdx.y * BM;
	int wm = (wid >> 1) * 16, wn = (wid & 1) * 32;
	wmma::fragment<wmma::accumulator, 16, 16, 16, float> c0, c1;
	wmma::fill_fragment(c0, 0.0f);
	wmma::fill_fragment(c1, 0.0f);
	float r[32];
	mmh_fetch<T>(W, wrow, X, ldx, N, M, n0, m0, kb, tid, r);
	for (int k0 = kb; k0 < ke; k0 += BK) {
		if (tid < BN) {
			mh_split(r, 32, Wh[tid], Wl[tid]);
		} else if (tid < BN + 2 * BM) {
			int t = tid - BN, ml = t >> 1, hf = t & 1;
			mh_split(r, 16, Xh[ml] + 16 * hf, Xl[ml] + 16 * hf);
		}
		__syncthreads();
		if (k0 + BK < ke) mmh_fetch<T>(W, wrow, X, ldx, N, M, n0, m0, k0 + BK, tid, r);
#pragma unroll
		for (int kk = 0; kk < BK; kk += 16) {
			wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> ah, al;
			wmma::load_matrix_sync(ah, &Xh[wm][kk], MH_LD);
			wmma::load_matrix_sync(al, &Xl[wm][kk], MH_LD);
#pragma unroll
			for (int f = 0; f < 2; f++) {
				wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> bh, bl;
				wmma::load_matrix_sync(bh, &Wh[wn + 16 * f][kk], MH_LD);
				wmma::load_matrix_sync(bl, &Wl[wn + 16 * f][kk], MH_LD);
				auto &c = f == 0 ? c0 : c1;
				wmma::mma_sync(c, al, bh, c);
				wmma::mma_sync(c, ah, bl, c);
				wmma::mma_sync(c, ah, bh, c);
			}
		}
		__syncthreads();
	}
	wmma::store_matrix_sync(&Cs[wm][wn], c0, BN + 4, wmma::mem_row_major);
	wmma::store_matrix_sync(&Cs[wm][wn + 16], c1, BN + 4, wmma::mem_row_major);
	__syncthreads();
	for (int e = tid; e < BM * BN; e += 256) {
		int ml = e / BN, nl = e % BN, m = m0 + ml, n = n0 + nl;
		if (m < M && n < N) Y[(size_t)m * ldy + n] = epi(Cs[ml][nl], n, m, bias, res, ldres, act);
	}
}

// ---- mmf: the tiled product of prompts on f16 planes ----
// mmh dequantizes and splits its operands inside the product (64 threads dequantize, every
// tile is split again for each block that reads it) in 64 x 64 tiles with a barrier per 32 of
// K. mmf splits once, before the product: the activations into f16 hi and lo planes
// (split_rows), quantized weights into hi and lo planes (splitw_*; f16 weights are their own
// hi plane, with lo = 0), and then multiplies planes in 128 x 128 tiles fed by a three-stage
// cp.async pipeline. The same three products per step as mmh (lo*hi, hi*lo, hi*hi; for f16
// weights the hi*lo product is exactly zero and skipped), so the same accuracy.

#define MF_T 128 // tile rows (activations) and columns (weight rows)
#define MF_BK 32
#define MF_LD 40 // halves per staged row: 32 + 8 of padding (80 bytes: 16-byte aligned, few bank conflicts)
#define MF_STAGES 3
#define MF_ARR (MF_T * MF_LD) // halves of one staged array

// split_rows writes the M rows of X (K elements, K % 8 == 0, rows 16-byte aligned) as f16 hi
// and lo planes of M x K.
extern "C" __global__ void split_rows(const float *__restrict__ X, int ldx, int M, int K, __half *H, __half *L) {
	size_t total = (size_t)M * K / 8;
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
		size_t e = i * 8;
		int m = (int)(e / K), k = (int)(e % K);
		const float4 *x = (const float4 *)(X + (size_t)m * ldx + k);
		float4 a = x[0], b = x[1];
		float r[8] = {a.x, a.y, a.z, a.w, b.x, b.y, b.z, b.w};
		mh_split(r, 8, H + e, L + e);
	}
}

// splitw_T writes the N weight rows (K elements, K % 32 == 0) as f16 hi and lo planes of N x K.
template <int T>
__device__ __forceinline__ void splitw_body(const uint8_t *__restrict__ W, int wrow, int N, int K, __half *H, __half *L) {
	int C = K >> 5;
	size_t total = (size_t)N * C;
	for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < total; i += (size_t)gridDim.x * blockDim.x) {
		int n = (int)(i / C), c = (int)(i % C);
		float r[32];
		dq32<T>(W + (size_t)n * wrow, c, r);
		size_t e = (size_t)n * K + 32 * c;
		mh_split(r, 32, H + e, L + e);
	}
}

// cp16 copies 16 bytes to shared memory asynchronously, or zeros them when !ok.
__device__ __forceinline__ void cp16(void *dst, const void *src, bool ok) {
	unsigned d = (unsigned)__cvta_generic_to_shared(dst);
	int n = ok ? 16 : 0;
	asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(d), "l"(src), "r"(n));
}

// mf_stage copies the MF_BK-wide slice at k0 of rows r0.. of a plane (rows of K halves, rows
// beyond the plane's last zeroed) into a staged array: 512 16-byte pieces, two per thread.
__device__ __forceinline__ void mf_stage(__half *dst, const __half *__restrict__ src, int r0, int rows, int K, int k0) {
#pragma unroll
	for (int h = 0; h < 2; h++) {
		int idx = threadIdx.x + 256 * h, r = idx >> 2, part = idx & 3;
		bool ok = r0 + r < rows;
		cp16(dst + r * MF_LD + 8 * part, src + (size_t)(ok ? r0 + r : 0) * K + k0 + 8 * part, ok);
	}
}

// mmf_body: block (n tile, m tile, K slice); 8 warps, each 64 activation rows x 32 weight rows
// (4 x 2 fragments of 16 x 16). With gridDim.z > 1 (split-K), Y is slice z's partial product (no
// epilogue; splitk_reduce adds the slices and applies it).
template <bool WLO>
__device__ __forceinline__ void mmf_body(const __half *__restrict__ Ah, const __half *__restrict__ Al, int M,
		const __half *__restrict__ Bh, const __half *__restrict__ Bl, int N, int K, float *__restrict__ Y, int ldy,
		const float *bias, const float *res, int ldres, int act, int Kc) {
	using namespace nvcuda;
	extern __shared__ __align__(128) __half mf[]; // MF_STAGES x {Ah, Al, Bh, Bl}, then reused for the output tile
	int kb = blockIdx.z * Kc, KT = min(K - kb, Kc) / MF_BK;
	Y += (size_t)blockIdx.z * M * ldy;
	int n0 = blockIdx.x * MF_T, m0 = blockIdx.y * MF_T;
	int wid = threadIdx.x >> 5, wm = (wid >> 2) * 64, wn = (wid & 3) * 32;
	wmma::fragment<wmma::accumulator, 16, 16, 16, float> c[4][2];
#pragma unroll
	for (int i = 0; i < 4; i++)
#pragma unroll
		for (int j = 0; j < 2; j++) wmma::fill_fragment(c[i][j], 0.0f);
	auto load = [&](int s, int kt) {
		__half *st = mf + s * 4 * MF_ARR;
		int k0 = kb + kt * MF_BK;
		mf_stage(st, Ah, m0, M, K, k0);
		mf_stage(st + MF_ARR, Al, m0, M, K, k0);
		mf_stage(st + 2 * MF_ARR, Bh, n0, N, K, k0);
		if (WLO) mf_stage(st + 3 * MF_ARR, Bl, n0, N, K, k0);
	};
#pragma unroll
	for (int s = 0; s < MF_STAGES - 1; s++) {
		if (s < KT) load(s, s);
		cp_async_commit();
	}
	for (int kt = 0; kt < KT; kt++) {
		cp_async_wait1(); // stage kt has landed (MF_STAGES - 2 = 1 group may still be in flight) ...
		__syncthreads(); // ... for every thread, and every warp is done with the stage refilled next
		if (kt + MF_STAGES - 1 < KT) load((kt + MF_STAGES - 1) % MF_STAGES, kt + MF_STAGES - 1);
		cp_async_commit();
		const __half *st = mf + (kt % MF_STAGES) * 4 * MF_ARR;
		const __half *sah = st, *sal = st + MF_ARR, *sbh = st + 2 * MF_ARR, *sbl = st + 3 * MF_ARR;
#pragma unroll
		for (int kk = 0; kk < MF_BK; kk += 16) {
			wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> bh[2], bl[2];
#pragma unroll
			for (int j = 0; j < 2; j++) {
				wmma::load_matrix_sync(bh[j], sbh + (wn + 16 * j) * MF_LD + kk, MF_LD);
				if (WLO) wmma::load_matrix_sync(bl[j], sbl + (wn + 16 * j) * MF_LD + kk, MF_LD);
			}
#pragma unroll
			for (int i = 0; i < 4; i++) {
				wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> ah, al;
				wmma::load_matrix_sync(ah, sah + (wm + 16 * i) * MF_LD + kk, MF_LD);
				wmma::load_matrix_sync(al, sal + (wm + 16 * i) * MF_LD + kk, MF_LD);
#pragma unroll
				for (int j = 0; j < 2; j++) {
					wmma::mma_sync(c[i][j], al, bh[j], c[i][j]);
					if (WLO) wmma::mma_sync(c[i][j], ah, bl[j], c[i][j]);
					wmma::mma_sync(c[i][j], ah, bh[j], c[i][j]);
				}
			}
		}
	}
	cp_async_wait0();
	__syncthreads();
	float *Cs = (float *)mf; // MF_T x (MF_T + 4) floats
#pragma unroll
	for (int i = 0; i < 4; i++)
#pragma unroll
		for (int j = 0; j < 2; j++)
			wmma::store_matrix_sync(Cs + (wm + 16 * i) * (MF_T + 4) + wn + 16 * j, c[i][j], MF_T + 4, wmma::mem_row_major);
	__syncthreads();
	for (int e = threadIdx.x; e < MF_T * MF_T; e += 256) {
		int ml = e / MF_T, nl = e % MF_T, m = m0 + ml, n = n0 + nl;
		if (m < M && n < N) Y[(size_t)m * ldy + n] = epi(Cs[ml * (MF_T + 4) + nl], n, m, bias, res, ldres, act);
	}
}

extern "C" __global__ void __launch_bounds__(256) mmf1(const __half *Ah, const __half *Al, int M, const __half *Bh,
		const __half *Bl, int N, int K, float *Y, int ldy, const float *bias, const float *res, int ldres, int act, int Kc) {
	mmf_body<false>(Ah, Al, M, Bh, Bl, N, K, Y, ldy, bias, res, ldres, act, Kc);
}
extern "C" __global__ void __launch_bounds__(256) mmf2(const __half *Ah, const __half *Al, int M, const __half *Bh,
		const __half *Bl, int N, int K, float *Y, int ldy, const float *bias, const float *res, int ldres, int act, int Kc) {
	mmf_body<true>(Ah, Al, M, Bh, Bl, N, K, Y, ldy, bias, res, ldres, act, Kc);
}

template <int T>
__device__ __forceinline__ void getrows_body(const uint8_t *__restrict__ table, int rowbytes, int nrows, const int *ids,
		float *__restrict__ Y, int ldy, int K, unsigned *status) {
	int i = blockIdx.x;
	int id = ids[i];
	if (id < 0 || id >= nrows) {
		if (threadIdx.x == 0) atomicOr(status, ST_BAD_ID);
		return;
	}
	const uint8_t *row = table + (size_t)id * rowbytes;
	for (int k = threadIdx.x; k < K; k += blockDim.x) Y[(size_t)i * ldy + k] = dq<T>(row, k);
}

// embed: get_rows of a table of type T plus get_rows of float32 rows (the position
// embedding), as one launch.
template <int T>
__device__ __forceinline__ void embed_body(const uint8_t *__restrict__ table, int rowbytes, int nrows, const int *ids,
		float *__restrict__ Y, int ldy, int K, unsigned *status, const float *__restrict__ ptab, int ldp, int prows,
		const int *pids) {
	int i = blockIdx.x;
	int id = ids[i], pid = pids[i];
	if (id < 0 || id >= nrows || pid < 0 || pid >= prows) {
		if (threadIdx.x == 0) atomicOr(status, ST_BAD_ID);
		return;
	}
	const uint8_t *row = table + (size_t)id * rowbytes;
	const float *prow = ptab + (size_t)pid * ldp;
	for (int k = threadIdx.x; k < K; k += blockDim.x) Y[(size_t)i * ldy + k] = dq<T>(row, k) + prow[k];
}

#define INSTANTIATE(T, name)                                                                                   \
	extern "C" __global__ void __launch_bounds__(256) mv_##name(const uint8_t *W, int wrow, const float *X,     \
			int ldx, float *Y, int ldy, int N, int M, int K, const float *bias, const float *res, int ldres,      \
			int act) {                                                                                         \
		mv_body<T>(W, wrow, X, ldx, Y, ldy, N, M, K, bias, res, ldres, act);                                   \
	}                                                                                                          \
	extern "C" __global__ void __launch_bounds__(256) mvs_##name(const uint8_t *W, int wrow, const float *X,    \
			int ldx, float *Y, int ldy, int N, int M, int K, const float *bias, const float *res, int ldres,      \
			int act, int R, int wstride, int xsm) {                                                            \
		mvs_body<T>(W, wrow, X, ldx, Y, ldy, N, M, K, bias, res, ldres, act, R, wstride, xsm);                 \
	}                                                                                                          \
	extern "C" __global__ void __launch_bounds__(256) mvsln_##name(const uint8_t *W, int wrow, const float *X,  \
			float *Y, int N, int K, const float *bias, const float *res, int act, int wstride, const float *lnw, \
			const float *lnb, float eps, int rms) {                                                            \
		mvsln_body<T>(W, wrow, X, Y, N, K, bias, res, act, wstride, lnw, lnb, eps, rms);                       \
	}                                                                                                          \
	extern "C" __global__ void __launch_bounds__(256) mvd_##name(const uint8_t *W, int wrow, const float *X,    \
			float *Y, int N, int K, const float *bias, const float *res, int act, int WR, int ln,               \
			const float *lnw, const float *lnb, float eps, int rms) {                                          \
		mvd_body<T>(W, wrow, X, Y, N, K, bias, res, act, WR, ln, lnw, lnb, eps, rms);                          \
	}                                                                                                          \
	extern "C" __global__ void __launch_bounds__(256) mvsp_##name(const uint8_t *W, int wrow, const float *X,   \
			float *Y, int N, int K, const float *bias, const float *res, int act, int R, int wstride, int u) {   \
		mvsp_body<T>(W, wrow, X, Y, N, K, bias, res, act, R, wstride, u);                                      \
	}                                                                                                          \
	extern "C" __global__ void __launch_bounds__(256) mv1_##name(const uint8_t *W, int wrow, const float *X,    \
			int ldx, float *Y, int ldy, int N, int M, int K, const float *bias, const float *res, int ldres,      \
			int act) {                                                                                         \
		mv1_body<T>(W, wrow, X, ldx, Y, ldy, N, M, K, bias, res, ldres, act);                                  \
	}                                                                                                          \
	extern "C" __global__ void __launch_bounds__(256) mm2_##name(const uint8_t *W, int wrow, const float *X,    \
			int ldx, float *Y, int ldy, int N, int M, int K, const float *bias, const float *res, int ldres,      \
			int act, int Kc) {                                                                                 \
		mm2_body<T, 4>(W, wrow, X, ldx, Y, ldy, N, M, K, bias, res, ldres, act, Kc);                           \
	}                                                                                                          \
	extern "C" __global__ void __launch_bounds__(256) mmh_##name(const uint8_t *W, int wrow, const float *X,    \
			int ldx, float *Y, int ldy, int N, int M, int K, const float *bias, const float *res, int ldres,      \
			int act, int Kc) {                                                                                 \
		mmh_body<T>(W, wrow, X, ldx, Y, ldy, N, M, K, bias, res, ldres, act, Kc);                              \
	}                                                                                                          \
	extern "C" __global__ void __launch_bounds__(256) mm_##name(const uint8_t *W, int wrow, const float *X,     \
			int ldx, float *Y, int ldy, int N, int M, int K, const float *bias, const float *res, int ldres,      \
			int act) {                                                                                         \
		mm_body<T>(W, wrow, X, ldx, Y, ldy, N, M, K, bias, res, ldres, act);                                   \
	}                                                                                                          \
	extern "C" __global__ void embed_##name(const uint8_t *table, int rowbytes, int nrows, const int *ids,      \
			float *Y, int ldy, int K, unsigned *status, const float *ptab, int ldp, int prows, const int *pids) {  \
		embed_body<T>(table, rowbytes, nrows, ids, Y, ldy, K, status, ptab, ldp, prows, pids);                \
	}                                                                                                          \
	extern "C" __global__ void splitw_##name(const uint8_t *W, int wrow, int N, int K, __half *H, __half *L) {  \
		splitw_body<T>(W, wrow, N, K, H, L);                                                                   \
	}                                                                                                          \
	extern "C" __global__ void getrows_##name(const uint8_t *table, int rowbytes, int nrows, const int *ids,    \
			float *Y, int ldy, int K, unsigned *status) {                                                      \
		getrows_body<T>(table, rowbytes, nrows, ids, Y, ldy, K, status);                                       \
	}

INSTANTIATE(T_F32, f32)
INSTANTIATE(T_F16, f16)
INSTANTIATE(T_Q4_0, q4_0)
INSTANTIATE(T_Q4_1, q4_1)
INSTANTIATE(T_Q5_0, q5_0)
INSTANTIATE(T_Q5_1, q5_1)
INSTANTIATE(T_Q8_0, q8_0)
INSTANTIATE(T_Q4_K, q4_K)
INSTANTIATE(T_Q5_K, q5_K)
INSTANTIATE(T_Q6_K, q6_K)
INSTANTIATE(T_BF16, bf16)
INSTANTIATE(T_Q2_K, q2_K)
INSTANTIATE(T_Q3_K, q3_K)
INSTANTIATE(T_IQ4_NL, iq4_nl)
INSTANTIATE(T_IQ4_XS, iq4_xs)

// mvsln3 for the types whose Q, K and V products compile.go groups (mvsln3Types): the Llama
// family's files; the others keep a launch per product (the PTX is embedded: every kernel costs).
#define INSTANTIATE_MVSLN3(T, name)                                                                            \
	extern "C" __global__ void __launch_bounds__(256) mvsln3_##name(LnProd p0, LnProd p1, LnProd p2, int wrow,   \
			const float *X, int K, int wstride, const float *lnw, const float *lnb, float eps, int rms) {       \
		mvsln3_body<T>(p0, p1, p2, wrow, X, K, wstride, lnw, lnb, eps, rms);                                   \
	}

INSTANTIATE_MVSLN3(T_F16, f16)
INSTANTIATE_MVSLN3(T_BF16, bf16)
INSTANTIATE_MVSLN3(T_Q8_0, q8_0)
INSTANTIATE_MVSLN3(T_Q4_0, q4_0)
INSTANTIATE_MVSLN3(T_Q4_K, q4_K)
INSTANTIATE_MVSLN3(T_Q5_K, q5_K)
INSTANTIATE_MVSLN3(T_Q6_K, q6_K)

// splitk_reduce adds the S partial products of a split-K mm2 (P: S blocks of M x N) and
// applies the epilogue.
extern "C" __global__ void splitk_reduce(const float *P, int S, int M, int N, float *Y, int ldy, const float *bias,
		const float *res, int ldres, int act) {
	size_t total = (size_t)M * N;
	for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += (size_t)gridDim.x * blockDim.x) {
		int m = (int)(idx / N), n = (int)(idx % N);
		float v = 0.0f;
		for (int z = 0; z < S; z++) v += P[z * total + idx];
		Y[(size_t)m * ldy + n] = epi(v, n, m, bias, res, ldres, act);
	}
}

// ---- elementwise ----

// op 0: add, 1: mul. B has one row (ldb 0) or as many as A.
extern "C" __global__ void binary(const float *A, int lda, const float *B, int ldb, float *Y, int ldy, int K, int rows, int op) {
	size_t total = (size_t)K * rows;
	for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += (size_t)gridDim.x * blockDim.x) {
		int r = (int)(idx / K), c = (int)(idx % K);
		float a = A[(size_t)r * lda + c], b = B[(size_t)r * ldb + c];
		Y[(size_t)r * ldy + c] = op == 0 ? a + b : a * b;
	}
}

// op 0: copy, 1: GELU, 2: scale by s.
extern "C" __global__ void unary(const float *X, int ldx, float *Y, int ldy, int K, int rows, int op, float s) {
	size_t total = (size_t)K * rows;
	for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += (size_t)gridDim.x * blockDim.x) {
		int r = (int)(idx / K), c = (int)(idx % K);
		float x = X[(size_t)r * ldx + c];
		Y[(size_t)r * ldy + c] = op == 0 ? x : (op == 1 ? gelu(x) : x * s);
	}
}

// layer_norm: one block (256 threads) per row; mean and variance accumulated in double as the
// CPU backend does. Rows up to 8 * 256 elements are read once, into registers, with all loads
// issued together.
extern "C" __global__ void __launch_bounds__(256) layer_norm(const float *X, int ldx, float *Y, int ldy, int K,
		const float *w, const float *b, float eps) {
	__shared__ double red[32];
	const float *x = X + (size_t)blockIdx.x * ldx;
	float *y = Y + (size_t)blockIdx.x * ldy;
	int tid = threadIdx.x, bd = blockDim.x;
	bool cached = K <= LN_MAXE * bd;
	float v[LN_MAXE];
	double s = 0;
	if (cached) {
#pragma unroll
		for (int i = 0; i < LN_MAXE; i++) {
			int k = tid + i * bd;
			v[i] = k < K ? x[k] : 0.0f;
		}
#pragma unroll
		for (int i = 0; i < LN_MAXE; i++) s += v[i];
	} else {
		for (int k = tid; k < K; k += bd) s += x[k];
	}
	double mean = block_sum(s, red) / K, q = 0;
	if (cached) {
#pragma unroll
		for (int i = 0; i < LN_MAXE; i++) {
			double d = (double)v[i] - mean;
			if (tid + i * bd < K) q += d * d;
		}
	} else {
		for (int k = tid; k < K; k += bd) {
			double d = (double)x[k] - mean;
			q += d * d;
		}
	}
	double rstd = 1.0 / sqrt(block_sum(q, red) / K + (double)eps);
	if (cached) {
#pragma unroll
		for (int i = 0; i < LN_MAXE; i++) {
			int k = tid + i * bd;
			if (k < K) {
				float o = (float)(((double)v[i] - mean) * rstd);
				if (w) o *= w[k];
				if (b) o += b[k];
				y[k] = o;
			}
		}
	} else {
		for (int k = tid; k < K; k += bd) {
			float o = (float)(((double)x[k] - mean) * rstd);
			if (w) o *= w[k];
			if (b) o += b[k];
			y[k] = o;
		}
	}
}

// ---- the Llama family: RMS norm, RoPE, SwiGLU ----

// rms_norm: one block (256 threads) per row, as the CPU's kernels.RMSNorm: the sum of squares
// in double, the scale 1/sqrt(mean + eps) rounded to float once, then x * scale [* w] in float.
extern "C" __global__ void __launch_bounds__(256) rms_norm(const float *X, int ldx, float *Y, int ldy, int K,
		const float *w, float eps) {
	__shared__ double red[32];
	const float *x = X + (size_t)blockIdx.x * ldx;
	float *y = Y + (size_t)blockIdx.x * ldy;
	int tid = threadIdx.x, bd = blockDim.x;
	double s = 0;
	for (int k = tid; k < K; k += bd) {
		double v = x[k];
		s += v * v;
	}
	float scale = (float)(1.0 / sqrt(block_sum(s, red) / K + (double)eps));
	for (int k = tid; k < K; k += bd) {
		float o = x[k] * scale;
		if (w) o = o * w[k];
		y[k] = o;
	}
}

// ROPE_MAXP is the most rotated pairs per head rope takes (its table of angles).
#define ROPE_MAXP 256

// rope: one block per row of E values (heads of hd), rotated by the row's position pos[r]: the
// first dims values of every head in pairs (2i, 2i+1) (normal mode) or (i, i + dims/2) (neox),
// by the angle pos * fscale * base^(-2i/dims) / factors[i], the rest copied. As the CPU's
// kernels.RopeFreqs/RopeAngles: the angle in double, its cosine and sine rounded to float once;
// the rotation in float without fused multiply-adds (the CPU's Go rounds every product).
extern "C" __global__ void __launch_bounds__(256) rope(const float *X, int ldx, float *Y, int ldy, int E,
		const int *pos, int hd, int dims, int neox, float base, float fscale, const float *factors) {
	__shared__ float cs[2 * ROPE_MAXP];
	int r = blockIdx.x, half = dims / 2;
	double p = (double)pos[r];
	for (int i = threadIdx.x; i < half; i += blockDim.x) {
		double f = (double)fscale * pow((double)base, -(double)(2 * i) / (double)dims);
		if (factors) f /= (double)factors[i];
		double sn, c;
		sincos(p * f, &sn, &c);
		cs[2 * i] = (float)c, cs[2 * i + 1] = (float)sn;
	}
	__syncthreads();
	const float *x = X + (size_t)r * ldx;
	float *y = Y + (size_t)r * ldy;
	for (int e = threadIdx.x; e < E; e += blockDim.x) {
		int d = e % hd, h0 = e - d;
		if (d >= dims) {
			y[e] = x[e];
			continue;
		}
		int i, a, b; // the pair: angle i, first and second element of the head
		if (neox) {
			i = d < half ? d : d - half, a = i, b = i + half;
		} else {
			i = d >> 1, a = 2 * i, b = a + 1;
		}
		float c = cs[2 * i], sn = cs[2 * i + 1], x0 = x[h0 + a], x1 = x[h0 + b];
		y[e] = d == a ? __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, sn)) : __fadd_rn(__fmul_rn(x0, sn), __fmul_rn(x1, c));
	}
}

// swiglu: Y = silu(G) * U elementwise (rows of K).
extern "C" __global__ void swiglu(const float *G, int ldg, const float *U, int ldu, float *Y, int ldy, int K, int rows) {
	size_t total = (size_t)K * rows;
	for (size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x; idx < total; idx += (size_t)gridDim.x * blockDim.x) {
		int r = (int)(idx / K), c = (int)(idx % K);
		Y[(size_t)r * ldy + c] = silu(G[(size_t)r * ldg + c]) * U[(size_t)r * ldu + c];
	}
}

// ---- KV cache ----

__device__ __forceinline__ float ldc(const float *p) { return *p; }
__device__ __forceinline__ float ldc(const __half *p) { return __half2float(*p); }
__device__ __forceinline__ void stc(float *p, float v) { *p = v; }
__device__ __forceinline__ void stc(__half *p, float v) { *p = __float2half_rn(v); }

// store_kv: cache row positions[i] = V row i (one block per row).
template <typename CT>
__device__ __forceinline__ void store_kv_body(CT *cache, int ldc_, int C, const float *V, int ldv, const int *pos, int E, unsigned *status) {
	int i = blockIdx.x, p = pos[i];
	if (p < 0 || p >= C) {
		if (threadIdx.x == 0) atomicOr(status, ST_BAD_POS);
		return;
	}
	for (int e = threadIdx.x; e < E; e += blockDim.x) stc(cache + (size_t)p * ldc_ + e, V[(size_t)i * ldv + e]);
}

extern "C" __global__ void store_kv_f32(float *cache, int ldc_, int C, const float *V, int ldv, const int *pos, int E, unsigned *status) {
	store_kv_body(cache, ldc_, C, V, ldv, pos, E, status);
}
extern "C" __global__ void store_kv_f16(__half *cache, int ldc_, int C, const float *V, int ldv, const int *pos, int E, unsigned *status) {
	store_kv_body(cache, ldc_, C, V, ldv, pos, E, status);
}

// store_kv_rows: row i goes to its own sequence's cache, caches[i] (batched decoding of several
// sessions; the table of cache addresses is built when the graph is compiled).
extern "C" __global__ void store_kv_rows_f32(float *const *caches, int ldc_, int C, const float *V, int ldv, const int *pos, int E, unsigned *status) {
	store_kv_body(caches[blockIdx.x], ldc_, C, V, ldv, pos, E, status);
}
extern "C" __global__ void store_kv_rows_f16(__half *const *caches, int ldc_, int C, const float *V, int ldv, const int *pos, int E, unsigned *status) {
	store_kv_body(caches[blockIdx.x], ldc_, C, V, ldv, pos, E, status);
}

// store_kv2 stores K and V of the same rows in one launch (blockIdx.y picks which).
extern "C" __global__ void store_kv2_f32(float *kc, float *vc, int ldc_, int C, const float *K, const float *V, int ldv,
		const int *pos, int E, unsigned *status) {
	if (blockIdx.y == 0)
		store_kv_body(kc, ldc_, C, K, ldv, pos, E, status);
	else
		store_kv_body(vc, ldc_, C, V, ldv, pos, E, status);
}

// attention: one block (128 threads) per (head, query row). Scores of the query against cache
// rows 0..p live in shared memory (dynamic: D + C + 128 floats). Grouped-query attention: group
// query heads share a key/value head, so head h reads key/value head h / group (cache and new
// rows hold the key/value heads only).
template <typename CT>
__device__ __forceinline__ void attention_body(const float *Q, int ldq, CT *Kc, CT *Vc, int ldc_, int C,
		const int *pos, float *O, int ldo, int D, float scale, unsigned *status, const float *Knew, const float *Vnew, int ldnew,
		int group) {
	extern __shared__ float sm[];
	int h = blockIdx.x, i = blockIdx.y, kvo = (h / group) * D;
	int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5, nw = blockDim.x >> 5;
	int p = pos[i];
	if (p < 0 || p >= C) {
		if (tid == 0) atomicOr(status, ST_BAD_POS);
		return;
	}
	float *q = sm, *scores = sm + D, *red = sm + D + C;
	if (Knew) { // the store of this (single) query's K and V rows, fused in: this head's slice
		// (with grouped queries the group's blocks all store the same values of their shared
		// slice, so each reads it back after its own store, whichever block's store lands last)
		for (int d = tid; d < D; d += blockDim.x) {
			stc(Kc + (size_t)p * ldc_ + kvo + d, Knew[(size_t)i * ldnew + kvo + d]);
			stc(Vc + (size_t)p * ldc_ + kvo + d, Vnew[(size_t)i * ldnew + kvo + d]);
		}
	}
	for (int d = tid; d < D; d += blockDim.x) q[d] = Q[(size_t)i * ldq + h * D + d];
	__syncthreads();
	const CT *kh = Kc + kvo, *vh = Vc + kvo;
	// One thread per key: the query is in shared memory (every thread reads the same element at
	// once), each thread walks its key row with wide loads.
	if (sizeof(CT) == 4 && (D & 3) == 0 && (ldc_ & 3) == 0) {
		const float4 *q4 = (const float4 *)q;
		for (int j = tid; j <= p; j += blockDim.x) {
			const float4 *kr = (const float4 *)(kh + (size_t)j * ldc_);
			float s0 = 0.0f, s1 = 0.0f;
			for (int d = 0; d < D / 4; d += 2) {
				float4 a = kr[d], b = q4[d];
				s0 += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
				if (d + 1 < D / 4) {
					float4 a1 = kr[d + 1], b1 = q4[d + 1];
					s1 += a1.x * b1.x + a1.y * b1.y + a1.z * b1.z + a1.w * b1.w;
				}
			}
			scores[j] = (s0 + s1) * scale;
		}
	} else {
		for (int j = tid; j <= p; j += blockDim.x) {
			const CT *kr = kh + (size_t)j * ldc_;
			float s = 0.0f;
			for (int d = 0; d < D; d++) s += q[d] * ldc(kr + d);
			scores[j] = s * scale;
		}
	}
	__syncthreads();
	float mx = -__int_as_float(0x7f800000);
	for (int j = tid; j <= p; j += blockDim.x) mx = fmaxf(mx, scores[j]);
	mx = warp_max(mx);
	if (lane == 0) red[wid] = mx;
	__syncthreads();
	mx = red[0];
	for (int w = 1; w < nw; w++) mx = fmaxf(mx, red[w]);
	__syncthreads();
	float sum = 0.0f;
	for (int j = tid; j <= p; j += blockDim.x) {
		float e = expf(scores[j] - mx);
		scores[j] = e;
		sum += e;
	}
	sum = warp_sum(sum);
	if (lane == 0) red[wid] = sum;
	__syncthreads();
	sum = 0.0f;
	for (int w = 0; w < nw; w++) sum += red[w];
	float inv = 1.0f / sum;
	__syncthreads();
	int bd = blockDim.x;
	int G = bd >= D ? bd / D : 1;
	if (G > 1) {
		int g = tid / D, d = tid % D;
		float acc = 0.0f;
		if (g < G)
			for (int j = g; j <= p; j += G) acc += scores[j] * ldc(vh + (size_t)j * ldc_ + d);
		if (g < G) red[g * D + d] = acc;
		__syncthreads();
		if (tid < D) {
			float o = 0.0f;
			for (int gg = 0; gg < G; gg++) o += red[gg * D + tid];
			O[(size_t)i * ldo + h * D + tid] = o * inv;
		}
	} else {
		for (int d = tid; d < D; d += blockDim.x) {
			float acc = 0.0f;
			for (int j = 0; j <= p; j++) acc += scores[j] * ldc(vh + (size_t)j * ldc_ + d);
			O[(size_t)i * ldo + h * D + d] = acc * inv;
		}
	}
}

extern "C" __global__ void __launch_bounds__(128) attention_f32(const float *Q, int ldq, float *Kc, float *Vc,
		int ldc_, int C, const int *pos, float *O, int ldo, int D, float scale, unsigned *status, const float *Knew,
		const float *Vnew, int ldnew, int group) {
	attention_body(Q, ldq, Kc, Vc, ldc_, C, pos, O, ldo, D, scale, status, Knew, Vnew, ldnew, group);
}
extern "C" __global__ void __launch_bounds__(128) attention_f16(const float *Q, int ldq, __half *Kc, __half *Vc,
		int ldc_, int C, const int *pos, float *O, int ldo, int D, float scale, unsigned *status, const float *Knew,
		const float *Vnew, int ldnew, int group) {
	attention_body(Q, ldq, Kc, Vc, ldc_, C, pos, O, ldo, D, scale, status, Knew, Vnew, ldnew, group);
}

// attention_split: decode attention split over the context (flash-decoding). One block per
// (head, query row) walking every position left a 124M model's 12 heads on 12 of 132 SMs, and a
// token at position 500 took 2.5x one at position 10. Block (h, i, s) takes positions
// s*chunk .. min((s+1)*chunk, p+1)-1 (chunk from p, below), writes its unnormalized partial (max score, sum of
// exponentials, exponential-weighted sum of values) to part, and the last block of (h, i) to
// finish (a ticket counter per (h, i), reset by that block) combines the partials in split
// order: the result does not depend on which block finishes last, so a row computes the same
// bits in a batch as alone.
template <typename CT>
__device__ __forceinline__ void attention_split_body(const float *Q, int ldq, CT *Kc, CT *Vc, int ldc_, int C,
		const int *pos, float *O, int ldo, int D, float scale, unsigned *status, const float *Knew, const float *Vnew, int ldnew,
		int group, float *part, unsigned *count, int maxChunk) {
	extern __shared__ float sm[];
	__shared__ int last;
	int h = blockIdx.x, i = blockIdx.y, s = blockIdx.z, H = gridDim.x, S = gridDim.z, kvo = (h / group) * D;
	int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5, nw = blockDim.x >> 5;
	int p = pos[i];
	bool ok = p >= 0 && p < C;
	if (!ok && s == 0 && tid == 0) atomicOr(status, ST_BAD_POS);
	// The split of positions 0..p follows p (at least 64 positions a block): a short context
	// takes few blocks, a long one all S; maxChunk (ceil(C/S), at least 64) bounds it.
	int chunk = ok ? min(maxChunk, max(64, (p + S) / S)) : maxChunk;
	int j0 = s * chunk, j1 = ok ? min(j0 + chunk, p + 1) : j0;
	float *q = sm, *scores = sm + D, *red = sm + D + maxChunk;
	float *mine = part + ((size_t)(i * H + h) * S + s) * (D + 2);
	if (j1 > j0) {
		if (Knew && p < j1) { // this split holds position p: the fused store of the new K and V rows
			for (int d = tid; d < D; d += blockDim.x) {
				stc(Kc + (size_t)p * ldc_ + kvo + d, Knew[(size_t)i * ldnew + kvo + d]);
				stc(Vc + (size_t)p * ldc_ + kvo + d, Vnew[(size_t)i * ldnew + kvo + d]);
			}
		}
		for (int d = tid; d < D; d += blockDim.x) q[d] = Q[(size_t)i * ldq + h * D + d];
		__syncthreads();
		const CT *kh = Kc + kvo, *vh = Vc + kvo;
		for (int j = j0 + tid; j < j1; j += blockDim.x) {
			const CT *kr = kh + (size_t)j * ldc_;
			float s0 = 0.0f, s1 = 0.0f;
			if (sizeof(CT) == 4 && (D & 7) == 0 && (ldc_ & 3) == 0) {
				const float4 *q4 = (const float4 *)q, *k4 = (const float4 *)kr;
				for (int d = 0; d < D / 4; d += 2) {
					float4 a = k4[d], b = q4[d], a1 = k4[d + 1], b1 = q4[d + 1];
					s0 += a.x * b.x + a.y * b.y + a.z * b.z + a.w * b.w;
					s1 += a1.x * b1.x + a1.y * b1.y + a1.z * b1.z + a1.w * b1.w;
				}
			} else {
				for (int d = 0; d < D; d++) s0 += q[d] * ldc(kr + d);
			}
			scores[j - j0] = (s0 + s1) * scale;
		}
		__syncthreads();
		float mx = -__int_as_float(0x7f800000);
		for (int j = tid; j < j1 - j0; j += blockDim.x) mx = fmaxf(mx, scores[j]);
		mx = warp_max(mx);
		if (lane == 0) red[wid] = mx;
		__syncthreads();
		mx = red[0];
		for (int w = 1; w < nw; w++) mx = fmaxf(mx, red[w]);
		__syncthreads();
		float sum = 0.0f;
		for (int j = tid; j < j1 - j0; j += blockDim.x) {
			float e = expf(scores[j] - mx);
			scores[j] = e;
			sum += e;
		}
		sum = warp_sum(sum);
		if (lane == 0) red[wid] = sum;
		__syncthreads();
		sum = 0.0f;
		for (int w = 0; w < nw; w++) sum += red[w];
		__syncthreads();
		// Values: G groups of D threads take every G-th position, then add up in group order.
		int G = blockDim.x >= D ? blockDim.x / D : 1;
		if (G > 1) {
			int g = tid / D, d = tid % D;
			float acc = 0.0f;
			if (g < G)
				for (int j = j0 + g; j < j1; j += G) acc += scores[j - j0] * ldc(vh + (size_t)j * ldc_ + d);
			if (g < G) red[g * D + d] = acc;
			__syncthreads();
			if (tid < D) {
				float o = 0.0f;
				for (int gg = 0; gg < G; gg++) o += red[gg * D + tid];
				mine[2 + tid] = o;
			}
		} else {
			for (int d = tid; d < D; d += blockDim.x) {
				float acc = 0.0f;
				for (int j = j0; j < j1; j++) acc += scores[j - j0] * ldc(vh + (size_t)j * ldc_ + d);
				mine[2 + d] = acc;
			}
		}
		if (tid == 0) {
			mine[0] = mx;
			mine[1] = sum;
		}
	} else if (tid == 0) { // an empty split (past the query's position): nothing to add
		mine[0] = 0.0f;
		mine[1] = 0.0f;
	}
	__threadfence();
	__syncthreads();
	if (tid == 0) last = atomicAdd(count + i * H + h, 1u) == (unsigned)S - 1;
	__syncthreads();
	if (!last) return;
	__threadfence();
	if (tid == 0) count[i * H + h] = 0;
	if (!ok) return;
	const volatile float *all = part + (size_t)(i * H + h) * S * (D + 2);
	float M = -__int_as_float(0x7f800000);
	for (int t = 0; t < S; t++)
		if (all[t * (D + 2) + 1] > 0.0f) M = fmaxf(M, all[t * (D + 2)]);
	for (int d = tid; d < D; d += blockDim.x) {
		float L = 0.0f, o = 0.0f;
		for (int t = 0; t < S; t++) {
			const volatile float *ps = all + t * (D + 2);
			float l = ps[1];
			if (l > 0.0f) {
				float w = expf(ps[0] - M);
				L += l * w;
				o += ps[2 + d] * w;
			}
		}
		O[(size_t)i * ldo + h * D + d] = o / L;
	}
}

extern "C" __global__ void __launch_bounds__(128) attention_split_f32(const float *Q, int ldq, float *Kc, float *Vc,
		int ldc_, int C, const int *pos, float *O, int ldo, int D, float scale, unsigned *status, const float *Knew,
		const float *Vnew, int ldnew, int group, float *part, unsigned *count, int maxChunk) {
	attention_split_body(Q, ldq, Kc, Vc, ldc_, C, pos, O, ldo, D, scale, status, Knew, Vnew, ldnew, group, part, count, maxChunk);
}
extern "C" __global__ void __launch_bounds__(128) attention_split_f16(const float *Q, int ldq, __half *Kc, __half *Vc,
		int ldc_, int C, const int *pos, float *O, int ldo, int D, float scale, unsigned *status, const float *Knew,
		const float *Vnew, int ldnew, int group, float *part, unsigned *count, int maxChunk) {
	attention_split_body(Q, ldq, Kc, Vc, ldc_, C, pos, O, ldo, D, scale, status, Knew, Vnew, ldnew, group, part, count, maxChunk);
}
extern "C" __global__ void __launch_bounds__(128) attention_rows_split_f32(const float *Q, int ldq, float *const *Kcs,
		float *const *Vcs, int ldc_, int C, const int *pos, float *O, int ldo, int D, float scale, unsigned *status, int group,
		float *part, unsigned *count, int maxChunk) {
	attention_split_body(Q, ldq, Kcs[blockIdx.y], Vcs[blockIdx.y], ldc_, C, pos, O, ldo, D, scale, status, (const float *)0,
		(const float *)0, 0, group, part, count, maxChunk);
}
extern "C" __global__ void __launch_bounds__(128) attention_rows_split_f16(const float *Q, int ldq, __half *const *Kcs,
		__half *const *Vcs, int ldc_, int C, const int *pos, float *O, int ldo, int D, float scale, unsigned *status, int group,
		float *part, unsigned *count, int maxChunk) {
	attention_split_body(Q, ldq, Kcs[blockIdx.y], Vcs[blockIdx.y], ldc_, C, pos, O, ldo, D, scale, status, (const float *)0,
		(const float *)0, 0, group, part, count, maxChunk);
}

// attention_rows: attention for rows of several sequences, query row i against its own
// sequence's caches Kcs[i], Vcs[i]; each row computed exactly as attention_* computes it.
extern "C" __global__ void __launch_bounds__(128) attention_rows_f32(const float *Q, int ldq, float *const *Kcs, float *const *Vcs,
		int ldc_, int C, const int *pos, float *O, int ldo, int D, float scale, unsigned *status, int group) {
	attention_body(Q, ldq, Kcs[blockIdx.y], Vcs[blockIdx.y], ldc_, C, pos, O, ldo, D, scale, status, (const float *)0, (const float *)0, 0, group);
}
extern "C" __global__ void __launch_bounds__(128) attention_rows_f16(const float *Q, int ldq, __half *const *Kcs, __half *const *Vcs,
		int ldc_, int C, const int *pos, float *O, int ldo, int D, float scale, unsigned *status, int group) {
	attention_body(Q, ldq, Kcs[blockIdx.y], Vcs[blockIdx.y], ldc_, C, pos, O, ldo, D, scale, status, (const float *)0, (const float *)0, 0, group);
}

// attn_tile_f32: attention for prompt batches, head size 64, f32 caches. A block takes 32
// queries of one head and walks the keys 0..max(pos) in tiles of 32 held in shared memory,
// with the online softmax (running max and sum per query; flash attention's recurrence), so K
// and V are read once per 32 queries instead of once per query. 256 threads: for scores and
// for the output, thread t works on query t/8.
#define AQ 32
#define AK 32
#define AD 64
extern "C" __global__ void __launch_bounds__(256) attn_tile_f32(const float *Q, int ldq, const float *Kc, const float *Vc,
		int ldc_, int C, const int *pos, int nq, float *O, int ldo, float scale, unsigned *status, int group) {
	__shared__ float Qs[AQ][AD + 1];
	__shared__ float Ks[AK][AD + 1];
	__shared__ __align__(16) float Vs[AK][AD];
	__shared__ float Ps[AQ][AK + 1];
	__shared__ int maxp;
	// The query tiles run last-first: the late ones walk the most keys, so starting them first
	// balances the multiprocessors' loads (blocks are dispatched in index order).
	int h = blockIdx.x, i0 = (gridDim.y - 1 - blockIdx.y) * AQ, tid = threadIdx.x;
	int qi = tid >> 3, sub = tid & 7;
	int i = i0 + qi;
	int p = -1;
	if (i < nq) {
		p = pos[i];
		if (p < 0 || p >= C) {
			if (sub == 0) atomicOr(status, ST_BAD_POS);
			p = -1;
		}
	}
	if (tid == 0) maxp = -1;
	__syncthreads();
	if (sub == 0) atomicMax(&maxp, p);
	for (int e = tid; e < AQ * AD; e += 256) {
		int r = e / AD, d = e % AD;
		Qs[r][d] = (i0 + r < nq) ? Q[(size_t)(i0 + r) * ldq + h * AD + d] * scale : 0.0f;
	}
	__syncthreads();
	int last = maxp;
	float m = -1e30f, l = 0.0f, acc[8];
#pragma unroll
	for (int e = 0; e < 8; e++) acc[e] = 0.0f;
	const float *kh = Kc + (h / group) * AD, *vh = Vc + (h / group) * AD; // grouped queries: h's key/value head
	for (int j0 = 0; j0 <= last; j0 += AK) {
		{ // load the K and V tiles: row tid/8, 8 elements each
			int r = tid >> 3, c = (tid & 7) * 8, j = j0 + r;
			float4 k0 = make_float4(0, 0, 0, 0), k1 = k0, v0 = k0, v1 = k0;
			if (j <= last) {
				const float4 *kr = (const float4 *)(kh + (size_t)j * ldc_ + c);
				const float4 *vr = (const float4 *)(vh + (size_t)j * ldc_ + c);
				k0 = kr[0], k1 = kr[1], v0 = vr[0], v1 = vr[1];
			}
			Ks[r][c] = k0.x, Ks[r][c + 1] = k0.y, Ks[r][c + 2] = k0.z, Ks[r][c + 3] = k0.w;
			Ks[r][c + 4] = k1.x, Ks[r][c + 5] = k1.y, Ks[r][c + 6] = k1.z, Ks[r][c + 7] = k1.w;
			*(float4 *)&Vs[r][c] = v0;
			*(float4 *)&Vs[r][c + 4] = v1;
		}
		__syncthreads();
		// Each query element read from shared memory serves the thread's 4 keys.
		float s[4] = {0.0f, 0.0f, 0.0f, 0.0f}, mx = -1e30f;
#pragma unroll 16
		for (int d = 0; d < AD; d++) {
			float qv = Qs[qi][d];
#pragma unroll
			for (int u = 0; u < 4; u++) s[u] += qv * Ks[sub + 8 * u][d];
		}
#pragma unroll
		for (int u = 0; u < 4; u++) {
			if (j0 + sub + 8 * u > p) s[u] = -__int_as_float(0x7f800000);
			mx = fmaxf(mx, s[u]);
		}
		mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
		mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
		mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 4));
		float mn = fmaxf(m, mx), corr = expf(m - mn), sum = 0.0f;
#pragma unroll
		for (int u = 0; u < 4; u++) {
			float e = expf(s[u] - mn);
			Ps[qi][sub + 8 * u] = e;
			sum += e;
		}
		sum += __shfl_xor_sync(0xffffffffu, sum, 1);
		sum += __shfl_xor_sync(0xffffffffu, sum, 2);
		sum += __shfl_xor_sync(0xffffffffu, sum, 4);
		l = l * corr + sum;
		m = mn;
		__syncwarp();
#pragma unroll
		for (int e = 0; e < 8; e++) acc[e] *= corr;
		// The thread's 8 output elements are consecutive (sub * 8 ..): two float4 reads of V per key.
#pragma unroll 8
		for (int kj = 0; kj < AK; kj++) {
			float pv = Ps[qi][kj];
			float4 va = *(const float4 *)&Vs[kj][8 * sub], vb = *(const float4 *)&Vs[kj][8 * sub + 4];
			acc[0] += pv * va.x, acc[1] += pv * va.y, acc[2] += pv * va.z, acc[3] += pv * va.w;
			acc[4] += pv * vb.x, acc[5] += pv * vb.y, acc[6] += pv * vb.z, acc[7] += pv * vb.w;
		}
		__syncthreads();
	}
	if (p >= 0) {
		float inv = 1.0f / l;
#pragma unroll
		for (int e = 0; e < 8; e++) O[(size_t)i * ldo + h * AD + 8 * sub + e] = acc[e] * inv;
	}
}

// attn_mma_f32: the same attention on f16 tensor cores, with the operands split in two f16 parts
// and three products per tile (as mmh: close to float32 accuracy). A block (4 warps) takes 32
// queries of one head; per tile of 32 keys: S = Q K^T (each warp one 16 x 16 block of scores),
// the online softmax by 4 threads per query (the probabilities split into f16 parts), then
// P V (each warp 16 queries x 32 dimensions) added to the output, which each thread keeps in
// registers for its query (16 of the 64 dimensions) and rescales as the running maximum grows.
// The next tile's keys and values are loaded into registers while the current one is used.
#define AL 72
#define PL 40
__device__ __forceinline__ void attn_ld16(const float *src, float *r) {
	const float4 *s = (const float4 *)src;
#pragma unroll
	for (int i = 0; i < 4; i++) {
		float4 v = s[i];
		r[4 * i] = v.x, r[4 * i + 1] = v.y, r[4 * i + 2] = v.z, r[4 * i + 3] = v.w;
	}
}

extern "C" __global__ void __launch_bounds__(128) attn_mma_f32(const float *Q, int ldq, const float *Kc, const float *Vc,
		int ldc_, int C, const int *pos, int nq, float *O, int ldo, float scale, unsigned *status, int group) {
	using namespace nvcuda;
	__shared__ __align__(32) __half Qh[AQ][AL], Ql[AQ][AL], Kh[AK][AL], Kl[AK][AL], Vh[AK][AL], Vl[AK][AL];
	__shared__ __align__(32) __half Ph[AQ][PL], Pl[AQ][PL];
	__shared__ __align__(32) float Ss[AQ][AK + 4];
	__shared__ __align__(32) float Ts[AQ][AD + 4];
	__shared__ int maxp;
	// Query tiles last-first (the late ones walk the most keys).
	int h = blockIdx.x, i0 = (gridDim.y - 1 - blockIdx.y) * AQ, tid = threadIdx.x, wid = tid >> 5;
	int row = tid >> 2, q4 = tid & 3; // this thread's query (row of the tile) and quarter
	int i = i0 + row;
	int p = -1;
	if (i < nq) {
		p = pos[i];
		if (p < 0 || p >= C) {
			if (q4 == 0) atomicOr(status, ST_BAD_POS);
			p = -1;
		}
	}
	if (tid == 0) maxp = -1;
	__syncthreads();
	if (q4 == 0) atomicMax(&maxp, p);
	float r[16];
	if (i < nq) {
		attn_ld16(Q + (size_t)i * ldq + h * AD + 16 * q4, r);
#pragma unroll
		for (int e = 0; e < 16; e++) r[e] *= scale;
	} else {
#pragma unroll
		for (int e = 0; e < 16; e++) r[e] = 0.0f;
	}
	mh_split(r, 16, &Qh[row][16 * q4], &Ql[row][16 * q4]);
	__syncthreads();
	int last = maxp;
	const float *kh = Kc + (h / group) * AD, *vh = Vc + (h / group) * AD; // grouped queries: h's key/value head
	float kr[16], vr[16];
	// tile loads: thread t takes key row t/4, dimensions 16 * (t%4) ..
	auto fetch = [&](int j0) {
		int j = j0 + row;
		if (j <= last) {
			attn_ld16(kh + (size_t)j * ldc_ + 16 * q4, kr);
			attn_ld16(vh + (size_t)j * ldc_ + 16 * q4, vr);
		} else {
#pragma unroll
			for (int e = 0; e < 16; e++) kr[e] = 0.0f, vr[e] = 0.0f;
		}
	};
	float m = -1e30f, l = 0.0f, acc[16];
#pragma unroll
	for (int e = 0; e < 16; e++) acc[e] = 0.0f;
	int sr = (wid >> 1) * 16, sc = (wid & 1) * 16; // this warp's block of scores
	int orow = (wid >> 1) * 16, ocol = (wid & 1) * 32; // and of the output
	if (last >= 0) fetch(0);
	for (int j0 = 0; j0 <= last; j0 += AK) {
		mh_split(kr, 16, &Kh[row][16 * q4], &Kl[row][16 * q4]);
		mh_split(vr, 16, &Vh[row][16 * q4], &Vl[row][16 * q4]);
		__syncthreads();
		if (j0 + AK <= last) fetch(j0 + AK);
		{
			wmma::fragment<wmma::accumulator, 16, 16, 16, float> s;
			wmma::fill_fragment(s, 0.0f);
#pragma unroll
			for (int kk = 0; kk < AD; kk += 16) {
				wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> ah, al;
				wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::col_major> bh, bl;
				wmma::load_matrix_sync(ah, &Qh[sr][kk], AL);
				wmma::load_matrix_sync(al, &Ql[sr][kk], AL);
				wmma::load_matrix_sync(bh, &Kh[sc][kk], AL);
				wmma::load_matrix_sync(bl, &Kl[sc][kk], AL);
				wmma::mma_sync(s, al, bh, s);
				wmma::mma_sync(s, ah, bl, s);
				wmma::mma_sync(s, ah, bh, s);
			}
			wmma::store_matrix_sync(&Ss[sr][sc], s, AK + 4, wmma::mem_row_major);
		}
		__syncthreads();
		{ // online softmax: this thread's 8 keys of its query
			float sv[8], mx = -__int_as_float(0x7f800000);
#pragma unroll
			for (int e = 0; e < 8; e++) {
				int kj = 8 * q4 + e;
				sv[e] = (j0 + kj <= p) ? Ss[row][kj] : -__int_as_float(0x7f800000);
				mx = fmaxf(mx, sv[e]);
			}
			mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
			mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
			float mn = fmaxf(m, mx), corr = expf(m - mn), sum = 0.0f;
#pragma unroll
			for (int e = 0; e < 8; e++) {
				sv[e] = expf(sv[e] - mn);
				sum += sv[e];
			}
			sum += __shfl_xor_sync(0xffffffffu, sum, 1);
			sum += __shfl_xor_sync(0xffffffffu, sum, 2);
			l = l * corr + sum;
			m = mn;
#pragma unroll
			for (int e = 0; e < 16; e++) acc[e] *= corr;
			mh_split(sv, 8, &Ph[row][8 * q4], &Pl[row][8 * q4]);
		}
		__syncthreads();
		{
			wmma::fragment<wmma::accumulator, 16, 16, 16, float> o0, o1;
			wmma::fill_fragment(o0, 0.0f);
			wmma::fill_fragment(o1, 0.0f);
#pragma unroll
			for (int kk = 0; kk < AK; kk += 16) {
				wmma::fragment<wmma::matrix_a, 16, 16, 16, __half, wmma::row_major> ah, al;
				wmma::load_matrix_sync(ah, &Ph[orow][kk], PL);
				wmma::load_matrix_sync(al, &Pl[orow][kk], PL);
#pragma unroll
				for (int f = 0; f < 2; f++) {
					wmma::fragment<wmma::matrix_b, 16, 16, 16, __half, wmma::row_major> bh, bl;
					wmma::load_matrix_sync(bh, &Vh[kk][ocol + 16 * f], AL);
					wmma::load_matrix_sync(bl, &Vl[kk][ocol + 16 * f], AL);
					auto &o = f == 0 ? o0 : o1;
					wmma::mma_sync(o, al, bh, o);
					wmma::mma_sync(o, ah, bl, o);
					wmma::mma_sync(o, ah, bh, o);
				}
			}
			wmma::store_matrix_sync(&Ts[orow][ocol], o0, AD + 4, wmma::mem_row_major);
			wmma::store_matrix_sync(&Ts[orow][ocol + 16], o1, AD + 4, wmma::mem_row_major);
		}
		__syncthreads();
#pragma unroll
		for (int e = 0; e < 16; e += 4) {
			float4 t = *(const float4 *)&Ts[row][16 * q4 + e];
			acc[e] += t.x, acc[e + 1] += t.y, acc[e + 2] += t.z, acc[e + 3] += t.w;
		}
	}
	if (p >= 0) {
		float inv = 1.0f / l;
		float4 *o = (float4 *)(O + (size_t)i * ldo + h * AD + 16 * q4);
#pragma unroll
		for (int e = 0; e < 4; e++) o[e] = make_float4(acc[4 * e] * inv, acc[4 * e + 1] * inv, acc[4 * e + 2] * inv, acc[4 * e + 3] * inv);
	}
}
