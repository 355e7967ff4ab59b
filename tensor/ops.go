package tensor

import (
	"math"

	"gocompile/array"
	"gocompile/ir"
)

// Each method below runs one registry op; the op's entry in package ir says
// what it computes and how types promote. Binary ops broadcast their
// operands. Scalar variants take a Go number that promotes like a Python
// literal: integral values (2, -1) keep an integer tensor integral,
// fractional ones (0.5) make it Float32.

func (t *Tensor) binary(op *ir.Op, u *Tensor) *Tensor { return apply(op, ir.Attrs{}, t, u) }
func (t *Tensor) scalar(op *ir.Op, s float64) *Tensor {
	return apply(op, ir.Attrs{}, t, ir.ScalarOf(s))
}
func (t *Tensor) unary(op *ir.Op) *Tensor { return apply(op, ir.Attrs{}, t) }

// Add returns t + u.
func (t *Tensor) Add(u *Tensor) *Tensor { return t.binary(ir.OpAdd, u) }

// Sub returns t - u.
func (t *Tensor) Sub(u *Tensor) *Tensor { return t.binary(ir.OpSub, u) }

// Mul returns t * u.
func (t *Tensor) Mul(u *Tensor) *Tensor { return t.binary(ir.OpMul, u) }

// Div returns t / u, true division: integer operands give Float32.
func (t *Tensor) Div(u *Tensor) *Tensor { return t.binary(ir.OpDiv, u) }

// Pow returns t raised to the power u.
func (t *Tensor) Pow(u *Tensor) *Tensor { return t.binary(ir.OpPow, u) }

// Maximum returns the elementwise maximum; NaN propagates.
func (t *Tensor) Maximum(u *Tensor) *Tensor { return t.binary(ir.OpMaximum, u) }

// Minimum returns the elementwise minimum; NaN propagates.
func (t *Tensor) Minimum(u *Tensor) *Tensor { return t.binary(ir.OpMinimum, u) }

// AddScalar returns t + s.
func (t *Tensor) AddScalar(s float64) *Tensor { return t.scalar(ir.OpAdd, s) }

// SubScalar returns t - s.
func (t *Tensor) SubScalar(s float64) *Tensor { return t.scalar(ir.OpSub, s) }

// MulScalar returns t * s.
func (t *Tensor) MulScalar(s float64) *Tensor { return t.scalar(ir.OpMul, s) }

// DivScalar returns t / s.
func (t *Tensor) DivScalar(s float64) *Tensor { return t.scalar(ir.OpDiv, s) }

// PowScalar returns t raised to the power s.
func (t *Tensor) PowScalar(s float64) *Tensor { return t.scalar(ir.OpPow, s) }

// MaximumScalar returns max(t, s) elementwise.
func (t *Tensor) MaximumScalar(s float64) *Tensor { return t.scalar(ir.OpMaximum, s) }

// MinimumScalar returns min(t, s) elementwise.
func (t *Tensor) MinimumScalar(s float64) *Tensor { return t.scalar(ir.OpMinimum, s) }

// Neg returns -t.
func (t *Tensor) Neg() *Tensor { return t.unary(ir.OpNeg) }

// Abs returns |t|.
func (t *Tensor) Abs() *Tensor { return t.unary(ir.OpAbs) }

// Floor rounds down to an integer (integer tensors are returned as they are).
func (t *Tensor) Floor() *Tensor { return t.unary(ir.OpFloor) }

// Ceil rounds up to an integer (integer tensors are returned as they are).
func (t *Tensor) Ceil() *Tensor { return t.unary(ir.OpCeil) }

// Round rounds to the nearest integer, halves to even as torch.round
// does (integer tensors are returned as they are).
func (t *Tensor) Round() *Tensor { return t.unary(ir.OpRound) }

// Sign returns -1, 0 or 1 as t is negative, zero or positive, and 0 for
// NaN, as torch.sign does.
func (t *Tensor) Sign() *Tensor { return t.unary(ir.OpSign) }

// Exp returns e**t.
func (t *Tensor) Exp() *Tensor { return t.unary(ir.OpExp) }

// Log returns the natural logarithm.
func (t *Tensor) Log() *Tensor { return t.unary(ir.OpLog) }

// Sqrt returns the square root.
func (t *Tensor) Sqrt() *Tensor { return t.unary(ir.OpSqrt) }

