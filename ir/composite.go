package ir

import (
	"fmt"
	"math"
)

func composite(op *Op) *Op {
	op.Kind = Composite
	return Register(op)
}

// The composite ops. Their decompositions compute float16 and bfloat16
// inputs in float32 and round once at the end, as PyTorch's kernels do.
var (
	OpVar = composite(&Op{Name: "var", Title: "Var", Arity: 1, Params: 1, Rule: FloatOnly, Decompose: varDecomp,
		Doc: "variance over Attrs.Dims with Bessel-style correction Attrs.Scalars[0]: sum((x-mean)^2) / max(n-correction, 0)"})
	OpSoftmax = composite(&Op{Name: "softmax", Title: "Softmax", Arity: 1, Rule: FloatOnly, Decompose: softmaxDecomp,
		Doc: "exp(x - max) / sum(exp(x - max)) along Attrs.Dim"})
	OpLogSoftmax = composite(&Op{Name: "log_softmax", Title: "LogSoftmax", Arity: 1, Rule: FloatOnly, Decompose: logSoftmaxDecomp,
		Doc: "(x - max) - log(sum(exp(x - max))) along Attrs.Dim"})
	OpLayerNorm = composite(&Op{Name: "layer_norm", Title: "LayerNorm", Arity: 3, Params: 1, Rule: FloatOnly, Decompose: layerNormDecomp,
		Doc: "(x - mean) / sqrt(var + eps) * weight + bias over the trailing dims Attrs.Dims (the normalized shape); weight and bias may be nil; eps is Attrs.Scalars[0]"})
	OpRMSNorm = composite(&Op{Name: "rms_norm", Title: "RMSNorm", Arity: 2, Params: 1, Rule: FloatOnly, Decompose: rmsNormDecomp,
		Doc: "x / sqrt(mean(x^2) + eps) * weight over the trailing dims Attrs.Dims; weight may be nil; eps is Attrs.Scalars[0]"})
	OpRepeat = composite(&Op{Name: "repeat", Title: "Repeat", Arity: 1, Rule: SameAsFirst, Decompose: repeatDecomp,
		Doc: "x tiled Attrs.Dims[i] times along dim i, as torch.Tensor.repeat; counts beyond x's rank add leading dims"})
	OpPad = composite(&Op{Name: "pad", Title: "Pad", Arity: 1, Params: 1, Rule: SameAsFirst, Decompose: padDecomp,
		Doc: "constant padding as torch.nn.functional.pad: Attrs.Dims holds (before, after) amounts from the last dim backwards, negative ones crop; the fill is Attrs.Scalars[0]"})
	OpLinear = composite(&Op{Name: "linear", Title: "Linear", Arity: 3, Rule: PromoteNoBool, Decompose: linearDecomp,
		Doc: "x @ weight^T + bias, weight [out, in]; bias may be nil"})
)

// upcast returns x computed in float32 if it is a 16-bit float, and the
// function that casts a result back to x's type.
func upcast(b Builder, x Value) (Value, func(Value) Value) {
	dt := b.DType(x)
	if dt != Float16 && dt != BFloat16 {
		return x, func(v Value) Value { return v }
	}
	x = b.Apply(OpCast, Attrs{DType: Float32}, x)
	return x, func(v Value) Value { return b.Apply(OpCast, Attrs{DType: dt}, v) }
}

func requireFloat(b Builder, title string, x Value) error {
	if dt := b.DType(x); !dt.IsFloat() {
		return Errorf(title, [][]int{b.Shape(x)}, "cast the input to a floating type first, e.g. x.To(tensor.Float32)",
			"needs a floating-point input, got %v", dt)
	}
	return nil
}

func varDecomp(b Builder, a Attrs, args ...Value) (Value, error) {
	x := args[0]
	if err := requireFloat(b, "Var", x); err != nil {
		return nil, err
	}
	dims, err := NormDims("Var", b.Shape(x), a.Dims)
	if err != nil {
		return nil, err
	}
	n := 1
	for _, d := range dims {
		n *= b.Shape(x)[d]
	}
	correction := 1.0
	if len(a.Scalars) > 0 {
		correction = a.Scalars[0]
	}
	x, back := upcast(b, x)
	mean := b.Apply(OpMean, Attrs{Dims: dims, KeepDim: true}, x)
	dev := b.Apply(OpSub, Attrs{}, x, mean)
	ss := b.Apply(OpSum, Attrs{Dims: dims, KeepDim: a.KeepDim}, b.Apply(OpMul, Attrs{}, dev, dev))
	v := b.Apply(OpDiv, Attrs{}, ss, Scalar{Value: max(float64(n)-correction, 0), DType: Float64})
	return back(v), nil
}

