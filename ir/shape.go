package ir

import (
	"fmt"
	"math"
	"math/big"
	"strings"
)

// Error describes a misuse of an op: which op, the shapes (or types) of its
// operands, what is wrong and how to fix it. Package tensor panics with it.
type Error struct {
	Op     string  // the op, as users call it: "Add", "MatMul" …
	Shapes [][]int // operand shapes, in argument order
	Reason string  // what is wrong
	Fix    string  // what to do instead
}

func (e *Error) Error() string {
	var b strings.Builder
	b.WriteString(e.Op)
	if len(e.Shapes) > 0 {
		b.WriteString(" on ")
		for i, s := range e.Shapes {
			if i > 0 {
				b.WriteString(" and ")
			}
			b.WriteString(FormatShape(s))
		}
	}
	b.WriteString(": ")
	b.WriteString(e.Reason)
	if e.Fix != "" {
		b.WriteString("; ")
		b.WriteString(e.Fix)
	}
	return b.String()
}

// Errorf builds an *Error with a formatted reason.
func Errorf(op string, shapes [][]int, fix string, format string, args ...any) *Error {
	return &Error{Op: op, Shapes: shapes, Reason: fmt.Sprintf(format, args...), Fix: fix}
}

// FormatShape prints a shape as PyTorch does: [2, 3].
func FormatShape(s []int) string {
	var b strings.Builder
	b.WriteByte('[')
	for i, d := range s {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprint(&b, d)
	}
	b.WriteByte(']')
	return b.String()
}

// Numel is the number of elements of a shape (1 for a scalar shape).
func Numel(shape []int) int {
	n := 1
	for _, d := range shape {
		n *= d
	}
	return n
}

// MaxNumel is the most elements a tensor may have, views included: 2^44,
// so that its storage at the widest dtype (128 TiB) is a size Go's
// allocator can be asked for without a runtime panic, and its byte size
// and every offset fit in an int. Graph.Call and package tensor refuse
// results above it (CheckShape), so Numel never overflows on the shape of
// a tensor that exists. The shape rules themselves compute any shape:
// symbolic dims are probed with sizes whose products may be larger.
const MaxNumel = min(1<<44, math.MaxInt/8)

// CheckedNumel is the number of elements of shape, or false if a size is
// negative or the count exceeds MaxNumel (computed without overflowing).
func CheckedNumel(shape []int) (int, bool) {
	n := 1
	for _, d := range shape {
		if d < 0 {
			return 0, false
		}
		if d == 0 {
			n = 0
		}
	}
	if n == 0 {
		return 0, true
	}
	for _, d := range shape {
		if n > MaxNumel/d {
			return 0, false
		}
		n *= d
	}
	return n, true
}

// CheckShape returns an error naming op and its operands' shapes if shape,
// the shape of a result, has a negative size or more than MaxNumel
// elements.
func CheckShape(op string, operands [][]int, shape []int) error {
	for _, d := range shape {
		if d < 0 {
			return Errorf(op, operands, "sizes must be non-negative", "shape %s has a negative size", FormatShape(shape))
		}
	}
	if _, ok := CheckedNumel(shape); !ok {
		return Errorf(op, operands, "use smaller sizes",
			"shape %s has more elements than a tensor may hold (%d)", FormatShape(shape), MaxNumel)
	}
	return nil
}

// ContiguousStrides returns row-major strides, in elements, for shape.
func ContiguousStrides(shape []int) []int {
	st := make([]int, len(shape))
	s := 1
	for i := len(shape) - 1; i >= 0; i-- {
		st[i] = s
		s *= max(shape[i], 1)
	}
	return st
}

// IsContiguous reports whether strides are row-major for shape (dims of size
// one may carry any stride).
func IsContiguous(shape, strides []int) bool {
	if Numel(shape) == 0 {
		return true // no elements, nothing out of order
	}
	s := 1
	for i := len(shape) - 1; i >= 0; i-- {
		if shape[i] == 1 {
			continue
		}
		if strides[i] != s {
			return false
		}
		s *= shape[i]
	}
	return true
}

// Broadcast returns the shape that shapes broadcast to under NumPy and
// PyTorch rules: shapes are aligned on the right, and each dim must be equal
// or 1. op names the caller in the error.
func Broadcast(op string, shapes ...[]int) ([]int, error) {
	rank := 0
	for _, s := range shapes {
		rank = max(rank, len(s))
	}
	out := make([]int, rank)
	for i := range out {
		out[i] = 1
	}
	for _, s := range shapes {
		off := rank - len(s)
		for i, d := range s {
			if d < 0 {
				return nil, Errorf(op, shapes, "sizes must be non-negative", "negative size %d", d)
			}
			o := &out[off+i]
			switch {
			case d == *o || d == 1:
			case *o == 1:
				*o = d
			default:
				return nil, Errorf(op, shapes,
					"make the sizes equal, or 1 where the operand should be repeated (Unsqueeze or Reshape it)",
					"shapes are not broadcastable: size %d does not match size %d at dim %d of the result",
					d, *o, off+i-rank)
			}
		}
	}
	return out, nil
}

// BroadcastStrides returns strides that view a tensor of shape/strides as the
// larger shape out (which it must broadcast to): stride 0 on repeated dims.
func BroadcastStrides(shape, strides, out []int) []int {
	st := make([]int, len(out))
	off := len(out) - len(shape)
	for i := range shape {
		if shape[i] != 1 || out[off+i] == 1 {
			st[off+i] = strides[i]
		}
	}
	return st
}

