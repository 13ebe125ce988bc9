package quant

import (
	"bytes"
	"math/rand/v2"
	"testing"
)

// refTestRows returns rows for comparing the faster reference copies with the reference code:
// the pinned rows and more random ones of several kinds and scales.
func refTestRows() [][]float32 {
	rows, _ := pinRows()
	r := rand.New(rand.NewPCG(21, 22))
	for i := range 200 {
		n := 768
		switch i % 4 {
		case 0:
			rows = append(rows, gaussRow(r, n, 0.02))
		case 1:
			rows = append(rows, heavyRow(r, n, 1))
		case 2:
			x := gaussRow(r, n, 3)
			for j, v := range x {
				x[j] = F16ToF32(F32ToF16(v))
			}
			rows = append(rows, x)
		default:
			x := heavyRow(r, n, 1e-3)
			for j := range x {
				if r.IntN(3) == 0 {
					x[j] = 0
				}
			}
			rows = append(rows, x)
		}
	}
	return rows
}

func TestRefCopiesEqual(t *testing.T) {
	for _, asm := range []bool{false, true} {
		if asm && !candAsmAvailable {
			continue
		}
		t.Run(map[bool]string{false: "generic", true: "asm"}[asm], func(t *testing.T) {
			defer func(v bool) { useCandAsm = v }(useCandAsm)
			useCandAsm = asm
			testRefCopiesEqual(t)
		})
	}
}

func testRefCopiesEqual(t *testing.T) {
	for i, x := range refTestRows() {
		for o := 0; o+QK_K <= len(x); o += QK_K {
			xb := (*[QK_K]float32)(x[o:])
			var want, got [sizeQ6_K]byte
			quantBlockQ6_K(&want, xb)
			refBlockQ6_K(&got, xb)
			if !bytes.Equal(want[:], got[:]) {
				t.Fatalf("Q6_K row %d block %d: reference copy differs", i, o/QK_K)
			}
			for _, nmax := range []int32{15, 31} {
				var want, got [sizeQ5_K]byte
				quantBlockKx(want[:], xb, nmax)
				refBlockKx(got[:], xb, nmax)
				if !bytes.Equal(want[:], got[:]) {
					t.Fatalf("nmax %d row %d block %d: reference copy differs", nmax, i, o/QK_K)
				}
			}
		}
	}
}

// The reference copies' candidate loops against ggml's, on many small groups of varied shapes (few
// distinct values, ties, one-sided, tiny).
func TestRefCopiesGroups(t *testing.T) {
	for _, asm := range []bool{false, true} {
		if asm && !candAsmAvailable {
			continue
		}
		t.Run(map[bool]string{false: "generic", true: "asm"}[asm], func(t *testing.T) {
			defer func(v bool) { useCandAsm = v }(useCandAsm)
			useCandAsm = asm
			testRefCopiesGroups(t)
		})
	}
}

func testRefCopiesGroups(t *testing.T) {
	r := rand.New(rand.NewPCG(23, 24))
	var x, w [32]float32
	groups := 40000
	if testing.Short() {
		groups = 5000
	}
	for it := range groups {
		scale := float32(r.ExpFloat64())
		kind := it % 5
		for i := range x {
			v := float32(r.NormFloat64())
			switch kind {
			case 1:
				v = float32(r.IntN(5) - 2)
			case 2:
				v = abs32(v) + 0.5
			case 3:
				v = F16ToF32(F32ToF16(v * 1e-4))
			case 4:
				if r.IntN(2) == 0 {
					v = 0
				}
			}
			x[i] = v * scale
		}
		var sumX2 float32
		for _, v := range x {
			sumX2 += float32(v * v)
		}
		avX := sqrt32(sumX2 / 32)
		for i, v := range x {
			w[i] = avX + abs32(v)
		}
		for _, p := range []struct {
			nmax  int32
			rmin  float32
			nstep int32
		}{{15, -1, 20}, {31, -0.5, 15}} {
			var L1, L2, aux [32]uint8
			s1, m1 := makeQKX2Quants(p.nmax, x[:], w[:], L1[:], aux[:], p.rmin, 0.1, p.nstep, false)
			s2, m2 := refQKX2Quants(p.nmax, x[:], w[:], L2[:], p.rmin, 0.1, p.nstep)
			if s1 != s2 || m1 != m2 || L1 != L2 {
				t.Fatalf("makeQKX2Quants nmax %d group %d: (%v, %v) vs copy (%v, %v)", p.nmax, it, s1, m1, s2, m2)
			}
		}
		var Q1, Q2 [16]int8
		for h := 0; h < 2; h++ {
			s1 := makeQXQuants(32, x[16*h:16*h+16], Q1[:])
			s2 := refQXQuants(32, x[16*h:16*h+16], Q2[:])
			if s1 != s2 || Q1 != Q2 {
				t.Fatalf("makeQXQuants group %d: %v vs copy %v", it, s1, s2)
			}
		}
	}
}

func BenchmarkRefCopies(b *testing.B) {
	rng := rand.New(rand.NewPCG(2, 2))
	x := (*[QK_K]float32)(gaussRow(rng, QK_K, 0.02))
	var q [sizeQ6_K]byte
	for _, c := range []struct {
		name string
		f    func()
	}{
		{"Q6_K/ref", func() { quantBlockQ6_K(&q, x) }},
		{"Q6_K/copy", func() { refBlockQ6_K(&q, x) }},
		{"Q4_K/ref", func() { quantBlockKx(q[:], x, 15) }},
		{"Q4_K/copy", func() { refBlockKx(q[:], x, 15) }},
	} {
		b.Run(c.name, func(b *testing.B) {
			c0 := cpuNanos()
			for b.Loop() {
				c.f()
			}
			b.ReportMetric(float64(cpuNanos()-c0)/float64(b.N), "cpu-ns/op")
		})
	}
}
