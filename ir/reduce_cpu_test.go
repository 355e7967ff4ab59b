package ir

import (
	"math"
	"math/rand/v2"
	"testing"
)

// refBest is the best value of x and its first index by a loop in order:
// the first NaN wins, then the first of the greatest (least) values.
func refBest(x []float64, greater bool) (float64, int) {
	best, at := x[0], 0
	for i, v := range x {
		if v != v {
			return v, i
		}
		if greater && v > best || !greater && v < best {
			best, at = v, i
		}
	}
	return best, at
}

// Accumulate's fast paths agree with loops in order (the value, and the
// index for arg reductions), on every length and
// mix of values, in blocks folded one after another.
func TestAccumulateFastPaths(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	negZero := math.Copysign(0, -1)
	for trial := range 2000 {
		n := 1 + rng.IntN(90)
		if trial%20 == 0 {
			n = 1 + rng.IntN(5000)
		}
		x := make([]float64, n)
		for i := range x {
			switch r := rng.Float64(); {
			case trial%11 == 0: // zeros of both signs are the best values
				x[i] = []float64{0, negZero, -1}[rng.IntN(3)]
			case trial%3 == 0 && r < 0.3: // ties, ±0
				x[i] = []float64{0, negZero, 1, -1}[rng.IntN(4)]
			case trial%7 == 0 && r < 0.01:
				x[i] = math.NaN()
			case trial%5 == 0 && r < 0.05:
				x[i] = math.Inf(rng.IntN(2)*2 - 1)
			default:
				x[i] = rng.NormFloat64()
			}
		}
		x32 := make([]float32, n)
		for i, v := range x {
			x32[i] = float32(v)
		}
		cut := rng.IntN(n + 1) // two blocks
		for _, r := range []Reducer{RMax, RMin, RArgMax, RArgMin} {
			greater := r == RMax || r == RArgMax
			for _, in := range []struct {
				name string
				vals []float64
				acc  func() Acc
			}{
				{"float64", x, func() Acc {
					a := r.Init()
					Accumulate(r, &a, x[:cut], 0)
					Accumulate(r, &a, x[cut:], int64(cut))
					return a
				}},
				{"float32", widen(x32), func() Acc {
					a := r.Init()
					Accumulate(r, &a, x32[:cut], 0)
					Accumulate(r, &a, x32[cut:], int64(cut))
					return a
				}},
			} {
				a := in.acc()
				want, at := refBest(in.vals, greater)
				if math.Float64bits(a.F) != math.Float64bits(want) && !(a.F != a.F && want != want) || r.IsArg() && a.Index != int64(at) {
					t.Fatalf("trial %d, %v of %d %s (blocks at %d): %v at %d, want %v at %d", trial, r, n, in.name, cut, a.F, a.Index, want, at)
				}
			}
		}
		// Sums: the sixteen-lane order, the same with the vector loop and
		// without it, and close to an exact sum.
		for _, in := range []struct {
			name      string
			fast, ref float64
		}{
			{"float64", sumFloat(x), sumFloatGo(x)},
			{"float32", sumFloat(x32), sumFloatGo(x32)},
		} {
			if math.Float64bits(in.fast) != math.Float64bits(in.ref) && !(in.fast != in.fast && in.ref != in.ref) {
				t.Fatalf("trial %d, sum of %d %s: %v, the Go loop %v", trial, n, in.name, in.fast, in.ref)
			}
		}
		var exact, mag float64
		for _, v := range x {
			exact += v
			mag += math.Abs(v)
		}
		if got := sumFloat(x); !math.IsNaN(exact) && !math.IsInf(mag, 0) && math.Abs(got-exact) > 1e-13*mag {
			t.Fatalf("trial %d: sum %v, want %v", trial, got, exact)
		}
	}
}

func widen(x []float32) []float64 {
	w := make([]float64, len(x))
	for i, v := range x {
		w[i] = float64(v)
	}
	return w
}

// sumFloatGo is sumFloat without the vector loop.
func sumFloatGo[T floating](x []T) float64 { return sumWith(x, false) }

// SumBlocks gives what Accumulate gives block by block.
func TestSumBlocksSameBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(19, 20))
	for trial := range 300 {
		size := 16 * (1 + rng.IntN(70))
		n := rng.IntN(5 * size)
		x := make([]float64, n)
		for i := range x {
			x[i] = rng.NormFloat64() * math.Pow(10, float64(rng.IntN(12)-6))
		}
		x32 := make([]float32, n)
		for i, v := range x {
			x32[i] = float32(v)
		}
		for _, r := range []Reducer{RSum, RMean} {
			got, want := Acc{F: 0.5, Count: 3, Index: -1}, Acc{F: 0.5, Count: 3, Index: -1}
			got32, want32 := got, want
			SumBlocks(r, &got, x, 7, size)
			SumBlocks(r, &got32, x32, 7, size)
			for i := 0; i < n; i += size {
				Accumulate(r, &want, x[i:min(i+size, n)], int64(7+i))
				Accumulate(r, &want32, x32[i:min(i+size, n)], int64(7+i))
			}
			if got != want || got32 != want32 {
				t.Fatalf("trial %d, %d values in blocks of %d: %+v and %+v, block by block %+v and %+v", trial, n, size, got, got32, want, want32)
			}
		}
	}
}