// Rsqrt returns 1/sqrt(t).
func (t *Tensor) Rsqrt() *Tensor { return t.unary(ir.OpRsqrt) }

// Sin returns the sine.
func (t *Tensor) Sin() *Tensor { return t.unary(ir.OpSin) }

// Cos returns the cosine.
func (t *Tensor) Cos() *Tensor { return t.unary(ir.OpCos) }

// Tanh returns the hyperbolic tangent.
func (t *Tensor) Tanh() *Tensor { return t.unary(ir.OpTanh) }

// Erf returns the error function.
func (t *Tensor) Erf() *Tensor { return t.unary(ir.OpErf) }

// Sigmoid returns 1/(1+exp(-t)).
func (t *Tensor) Sigmoid() *Tensor { return t.unary(ir.OpSigmoid) }

// ReLU returns max(t, 0).
func (t *Tensor) ReLU() *Tensor { return t.unary(ir.OpReLU) }

// GELU returns the exact GELU, t/2 * (1 + erf(t/sqrt(2))).
func (t *Tensor) GELU() *Tensor { return t.unary(ir.OpGELU) }

// GELUTanh returns GELU's tanh approximation (PyTorch's approximate="tanh").
func (t *Tensor) GELUTanh() *Tensor { return t.unary(ir.OpGELUTanh) }

// SiLU returns t * sigmoid(t).
func (t *Tensor) SiLU() *Tensor { return t.unary(ir.OpSiLU) }

// Eq returns the Bool tensor t == u.
func (t *Tensor) Eq(u *Tensor) *Tensor { return t.binary(ir.OpEq, u) }

// Ne returns the Bool tensor t != u.
func (t *Tensor) Ne(u *Tensor) *Tensor { return t.binary(ir.OpNe, u) }

// Lt returns the Bool tensor t < u.
func (t *Tensor) Lt(u *Tensor) *Tensor { return t.binary(ir.OpLt, u) }

// Le returns the Bool tensor t <= u.
func (t *Tensor) Le(u *Tensor) *Tensor { return t.binary(ir.OpLe, u) }

// Gt returns the Bool tensor t > u.
func (t *Tensor) Gt(u *Tensor) *Tensor { return t.binary(ir.OpGt, u) }

// Ge returns the Bool tensor t >= u.
func (t *Tensor) Ge(u *Tensor) *Tensor { return t.binary(ir.OpGe, u) }

// EqScalar returns the Bool tensor t == s.
func (t *Tensor) EqScalar(s float64) *Tensor { return t.scalar(ir.OpEq, s) }

// NeScalar returns the Bool tensor t != s.
func (t *Tensor) NeScalar(s float64) *Tensor { return t.scalar(ir.OpNe, s) }

// LtScalar returns the Bool tensor t < s.
func (t *Tensor) LtScalar(s float64) *Tensor { return t.scalar(ir.OpLt, s) }

// LeScalar returns the Bool tensor t <= s.
func (t *Tensor) LeScalar(s float64) *Tensor { return t.scalar(ir.OpLe, s) }

// GtScalar returns the Bool tensor t > s.
func (t *Tensor) GtScalar(s float64) *Tensor { return t.scalar(ir.OpGt, s) }

// GeScalar returns the Bool tensor t >= s.
func (t *Tensor) GeScalar(s float64) *Tensor { return t.scalar(ir.OpGe, s) }

// LogicalNot returns the Bool tensor t == 0.
func (t *Tensor) LogicalNot() *Tensor { return t.unary(ir.OpLogicalNot) }

// LogicalAnd returns the Bool tensor t != 0 && u != 0.
func (t *Tensor) LogicalAnd(u *Tensor) *Tensor { return t.binary(ir.OpLogicalAnd, u) }

// LogicalOr returns the Bool tensor t != 0 || u != 0.
func (t *Tensor) LogicalOr(u *Tensor) *Tensor { return t.binary(ir.OpLogicalOr, u) }

// Where returns x where cond is true and y elsewhere; cond must be Bool.
func Where(cond, x, y *Tensor) *Tensor { return apply(ir.OpWhere, ir.Attrs{}, cond, x, y) }