func softmaxDecomp(b Builder, a Attrs, args ...Value) (Value, error) {
	x := args[0]
	if err := requireFloat(b, "Softmax", x); err != nil {
		return nil, err
	}
	d, err := NormDim("Softmax", b.Shape(x), a.Dim)
	if err != nil {
		return nil, err
	}
	x, back := upcast(b, x)
	red := Attrs{Dims: []int{d}, KeepDim: true}
	e := b.Apply(OpExp, Attrs{}, b.Apply(OpSub, Attrs{}, x, b.Apply(OpAMax, red, x)))
	return back(b.Apply(OpDiv, Attrs{}, e, b.Apply(OpSum, red, e))), nil
}

func logSoftmaxDecomp(b Builder, a Attrs, args ...Value) (Value, error) {
	x := args[0]
	if err := requireFloat(b, "LogSoftmax", x); err != nil {
		return nil, err
	}
	d, err := NormDim("LogSoftmax", b.Shape(x), a.Dim)
	if err != nil {
		return nil, err
	}
	x, back := upcast(b, x)
	red := Attrs{Dims: []int{d}, KeepDim: true}
	shifted := b.Apply(OpSub, Attrs{}, x, b.Apply(OpAMax, red, x))
	lse := b.Apply(OpLog, Attrs{}, b.Apply(OpSum, red, b.Apply(OpExp, Attrs{}, shifted)))
	return back(b.Apply(OpSub, Attrs{}, shifted, lse)), nil
}

// normDims checks that the trailing dims of x equal normShape and that the
// optional affine parameters have exactly that shape.
func normDims(b Builder, title string, x Value, normShape []int, params ...Value) ([]int, error) {
	xs := b.Shape(x)
	shapes := [][]int{xs}
	for _, p := range params {
		if p != nil {
			shapes = append(shapes, b.Shape(p))
		}
	}
	k := len(normShape)
	if k == 0 || k > len(xs) || !equalInts(xs[len(xs)-k:], normShape) {
		return nil, Errorf(title, shapes, fmt.Sprintf("pass the sizes of the input's last dims, e.g. [%d]", lastOr(xs)),
			"normalized shape %s does not match the input's trailing dims", FormatShape(normShape))
	}
	for _, p := range params {
		if p != nil && !equalInts(b.Shape(p), normShape) {
			return nil, Errorf(title, shapes, "give weight and bias the normalized shape",
				"parameter of shape %s, normalized shape %s", FormatShape(b.Shape(p)), FormatShape(normShape))
		}
	}
	dims := make([]int, k)
	for i := range dims {
		dims[i] = len(xs) - k + i
	}
	return dims, nil
}

func lastOr(s []int) int {
	if len(s) == 0 {
		return 1
	}
	return s[len(s)-1]
}

func eps(a Attrs) Scalar {
	e := 1e-5
	if len(a.Scalars) > 0 {
		e = a.Scalars[0]
	}
	return Scalar{Value: e, DType: Float64}
}

func affine(b Builder, y, w, bias Value, back func(Value) Value) Value {
	if w != nil {
		y = b.Apply(OpMul, Attrs{}, y, w)
	}
	if bias != nil {
		y = b.Apply(OpAdd, Attrs{}, y, bias)
	}
	return back(y)
}

func layerNormDecomp(b Builder, a Attrs, args ...Value) (Value, error) {
	x, w, bias := args[0], args[1], args[2]
	if err := requireFloat(b, "LayerNorm", x); err != nil {
		return nil, err
	}
	dims, err := normDims(b, "LayerNorm", x, a.Dims, w, bias)
	if err != nil {
		return nil, err
	}
	x, back := upcast(b, x)
	red := Attrs{Dims: dims, KeepDim: true}
	dev := b.Apply(OpSub, Attrs{}, x, b.Apply(OpMean, red, x))
	variance := b.Apply(OpMean, red, b.Apply(OpMul, Attrs{}, dev, dev))
	y := b.Apply(OpMul, Attrs{}, dev, b.Apply(OpRsqrt, Attrs{}, b.Apply(OpAdd, Attrs{}, variance, eps(a))))
	return affine(b, y, w, bias, back), nil
}

func rmsNormDecomp(b Builder, a Attrs, args ...Value) (Value, error) {
	x, w := args[0], args[1]
	if err := requireFloat(b, "RMSNorm", x); err != nil {
		return nil, err
	}
	dims, err := normDims(b, "RMSNorm", x, a.Dims, w)
	if err != nil {
		return nil, err
	}
	x, back := upcast(b, x)
	ms := b.Apply(OpMean, Attrs{Dims: dims, KeepDim: true}, b.Apply(OpMul, Attrs{}, x, x))
	y := b.Apply(OpMul, Attrs{}, x, b.Apply(OpRsqrt, Attrs{}, b.Apply(OpAdd, Attrs{}, ms, eps(a))))
	return affine(b, y, w, nil, back), nil
}

