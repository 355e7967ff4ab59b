package ir

import (
	"math"
	"slices"
)

// VJPFunc is an op's derivative, written as ops: given the op's operands
// (args, as the op was applied: tensors, scalars, nil), its result out and
// the gradient grad of a scalar loss with respect to out, it returns the
// gradient with respect to each operand (nil where there is none: scalars,
// masks, indices). A returned gradient may have a broadcast shape: the
// caller reduces it to its operand's shape (SumTo) and type.
type VJPFunc func(b Builder, a Attrs, args []Value, out, grad Value) ([]Value, error)

// Differentiable reports how op takes part in gradients: by its VJP, by
// its decomposition (composites without a VJP) or its Math (externs
// defined by one), or not at all (results that are not floating, or an
// op without a derivative yet: Gather, Embedding, CumSum …).
func (op *Op) Differentiable() bool {
	return op.VJP != nil || op.Kind == Composite || op.Math != nil
}

// SumTo sums g over the dims it was broadcast along to reach its shape
// from shape, and returns it with shape.
func SumTo(b Builder, g Value, shape []int) Value {
	gs := b.Shape(g)
	if slices.Equal(gs, shape) {
		return g
	}
	lead := len(gs) - len(shape)
	var dims []int
	for i := range gs {
		if i < lead || shape[i-lead] == 1 && gs[i] != 1 {
			dims = append(dims, i)
		}
	}
	if len(dims) > 0 {
		g = b.Apply(OpSum, Attrs{Dims: dims, KeepDim: true}, g)
	}
	return reshapeTo(b, g, shape)
}

// reshapeTo reshapes g to shape, copying it first when its layout needs it.
func reshapeTo(b Builder, g Value, shape []int) Value {
	if slices.Equal(b.Shape(g), shape) {
		return g
	}
	g = b.Apply(OpContiguous, Attrs{}, g)
	return b.Apply(OpReshape, Attrs{Dims: clone(shape)}, g)
}

// gradOps are the derivative's building blocks.
type gradOps struct{ b Builder }

func (o gradOps) ap(op *Op, a Attrs, args ...Value) Value { return o.b.Apply(op, a, args...) }
func (o gradOps) add(x, y Value) Value                    { return o.ap(OpAdd, Attrs{}, x, y) }
func (o gradOps) sub(x, y Value) Value                    { return o.ap(OpSub, Attrs{}, x, y) }
func (o gradOps) mul(x, y Value) Value                    { return o.ap(OpMul, Attrs{}, x, y) }
func (o gradOps) div(x, y Value) Value                    { return o.ap(OpDiv, Attrs{}, x, y) }
func (o gradOps) neg(x Value) Value                       { return o.ap(OpNeg, Attrs{}, x) }
func (o gradOps) c(v float64) Value                       { return Scalar{Value: v, DType: Float64} }

// zeroWhere is g with zeros where mask holds.
func (o gradOps) zeroWhere(g, mask Value) Value {
	return o.ap(OpMaskedFill, Attrs{Scalars: []float64{0}}, g, mask)
}

// as converts a bool mask to g's type.
func (o gradOps) as(mask, g Value) Value {
	return o.ap(OpCast, Attrs{DType: o.b.DType(g)}, mask)
}

// unary is the VJP of a unary op whose derivative is d(x, out).
func unaryVJP(d func(o gradOps, x, out Value) Value) VJPFunc {
	return func(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
		o := gradOps{b}
		return []Value{o.mul(g, d(o, args[0], out))}, nil
	}
}

// tensorArg reports whether v is a tensor operand (not a scalar or nil).
func tensorArg(v Value) bool {
	if v == nil {
		return false
	}
	_, scalar := v.(Scalar)
	return !scalar
}

