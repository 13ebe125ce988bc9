// Package kernels holds the CPU backend's compute kernels: float32 dot products and small
// matrix-multiply tiles, dequantization of every weight format into float32, and the
// elementwise operations. Each kernel has a pure-Go reference (this file's siblings named
// generic*.go) compiled everywhere, and SIMD versions (Go assembly, *_amd64.s) for the tiers
// the CPU supports; the best tier is chosen once at start-up (github.com/klauspost/cpuid/v2)
// and can be forced with GORUN_CPU=generic|avx2|avx512 or by building with -tags purego.
//
// Summation order. Every dot product of length k keeps 16 partial sums, lane l accumulating
// the products of elements i ≡ l (mod 16) in increasing i (a fused multiply-add per element in
// the SIMD tiers), then reduces them with one fixed tree (lanes l and l+8, then l and l+4, then
// l and l+2, then the last two), and finally adds the products of the k mod 16 trailing
// elements one by one. The AVX2 tier keeps its 16 lanes in two registers, so AVX2 and AVX-512
// give bit-identical results; the generic tier rounds the product and the sum separately, so it
// agrees with them to within float32 rounding. Because every kernel of a tier (one row, 1x4,
// 4x4) sums each output element in this same order, a matrix product gives the same bits
// whatever the batch size or the tiling, which is what keeps batched and token-by-token
// evaluation identical.
package kernels