// Clamp limits t to [lo, hi]; pass math.Inf(-1) or math.Inf(1) to leave a
// side open. NaN propagates; if lo > hi every element becomes hi.
func (t *Tensor) Clamp(lo, hi float64) *Tensor {
	t.must("Clamp")
	switch {
	case math.IsInf(lo, -1) && math.IsInf(hi, 1):
		return apply(ir.OpCast, ir.Attrs{DType: t.dtype()}, t)
	case math.IsInf(lo, -1):
		return apply(ir.OpClampMax, ir.Attrs{Scalars: []float64{hi}}, t)
	case math.IsInf(hi, 1):
		return apply(ir.OpClampMin, ir.Attrs{Scalars: []float64{lo}}, t)
	}
	return apply(ir.OpClamp, ir.Attrs{Scalars: []float64{lo, hi}}, t)
}

// MaskedFill returns t with value where mask (Bool, broadcast) is true.
func (t *Tensor) MaskedFill(mask *Tensor, value float64) *Tensor {
	return apply(ir.OpMaskedFill, ir.Attrs{Scalars: []float64{value}}, t, mask)
}

// To returns t converted to a dtype or moved to a device, as PyTorch's
// tensor.to: x.To(tensor.Float16), x.To(tensor.CUDA(0)). It returns t
// itself when nothing changes. Floating to integer truncates toward zero;
// any type to Bool tests for non-zero; see ToDevice for moves.
func (t *Tensor) To(target Target) *Tensor {
	t.must("To")
	switch target := target.(type) {
	case Device:
		return t.ToDevice(target)
	case DType:
		if target == t.dtype() {
			return t
		}
		return apply(ir.OpCast, ir.Attrs{DType: target}, t)
	}
	// ir.Target has no other implementations: only a nil interface is left.
	throw("To", []*Tensor{t}, "pass a DType or a Device", "the target is nil")
	return nil
}

func (t *Tensor) reduction(op *ir.Op, keepDim bool, dims []int) *Tensor {
	return apply(op, ir.Attrs{Dims: dims, KeepDim: keepDim}, t)
}

// Sum sums over dims (every dim if none are given). Integer and bool
// tensors sum to Int64.
func (t *Tensor) Sum(dims ...int) *Tensor { return t.reduction(ir.OpSum, false, dims) }

// SumKeepDim is Sum keeping the reduced dims with size 1.
func (t *Tensor) SumKeepDim(dims ...int) *Tensor { return t.reduction(ir.OpSum, true, dims) }

// Mean averages over dims (every dim if none are given).
func (t *Tensor) Mean(dims ...int) *Tensor { return t.reduction(ir.OpMean, false, dims) }

// MeanKeepDim is Mean keeping the reduced dims with size 1.
func (t *Tensor) MeanKeepDim(dims ...int) *Tensor { return t.reduction(ir.OpMean, true, dims) }

// Max is the maximum over dims (every dim if none are given); NaN
// propagates. Use ArgMax for the positions.
func (t *Tensor) Max(dims ...int) *Tensor { return t.reduction(ir.OpAMax, false, dims) }

// MaxKeepDim is Max keeping the reduced dims with size 1.
func (t *Tensor) MaxKeepDim(dims ...int) *Tensor { return t.reduction(ir.OpAMax, true, dims) }

// Min is the minimum over dims (every dim if none are given); NaN
// propagates.
func (t *Tensor) Min(dims ...int) *Tensor { return t.reduction(ir.OpAMin, false, dims) }

// MinKeepDim is Min keeping the reduced dims with size 1.
func (t *Tensor) MinKeepDim(dims ...int) *Tensor { return t.reduction(ir.OpAMin, true, dims) }

// ArgMax returns the Int64 index of the first maximum along dim.
func (t *Tensor) ArgMax(dim int, keepDim bool) *Tensor {
	t.must("ArgMax")
	return t.reduction(ir.OpArgMax, keepDim, []int{t.normDim("ArgMax", dim)})
}

// ArgMin returns the Int64 index of the first minimum along dim.
func (t *Tensor) ArgMin(dim int, keepDim bool) *Tensor {
	t.must("ArgMin")
	return t.reduction(ir.OpArgMin, keepDim, []int{t.normDim("ArgMin", dim)})
}

// ArgMaxAll returns the index of the first maximum of the flattened tensor.
func (t *Tensor) ArgMaxAll() *Tensor {
	t.must("ArgMaxAll")
	return t.Reshape(-1).ArgMax(0, false)
}

// ArgMinAll returns the index of the first minimum of the flattened tensor.
func (t *Tensor) ArgMinAll() *Tensor {
	t.must("ArgMinAll")
	return t.Reshape(-1).ArgMin(0, false)
}