// reducedKept is g of a reduction over a.Dims of x, with the reduced
// dims back as 1s (as KeepDim gives it), and the reduced dims.
func reducedKept(b Builder, a Attrs, x, g Value) (Value, []int) {
	xs := b.Shape(x)
	dims := a.Dims
	if len(dims) == 0 {
		dims = make([]int, len(xs))
		for i := range dims {
			dims[i] = i
		}
	}
	norm := make([]int, len(dims))
	for i, d := range dims {
		if d < 0 {
			d += len(xs)
		}
		norm[i] = d
	}
	if a.KeepDim {
		return g, norm
	}
	kept := clone(xs)
	for _, d := range norm {
		kept[d] = 1
	}
	return reshapeTo(b, g, kept), norm
}

func init() {
	OpAdd.VJP = func(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
		return []Value{g, g}, nil
	}
	OpSub.VJP = func(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
		return []Value{g, gradOps{b}.neg(g)}, nil
	}
	OpMul.VJP = func(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
		o := gradOps{b}
		return []Value{o.mul(g, args[1]), o.mul(g, args[0])}, nil
	}
	OpDiv.VJP = func(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
		o := gradOps{b}
		gx := o.div(g, args[1])
		var gy Value
		if tensorArg(args[1]) {
			gy = o.neg(o.div(o.mul(g, out), args[1]))
		}
		return []Value{gx, gy}, nil
	}
	OpPow.VJP = func(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
		o := gradOps{b}
		x, y := args[0], args[1]
		var ym1 Value
		if s, ok := y.(Scalar); ok {
			ym1 = Scalar{Value: s.Value - 1, DType: Float64}
		} else {
			ym1 = o.sub(y, o.c(1))
		}
		// 0 where the exponent is 0 (x**-1 of a zero x would give NaN).
		gx := o.mul(o.mul(g, y), o.ap(OpPow, Attrs{}, x, ym1))
		if s, ok := y.(Scalar); ok && s.Value == 0 {
			gx = o.mul(g, o.c(0))
		} else if !ok {
			gx = o.zeroWhere(gx, o.ap(OpEq, Attrs{}, y, o.c(0)))
		}
		var gy Value
		if tensorArg(y) {
			// x**y·log(x), 0 where x is 0 and y >= 0 (as PyTorch's).
			zero := o.ap(OpLogicalAnd, Attrs{}, o.ap(OpEq, Attrs{}, x, o.c(0)), o.ap(OpGe, Attrs{}, y, o.c(0)))
			gy = o.zeroWhere(o.mul(g, o.mul(out, o.ap(OpLog, Attrs{}, x))), zero)
		}
		return []Value{gx, gy}, nil
	}
	// Ties share the gradient equally, as PyTorch's maximum and minimum do.
	extremum := func(wins *Op) VJPFunc {
		return func(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
			o := gradOps{b}
			x, y := args[0], args[1]
			half := o.mul(o.as(o.ap(OpEq, Attrs{}, x, y), g), o.c(0.5))
			wx := o.add(o.as(o.ap(wins, Attrs{}, x, y), g), half)
			wy := o.add(o.as(o.ap(wins, Attrs{}, y, x), g), half)
			return []Value{o.mul(g, wx), o.mul(g, wy)}, nil
		}
	}
	OpMaximum.VJP = extremum(OpGt)
	OpMinimum.VJP = extremum(OpLt)

	OpNeg.VJP = func(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
		return []Value{gradOps{b}.neg(g)}, nil
	}
	OpAbs.VJP = unaryVJP(func(o gradOps, x, out Value) Value { return o.ap(OpSign, Attrs{}, x) })
	OpExp.VJP = unaryVJP(func(o gradOps, x, out Value) Value { return out })
	OpLog.VJP = func(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
		return []Value{gradOps{b}.div(g, args[0])}, nil
	}
	OpSqrt.VJP = func(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
		o := gradOps{b}
		return []Value{o.div(g, o.mul(out, o.c(2)))}, nil
	}
	OpRsqrt.VJP = unaryVJP(func(o gradOps, x, out Value) Value { return o.mul(o.mul(out, o.mul(out, out)), o.c(-0.5)) })
	OpSin.VJP = unaryVJP(func(o gradOps, x, out Value) Value { return o.ap(OpCos, Attrs{}, x) })
	OpCos.VJP = unaryVJP(func(o gradOps, x, out Value) Value { return o.neg(o.ap(OpSin, Attrs{}, x)) })
	OpTanh.VJP = unaryVJP(func(o gradOps, x, out Value) Value { return o.sub(o.c(1), o.mul(out, out)) })
	OpSigmoid.VJP = unaryVJP(func(o gradOps, x, out Value) Value { return o.mul(out, o.sub(o.c(1), out)) })
	OpErf.VJP = unaryVJP(func(o gradOps, x, out Value) Value {
		return o.mul(o.ap(OpExp, Attrs{}, o.neg(o.mul(x, x))), o.c(2/math.Sqrt(math.Pi)))
	})
	// Rounding has a zero derivative wherever it has one.
	for _, op := range []*Op{OpFloor, OpCeil, OpRound, OpSign} {
		op.VJP = unaryVJP(func(o gradOps, x, out Value) Value { return o.c(0) })
	}
	// PyTorch's relu passes no gradient at 0.
	OpReLU.VJP = func(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
		o := gradOps{b}
		return []Value{o.zeroWhere(g, o.ap(OpLe, Attrs{}, out, o.c(0)))}, nil
	}
	OpGELU.VJP = unaryVJP(func(o gradOps, x, out Value) Value {
		cdf := o.mul(o.add(o.ap(OpErf, Attrs{}, o.mul(x, o.c(1/math.Sqrt2))), o.c(1)), o.c(0.5))
		pdf := o.mul(o.ap(OpExp, Attrs{}, o.mul(o.mul(x, x), o.c(-0.5))), o.c(1/math.Sqrt(2*math.Pi)))
		return o.add(cdf, o.mul(x, pdf))
	})
	OpGELUTanh.VJP = unaryVJP(func(o gradOps, x, out Value) Value {
		k := math.Sqrt(2 / math.Pi)
		x2 := o.mul(x, x)
		t := o.ap(OpTanh, Attrs{}, o.mul(o.mul(x, o.add(o.mul(x2, o.c(0.044715)), o.c(1))), o.c(k)))
		du := o.mul(o.add(o.mul(x2, o.c(3*0.044715)), o.c(1)), o.c(k))
		left := o.mul(o.add(t, o.c(1)), o.c(0.5))
		right := o.mul(o.mul(o.mul(x, o.sub(o.c(1), o.mul(t, t))), du), o.c(0.5))
		return o.add(left, right)
	})
	OpSiLU.VJP = unaryVJP(func(o gradOps, x, out Value) Value {
		s := o.ap(OpSigmoid, Attrs{}, x)
		return o.mul(s, o.add(o.mul(x, o.sub(o.c(1), s)), o.c(1)))
	})
	OpWhere.VJP = func(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
		o := gradOps{b}
		cond := args[0]
		res := []Value{nil, nil, nil}
		if tensorArg(args[1]) {
			res[1] = o.zeroWhere(g, o.ap(OpLogicalNot, Attrs{}, cond))
		}
		if tensorArg(args[2]) {
			res[2] = o.zeroWhere(g, cond)
		}
		return res, nil
	}
	OpMaskedFill.VJP = func(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
		return []Value{gradOps{b}.zeroWhere(g, args[1]), nil}, nil
	}
	// Clamping passes the gradient where x lies within the bounds.
	clampVJP := func(outside func(o gradOps, a Attrs, x Value) Value) VJPFunc {
		return func(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
			o := gradOps{b}
			return []Value{o.zeroWhere(g, outside(o, a, args[0]))}, nil
		}
	}
	// (NaN is outside: no gradient, as PyTorch's.)
	OpClamp.VJP = clampVJP(func(o gradOps, a Attrs, x Value) Value {
		inside := o.ap(OpLogicalAnd, Attrs{}, o.ap(OpGe, Attrs{}, x, o.c(a.Scalars[0])), o.ap(OpLe, Attrs{}, x, o.c(a.Scalars[1])))
		return o.ap(OpLogicalNot, Attrs{}, inside)
	})
	OpClampMin.VJP = clampVJP(func(o gradOps, a Attrs, x Value) Value {
		return o.ap(OpLogicalNot, Attrs{}, o.ap(OpGe, Attrs{}, x, o.c(a.Scalars[0])))
	})
	OpClampMax.VJP = clampVJP(func(o gradOps, a Attrs, x Value) Value {
		return o.ap(OpLogicalNot, Attrs{}, o.ap(OpLe, Attrs{}, x, o.c(a.Scalars[0])))
	})
	OpCast.VJP = func(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
		return []Value{b.Apply(OpCast, Attrs{DType: b.DType(args[0])}, g)}, nil
	}

	OpSum.VJP = func(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
		kept, _ := reducedKept(b, a, args[0], g)
		return []Value{b.Apply(OpExpand, Attrs{Dims: clone(b.Shape(args[0]))}, kept)}, nil
	}
	OpMean.VJP = func(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
		kept, dims := reducedKept(b, a, args[0], g)
		n := 1
		for _, d := range dims {
			n *= b.Shape(args[0])[d]
		}
		o := gradOps{b}
		return []Value{o.div(b.Apply(OpExpand, Attrs{Dims: clone(b.Shape(args[0]))}, kept), o.c(float64(n)))}, nil
	}
	// The extremes share the gradient equally among the elements that
	// reach them, as PyTorch's amax and amin do.
	extremeVJP := func(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
		o := gradOps{b}
		x := args[0]
		kept, dims := reducedKept(b, a, x, g)
		outKept, _ := reducedKept(b, a, x, out)
		hit := o.as(o.ap(OpEq, Attrs{}, x, outKept), g)
		count := o.ap(OpSum, Attrs{Dims: dims, KeepDim: true}, hit)
		return []Value{o.mul(hit, o.div(kept, count))}, nil
	}
	OpAMax.VJP, OpAMin.VJP = extremeVJP, extremeVJP

	OpReshape.VJP = func(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
		return []Value{reshapeTo(b, g, b.Shape(args[0]))}, nil
	}
	OpSqueeze.VJP, OpUnsqueeze.VJP = OpReshape.VJP, OpReshape.VJP
	OpTranspose.VJP = func(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
		return []Value{b.Apply(OpTranspose, Attrs{Dim: a.Dim, Dim2: a.Dim2}, g)}, nil
	}
	OpPermute.VJP = func(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
		inv := make([]int, len(a.Dims))
		for i, d := range a.Dims {
			if d < 0 {
				d += len(a.Dims)
			}
			inv[d] = i
		}
		return []Value{b.Apply(OpPermute, Attrs{Dims: inv}, g)}, nil
	}
	// Expand's gradient is the sum over the expanded dims: SumTo does it.
	OpExpand.VJP = func(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
		return []Value{g}, nil
	}
	// A slice's gradient is g spread back to its places: interleaved with
	// step − 1 zeros, then padded (or cropped) to x's extent along the dim.
	OpSlice.VJP = func(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
		xs, gs := b.Shape(args[0]), b.Shape(g)
		d := a.Dim
		if d < 0 {
			d += len(xs)
		}
		if gs[d] == 0 {
			return []Value{zerosLike(b, args[0])}, nil
		}
		start, _ := sliceBounds(a.Start, a.Stop, xs[d])
		covered := gs[d]
		if a.Step > 1 {
			g = b.Apply(OpUnsqueeze, Attrs{Dim: d + 1}, g)
			pads := make([]int, 2*(len(gs)-d))
			pads[len(pads)-1] = a.Step - 1
			g = b.Apply(OpPad, Attrs{Dims: pads, Scalars: []float64{0}}, g)
			covered *= a.Step
			merged := clone(gs)
			merged[d] = covered
			g = reshapeTo(b, g, merged)
		}
		pads := make([]int, 2*(len(xs)-d))
		pads[len(pads)-2], pads[len(pads)-1] = start, xs[d]-start-covered
		return []Value{b.Apply(OpPad, Attrs{Dims: pads, Scalars: []float64{0}}, g)}, nil
	}
	OpContiguous.VJP = func(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
		return []Value{g}, nil
	}
	OpMatMul.VJP = matmulVJP
	OpCat.VJP = func(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
		d := a.Dim
		if d < 0 {
			d += len(b.Shape(out))
		}
		res := make([]Value, len(args))
		at := 0
		for i, x := range args {
			n := b.Shape(x)[d]
			res[i] = b.Apply(OpSlice, Attrs{Dim: d, Start: at, Stop: at + n, Step: 1}, g)
			at += n
		}
		return res, nil
	}
	OpStack.VJP = func(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
		d := a.Dim
		if d < 0 {
			d += len(b.Shape(out))
		}
		res := make([]Value, len(args))
		for i, x := range args {
			res[i] = reshapeTo(b, b.Apply(OpSlice, Attrs{Dim: d, Start: i, Stop: i + 1, Step: 1}, g), b.Shape(x))
		}
		return res, nil
	}
	for _, op := range []*Op{OpTril, OpTriu} {
		op.VJP = func(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
			return []Value{b.Apply(op, a, g)}, nil
		}
	}

	// The composites below have fused derivatives, as PyTorch's: their
	// forward runs as one kernel where a device has one, and the backward
	// is a few ops, computed in float32 for 16-bit values.
	// along is the derivative of an op along Attrs.Dim from its result y
	// and g, both in float32 at least.
	along := func(title string, d func(o gradOps, red Attrs, y, g Value) Value) VJPFunc {
		return func(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
			dim, err := NormDim(title, b.Shape(args[0]), a.Dim)
			if err != nil {
				return nil, err
			}
			y, _ := upcast(b, out)
			g, _ = upcast(b, g)
			return []Value{d(gradOps{b}, Attrs{Dims: []int{dim}, KeepDim: true}, y, g)}, nil
		}
	}
	OpSoftmax.VJP = along("Softmax", func(o gradOps, red Attrs, y, g Value) Value {
		return o.mul(y, o.sub(g, o.ap(OpSum, red, o.mul(g, y))))
	})
	OpLogSoftmax.VJP = along("LogSoftmax", func(o gradOps, red Attrs, y, g Value) Value {
		return o.sub(g, o.mul(o.ap(OpExp, Attrs{}, y), o.ap(OpSum, red, g)))
	})
	OpLayerNorm.VJP = func(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
		x, w, bias := args[0], args[1], args[2]
		o, red, x, g, err := normPrologue(b, "LayerNorm", a, x, g, w, bias)
		if err != nil {
			return nil, err
		}
		dev := o.sub(x, o.ap(OpMean, red, x))
		rstd := o.ap(OpRsqrt, Attrs{}, o.add(o.ap(OpMean, red, o.mul(dev, dev)), eps(a)))
		xhat := o.mul(dev, rstd)
		res := normVJP(o, red, xhat, rstd, g, w, true)
		if bias != nil {
			res = append(res, g) // SumTo reduces it to the bias's shape
		} else {
			res = append(res, nil)
		}
		return res, nil
	}
	OpRMSNorm.VJP = func(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
		x, w := args[0], args[1]
		o, red, x, g, err := normPrologue(b, "RMSNorm", a, x, g, w)
		if err != nil {
			return nil, err
		}
		rstd := o.ap(OpRsqrt, Attrs{}, o.add(o.ap(OpMean, red, o.mul(x, x)), eps(a)))
		return normVJP(o, red, o.mul(x, rstd), rstd, g, w, false), nil
	}

	OpSDPA.VJP, OpAttention.VJP = sdpaVJP, sdpaVJP

	// Gathering rows: their gradients add up at the rows they came from.
	OpIndexSelect.VJP = func(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
		x, idx := args[0], args[1]
		if len(b.Shape(x)) == 0 {
			return nil, Errorf("IndexSelect", [][]int{b.Shape(x)}, "index a tensor of at least one dim", "no gradient for a scalar source")
		}
		return []Value{b.Apply(OpIndexAdd, Attrs{Dim: a.Dim}, zerosLike(b, x), flat(b, idx), g), nil}, nil
	}
	OpEmbedding.VJP = func(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
		idx, w := args[0], args[1]
		rows := reshapeTo(b, g, []int{Numel(b.Shape(idx)), b.Shape(w)[1]})
		return []Value{nil, b.Apply(OpIndexAdd, Attrs{Dim: 0}, zerosLike(b, w), flat(b, idx), rows)}, nil
	}
	// Gather's gradient adds each output's gradient at the element it
	// read: a one-hot comparison of the index with the positions along the
	// dim (memory: the index's elements times the dim's size, as a
	// cross-entropy's logits), summed over the index's extent along it,
	// then padded with zeros where the index is smaller than x.
	OpGather.VJP = func(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
		x, idx := args[0], args[1]
		xs, is := b.Shape(x), b.Shape(idx)
		if len(xs) == 0 {
			return []Value{g, nil}, nil
		}
		d, err := NormDim("Gather", xs, a.Dim)
		if err != nil {
			return nil, err
		}
		o := gradOps{b}
		n := xs[d]
		pos := zerosLike(b, x) // 0, 1, …, n−1 along d, one element along the other dims
		for k := range xs {
			if k != d && xs[k] != 1 {
				pos = b.Apply(OpSlice, Attrs{Dim: k, Start: 0, Stop: 1, Step: 1}, pos)
			}
		}
		pos = o.sub(b.Apply(OpCumSum, Attrs{Dim: d}, o.add(pos, o.c(1))), o.c(1))
		pos = b.Apply(OpUnsqueeze, Attrs{Dim: d}, pos)
		wrapped := b.Apply(OpWhere, Attrs{}, b.Apply(OpLt, Attrs{}, idx, Scalar{Value: 0, DType: Int64}),
			b.Apply(OpAdd, Attrs{}, idx, Scalar{Value: float64(n), DType: Int64}), idx)
		hit := o.as(b.Apply(OpEq, Attrs{}, b.Apply(OpUnsqueeze, Attrs{Dim: d + 1}, wrapped), pos), g)
		gx := b.Apply(OpSum, Attrs{Dims: []int{d}}, o.mul(hit, b.Apply(OpUnsqueeze, Attrs{Dim: d + 1}, g)))
		pads := make([]int, 2*len(xs))
		padded := false
		for k := range xs {
			if k != d && is[k] < xs[k] {
				pads[2*(len(xs)-1-k)+1] = xs[k] - is[k]
				padded = true
			}
		}
		if padded {
			gx = b.Apply(OpPad, Attrs{Dims: pads, Scalars: []float64{0}}, gx)
		}
		return []Value{gx, nil}, nil
	}
	// The running sum's gradient is the reversed running sum of g:
	// sum(g) − cumsum(g) + g along the dim.
	OpCumSum.VJP = func(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
		o := gradOps{b}
		total := o.ap(OpSum, Attrs{Dims: []int{a.Dim}, KeepDim: true}, g)
		return []Value{o.add(o.sub(total, b.Apply(OpCumSum, Attrs{Dim: a.Dim}, g)), g)}, nil
	}
	OpIndexAdd.VJP = func(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
		return []Value{g, nil, b.Apply(OpIndexSelect, Attrs{Dim: a.Dim}, g, args[1])}, nil
	}
	// IndexCopy's entries at index came from src: src's gradient is g's
	// entries there (as torch's index_copy backward gives it, a repeated
	// index included), x's is g with them zeroed.
	OpIndexCopy.VJP = func(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
		dx := b.Apply(OpIndexCopy, Attrs{Dim: a.Dim}, g, args[1], zerosLike(b, args[2]))
		return []Value{dx, nil, b.Apply(OpIndexSelect, Attrs{Dim: a.Dim}, g, args[1])}, nil
	}
}

