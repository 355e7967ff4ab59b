package tensor

import "gocompile/ir"

// The methods in this file return views: tensors over the same storage,
// so that no data moves and a write through one is seen through the other.
// Reshape alone copies, when the layout leaves no other way.

func (t *Tensor) viewOp(op *ir.Op, a ir.Attrs) *Tensor { return apply(op, a, t) }

// View returns t under a new shape (one size may be -1, inferred) without
// copying; it panics if t's strides do not allow it (use Reshape).
func (t *Tensor) View(shape ...int) *Tensor {
	return t.viewOp(ir.OpReshape, ir.Attrs{Dims: shape})
}

// Reshape returns t under a new shape (one size may be -1): a view when the
// layout allows, as View, otherwise a contiguous copy.
func (t *Tensor) Reshape(shape ...int) *Tensor {
	t.must("Reshape")
	newShape, err := ir.InferShape("Reshape", t.shape(), shape)
	check(err, "Reshape", t)
	if _, ok := ir.ViewStrides(t.shape(), t.strides(), newShape); ok {
		return t.View(newShape...)
	}
	return t.Contiguous().View(newShape...)
}

// Flatten merges dims start through end (inclusive; negative counts from
// the end) into one.
func (t *Tensor) Flatten(start, end int) *Tensor {
	t.must("Flatten")
	if len(t.shape()) == 0 {
		return t.Reshape(1)
	}
	s, e := t.normDim("Flatten", start), t.normDim("Flatten", end)
	if s > e {
		throw("Flatten", []*Tensor{t}, "give start <= end", "start dim %d is after end dim %d", start, end)
	}
	shape := append([]int(nil), t.shape()[:s]...)
	shape = append(shape, ir.Numel(t.shape()[s:e+1]))
	shape = append(shape, t.shape()[e+1:]...)
	return t.Reshape(shape...)
}

// Transpose swaps dims d0 and d1.
func (t *Tensor) Transpose(d0, d1 int) *Tensor {
	return t.viewOp(ir.OpTranspose, ir.Attrs{Dim: d0, Dim2: d1})
}

// T transposes the last two dims (a 1-D tensor is returned as is).
func (t *Tensor) T() *Tensor {
	t.must("T")
	if len(t.shape()) < 2 {
		return t
	}
	return t.Transpose(-2, -1)
}

// Permute reorders the dims: dim i of the result is dim dims[i] of t.
func (t *Tensor) Permute(dims ...int) *Tensor {
	return t.viewOp(ir.OpPermute, ir.Attrs{Dims: dims})
}

// Expand repeats size-1 dims (and adds leading dims) to reach shape,
// without copying; -1 keeps a dim's size.
func (t *Tensor) Expand(shape ...int) *Tensor {
	return t.viewOp(ir.OpExpand, ir.Attrs{Dims: shape})
}

// ExpandAs expands t to u's shape.
func (t *Tensor) ExpandAs(u *Tensor) *Tensor {
	mustOperands("ExpandAs", t, u)
	return t.Expand(u.shape()...)
}

// Squeeze removes the given dims if they have size 1 (all size-1 dims when
// none are given).
func (t *Tensor) Squeeze(dims ...int) *Tensor {
	return t.viewOp(ir.OpSqueeze, ir.Attrs{Dims: dims})
}

// Unsqueeze inserts a size-1 dim at position dim.
func (t *Tensor) Unsqueeze(dim int) *Tensor {
	return t.viewOp(ir.OpUnsqueeze, ir.Attrs{Dim: dim})
}

// Slice returns elements start, start+step, … below stop along dim, like
// Python's t[start:stop:step]: negative bounds count from the end and
// bounds beyond the size are clamped. step must be positive.
func (t *Tensor) Slice(dim, start, stop, step int) *Tensor {
	return t.viewOp(ir.OpSlice, ir.Attrs{Dim: dim, Start: start, Stop: stop, Step: step})
}

// Narrow returns length elements from start along dim; unlike Slice, the
// range must lie inside the dim.
func (t *Tensor) Narrow(dim, start, length int) *Tensor {
	t.must("Narrow")
	if len(t.shape()) == 0 {
		throw("Narrow", []*Tensor{t}, "Unsqueeze a scalar first", "cannot narrow a scalar")
	}
	d := t.normDim("Narrow", dim)
	size := t.Size(d)
	from := start
	if from < 0 {
		from += size
	}
	if from < 0 || from > size || length < 0 || length > size-from { // no overflow in from+length
		throw("Narrow", []*Tensor{t}, "keep start and start+length within the dim",
			"start %d and length %d leave dim %d of size %d", start, length, dim, size)
	}
	start = from
	return t.Slice(d, start, start+length, 1)
}

// Select returns the slice at index along dim, with that dim removed.
func (t *Tensor) Select(dim, index int) *Tensor {
	t.must("Select")
	if len(t.shape()) == 0 {
		throw("Select", []*Tensor{t}, "a scalar has no dims to select from; use Item or At()", "cannot select from a scalar")
	}
	d := t.normDim("Select", dim)
	size := t.Size(d)
	if index < -size || index >= size {
		throw("Select", []*Tensor{t}, "use an index in [-size, size)", "index %d is out of range for dim %d of size %d", index, dim, size)
	}
	if index < 0 {
		index += size
	}
	return t.Slice(d, index, index+1, 1).Squeeze(d)
}

// Split cuts t along dim into views of the given sizes, which must add up
// to the dim's size.
func (t *Tensor) Split(sizes []int, dim int) []*Tensor {
	t.must("Split")
	d := t.normDim("Split", dim)
	size := t.Size(d)
	total := 0
	for _, s := range sizes {
		if s < 0 {
			throw("Split", []*Tensor{t}, "sizes must be non-negative", "size %d in %v", s, sizes)
		}
		if s > size-total { // stop before the sum can overflow
			throw("Split", []*Tensor{t}, "give sizes that add up to the dim's size, or use Chunk",
				"sizes %v add up to more than dim %d's size %d", sizes, dim, size)
		}
		total += s
	}
	if total != size {
		throw("Split", []*Tensor{t}, "give sizes that add up to the dim's size, or use Chunk",
			"sizes %v add up to %d, dim %d has size %d", sizes, total, dim, size)
	}
	out := make([]*Tensor, len(sizes))
	at := 0
	for i, s := range sizes {
		out[i] = t.Narrow(d, at, s)
		at += s
	}
	return out
}

// Chunk cuts t along dim into views of size chunk (the last may be
// smaller), like torch.split with an integer.
func (t *Tensor) Chunk(chunk, dim int) []*Tensor {
	t.must("Chunk")
	if chunk <= 0 {
		throw("Chunk", []*Tensor{t}, "use a positive chunk size", "chunk size %d", chunk)
	}
	d := t.normDim("Chunk", dim)
	var sizes []int
	for left := t.Size(d); left > 0; left -= chunk {
		sizes = append(sizes, min(chunk, left))
	}
	if sizes == nil {
		sizes = []int{0}
	}
	return t.Split(sizes, d)
}
