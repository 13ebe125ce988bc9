//go:build amd64 && !purego

package kernels

// The Llama kernels' SIMD tiers (llama_amd64.s; SwiGLU in act_amd64.s and avx2_act_amd64.s).
// The wrappers hand the kernels whole vectors and finish the rest with the generic code, which
// computes the same bits for RMSNorm and RoPE; SwiGLU's rest goes through the kernel on a
// padded copy, so every element gets the SIMD tier's exp.

//go:noescape
func squareLanesAVX512(acc *[lanes]float64, x *float32, n uintptr)

//go:noescape
func scaleRowAVX512(dst, x *float32, n uintptr, s float32)

//go:noescape
func scaleMulRowAVX512(dst, x, w *float32, n uintptr, s float32)

//go:noescape
func ropeNormalAVX512(dst, x, cos, sin *float32, n uintptr)

//go:noescape
func ropeNeoXAVX512(dst, x, cos, sin *float32, h, n uintptr)

//go:noescape
func swiGLUAVX512(dst, gate, up *float32, n uintptr)

//go:noescape
func squareLanesAVX2(acc *[lanes]float64, x *float32, n uintptr)

//go:noescape
func scaleRowAVX2(dst, x *float32, n uintptr, s float32)

//go:noescape
func scaleMulRowAVX2(dst, x, w *float32, n uintptr, s float32)

//go:noescape
func ropeNormalAVX2(dst, x, cos, sin *float32, n uintptr)

//go:noescape
func ropeNeoXAVX2(dst, x, cos, sin *float32, h, n uintptr)

//go:noescape
func swiGLUAVX2(dst, gate, up *float32, n uintptr)

// useLlama installs the Llama kernels of the AVX-512 tier (wide) or of the AVX2 tier. The
// assembly is called directly, not through function values, so that the arrays the wrappers
// pass stay on the stack.
func useLlama(wide bool) {
	w := 8
	if wide {
		w = 16
	}
	squareLanes = func(x []float32) (acc [lanes]float64) {
		if n := len(x) &^ (lanes - 1); n > 0 {
			if wide {
				squareLanesAVX512(&acc, &x[0], uintptr(n))
			} else {
				squareLanesAVX2(&acc, &x[0], uintptr(n))
			}
		}
		return acc
	}
	scaleRow = func(dst, x []float32, s float32) {
		x = x[:len(dst)]
		n := len(dst) &^ (w - 1)
		switch {
		case n == 0:
		case wide:
			scaleRowAVX512(&dst[0], &x[0], uintptr(n), s)
		default:
			scaleRowAVX2(&dst[0], &x[0], uintptr(n), s)
		}
		scaleRowGeneric(dst[n:], x[n:], s)
	}
	scaleMulRow = func(dst, x, wt []float32, s float32) {
		x, wt = x[:len(dst)], wt[:len(dst)]
		n := len(dst) &^ (w - 1)
		switch {
		case n == 0:
		case wide:
			scaleMulRowAVX512(&dst[0], &x[0], &wt[0], uintptr(n), s)
		default:
			scaleMulRowAVX2(&dst[0], &x[0], &wt[0], uintptr(n), s)
		}
		scaleMulRowGeneric(dst[n:], x[n:], wt[n:], s)
	}
	RopeNormal = func(dst, x, cs []float32) {
		d, h := len(cs), len(cs)/2
		_, dst = x[:d], dst[:len(x)] // the rotated part and the head are in range
		n := 2 * h &^ (w - 1)        // values the kernels rotate (n/2 pairs)
		switch {
		case n == 0:
		case wide:
			ropeNormalAVX512(&dst[0], &x[0], &cs[0], &cs[h], uintptr(n))
		default:
			ropeNormalAVX2(&dst[0], &x[0], &cs[0], &cs[h], uintptr(n))
		}
		ropeNormalPairs(dst, x, cs, n/2)
		copy(dst[d:], x[d:])
	}
	RopeNeoX = func(dst, x, cs []float32) {
		d, h := len(cs), len(cs)/2
		_, dst = x[:d], dst[:len(x)]
		n := h &^ (w - 1) // pairs the kernels rotate
		switch {
		case n == 0:
		case wide:
			ropeNeoXAVX512(&dst[0], &x[0], &cs[0], &cs[h], uintptr(h), uintptr(n))
		default:
			ropeNeoXAVX2(&dst[0], &x[0], &cs[0], &cs[h], uintptr(h), uintptr(n))
		}
		ropeNeoXPairs(dst, x, cs, n)
		copy(dst[d:], x[d:])
	}
	swiGLU := swiGLUAVX2
	if wide {
		swiGLU = swiGLUAVX512
	}
	SwiGLU = func(dst, gate, up []float32) {
		gate, up = gate[:len(dst)], up[:len(dst)]
		n := len(dst) &^ (lanes - 1)
		if n > 0 {
			swiGLU(&dst[0], &gate[0], &up[0], uintptr(n))
		}
		if n < len(dst) {
			swiGLUTail(wide, dst[n:], gate[n:], up[n:])
		}
	}
}

// swiGLUTail runs the SIMD kernel on fewer than 16 values through padded copies.
func swiGLUTail(wide bool, dst, gate, up []float32) {
	var d, g, u [lanes]float32
	copy(g[:], gate)
	copy(u[:], up)
	if wide {
		swiGLUAVX512(&d[0], &g[0], &u[0], lanes)
	} else {
		swiGLUAVX2(&d[0], &g[0], &u[0], lanes)
	}
	copy(dst, d[:])
}
