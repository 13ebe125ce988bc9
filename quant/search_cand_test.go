package quant

import (
	"fmt"
	"math"
	"math/rand/v2"
	"testing"
)

// The assembly candErr8 equals the generic loop bit for bit: errors and levels, on random
// groups and candidates, including the special lanes the callers pass (ds = 0 with id = +Inf,
// id = 0, negative scales, levels clamped at either end).
func TestCandErr8Tiers(t *testing.T) {
	if !candAsmAvailable {
		t.Skip("no assembly candErr8 on this CPU or build")
	}
	r := rand.New(rand.NewPCG(31, 32))
	var x [32]float32
	var w [32]float64
	for it := range 20000 {
		n := 16 + 16*(it%2)
		sc := float32(r.ExpFloat64())
		for j := 0; j < n; j++ {
			v := float32(r.NormFloat64()) * sc
			switch r.IntN(8) {
			case 0:
				v = 0
			case 1:
				v = F16ToF32(F32ToF16(v))
			case 2:
				v = float32(math.Copysign(0, -1))
			}
			x[j] = v
			w[j] = float64(float32(r.ExpFloat64()))
		}
		var p candParams
		for c := 0; c < 8; c++ {
			ds := float32(r.NormFloat64()) * sc / 8
			dm := float32(0)
			if r.IntN(2) == 0 {
				dm = float32(r.ExpFloat64()) * sc
			}
			id := 1 / ds
			switch r.IntN(10) {
			case 0:
				ds, id = 0, float32(math.Inf(1))
			case 1:
				ds, id = 0, 0
			case 2:
				id *= 1.01
			}
			p.ds[c], p.dm[c], p.id[c] = ds, dm, id
			switch r.IntN(3) {
			case 0:
				p.lmin[c], p.lmax[c] = -32, 31
			case 1:
				p.lmin[c], p.lmax[c] = 0, 15
			default:
				p.lmin[c], p.lmax[c] = -128, 127
			}
		}
		var e1, e2 [8]float64
		var l1, l2 [256]int32
		candErr8Generic(x[:n], w[:n], &p, &e1, l1[:8*n])
		candErr8Asm(&x[0], &w[0], uintptr(n), &p, &e2, &l2[0])
		for c := 0; c < 8; c++ {
			if math.Float64bits(e1[c]) != math.Float64bits(e2[c]) && !(math.IsNaN(e1[c]) && math.IsNaN(e2[c])) {
				t.Fatalf("case %d lane %d: error %v generic, %v assembly", it, c, e1[c], e2[c])
			}
		}
		if l1 != l2 {
			t.Fatalf("case %d: levels differ", it)
		}
	}
}

func BenchmarkCandErr8(b *testing.B) {
	r := rand.New(rand.NewPCG(1, 2))
	var x [32]float32
	var w [32]float64
	for j := range x {
		x[j] = float32(r.NormFloat64())
		w[j] = 1 + float64(float32(r.ExpFloat64()))
	}
	var p candParams
	for c := range 8 {
		p.ds[c] = 0.2 + 0.01*float32(c)
		p.id[c] = 1 / p.ds[c]
		p.dm[c] = 1.5
		p.lmax[c] = 15
	}
	var e [8]float64
	var lt [256]int32
	b.Run("generic", func(b *testing.B) {
		c0 := cpuNanos()
		for b.Loop() {
			candErr8Generic(x[:], w[:], &p, &e, lt[:])
		}
		b.ReportMetric(float64(cpuNanos()-c0)/float64(b.N), "cpu-ns/op")
	})
	if candAsmAvailable {
		b.Run("asm", func(b *testing.B) {
			c0 := cpuNanos()
			for b.Loop() {
				candErr8Asm(&x[0], &w[0], 32, &p, &e, &lt[0])
			}
			b.ReportMetric(float64(cpuNanos()-c0)/float64(b.N), "cpu-ns/op")
		})
	}
}

func BenchmarkCandErr8N(b *testing.B) {
	var x [32]float32
	var w [32]float64
	for j := range x {
		x[j] = float32(j%7) * 0.1
		w[j] = 1
	}
	var p candParams
	for c := range 8 {
		p.ds[c] = 0.2
		p.id[c] = 5
		p.lmax[c] = 15
	}
	var e [8]float64
	var lt [256]int32
	if !candAsmAvailable {
		b.Skip()
	}
	for _, n := range []int{1, 8, 32} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			c0 := cpuNanos()
			for b.Loop() {
				candErr8Asm(&x[0], &w[0], uintptr(n), &p, &e, &lt[0])
			}
			b.ReportMetric(float64(cpuNanos()-c0)/float64(b.N), "cpu-ns/op")
		})
	}
}

// The whole quantizers give the same bytes with and without the assembly, on many rows.
func TestSearchFullTiers(t *testing.T) {
	if !candAsmAvailable {
		t.Skip("no assembly on this CPU or build")
	}
	r := rand.New(rand.NewPCG(43, 44))
	var rows, imps [][]float32
	for i := range 60 {
		var x []float32
		switch i % 3 {
		case 0:
			x = gaussRow(r, 512, 0.02)
		case 1:
			x = heavyRow(r, 512, 1)
		default:
			x = gaussRow(r, 512, 3)
			for j, v := range x {
				x[j] = F16ToF32(F32ToF16(v))
			}
		}
		rows = append(rows, x)
		var imp []float32
		if i%4 == 0 {
			imp = importanceRow(r, 512)
		}
		imps = append(imps, imp)
	}
	defer func(v bool) { useCandAsm = v }(useCandAsm)
	for _, ty := range searchTypes {
		useCandAsm = true
		a := searchHash(t, ty, rows, imps, SearchFull)
		useCandAsm = false
		g := searchHash(t, ty, rows, imps, SearchFull)
		if a != g {
			t.Errorf("%v: assembly hash %s, generic %s", ty, a, g)
		}
	}
}
