package ir

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The vector loops of float32 arithmetic give floatLoop's bits, on every
// length, with specials and subnormals among the operands.
func TestVectorArithSameBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 8))
	value := func() float32 {
		if rng.IntN(8) == 0 {
			return fastSpecials[rng.IntN(len(fastSpecials))]
		}
		return float32(rng.NormFloat64() * math.Pow(10, float64(rng.IntN(20)-10)))
	}
	for _, p := range []Prim{PAdd, PSub, PMul, PDiv} {
		for range 300 {
			n := rng.IntN(100)
			a, b := make([]float32, n), make([]float32, n)
			for i := range a {
				a[i], b[i] = value(), value()
			}
			got, want := make([]float32, n), make([]float32, n)
			if !vecF32(p, got, a, b) {
				floatLoop(p, got, a, b)
			}
			floatLoop(p, want, a, b)
			for i := range want {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
					t.Fatalf("%v(%v, %v), element %d of %d: %v, want %v", p, a[i], b[i], i, n, got[i], want[i])
				}
			}
		}
	}
}
