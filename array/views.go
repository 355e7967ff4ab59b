package array

import "gocompile/ir"

// Views of an array, for the kernels and programs that need them; each is
// its registry op applied eagerly. Reshape alone copies, when the layout
// leaves no other way.

// View is t under a new shape, without copying.
func (t *Array) View(shape ...int) *Array { return apply(ir.OpReshape, ir.Attrs{Dims: shape}, t) }

// Reshape is t under a new shape: a view when the layout allows, otherwise
// a contiguous copy.
func (t *Array) Reshape(shape ...int) *Array {
	newShape, err := ir.InferShape("Reshape", t.shape, shape)
	Check(err, "Reshape", t)
	if _, ok := ir.ViewStrides(t.shape, t.strides, newShape); ok {
		return t.View(newShape...)
	}
	return Contiguous(t).View(newShape...)
}

// Expand repeats size-1 dims (and adds leading dims) to reach shape.
func (t *Array) Expand(shape ...int) *Array { return apply(ir.OpExpand, ir.Attrs{Dims: shape}, t) }

// Unsqueeze inserts a size-1 dim at position dim.
func (t *Array) Unsqueeze(dim int) *Array { return apply(ir.OpUnsqueeze, ir.Attrs{Dim: dim}, t) }

// Squeeze removes the given size-1 dims (all of them when none are given).
func (t *Array) Squeeze(dims ...int) *Array { return apply(ir.OpSqueeze, ir.Attrs{Dims: dims}, t) }

// Slice is elements start, start+step, … below stop along dim.
func (t *Array) Slice(dim, start, stop, step int) *Array {
	return apply(ir.OpSlice, ir.Attrs{Dim: dim, Start: start, Stop: stop, Step: step}, t)
}

// Contiguous is t in row-major order without gaps: t itself when it
// already is, else a copy.
func Contiguous(t *Array) *Array { return apply(ir.OpContiguous, ir.Attrs{}, t) }

// selectAt is the slice at index i (in range) along dim d, with d removed.
func (t *Array) selectAt(d, i int) *Array { return t.Slice(d, i, i+1, 1).Squeeze(d) }
