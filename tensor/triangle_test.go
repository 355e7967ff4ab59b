package tensor

import (
	"fmt"
	"math"
	"testing"
)

// Tril and Triu against an index reference over every dtype, odd and
// batched shapes, non-contiguous inputs and diagonals on both sides,
// compiled against eager.
func TestTrilTriu(t *testing.T) {
	layouts := []layout{lay(1, 1), lay(3, 5), lay(5, 3), lay(2, 7, 4), lay(33, 129), layTransposed33, layStepRows,
		layExpandRow, {"T[2,5,6]", []int{2, 5, 6}, func(x *Tensor) *Tensor { return x.Transpose(1, 2) }, true}}
	seed := uint64(3)
	for _, upper := range []bool{false, true} {
		for _, dt := range allTypes {
			for _, l := range layouts {
				x := l.make(seed, dt, domNormal)
				seed++
				shape := x.Shape()
				rows, cols := shape[len(shape)-2], shape[len(shape)-1]
				for _, diag := range []int{-2, -1, 0, 1, 3, 200} {
					v := vals(x)
					want := make([]float64, len(v))
					for e := range v {
						i, j := e/cols%rows, e%cols
						if upper && j-i >= diag || !upper && j-i <= diag {
							want[e] = v[e]
						}
					}
					name, f := "Tril", func(x *Tensor) *Tensor { return x.Tril(diag) }
					if upper {
						name, f = "Triu", func(x *Tensor) *Tensor { return x.Triu(diag) }
					}
					what := fmt.Sprintf("%s(%d) of %v %s", name, diag, dt, l.name)
					got := f(x)
					checkClose(t, what, got, dt, shape, want, 0)
					checkSame(t, what+", compiled", Compile(f)(x), got)
				}
			}
		}
	}
	// A causal attention mask, compiled with what follows it.
	scores := Randn(5, Float32, 2, 6, 6)
	causal := func(s *Tensor) *Tensor {
		return s.MaskedFill(Ones(Bool, 6, 6).Triu(1), math.Inf(-1)).Softmax(-1)
	}
	// Compiled, the softmax is one row region (its order of operations
	// is not eager's): within float32's tolerance.
	eager := causal(scores)
	checkClose(t, "causal softmax, compiled", Compile(causal)(scores), Float32, eager.Shape(), vals(eager), 0)
	expectError(t, "Tril of a vector", func() { Ones(Float32, 4).Tril(0) })
}
