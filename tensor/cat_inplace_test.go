package tensor

import (
	"fmt"
	"math"
	"strings"
	"testing"

	"gocompile/internal/stats"
)

// The kernels computing a Cat's parts write them into the Cat's result,
// each into its slice, and the Cat copies only the others: a rotary
// embedding's halves, a lone op, parts along the first, a middle and a
// negative dim, beside an argument (copied). Parts something else reads
// (a result too, the same value twice) or of another dtype than the
// Cat's are copied as before. The compiled results match the function run
// in float64, in every floating dtype, at odd sizes and on a transposed
// input; Explain marks the Cats written in place.
func TestCatWrittenInPlace(t *testing.T) {
	type fn = func(x, y *Tensor) []*Tensor
	rope := func(x, y *Tensor) []*Tensor {
		hd := x.Size(-1)
		x1, x2 := x.Narrow(-1, 0, hd/2), x.Narrow(-1, hd/2, hd/2)
		c, s := y.Cos(), y.Sin()
		return []*Tensor{Cat([]*Tensor{x1.Mul(c).Sub(x2.Mul(s)), x2.Mul(c).Add(x1.Mul(s))}, -1)}
	}
	for _, c := range []struct {
		name    string
		f       fn
		y       func(x *Tensor) *Tensor // y from x's shape
		inPlace int                     // parts written in place a call
		all     bool                    // every part: Explain says "in place"
	}{
		{"rope", rope, func(x *Tensor) *Tensor { return Randn(5, Float32, x.Size(-1)/2) }, 2, true},
		{"a lone op beside an argument", func(x, y *Tensor) []*Tensor { return []*Tensor{Cat([]*Tensor{x.Exp(), y}, 1)} },
			func(x *Tensor) *Tensor { return Randn(6, Float32, x.Size(0), 3, x.Size(2)) }, 1, false},
		{"dim 0", func(x, y *Tensor) []*Tensor {
			return []*Tensor{Cat([]*Tensor{x.AddScalar(1).Mul(x), y.MulScalar(2).Neg()}, 0)}
		},
			func(x *Tensor) *Tensor { return Randn(7, Float32, 2, x.Size(1), x.Size(2)) }, 2, true},
		{"a middle dim, counted from the end", func(x, y *Tensor) []*Tensor {
			return []*Tensor{Cat([]*Tensor{x.Tanh(), y.Sigmoid().AddScalar(0.5), x.Abs().Sub(x)}, -2)}
		}, func(x *Tensor) *Tensor { return Randn(8, Float32, x.Size(0), 1, x.Size(2)) }, 3, true},
		{"a part that is a result too", func(x, y *Tensor) []*Tensor {
			p := x.MulScalar(3)
			return []*Tensor{Cat([]*Tensor{p, y.Exp()}, 0), p}
		}, func(x *Tensor) *Tensor { return Randn(9, Float32, 1, x.Size(1), x.Size(2)) }, 1, false},
		{"the same part twice", func(x, y *Tensor) []*Tensor {
			p := x.MulScalar(3)
			return []*Tensor{Cat([]*Tensor{p, p, y.Neg()}, 0)}
		}, func(x *Tensor) *Tensor { return Randn(10, Float32, 1, x.Size(1), x.Size(2)) }, 1, false},
		{"a part of another dtype", func(x, y *Tensor) []*Tensor {
			other := Float64 // the Cat's dtype, which x.AddScalar(1) has not
			if x.DType() == Float64 {
				other = Float32
			}
			return []*Tensor{Cat([]*Tensor{x.AddScalar(1), y.To(other).MulScalar(2)}, 0)}
		}, func(x *Tensor) *Tensor { return Randn(11, Float32, 1, x.Size(1), x.Size(2)) }, 1, false},
	} {
		for _, dt := range []DType{Float32, Float64, BFloat16, Float16} {
			for _, shape := range [][]int{{1, 1, 2}, {3, 5, 6}, {2, 7, 34}, {5, 3, 130}} {
				for _, transposed := range []bool{false, true} {
					what := fmt.Sprintf("%s %v %v transposed %v", c.name, dt, shape, transposed)
					x := Randn(4, Float32, shape...).To(dt)
					if transposed { // the same shape, its first two dims swapped in memory
						x = Randn(4, Float32, shape[1], shape[0], shape[2]).To(dt).Transpose(0, 1)
					}
					y := c.y(x).To(dt)
					eager, want := c.f(x, y), c.f(x.To(Float64), y.To(Float64))
					cf := Compile(c.f)
					cf(x, y)
					before := stats.CatParts.Load()
					got := cf(x, y)
					if n := stats.CatParts.Load() - before; n != int64(c.inPlace) {
						t.Errorf("%s: %d parts written in place, want %d", what, n, c.inPlace)
					}
					// Against the float64 run, normwise within dt's
					// tolerance (eager's rounding of every intermediate to
					// dt included).
					tol := map[DType]float64{Float32: 1e-5, Float64: 1e-12, Float16: 1e-2, BFloat16: 6e-2}[dt]
					for i := range want {
						if got[i].DType() != eager[i].DType() || !shapeEq(got[i].Shape(), want[i].Shape()) {
							t.Fatalf("%s: result %d is %v %v, want %v %v", what, i, got[i].DType(), got[i].Shape(), eager[i].DType(), want[i].Shape())
						}
						g, w := got[i].Float64s(), want[i].Float64s()
						scale, d := 1e-30, 0.0
						for j := range w {
							scale, d = max(scale, math.Abs(w[j])), max(d, math.Abs(g[j]-w[j]))
						}
						if !(d <= tol*scale) {
							t.Fatalf("%s: result %d differs from float64 by %.3g (scale %.3g)", what, i, d, scale)
						}
					}
					e, err := Explain(c.f, x, y)
					if err != nil {
						t.Fatal(err)
					}
					marked := false
					for _, r := range e.Regions {
						marked = marked || strings.HasSuffix(r, "(cat, in place)")
					}
					if marked != c.all {
						t.Errorf("%s: Explain marks the Cat in place %v, want %v: %q", what, marked, c.all, e.Regions)
					}
				}
			}
		}
	}
}

// A Cat over dynamic dims is copied as before (its slices are not known
// when its first part is computed), and its result is right at every
// size.
func TestCatInPlaceDynamic(t *testing.T) {
	f := func(x, y *Tensor) *Tensor { return Cat([]*Tensor{x.Exp(), y.MulScalar(2)}, 0) }
	cf := Compile(f, Dynamic(true))
	for _, n := range []int{2, 3, 7} {
		x, y := Randn(1, Float32, n, 5), Randn(2, Float32, n+1, 5)
		before := stats.CatParts.Load()
		got := cf(x, y)
		if d := stats.CatParts.Load() - before; d != 0 {
			t.Errorf("rows %d: %d parts written in place over dynamic dims", n, d)
		}
		checkClose(t, fmt.Sprintf("rows %d", n), got, Float32, []int{2*n + 1, 5}, f(x, y).Float64s(), 1)
	}
}