// Var is the variance over dims (every dim if dims is empty) with the given
// correction: 1 is the unbiased estimator (PyTorch's default), 0 the
// population variance.
func (t *Tensor) Var(dims []int, correction float64, keepDim bool) *Tensor {
	return apply(ir.OpVar, ir.Attrs{Dims: dims, KeepDim: keepDim, Scalars: []float64{correction}}, t)
}

// Repeat tiles t: counts[i] copies along dim i, as torch.Tensor.repeat.
// Counts beyond t's rank add leading dims: a [2, 3] tensor repeated
// (4, 1, 2) is [4, 2, 6].
func (t *Tensor) Repeat(counts ...int) *Tensor { return apply(ir.OpRepeat, ir.Attrs{Dims: counts}, t) }

// Pad pads t with value, as torch.nn.functional.pad in constant mode:
// pads holds (before, after) amounts from the last dim backwards, so
// (1, 2) pads the last dim with one element before and two after, and
// (0, 0, 3, 0) three rows before. Negative amounts crop.
func (t *Tensor) Pad(pads []int, value float64) *Tensor {
	return apply(ir.OpPad, ir.Attrs{Dims: pads, Scalars: []float64{value}}, t)
}

// CumSum is the inclusive running sum along dim, as torch.cumsum:
// floating tensors keep their type (summed in float64, each result
// rounded once), integer and bool tensors give Int64.
func (t *Tensor) CumSum(dim int) *Tensor { return apply(ir.OpCumSum, ir.Attrs{Dim: dim}, t) }

// IndexCopyInPlace writes src's entries into t at index along dim, in
// place, as torch's index_copy_, and returns t: the write of a KV cache at
// a position held in a tensor. Inside a compiled function it is a write
// like Copy (recorded in the graph, the position a tensor, so later
// positions need no recompile), made in place where nothing else in the
// function reads t's old contents.
func (t *Tensor) IndexCopyInPlace(dim int, index, src *Tensor) *Tensor {
	defer rethrow()
	mustOperands("IndexCopyInPlace", t, index, src)
	t.noInPlaceOnProxy("IndexCopyInPlace")
	if tr := writeTracer(t, index, src); tr != nil { // a traced write: a new version of t's storage
		d := t.normDim("IndexCopyInPlace", dim)
		if t.px != nil { // an argument: eager's checks
			if !index.dtype().IsInt() {
				throw("IndexCopyInPlace", []*Tensor{t, index, src}, "cast the index with To(Int64)", "index of type %v", index.dtype())
			}
			t.noInPlaceOnGrad("IndexCopyInPlace")
			t.noOverlap("IndexCopyInPlace")
		}
		tr.writeIndex(t, d, index, src)
		return t
	}
	if !index.dtype().IsInt() {
		throw("IndexCopyInPlace", []*Tensor{t, index, src}, "cast the index with To(Int64)", "index of type %v", index.dtype())
	}
	t.noInPlaceOnGrad("IndexCopyInPlace")
	t.noOverlap("IndexCopyInPlace")
	array.IndexCopyInto("IndexCopyInPlace", t.v, dim, index.v, src.v.ToDevice(t.v.Device()))
	return t
}

// AsStrided is the view of t, a 1-D contiguous tensor (a storage), with
// the given sizes, strides (in elements) and offset, as torch.as_strided
// on such a tensor. Elements may repeat (a zero stride); the view must lie
// inside t.
func (t *Tensor) AsStrided(size, stride []int, offset int) *Tensor {
	return t.viewOp(ir.OpAsStrided, asStridedAttrs("AsStrided", t, size, stride, offset))
}

// AsStridedScatter returns a copy of t, a 1-D tensor (a storage), with
// the view AsStrided(size, stride, offset) replaced by src (broadcast,
// converted to t's type), as torch.as_strided_scatter. Compile records
// writes into tensors (dst.Narrow(…).Copy(src)) as this op.
func (t *Tensor) AsStridedScatter(src *Tensor, size, stride []int, offset int) *Tensor {
	return apply(ir.OpAsStridedScatter, asStridedAttrs("AsStridedScatter", t, size, stride, offset), t, src)
}