func linearDecomp(b Builder, _ Attrs, args ...Value) (Value, error) {
	x, w, bias := args[0], args[1], args[2]
	ws := b.Shape(w)
	if len(ws) != 2 && len(ws) != 1 {
		return nil, Errorf("Linear", [][]int{b.Shape(x), ws}, "the weight is [out features, in features]",
			"weight has %d dims", len(ws))
	}
	xs := b.Shape(x)
	if len(xs) == 0 || xs[len(xs)-1] != ws[len(ws)-1] {
		return nil, Errorf("Linear", [][]int{xs, ws}, "the input's last dim must equal the weight's in-features (its last dim)",
			"input features %d, weight expects %d", lastOr(xs), ws[len(ws)-1])
	}
	wt := w
	if len(ws) == 2 {
		wt = b.Apply(OpTranspose, Attrs{Dim: 0, Dim2: 1}, w)
	}
	y := b.Apply(OpMatMul, Attrs{}, x, wt)
	if bias != nil {
		y = b.Apply(OpAdd, Attrs{}, y, bias)
	}
	return y, nil
}

// repeatDecomp tiles x by views and one copy: x as [1, s0, 1, s1, ...],
// expanded to [r0, s0, r1, s1, ...], made contiguous and merged pairwise.
func repeatDecomp(b Builder, a Attrs, args ...Value) (Value, error) {
	x := args[0]
	xs, reps := b.Shape(x), a.Dims
	if len(reps) < len(xs) {
		return nil, Errorf("Repeat", [][]int{xs}, "give a count for every dim (more counts add leading dims)",
			"%d counts for %d dims", len(reps), len(xs))
	}
	for len(b.Shape(x)) < len(reps) {
		x = b.Apply(OpUnsqueeze, Attrs{Dim: 0}, x)
	}
	shape := b.Shape(x)
	expanded := make([]int, 0, 2*len(reps))
	out := make([]int, len(reps))
	for i, r := range reps {
		if r < 0 {
			return nil, Errorf("Repeat", [][]int{xs}, "use counts of 0 or more", "count %d for dim %d", r, i)
		}
		if shape[i] > 0 && r > math.MaxInt/shape[i] {
			return nil, Errorf("Repeat", [][]int{xs}, "use smaller counts", "dim %d: %d copies of %d elements overflow", i, r, shape[i])
		}
		x = b.Apply(OpUnsqueeze, Attrs{Dim: 2 * i}, x)
		expanded = append(expanded, r, shape[i])
		out[i] = r * shape[i]
	}
	x = b.Apply(OpExpand, Attrs{Dims: expanded}, x)
	x = b.Apply(OpContiguous, Attrs{}, x)
	return b.Apply(OpReshape, Attrs{Dims: out}, x), nil
}

// padDecomp pads one dim at a time, last first: a crop (Slice) where an
// amount is negative, then a concatenation with blocks of the fill value,
// each a size-1 slice of x filled (MaskedFill) and expanded.
func padDecomp(b Builder, a Attrs, args ...Value) (Value, error) {
	x := args[0]
	xs, pads := b.Shape(x), a.Dims
	if len(pads)%2 != 0 || len(pads)/2 > len(xs) {
		return nil, Errorf("Pad", [][]int{xs}, "give (before, after) pairs, last dim first, at most one pair per dim",
			"%d amounts for %d dims", len(pads), len(xs))
	}
	value := 0.0
	if len(a.Scalars) > 0 {
		value = a.Scalars[0]
	}
	for j := range len(pads) / 2 {
		d := len(xs) - 1 - j
		before, after := pads[2*j], pads[2*j+1]
		shape := b.Shape(x)
		if before < 0 || after < 0 {
			start, stop := max(-before, 0), shape[d]-max(-after, 0)
			if stop < start {
				return nil, Errorf("Pad", [][]int{xs}, "crop at most the size of the dim",
					"dim %d of size %d cropped by %d and %d", d, shape[d], max(-before, 0), max(-after, 0))
			}
			x = b.Apply(OpSlice, Attrs{Dim: d, Start: start, Stop: stop, Step: 1}, x)
			shape = b.Shape(x)
		}
		before, after = max(before, 0), max(after, 0)
		if before == 0 && after == 0 {
			continue
		}
		if shape[d] == 0 {
			return nil, Errorf("Pad", [][]int{xs}, "build the result with Full and copy x into it",
				"cannot pad dim %d, which has no elements to take the fill's layout from", d)
		}
		first := b.Apply(OpSlice, Attrs{Dim: d, Start: 0, Stop: 1, Step: 1}, x)
		fill := b.Apply(OpMaskedFill, Attrs{Scalars: []float64{value}}, first, Scalar{Value: 1, DType: Bool})
		block := func(n int) Value {
			s := clone(shape)
			s[d] = n
			return b.Apply(OpExpand, Attrs{Dims: s}, fill)
		}
		var parts []Value
		if before > 0 {
			parts = append(parts, block(before))
		}
		parts = append(parts, x)
		if after > 0 {
			parts = append(parts, block(after))
		}
		x = b.Apply(OpCat, Attrs{Dim: d}, parts...)
	}
	return x, nil
}