// zerosLike is a tensor of x's shape and type holding zeros (NaN and
// infinities in x too).
func zerosLike(b Builder, x Value) Value {
	all := b.Apply(OpLogicalOr, Attrs{}, b.Apply(OpEq, Attrs{}, x, x), b.Apply(OpNe, Attrs{}, x, x))
	return b.Apply(OpMaskedFill, Attrs{Scalars: []float64{0}}, x, all)
}

// flat is idx as a 1-D tensor.
func flat(b Builder, idx Value) Value {
	if len(b.Shape(idx)) == 1 {
		return idx
	}
	return reshapeTo(b, idx, []int{Numel(b.Shape(idx))})
}

// sliceBounds is a slice's [start, stop) within a dim of size n, as
// OpSlice reads Attrs.Start and Attrs.Stop.
func sliceBounds(start, stop, n int) (int, int) {
	if start < 0 {
		start += n
	}
	if stop < 0 {
		stop += n
	}
	return min(max(start, 0), n), min(max(stop, 0), n)
}

// matmulVJP is MatMul's derivative: g·yᵀ and xᵀ·g, with 1-D operands
// treated as the matrices PyTorch's rules make of them and batch dims
// summed back by SumTo.
func matmulVJP(b Builder, a Attrs, args []Value, out, g Value) ([]Value, error) {
	x, y := args[0], args[1]
	xs, ys := b.Shape(x), b.Shape(y)
	if len(xs) == 1 {
		x = b.Apply(OpUnsqueeze, Attrs{Dim: 0}, x)
	}
	if len(ys) == 1 {
		y = b.Apply(OpUnsqueeze, Attrs{Dim: 1}, y)
	}
	x2, y2 := b.Shape(x), b.Shape(y)
	batch, m, _, n := MatMulBatch(x2, y2)
	g = reshapeTo(b, g, append(clone(batch), m, n))
	var gx, gy Value // products only for the operands that need them
	if NeedsGrad(b, args[0]) {
		gx = b.Apply(OpMatMul, Attrs{}, g, b.Apply(OpTranspose, Attrs{Dim: -2, Dim2: -1}, y))
		gx = reshapeTo(b, SumTo(b, gx, x2), xs)
	}
	if NeedsGrad(b, args[1]) {
		gy = b.Apply(OpMatMul, Attrs{}, b.Apply(OpTranspose, Attrs{Dim: -2, Dim2: -1}, x), g)
		gy = reshapeTo(b, SumTo(b, gy, y2), ys)
	}
	return []Value{gx, gy}, nil
}