// NormDim turns a possibly negative dim into an index in [0, rank). op names
// the caller in the error.
func NormDim(op string, shape []int, dim int) (int, error) {
	r := len(shape)
	lo := -r
	hi := r - 1
	if r == 0 { // a scalar accepts dim 0 and -1, as in PyTorch
		lo, hi = -1, 0
	}
	if dim < lo || dim > hi {
		return 0, Errorf(op, [][]int{shape}, fmt.Sprintf("use a dim in [%d, %d]", lo, hi),
			"dim %d is out of range for a tensor of rank %d", dim, r)
	}
	if dim < 0 {
		dim += max(r, 1)
	}
	return dim, nil
}

// NormDims normalises a list of dims, rejecting repeats. An empty list means
// every dim.
func NormDims(op string, shape []int, dims []int) ([]int, error) {
	if len(dims) == 0 {
		all := make([]int, len(shape))
		for i := range all {
			all[i] = i
		}
		return all, nil
	}
	out := make([]int, len(dims))
	seen := make([]bool, len(shape)) // not a bit mask: ranks may pass 64
	for i, d := range dims {
		n, err := NormDim(op, shape, d)
		if err != nil {
			return nil, err
		}
		if len(shape) == 0 {
			return []int{}, nil
		}
		if seen[n] {
			return nil, Errorf(op, [][]int{shape}, "name each dim once", "dim %d appears more than once in %v", d, dims)
		}
		seen[n] = true
		out[i] = n
	}
	return out, nil
}

// ReduceShape is the result shape of reducing dims (normalised) of shape.
func ReduceShape(shape, dims []int, keepDim bool) []int {
	red := make([]bool, len(shape))
	for _, d := range dims {
		red[d] = true
	}
	out := make([]int, 0, len(shape))
	for i, s := range shape {
		switch {
		case !red[i]:
			out = append(out, s)
		case keepDim:
			out = append(out, 1)
		}
	}
	return out
}

// InferShape resolves a single -1 in newShape so that it holds as many
// elements as shape. The products are exact even where they overflow an
// int: symbolic shapes are probed with sizes whose products can, and a
// wrapped product must not pass for the element count.
func InferShape(op string, shape, newShape []int) ([]int, error) {
	out := append([]int(nil), newShape...)
	infer := -1
	for i, d := range out {
		switch {
		case d == -1 && infer < 0:
			infer = i
		case d == -1:
			return nil, Errorf(op, [][]int{shape, newShape}, "use -1 for at most one dim", "more than one dim is -1")
		case d < 0:
			return nil, Errorf(op, [][]int{shape, newShape}, "sizes must be non-negative or -1", "invalid size %d", d)
		}
	}
	if infer >= 0 {
		out[infer] = 1
	}
	if n, ok := numelFits(shape); ok {
		if k, ok := numelFits(out); ok { // the common case, in ints
			switch {
			case infer >= 0 && k != 0 && n%k == 0:
				out[infer] = n / k
				return out, nil
			case infer < 0 && k == n:
				return out, nil
			}
		}
	}
	numel, known := exactNumel(shape), exactNumel(out)
	if infer >= 0 {
		var q, r big.Int
		if known.Sign() != 0 {
			q.QuoRem(numel, known, &r)
		}
		if known.Sign() == 0 || r.Sign() != 0 || !q.IsInt64() || q.Int64() > math.MaxInt {
			return nil, Errorf(op, [][]int{shape, newShape}, "choose sizes whose product divides the element count",
				"cannot infer the -1 dim: %v elements do not divide into %s", numel, FormatShape(newShape))
		}
		out[infer] = int(q.Int64())
		known = numel
	}
	if known.Cmp(numel) != 0 {
		return nil, Errorf(op, [][]int{shape, newShape}, "the new shape must hold the same number of elements",
			"shape %s holds %v elements, not %v", FormatShape(newShape), known, numel)
	}
	return out, nil
}

// numelFits is the number of elements of shape (of non-negative sizes),
// and whether it fits an int.
func numelFits(shape []int) (int, bool) {
	n := 1
	for _, d := range shape {
		if d != 0 && n > math.MaxInt/d {
			return 0, false
		}
		n *= d
	}
	return n, true
}

// exactNumel is the number of elements of shape (of non-negative sizes),
// however large.
func exactNumel(shape []int) *big.Int {
	n, ok := 1, true
	for _, d := range shape {
		if d != 0 && n > math.MaxInt/d {
			ok = false
			break
		}
		n *= d
	}
	if ok {
		return big.NewInt(int64(n))
	}
	b := big.NewInt(1)
	for _, d := range shape {
		b.Mul(b, big.NewInt(int64(d)))
	}
	return b
}

// ViewStrides returns strides that present memory laid out as shape/strides
// under newShape without copying, or ok=false when no such strides exist
// (the case in which Reshape copies and View fails). It follows PyTorch's
// computeStride: runs of dims that are contiguous with each other can be
// split and merged freely.
func ViewStrides(shape, strides, newShape []int) (newStrides []int, ok bool) {
	newStrides = make([]int, len(newShape))
	if Numel(shape) == 0 || len(shape) == 0 {
		return ContiguousStrides(newShape), true
	}
	viewD := len(newShape) - 1
	chunkBase := strides[len(strides)-1]
	tensorNumel := 1
	viewNumel := 1
	for d := len(shape) - 1; d >= 0; d-- {
		tensorNumel *= shape[d]
		if d == 0 || (shape[d-1] != 1 && strides[d-1] != tensorNumel*chunkBase) {
			for viewD >= 0 && (viewNumel < tensorNumel || newShape[viewD] == 1) {
				newStrides[viewD] = viewNumel * chunkBase
				viewNumel *= newShape[viewD]
				viewD--
			}
			if viewNumel != tensorNumel {
				return nil, false
			}
			if d > 0 {
				chunkBase = strides[d-1]
				tensorNumel = 1
				viewNumel = 1
			}
		}
	}
	if viewD != -1 {
		return nil, false
	}
	return newStrides, true
}
