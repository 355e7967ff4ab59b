package program

import (
	"slices"
	"testing"

	"gocompile/array"
	"gocompile/ir"
)

// trailingRows merges a reduction's trailing dims into one row where every
// input's layout allows it, and refuses reduced dims that are not trailing,
// a largest input that does not read the row with stride 1, and an input
// whose layout does not merge.
func TestTrailingRows(t *testing.T) {
	x := array.New(array.CPU, ir.Float32, []int{2, 3, 4})
	for _, c := range []struct {
		name   string
		args   []*array.Array
		dims   []int
		merged []int // nil: refused
	}{
		{"last two dims", []*array.Array{x}, []int{1, 2}, []int{2, 12}},
		{"all dims", []*array.Array{x}, []int{0, 1, 2}, []int{24}},
		{"last dim", []*array.Array{x}, []int{2}, []int{2, 3, 4}},
		{"not trailing", []*array.Array{x}, []int{0, 2}, nil},
		{"uniform along the row", []*array.Array{x, array.New(array.CPU, ir.Float32, []int{2, 1, 1})}, []int{1, 2}, []int{2, 12}},
		{"a weight over the last dim alone", []*array.Array{x, array.New(array.CPU, ir.Float32, []int{4})}, []int{1, 2}, nil},
		{"transposed", []*array.Array{array.Apply(ir.OpPermute, ir.Attrs{Dims: []int{2, 1, 0}}, array.New(array.CPU, ir.Float32, []int{4, 3, 2}))}, []int{1, 2}, nil},
		{"a row with stride 2", []*array.Array{array.New(array.CPU, ir.Float32, []int{2, 3, 8}).Slice(2, 0, 8, 2)}, []int{1, 2}, nil},
		{"stepped rows", []*array.Array{array.New(array.CPU, ir.Float32, []int{4, 3, 4}).Slice(0, 0, 4, 2)}, []int{1, 2}, []int{2, 12}},
	} {
		views, merged, ok := trailingRows(c.args, []int{2, 3, 4}, c.dims)
		if ok != (c.merged != nil) || ok && !slices.Equal(merged, c.merged) {
			t.Errorf("%s: merged %v, ok %v; want %v", c.name, merged, ok, c.merged)
			continue
		}
		for i, v := range views {
			if !slices.Equal(v.Shape(), merged) {
				t.Errorf("%s: input %d viewed as %v, want %v", c.name, i, v.Shape(), merged)
			}
		}
	}
}