// normPrologue checks a norm's operands as its decomposition does and
// returns the reduction over its normalized dims, and x and g in float32
// at least.
func normPrologue(b Builder, title string, a Attrs, x, g Value, params ...Value) (gradOps, Attrs, Value, Value, error) {
	dims, err := normDims(b, title, x, a.Dims, params...)
	if err != nil {
		return gradOps{}, Attrs{}, nil, nil, err
	}
	x, _ = upcast(b, x)
	g, _ = upcast(b, g)
	return gradOps{b}, Attrs{Dims: dims, KeepDim: true}, x, g, nil
}

// normVJP is the gradient of y = xhat·w (+ bias) with respect to x and w,
// xhat normalized over red's dims with 1/rstd: for x,
// rstd·(gy − mean(gy) − xhat·mean(gy·xhat)) with gy = g·w, where the mean
// of gy is there only for a centered xhat (LayerNorm's, not RMSNorm's);
// for w, g·xhat (SumTo reduces it to w's shape).
func normVJP(o gradOps, red Attrs, xhat, rstd, g, w Value, centered bool) []Value {
	gy := g
	if w != nil {
		gy = o.mul(g, w)
	}
	inner := gy
	if centered {
		inner = o.sub(gy, o.ap(OpMean, red, gy))
	}
	inner = o.sub(inner, o.mul(xhat, o.ap(OpMean, red, o.mul(gy, xhat))))
	var gw Value
	if w != nil {
		gw = o.mul(g, xhat)
	}
	return []Value{o.mul(rstd, inner), gw}
}
