package ir

import (
	"math"
	"math/rand/v2"
	"testing"
)

// The vector loops give the Go loops' bits on every input, with every
// around, at every length and alignment, edge inputs mixed in.
func TestFastMathVectorSameBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	arounds := []around{
		noAround,
		{pre: -1, post: 1, recip: true}, // sigmoid
		{pre: 0.70710677, post: 1},      // GELU's 1 + erf(x·√½)
		{pre: 2.5, post: float32(math.Copysign(0, -1))},
	}
	specials := append([]float32{-87, 88, -86.99999, 88.00001, -104, -103.5, 89, 1e30, -1e30}, fastSpecials...)
	for _, f := range []struct {
		name      string
		fast, ref func(d, a []float32, ar around)
	}{
		{"exp", expF32, expF32Go},
		{"erf", erfF32, erfF32Go},
		{"tanh", tanhF32, tanhF32Go},
	} {
		for trial := range 400 {
			n := rng.IntN(70)
			if trial%10 == 0 {
				n = 1000 + rng.IntN(4000)
			}
			off := rng.IntN(8) // misaligned starts
			a := make([]float32, off+n)
			for i := range a {
				switch r := rng.Float64(); {
				case r < 0.01*float64(trial%4): // some trials have no edge inputs
					a[i] = specials[rng.IntN(len(specials))]
				case r < 0.5:
					a[i] = float32(rng.NormFloat64() * 4)
				default:
					a[i] = float32(rng.Float64()*200 - 110)
				}
			}
			ar := arounds[trial%len(arounds)]
			got, want := make([]float32, off+n), make([]float32, off+n)
			f.fast(got[off:], a[off:], ar)
			f.ref(want[off:], a[off:], ar)
			for i := off; i < off+n; i++ {
				if math.Float32bits(got[i]) != math.Float32bits(want[i]) && !(got[i] != got[i] && want[i] != want[i]) {
					t.Fatalf("%s(%v) with %+v, element %d of %d: vector %v (%#x), Go %v (%#x)",
						f.name, a[i], ar, i-off, n, got[i], math.Float32bits(got[i]), want[i], math.Float32bits(want[i]))
				}
			}
		}
	}
}