// AsStridedIndexCopy returns a copy of t, a 1-D tensor (a storage), whose
// view AsStrided(size, stride, offset) has src's entries at index along
// dim, as IndexCopy of the view. Compile records IndexCopyInPlace as
// this op.
func (t *Tensor) AsStridedIndexCopy(size, stride []int, offset, dim int, index, src *Tensor) *Tensor {
	a := asStridedAttrs("AsStridedIndexCopy", t, size, stride, offset)
	a.Dim = dim
	return apply(ir.OpAsStridedIndexCopy, a, t, index, src)
}

func asStridedAttrs(op string, t *Tensor, size, stride []int, offset int) ir.Attrs {
	if len(size) != len(stride) {
		throw(op, []*Tensor{t}, "give one stride per size", "%d sizes and %d strides", len(size), len(stride))
	}
	return ir.StridedLayout(ir.Layout{Shape: size, Strides: stride, Offset: offset})
}

// IndexCopy returns a copy of t whose entries at index (1-D, Int32 or
// Int64, negative counting from the end) along dim are replaced by src's
// entries in order, as torch.index_copy: src has t's shape but along dim,
// where it is as long as index. With a repeated index the last entry
// wins. It writes a new tensor; t is unchanged.
func (t *Tensor) IndexCopy(dim int, index, src *Tensor) *Tensor {
	return apply(ir.OpIndexCopy, ir.Attrs{Dim: dim}, t, index, src)
}

// IndexAdd returns a copy of t, a floating tensor, with src's entries
// added to its entries at index (1-D, Int32 or Int64, negative counting
// from the end) along dim, as torch.index_add: src has t's shape but
// along dim, where it is as long as index, and a repeated index adds each
// of its entries. It writes a new tensor; t is unchanged. It is the
// gradient of IndexSelect and Embedding.
func (t *Tensor) IndexAdd(dim int, index, src *Tensor) *Tensor {
	return apply(ir.OpIndexAdd, ir.Attrs{Dim: dim}, t, index, src)
}

// ArgSort returns the indices (Int64) that sort t along dim, ascending or
// descending, as torch.argsort with stable=True: equal values keep their
// order, NaN sorts above every number (last ascending, first
// descending).
func (t *Tensor) ArgSort(dim int, descending bool) *Tensor {
	step := 1
	if descending {
		step = -1
	}
	return apply(ir.OpArgSort, ir.Attrs{Dim: dim, Step: step}, t)
}

// Sort returns t sorted along dim and the indices that sort it, as
// torch.sort with stable=True.
func (t *Tensor) Sort(dim int, descending bool) (values, indices *Tensor) {
	indices = t.ArgSort(dim, descending)
	return t.Gather(dim, indices), indices
}

// TopK returns the k largest (or, with largest false, smallest) elements
// of t along dim, in order, and their indices, as torch.topk with
// sorted=True; ties keep their order.
func (t *Tensor) TopK(k, dim int, largest bool) (values, indices *Tensor) {
	t.must("TopK")
	if len(t.shape()) == 0 {
		if k != 1 {
			throw("TopK", []*Tensor{t}, "use k = 1 for a scalar", "k = %d", k)
		}
		indices = t.ArgSort(dim, largest)
		return t.Gather(dim, indices), indices
	}
	d := t.normDim("TopK", dim)
	if k < 0 || k > t.Size(d) {
		throw("TopK", []*Tensor{t}, "use k between 0 and the size of the dim",
			"k = %d for dim %d of size %d", k, d, t.Size(d))
	}
	indices = t.ArgSort(d, largest).Narrow(d, 0, k)
	return t.Gather(d, indices), indices
}

// Tril keeps the lower triangle of the last two dims, as torch.tril:
// element [..., i, j] where j - i <= diagonal, zero elsewhere (diagonal 0
// keeps the main diagonal, -1 drops it, 1 keeps one above).
func (t *Tensor) Tril(diagonal int) *Tensor { return apply(ir.OpTril, ir.Attrs{Start: diagonal}, t) }

// Triu keeps the upper triangle of the last two dims, as torch.triu:
// element [..., i, j] where j - i >= diagonal, zero elsewhere.
func (t *Tensor) Triu(diagonal int) *Tensor { return apply(ir.OpTriu, ir.Attrs{Start: diagonal}, t) }

// Softmax normalises exp(t) along dim to sum to one.
func (t *Tensor) Softmax(dim int) *Tensor { return apply(ir.OpSoftmax, ir.Attrs{Dim: dim}, t) }

