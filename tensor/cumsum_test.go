package tensor

import (
	"fmt"
	"testing"
)

// refCumSum is the running sum along dim d of row-major values, in
// float64 (each result rounded to the output type by the check).
func refCumSum(v []float64, shape []int, d int) []float64 {
	out := append([]float64(nil), v...)
	if len(shape) == 0 {
		return out
	}
	inner := 1
	for _, s := range shape[d+1:] {
		inner *= s
	}
	L := shape[d]
	for o := 0; o < len(v)/max(L*inner, 1); o++ {
		for k := 1; k < L; k++ {
			for i := range inner {
				out[(o*L+k)*inner+i] += out[(o*L+k-1)*inner+i]
			}
		}
	}
	return out
}

// CumSum along every dim of odd sizes, long lines (a block a line on a
// GPU) and short ones, non-contiguous inputs and every dtype, against a
// float64 reference, compiled against eager.
func TestCumSum(t *testing.T) {
	layouts := []layout{lay(1), lay(3), lay(1023), lay(4097), lay(3, 1023), lay(33, 129), lay(2, 5, 300), lay(),
		layTransposed, layStepCols, layExpandCol, layTStep}
	seed := uint64(7)
	for _, dt := range allTypes {
		for _, l := range layouts {
			x := l.make(seed, dt, domSmall) // small values: float sums stay exact where the dtype allows
			seed++
			for d := -1; d < len(x.Shape()); d++ {
				if len(x.Shape()) == 0 && d > 0 {
					continue
				}
				what := fmt.Sprintf("CumSum(%d) of %v %s", d, dt, l.name)
				nd := d
				if nd < 0 {
					nd += max(len(x.Shape()), 1)
				}
				want := refCumSum(vals(x), x.Shape(), min(nd, max(len(x.Shape())-1, 0)))
				out := dt
				if !dt.IsFloat() {
					out = Int64
				}
				got := x.CumSum(d)
				checkClose(t, what, got, out, x.Shape(), want, 4)
				f := func(x *Tensor) *Tensor { return x.CumSum(d) }
				checkClose(t, what+", compiled", Compile(f)(x), out, x.Shape(), want, 4)
			}
		}
	}
	// A running sum inside a compiled chain: the top-p mask of sampling.
	probs := Randn(3, Float32, 4, 50).Softmax(-1)
	topP := func(p *Tensor) *Tensor { return p.CumSum(-1).LtScalar(0.9).Mul(p) }
	checkClose(t, "top-p mask, compiled", Compile(topP)(probs), Float32, []int{4, 50}, vals(topP(probs)), 1)
}

func TestCumSumErrors(t *testing.T) {
	expectError(t, "dim out of range", func() { Ones(Float32, 2, 3).CumSum(2) })
	expectError(t, "scalar dim 1", func() { Scalar(1, Float32).CumSum(1) })
}
