package array_test

import (
	"fmt"
	"math"
	"math/rand/v2"
	"runtime"
	"testing"

	"gocompile/array"
	"gocompile/ir"
)

// A reduction's result depends on the values alone: not on the number of
// cores, nor on whether a row is split across them (few rows) or folded by
// one (many rows), nor on the layout. Sums stay close to float64 loops.
func TestReduceSameBitsWhateverTheCores(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 10))
	for _, r := range []int{1, 3, 1023, 4097, array.FoldPart + 5, 3*array.FoldPart - 1} {
		for _, dt := range []ir.DType{ir.Float32, ir.Float64, ir.BFloat16, ir.Int64} {
			vals := make([]float64, 3*r)
			for i := range vals {
				vals[i] = rng.NormFloat64() * 100
				if dt == ir.Int64 {
					vals[i] = math.Round(vals[i])
				}
			}
			many := array.FromFloat64s(vals, dt, 3, r)
			for _, op := range []*ir.Op{ir.OpSum, ir.OpMean, ir.OpAMax, ir.OpAMin, ir.OpArgMax, ir.OpArgMin} {
				if op == ir.OpMean && dt == ir.Int64 {
					continue
				}
				name := fmt.Sprintf("%s/%v/%d", op.Name, dt, r)
				var want []float64
				for _, procs := range []int{1, 2, 3, 8} {
					prev := runtime.GOMAXPROCS(procs)
					rows := array.Apply(op, ir.Attrs{Dims: []int{1}}, many).Float64s()
					var one []float64 // each row alone: split across the cores
					for i := range 3 {
						row := array.FromFloat64s(vals[i*r:(i+1)*r], dt, r)
						one = append(one, array.Apply(op, ir.Attrs{Dims: []int{0}}, row).Float64s()...)
					}
					runtime.GOMAXPROCS(prev)
					if want == nil {
						want = rows
					}
					for i := range want {
						if rows[i] != want[i] || one[i] != want[i] {
							t.Fatalf("%s, %d cores, row %d: %v of the rows, %v alone, %v with one core", name, procs, i, rows[i], one[i], want[i])
						}
					}
				}
				if op == ir.OpSum && dt != ir.BFloat16 {
					for i := range 3 {
						var s, mag float64
						for _, v := range vals[i*r : (i+1)*r] {
							s += v
							mag += math.Abs(v)
						}
						if math.Abs(want[i]-s) > 1e-6*mag {
							t.Fatalf("%s, row %d: %v, float64 loop %v", name, i, want[i], s)
						}
					}
				}
			}
		}
	}
}

// Reductions over an outer dim (folded a tile of outputs at a time) give
// the bits of the same values reduced along a contiguous last dim.
func TestReduceOuterDimSameBits(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 18))
	for _, sz := range [][3]int{{1, 5, 16}, {2, 1023, 17}, {1, 1025, 300}, {3, 40, 1100}, {1, array.FoldPart + 3, 19}, {2, 2*array.FoldPart + 5, 20}} {
		a, n, c := sz[0], sz[1], sz[2]
		for _, dt := range []ir.DType{ir.Float32, ir.Float64, ir.BFloat16, ir.Int64} {
			vals := make([]float64, a*n*c) // [a, n, c]
			for i := range vals {
				switch {
				case dt == ir.Int64:
					vals[i] = float64(rng.IntN(2000) - 1000)
				case rng.IntN(5000) == 0:
					vals[i] = math.NaN()
				case rng.IntN(50) == 0:
					vals[i] = 0 // ties
				default:
					vals[i] = rng.NormFloat64() * 10
				}
			}
			tr := make([]float64, len(vals)) // [a, c, n]
			for p := range a {
				for i := range n {
					for j := range c {
						tr[(p*c+j)*n+i] = vals[(p*n+i)*c+j]
					}
				}
			}
			x, xt := array.FromFloat64s(vals, dt, a, n, c), array.FromFloat64s(tr, dt, a, c, n)
			for _, op := range []*ir.Op{ir.OpSum, ir.OpMean, ir.OpAMax, ir.OpAMin, ir.OpArgMax, ir.OpArgMin} {
				if op == ir.OpMean && dt == ir.Int64 {
					continue
				}
				got := array.Apply(op, ir.Attrs{Dims: []int{1}}, x).Float64s()
				want := array.Apply(op, ir.Attrs{Dims: []int{2}}, xt).Float64s()
				for i := range want {
					if math.Float64bits(got[i]) != math.Float64bits(want[i]) && !(math.IsNaN(got[i]) && math.IsNaN(want[i])) {
						t.Fatalf("%s of %v [%d %d %d] over dim 1, output %d: %v, along the last dim %v", op.Name, dt, a, n, c, i, got[i], want[i])
					}
				}
			}
		}
	}
}
