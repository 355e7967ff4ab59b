package array

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"

	"gocompile/ir"
)

// copyTiled copies any permuted, sliced or stepped view into a contiguous
// array exactly, in every dtype, over odd sizes; crosses picks the views
// whose stride-1 dim is not the innermost.
func TestCopyTiled(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 2026))
	sizes := []int{1, 2, 3, 5, 17, 33, 64, 100}
	for ci := range 60 {
		rank := 2 + r.IntN(4)
		shape := make([]int, rank)
		for d := range shape {
			shape[d] = sizes[r.IntN(len(sizes))]
		}
		if ir.Numel(shape) > 1<<18 {
			shape[0] = 1
		}
		dt := []DType{ir.Float32, ir.Float64, ir.Float16, ir.BFloat16, ir.Int32, ir.Int64, ir.Bool}[ci%7]
		perm := r.Perm(rank)
		base := Apply(ir.OpCast, ir.Attrs{DType: dt}, randomValues(r, shape))
		src := Apply(ir.OpPermute, ir.Attrs{Dims: perm}, base)
		if r.IntN(3) == 0 { // a step along some dim as well
			d := r.IntN(rank)
			src = src.Slice(d, 0, src.shape[d], 2)
		}
		name := fmt.Sprintf("%v %v perm %v strides %v", dt, src.shape, perm, src.strides)
		dst := newArray(dt, src.shape)
		copyTiled(dst, src)
		want := Contiguous(src)
		if !slices.Equal(dst.Float64s(), want.Float64s()) {
			t.Fatalf("%s: copyTiled differs from Contiguous", name)
		}
	}
	x := newArray(ir.Float32, []int{64, 128, 16})
	for _, c := range []struct {
		name string
		v    *Array
		want bool
	}{
		{"contiguous", x, false},
		{"contiguous along a dim outside 8192 elements", Apply(ir.OpPermute, ir.Attrs{Dims: []int{2, 0, 1}}, x), true},
		{"a transposed matrix of 16 columns", Apply(ir.OpPermute, ir.Attrs{Dims: []int{0, 2, 1}}, x), false},
		{"a 4-element stride a dim inside", Apply(ir.OpPermute, ir.Attrs{Dims: []int{2, 1, 0}}, newArray(ir.Float32, []int{31, 2642, 4})), false},
		{"stepped by a line everywhere", x.Slice(2, 0, 16, 16), false},
	} {
		if got := crosses(c.v); got != c.want {
			t.Errorf("%s: crosses(shape %v strides %v) = %v, want %v", c.name, c.v.shape, c.v.strides, got, c.want)
		}
	}
}

// randomValues is an array of shape with values in [-8, 8).
func randomValues(r *rand.Rand, shape []int) *Array {
	a := newArray(ir.Float64, shape)
	d := a.st.data.([]float64)
	for i := range d {
		d[i] = float64(r.IntN(64))/4 - 8
	}
	return a
}
