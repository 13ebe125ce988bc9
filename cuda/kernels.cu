// gorun's CUDA kernels. Compiled to PTX by gen.sh (go generate) and embedded in the Go package;
// the driver JIT-compiles the PTX for the GPU at load. Every kernel takes row strides in
// elements, so views (q/k/v slices of the fused QKV rows) need no copies.
//
// Weight types are in GGUF (ggml) block layout, dequantized element by element by dq<T>: each
// warp lane reads its own element of a block, so the lanes of a warp read neighbouring bytes.

#include <cuda_fp16.h>
#include <stdint.h>

// ggml type ids
#define T_F32 0
#define T_F16 1
#define T_Q4_0 2
#define T_Q4_1 3
#define T_Q5_0 6
#define T_Q5_1 7
#define T_Q8_0 8
#define T_Q4_K 12
#define T_Q5_K 13
#define T_Q6_K 14

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

__device__ __forceinline__ float gelu(float x) {
	const float c = 0.7978845608028654f;
	return 0.5f * x * (1.0f + tanhf(c * (x + 0.044715f * x * x * x)));
}

// epilogue of a matrix product: + bias[n], then GELU (act 1), then + res[m][n]
__device__ __forceinline__ float epi(float v, int n, int m, const float *bias, const float *res, int ldres, int act) {
	if (bias) v += bias[n];
	if (act == 1) v = gelu(v);
	if (res) v = res[(size_t)m * ldres + n] + v;
	return v;
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

// ---- matrix-vector: one warp per weight row, up to MV_MAXM activation rows ----

#define MV_MAXM 8

template <int T>
__device__ __forceinline__ void mv_body(const uint8_t *__restrict__ W, int wrow, const float *__restrict__ X, int ldx,
		float *__restrict__ Y, int ldy, int N, int M, int K, const float *bias, const float *res, int ldres, int act) {
	int n = (blockIdx.x * blockDim.x + threadIdx.x) >> 5;
	int lane = threadIdx.x & 31;
	if (n >= N) return;
	const uint8_t *row = W + (size_t)n * wrow;
	float acc[MV_MAXM];
#pragma unroll
	for (int m = 0; m < MV_MAXM; m++) acc[m] = 0.0f;
	for (int k = lane; k < K; k += 32) {
		float w = dq<T>(row, k);
#pragma unroll
		for (int m = 0; m < MV_MAXM; m++)
			if (m < M) acc[m] += w * X[(size_t)m * ldx + k];
	}
	float out = 0.0f;
#pragma unroll
	for (int m = 0; m < MV_MAXM; m++) {
		float s = warp_sum(acc[m]);
		if (lane == m) out = s;
	}
	if (lane < M) Y[(size_t)lane * ldy + n] = epi(out, n, lane, bias, res, ldres, act);
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

#define INSTANTIATE(T, name)                                                                                   \
	extern "C" __global__ void __launch_bounds__(256) mv_##name(const uint8_t *W, int wrow, const float *X,     \
			int ldx, float *Y, int ldy, int N, int M, int K, const float *bias, const float *res, int ldres,      \
			int act) {                                                                                         \
		mv_body<T>(W, wrow, X, ldx, Y, ldy, N, M, K, bias, res, ldres, act);                                   \
	}                                                                                                          \
	extern "C" __global__ void __launch_bounds__(256) mm_##name(const uint8_t *W, int wrow, const float *X,     \
			int ldx, float *Y, int ldy, int N, int M, int K, const float *bias, const float *res, int ldres,      \
			int act) {                                                                                         \
		mm_body<T>(W, wrow, X, ldx, Y, ldy, N, M, K, bias, res, ldres, act);                                   \
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
// CPU backend does.
extern "C" __global__ void __launch_bounds__(256) layer_norm(const float *X, int ldx, float *Y, int ldy, int K,
		const float *w, const float *b, float eps) {
	__shared__ double red[32];
	const float *x = X + (size_t)blockIdx.x * ldx;
	float *y = Y + (size_t)blockIdx.x * ldy;
	int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5, nw = blockDim.x >> 5;
	double s = 0;
	for (int k = tid; k < K; k += blockDim.x) s += x[k];
	for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);
	if (lane == 0) red[wid] = s;
	__syncthreads();
	if (wid == 0) {
		double t = lane < nw ? red[lane] : 0;
		for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
		if (lane == 0) red[0] = t;
	}
	__syncthreads();
	double mean = red[0] / K;
	__syncthreads();
	double q = 0;
	for (int k = tid; k < K; k += blockDim.x) {
		double d = (double)x[k] - mean;
		q += d * d;
	}
	for (int o = 16; o > 0; o >>= 1) q += __shfl_xor_sync(0xffffffffu, q, o);
	if (lane == 0) red[wid] = q;
	__syncthreads();
	if (wid == 0) {
		double t = lane < nw ? red[lane] : 0;
		for (int o = 16; o > 0; o >>= 1) t += __shfl_xor_sync(0xffffffffu, t, o);
		if (lane == 0) red[0] = t;
	}
	__syncthreads();
	double rstd = 1.0 / sqrt(red[0] / K + (double)eps);
	for (int k = tid; k < K; k += blockDim.x) {
		float v = (float)(((double)x[k] - mean) * rstd);
		if (w) v *= w[k];
		if (b) v += b[k];
		y[k] = v;
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

// store_kv2 stores K and V of the same rows in one launch (blockIdx.y picks which).
extern "C" __global__ void store_kv2_f32(float *kc, float *vc, int ldc_, int C, const float *K, const float *V, int ldv,
		const int *pos, int E, unsigned *status) {
	if (blockIdx.y == 0)
		store_kv_body(kc, ldc_, C, K, ldv, pos, E, status);
	else
		store_kv_body(vc, ldc_, C, V, ldv, pos, E, status);
}

// attention: one block (128 threads) per (head, query row). Scores of the query against cache
// rows 0..p live in shared memory (dynamic: D + C + 128 floats).
template <typename CT>
__device__ __forceinline__ void attention_body(const float *Q, int ldq, const CT *Kc, const CT *Vc, int ldc_, int C,
		const int *pos, float *O, int ldo, int D, float scale, unsigned *status) {
	extern __shared__ float sm[];
	int h = blockIdx.x, i = blockIdx.y;
	int tid = threadIdx.x, lane = tid & 31, wid = tid >> 5, nw = blockDim.x >> 5;
	int p = pos[i];
	if (p < 0 || p >= C) {
		if (tid == 0) atomicOr(status, ST_BAD_POS);
		return;
	}
	float *q = sm, *scores = sm + D, *red = sm + D + C;
	for (int d = tid; d < D; d += blockDim.x) q[d] = Q[(size_t)i * ldq + h * D + d];
	__syncthreads();
	const CT *kh = Kc + h * D, *vh = Vc + h * D;
	for (int j = wid; j <= p; j += nw) {
		const CT *kr = kh + (size_t)j * ldc_;
		float s = 0.0f;
		for (int d = lane; d < D; d += 32) s += q[d] * ldc(kr + d);
		s = warp_sum(s);
		if (lane == 0) scores[j] = s * scale;
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

extern "C" __global__ void __launch_bounds__(128) attention_f32(const float *Q, int ldq, const float *Kc, const float *Vc,
		int ldc_, int C, const int *pos, float *O, int ldo, int D, float scale, unsigned *status) {
	attention_body(Q, ldq, Kc, Vc, ldc_, C, pos, O, ldo, D, scale, status);
}
extern "C" __global__ void __launch_bounds__(128) attention_f16(const float *Q, int ldq, const __half *Kc, const __half *Vc,
		int ldc_, int C, const int *pos, float *O, int ldo, int D, float scale, unsigned *status) {
	attention_body(Q, ldq, Kc, Vc, ldc_, C, pos, O, ldo, D, scale, status);
}
