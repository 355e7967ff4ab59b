package ir

import "fmt"

func view(name, title string, rule func(in Layout, a *Attrs) (Layout, error), doc string) *Op {
	return Register(&Op{Name: name, Title: title, Kind: View, Arity: 1, Rule: SameAsFirst, View: rule, Doc: doc})
}

// The view ops. Each rule maps an input layout to an output layout over the
// same storage.
var (
	OpReshape   = view("reshape", "Reshape", reshapeRule, "same elements in row-major order under shape Attrs.Dims (one -1 is inferred)")
	OpTranspose = view("transpose", "Transpose", transposeRule, "swaps dims Attrs.Dim and Attrs.Dim2")
	OpPermute   = view("permute", "Permute", permuteRule, "reorders dims: output dim i is input dim Attrs.Dims[i]")
	OpExpand    = view("expand", "Expand", expandRule, "repeats size-1 dims to shape Attrs.Dims without copying (-1 keeps a dim)")
	OpSqueeze   = view("squeeze", "Squeeze", squeezeRule, "drops the size-1 dims among Attrs.Dims (all size-1 dims when empty)")
	OpUnsqueeze = view("unsqueeze", "Unsqueeze", unsqueezeRule, "inserts a size-1 dim at Attrs.Dim")
	OpSlice     = view("slice", "Slice", sliceRule, "elements Start, Start+Step, … below Stop along Attrs.Dim (bounds clamp as in Python)")
)

func clone(s []int) []int { return append([]int(nil), s...) }

func reshapeRule(in Layout, a *Attrs) (Layout, error) {
	shape, err := InferShape("Reshape", in.Shape, a.Dims)
	if err != nil {
		return Layout{}, err
	}
	st, ok := ViewStrides(in.Shape, in.Strides, shape)
	if !ok {
		return Layout{}, Errorf("View", [][]int{in.Shape, a.Dims},
			"call Contiguous first, or use Reshape, which copies when it must",
			"the input's strides %v cannot be viewed as that shape without a copy", in.Strides)
	}
	return Layout{Shape: shape, Strides: st, Offset: in.Offset}, nil
}

func transposeRule(in Layout, a *Attrs) (Layout, error) {
	d0, err := NormDim("Transpose", in.Shape, a.Dim)
	if err != nil {
		return Layout{}, err
	}
	d1, err := NormDim("Transpose", in.Shape, a.Dim2)
	if err != nil {
		return Layout{}, err
	}
	out := Layout{Shape: clone(in.Shape), Strides: clone(in.Strides), Offset: in.Offset}
	if len(in.Shape) == 0 {
		return out, nil
	}
	out.Shape[d0], out.Shape[d1] = out.Shape[d1], out.Shape[d0]
	out.Strides[d0], out.Strides[d1] = out.Strides[d1], out.Strides[d0]
	return out, nil
}

func permuteRule(in Layout, a *Attrs) (Layout, error) {
	if len(a.Dims) != len(in.Shape) {
		return Layout{}, Errorf("Permute", [][]int{in.Shape}, "name every dim exactly once",
			"permutation %v has %d dims, the tensor %d", a.Dims, len(a.Dims), len(in.Shape))
	}
	dims, err := NormDims("Permute", in.Shape, a.Dims)
	if err != nil {
		return Layout{}, err
	}
	out := Layout{Shape: make([]int, len(dims)), Strides: make([]int, len(dims)), Offset: in.Offset}
	for i, d := range dims {
		out.Shape[i], out.Strides[i] = in.Shape[d], in.Strides[d]
	}
	return out, nil
}

func expandRule(in Layout, a *Attrs) (Layout, error) {
	r := len(a.Dims)
	if r < len(in.Shape) {
		return Layout{}, Errorf("Expand", [][]int{in.Shape, a.Dims}, "give at least as many sizes as the tensor has dims",
			"cannot expand a rank-%d tensor to rank %d", len(in.Shape), r)
	}
	out := Layout{Shape: make([]int, r), Strides: make([]int, r), Offset: in.Offset}
	off := r - len(in.Shape)
	for i, d := range a.Dims {
		if i < off {
			if d < 0 {
				return Layout{}, Errorf("Expand", [][]int{in.Shape, a.Dims}, "use -1 only for existing dims", "new leading dim %d has size %d", i, d)
			}
			out.Shape[i] = d
			continue
		}
		s, st := in.Shape[i-off], in.Strides[i-off]
		switch {
		case d == -1 || d == s:
			out.Shape[i], out.Strides[i] = s, st
		case s == 1 && d >= 0:
			out.Shape[i] = d
		default:
			return Layout{}, Errorf("Expand", [][]int{in.Shape, a.Dims}, "only size-1 dims can be expanded; use Repeat to copy",
				"dim %d has size %d, which cannot become %d", i-off, s, d)
		}
	}
	return out, nil
}

func squeezeRule(in Layout, a *Attrs) (Layout, error) {
	drop := make([]bool, len(in.Shape))
	if len(a.Dims) == 0 {
		for i, s := range in.Shape {
			drop[i] = s == 1
		}
	} else {
		dims, err := NormDims("Squeeze", in.Shape, a.Dims)
		if err != nil {
			return Layout{}, err
		}
		for _, d := range dims {
			drop[d] = in.Shape[d] == 1
		}
	}
	out := Layout{Offset: in.Offset, Shape: []int{}, Strides: []int{}}
	for i := range in.Shape {
		if !drop[i] {
			out.Shape = append(out.Shape, in.Shape[i])
			out.Strides = append(out.Strides, in.Strides[i])
		}
	}
	return out, nil
}

func unsqueezeRule(in Layout, a *Attrs) (Layout, error) {
	r := len(in.Shape) + 1
	d := a.Dim
	if d < -r || d >= r {
		return Layout{}, Errorf("Unsqueeze", [][]int{in.Shape}, fmt.Sprintf("use a dim in [%d, %d]", -r, r-1),
			"dim %d is out of range", d)
	}
	if d < 0 {
		d += r
	}
	st := 1
	if d < len(in.Shape) {
		st = in.Strides[d] * in.Shape[d]
	}
	out := Layout{Offset: in.Offset}
	out.Shape = append(append(clone(in.Shape[:d]), 1), in.Shape[d:]...)
	out.Strides = append(append(clone(in.Strides[:d]), st), in.Strides[d:]...)
	return out, nil
}

func sliceRule(in Layout, a *Attrs) (Layout, error) {
	d, err := NormDim("Slice", in.Shape, a.Dim)
	if err != nil {
		return Layout{}, err
	}
	if len(in.Shape) == 0 {
		return Layout{}, Errorf("Slice", [][]int{in.Shape}, "Unsqueeze a scalar first", "cannot slice a scalar")
	}
	if a.Step <= 0 {
		return Layout{}, Errorf("Slice", [][]int{in.Shape}, "use a positive step (Flip is not a view)", "step %d is not positive", a.Step)
	}
	n := in.Shape[d]
	clamp := func(i int) int {
		if i < 0 {
			i += n
		}
		return min(max(i, 0), n)
	}
	start, stop := clamp(a.Start), clamp(a.Stop)
	size := 0
	if stop > start {
		size = (stop-start-1)/a.Step + 1 // no overflow for any step
	}
	out := Layout{Shape: clone(in.Shape), Strides: clone(in.Strides), Offset: in.Offset}
	out.Shape[d] = size
	out.Strides[d] = in.Strides[d] * a.Step
	if size > 0 {
		out.Offset += start * in.Strides[d]
	}
	return out, nil
}
