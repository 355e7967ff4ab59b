package array_test

import (
	"math/rand/v2"
	"testing"

	"gocompile/array"
	"gocompile/ir"
)

// Operand.Load gives the elements of a strided view in iteration order,
// whatever the layout (contiguous runs read in place, broadcast dims,
// steps, reversed strides) and wherever the block starts and ends.
func TestOperandLoadLayouts(t *testing.T) {
	rng := rand.New(rand.NewPCG(15, 16))
	const size = 1 << 12
	vals := make([]float64, size)
	for i := range vals {
		vals[i] = float64(i)
	}
	layouts := []struct {
		shape, strides []int
		offset         int
	}{
		{[]int{4, 300}, []int{0, 1}, 5},        // a broadcast row
		{[]int{7, 100}, []int{301, 1}, 2},      // rows of a wider array
		{[]int{3, 5, 64}, []int{0, 64, 1}, 0},  // broadcast over a middle dim
		{[]int{50, 40}, []int{1, 50}, 0},       // transposed
		{[]int{30, 20}, []int{41, 2}, 3},       // stepped
		{[]int{10, 64}, []int{-64, 1}, 64 * 9}, // rows in reverse
		{[]int{9}, []int{0}, 17},               // one value
	}
	for _, dt := range []ir.DType{ir.Float32, ir.Float64, ir.BFloat16} {
		data := array.FromFloat64s(vals, dt, size)
		for li, l := range layouts {
			n := ir.Numel(l.shape)
			want := make([]float64, n)
			idx := make([]int, len(l.shape))
			for i := range want {
				want[i] = float64(l.offset + array.Unravel(i, l.shape, l.strides, idx))
			}
			for _, k := range []ir.Kind{ir.F32, ir.F64} {
				o := data.Operand(l.shape, l.strides, l.offset)
				for range 200 {
					start := rng.IntN(n)
					m := 1 + rng.IntN(min(n-start, array.BlockSize))
					got := o.Load(start, m, k, ir.NewVec(k, array.BlockSize))
					for j := range m {
						g := float64(0)
						if k == ir.F32 {
							g = float64(got.F32[j])
						} else {
							g = got.F64[j]
						}
						w := want[start+j]
						if dt == ir.BFloat16 {
							w = float64(ir.BF16ToF32(ir.F32ToBF16(float32(w))))
						}
						if g != w {
							t.Fatalf("%v layout %d, %v, load [%d, %d): element %d is %v, want %v", dt, li, k, start, start+m, j, g, w)
						}
					}
				}
			}
		}
	}
}