// LogSoftmax is the logarithm of Softmax, computed stably.
func (t *Tensor) LogSoftmax(dim int) *Tensor { return apply(ir.OpLogSoftmax, ir.Attrs{Dim: dim}, t) }

// LayerNorm normalises over the trailing dims normalizedShape to zero mean
// and unit variance, then scales by weight and adds bias (either may be
// nil, both have shape normalizedShape).
func (t *Tensor) LayerNorm(normalizedShape []int, weight, bias *Tensor, eps float64) *Tensor {
	return apply(ir.OpLayerNorm, ir.Attrs{Dims: normalizedShape, Scalars: []float64{eps}}, t, val(weight), val(bias))
}

// RMSNorm divides by the root mean square over the trailing dims
// normalizedShape, then scales by weight (which may be nil).
func (t *Tensor) RMSNorm(normalizedShape []int, weight *Tensor, eps float64) *Tensor {
	return apply(ir.OpRMSNorm, ir.Attrs{Dims: normalizedShape, Scalars: []float64{eps}}, t, val(weight))
}

// ScaledDotProductAttention is softmax(q·kᵀ·scale + mask)·v over the
// last two dims, as torch.nn.functional.scaled_dot_product_attention: q
// is [..., Hq, L, E], k [..., Hkv, S, E], v [..., Hkv, S, Ev], and the
// result [..., Hq, L, Ev]. Hq may be a multiple of Hkv: each group of
// Hq/Hkv query heads shares one key and value head (grouped-query
// attention, PyTorch's enable_gqa). mask may be nil; it broadcasts to
// [..., L, S] and is added to the scores, or, where bool, true means
// attend. causal masks keys after each query (query i attends keys j <=
// i, aligned top-left as PyTorch's is_causal). scale 0 means 1/sqrt(E).
func ScaledDotProductAttention(q, k, v, mask *Tensor, causal bool, scale float64) *Tensor {
	c := 0.0
	if causal {
		c = 1
	}
	return apply(ir.OpSDPA, ir.Attrs{Scalars: []float64{scale, c}}, q, k, v, val(mask))
}

// MatMul is the matrix product with PyTorch's rules: 1-D operands are
// vectors, dims before the last two are batch dims and broadcast.
func (t *Tensor) MatMul(u *Tensor) *Tensor { return apply(ir.OpMatMul, ir.Attrs{}, t, u) }

// Linear returns t @ weight^T + bias, with weight [out, in] as in
// torch.nn.Linear; bias may be nil.
func (t *Tensor) Linear(weight, bias *Tensor) *Tensor {
	return apply(ir.OpLinear, ir.Attrs{}, t, weight, val(bias))
}

// Contiguous returns t if its elements are row-major without gaps, else a
// row-major copy.
func (t *Tensor) Contiguous() *Tensor { return apply(ir.OpContiguous, ir.Attrs{}, t) }

// Cat concatenates tensors along dim; sizes must match in the other dims.
func Cat(tensors []*Tensor, dim int) *Tensor {
	args := make([]ir.Value, len(tensors))
	for i, t := range tensors {
		args[i] = t
	}
	return apply(ir.OpCat, ir.Attrs{Dim: dim}, args...)
}

// Stack joins same-shaped tensors along a new dim.
func Stack(tensors []*Tensor, dim int) *Tensor {
	args := make([]ir.Value, len(tensors))
	for i, t := range tensors {
		args[i] = t
	}
	return apply(ir.OpStack, ir.Attrs{Dim: dim}, args...)
}

// Gather picks, along dim, the elements of t at index (Int64 or Int32, the
// same rank as t): out[i][j] = t[index[i][j]][j] for dim 0.
func (t *Tensor) Gather(dim int, index *Tensor) *Tensor {
	return apply(ir.OpGather, ir.Attrs{Dim: dim}, t, index)
}

// IndexSelect returns the entries of t along dim at the positions in the
// 1-D index.
func (t *Tensor) IndexSelect(dim int, index *Tensor) *Tensor {
	return apply(ir.OpIndexSelect, ir.Attrs{Dim: dim}, t, index)
}

// Embedding looks up rows of weight [vocab, dim] at indices of any shape;
// the result has shape indices.Shape() + [dim].
func Embedding(indices, weight *Tensor) *Tensor {
	return apply(ir.OpEmbedding, ir.Attrs{}, indices, weight)
}
