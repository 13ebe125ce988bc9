package testmodel

import (
	"encoding/binary"
	"math"
	"sync"

	"github.com/gorun-dev/gorun/quant"
)

// rng is splitmix64: one add and three multiply-xorshift rounds per 64 bits, statistically
// good enough for weights and several times faster than math/rand. A stream is fixed by its
// seed, so every tensor can be generated on its own.
type rng struct{ s uint64 }

func mix(z uint64) uint64 {
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// newRNG seeds a stream from the model seed and a stream number (the tensor index).
func newRNG(seed int64, stream uint64) rng {
	return rng{s: mix(uint64(seed) ^ mix(stream+0x9e3779b97f4a7c15))}
}

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	return mix(r.s)
}

// intn returns a number in [0, n) (n > 0); the modulo bias is irrelevant here.
func (r *rng) intn(n int) int { return int(r.next() % uint64(n)) }

// zTable holds the 65536 standard-normal quantiles Φ⁻¹((k+½)/65536). Indexing it with 16
// random bits draws from a finely discretized normal (tails to ±4.3σ), so one 64-bit random
// number gives four samples and no arithmetic: the 1.5B model has 1.6 billion of them.
var zTable = sync.OnceValue(func() *[1 << 16]float64 {
	var z [1 << 16]float64
	for k := range z {
		p := (float64(k) + 0.5) / (1 << 16)
		z[k] = math.Sqrt2 * math.Erfinv(2*p-1)
	}
	return &z
})

// dist is the distribution of one tensor's elements: mean + std*N(0,1).
type dist struct{ mean, std float64 }

// sampler holds one tensor's distribution already encoded in its element type, so sampling
// is a table lookup per element.
type sampler struct {
	t    quant.Type
	bits [1 << 16]uint32 // the encoded element: float32 bits, or f16/bf16 in the low half
}

// reset prepares s for elements of type t (F32, F16 or BF16) drawn from d.
func (s *sampler) reset(t quant.Type, d dist) {
	s.t = t
	for k, z := range zTable() {
		v := float32(d.mean + d.std*z)
		switch t {
		case quant.F32:
			s.bits[k] = math.Float32bits(v)
		case quant.F16:
			s.bits[k] = uint32(quant.F32ToF16(v))
		case quant.BF16:
			s.bits[k] = uint32(quant.F32ToBF16(v))
		default:
			panic("testmodel: no sampler for " + t.String())
		}
	}
}

// fill writes samples to dst, whose length is a whole number of elements. Four elements use
// one random number, so filling a tensor in chunks of a multiple of four elements gives the
// same bytes as filling it at once.
func (s *sampler) fill(dst []byte, r *rng) {
	if s.t == quant.F32 {
		s.fill32(dst, r)
	} else {
		s.fill16(dst, r)
	}
}

func (s *sampler) fill32(dst []byte, r *rng) {
	tab := &s.bits
	n := len(dst) / 4
	i := 0
	for ; i+4 <= n; i += 4 {
		x := r.next()
		b := dst[4*i : 4*i+16]
		binary.LittleEndian.PutUint32(b[0:], tab[uint16(x)])
		binary.LittleEndian.PutUint32(b[4:], tab[uint16(x>>16)])
		binary.LittleEndian.PutUint32(b[8:], tab[uint16(x>>32)])
		binary.LittleEndian.PutUint32(b[12:], tab[uint16(x>>48)])
	}
	for x := r.tail(i, n); i < n; i, x = i+1, x>>16 {
		binary.LittleEndian.PutUint32(dst[4*i:], tab[uint16(x)])
	}
}

func (s *sampler) fill16(dst []byte, r *rng) {
	tab := &s.bits
	n := len(dst) / 2
	i := 0
	for ; i+4 <= n; i += 4 {
		x := r.next()
		b := dst[2*i : 2*i+8]
		binary.LittleEndian.PutUint16(b[0:], uint16(tab[uint16(x)]))
		binary.LittleEndian.PutUint16(b[2:], uint16(tab[uint16(x>>16)]))
		binary.LittleEndian.PutUint16(b[4:], uint16(tab[uint16(x>>32)]))
		binary.LittleEndian.PutUint16(b[6:], uint16(tab[uint16(x>>48)]))
	}
	for x := r.tail(i, n); i < n; i, x = i+1, x>>16 {
		binary.LittleEndian.PutUint16(dst[2*i:], uint16(tab[uint16(x)]))
	}
}

// tail draws the random number for the last 1 to 3 elements, and nothing when there are none.
func (r *rng) tail(i, n int) uint64 {
	if i < n {
		return r.next()
	}
	return 0
}
