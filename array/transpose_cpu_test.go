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
	// Permutations that keep a short innermost dim (shorter than a cache
	// line) and move the dim continuing it outward: copied a run at a time.
	for ci, c := range []struct {
		shape, perm []int
	}{
		{[]int{6, 4, 5, 30, 27}, []int{3, 1, 0, 2, 4}},
		{[]int{3, 70, 5}, []int{1, 0, 2}},
		{[]int{2, 33, 17, 3}, []int{2, 0, 1, 3}},
		{[]int{40, 9, 1, 7}, []int{1, 2, 0, 3}},
	} {
		for _, dt := range []DType{ir.Float32, ir.Float16, ir.Int64, ir.Bool} {
			src := Apply(ir.OpPermute, ir.Attrs{Dims: c.perm}, Apply(ir.OpCast, ir.Attrs{DType: dt}, randomValues(r, c.shape)))
			if ci == 3 {
				src = src.Slice(0, 1, src.shape[0], 2) // and stepped
			}
			dst := newArray(dt, src.shape)
			copyTiled(dst, src)
			if !slices.Equal(dst.Float64s(), Contiguous(src).Float64s()) {
				t.Fatalf("%v %v perm %v: copyTiled of short runs differs from Contiguous", dt, c.shape, c.perm)
			}
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
		{"runs of 27 continued 106704 elements later", Apply(ir.OpPermute, ir.Attrs{Dims: []int{3, 1, 0, 2, 4}}, newArray(ir.Float16, []int{26, 4, 38, 298, 27})), true},
		{"runs of 27 continued 27·38 elements later", Apply(ir.OpPermute, ir.Attrs{Dims: []int{0, 1, 3, 2, 4}}, newArray(ir.Float16, []int{26, 4, 38, 298, 27})), false},
		{"runs of 32 float16 fill lines", Apply(ir.OpPermute, ir.Attrs{Dims: []int{1, 0, 2}}, newArray(ir.Float16, []int{300, 400, 32})), false},
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
