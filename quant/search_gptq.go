package quant

// Grid is what a quantized block's values can be once its scales are chosen: value j is
// float32(Scale[j]*l) - Min[j] for an integer level l in [Lmin, Lmax]. It lets a caller re-round
// the block's values one at a time with the scales fixed (GPTQ's error compensation, which
// changes a block's later values after its scales are chosen, quantize's gptq.go) and store
// the levels back.
type Grid struct {
	t          Type
	n          int
	Scale, Min [QK_K]float32
	Lmin, Lmax int32
	// The stored scales, for Store.
	d, dmin float32
	sc, mc  [16]int32
}

// Load reads the grid of one block b of type t (t.BlockSize() values). It reports false for a
// type whose levels are not evenly spaced (IQ4_NL, IQ4_XS) or that it does not know.
func (g *Grid) Load(t Type, b []byte) bool {
	g.t = t
	switch t {
	case Q4_0, Q5_0, Q8_0, Q4_1, Q5_1:
		g.n = 32
		g.Lmin, g.Lmax, _, _, _ = legacyLevels(t)
		g.d = getF16(b)
		m := float32(0)
		if t == Q4_1 || t == Q5_1 {
			m = -getF16(b[2:])
		}
		for j := 0; j < 32; j++ {
			g.Scale[j], g.Min[j] = g.d, m
		}
	case Q4_K, Q5_K:
		g.n = QK_K
		g.Lmin, g.Lmax = 0, 15
		if t == Q5_K {
			g.Lmax = 31
		}
		g.d, g.dmin = getF16(b[0:]), getF16(b[2:])
		sc, mn := kScales(b[4:16])
		for s := 0; s < 8; s++ {
			g.sc[s], g.mc[s] = int32(sc[s]), int32(mn[s])
			g.fill(32*s, 32, g.d*float32(sc[s]), g.dmin*float32(mn[s]))
		}
	case Q6_K:
		g.n = QK_K
		g.Lmin, g.Lmax = -32, 31
		g.d = getF16(b[208:])
		for s := 0; s < 16; s++ {
			g.sc[s] = int32(int8(b[192+s]))
			g.fill(16*s, 16, g.d*float32(g.sc[s]), 0)
		}
	case Q3_K:
		g.n = QK_K
		g.Lmin, g.Lmax = kindQ3.lmin, kindQ3.lmax
		g.d = getF16(b[108:])
		sc := q3Scales((*[12]byte)(b[96:108]))
		for s := 0; s < 16; s++ {
			g.sc[s] = int32(sc[s])
			g.fill(16*s, 16, g.d*float32(sc[s]), 0)
		}
	case Q2_K:
		g.n = QK_K
		g.Lmin, g.Lmax = kindQ2.lmin, kindQ2.lmax
		g.d, g.dmin = getF16(b[80:]), getF16(b[82:])
		for s := 0; s < 16; s++ {
			g.sc[s], g.mc[s] = int32(b[s]&0xF), int32(b[s]>>4)
			g.fill(16*s, 16, g.d*float32(g.sc[s]), g.dmin*float32(g.mc[s]))
		}
	default:
		return false
	}
	return true
}

func (g *Grid) fill(from, n int, scale, min float32) {
	for j := from; j < from+n; j++ {
		g.Scale[j], g.Min[j] = scale, min
	}
}

// Round returns the level nearest v at position j of the block and the value it stands for.
func (g *Grid) Round(j int, v float32) (int32, float32) {
	s, m := g.Scale[j], g.Min[j]
	if s == 0 {
		return max(g.Lmin, min(g.Lmax, 0)), -m
	}
	l := clampL(nearestInt((v+m)/s), g.Lmin, g.Lmax)
	return l, float32(s*float32(l)) - m
}

// Store writes the levels L (one per value, each in [Lmin, Lmax]) into the block b that Load
// read, keeping its scales.
func (g *Grid) Store(b []byte, L []int32) {
	L = L[:g.n]
	switch g.t {
	case Q4_0, Q5_0, Q8_0, Q4_1, Q5_1:
		var u [32]uint8
		bias := -g.Lmin // the stored levels are offset to start at 0, except Q8_0's int8
		if g.t == Q8_0 {
			bias = 0
		}
		for j, l := range L {
			u[j] = uint8(l + bias)
		}
		packLegacy(g.t, b, &u)
	case Q4_K, Q5_K:
		st := kxState{d: g.d, dmin: g.dmin}
		for s := 0; s < 8; s++ {
			st.sc[s], st.mc[s] = uint8(g.sc[s]), uint8(g.mc[s])
		}
		for j, l := range L {
			st.L[j] = uint8(l)
		}
		packKx(b, &st, g.Lmax)
	case Q6_K:
		st := q6State{d: g.d}
		for s := 0; s < 16; s++ {
			st.sc[s] = int8(g.sc[s])
		}
		for j, l := range L {
			st.L[j] = int8(l)
		}
		packQ6((*[sizeQ6_K]byte)(b), &st)
	case Q2_K, Q3_K:
		st := lowState{d: g.d, dmin: g.dmin, sc: g.sc, mc: g.mc}
		copy(st.L[:], L)
		if g.t == Q2_K {
			packQ2(b, &st)
		} else {
			packQ3(b, &st)
		}
	}
}
