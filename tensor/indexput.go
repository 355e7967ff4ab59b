package tensor

import (
	"gocompile/ir"
)

// IndexPut returns a copy of t with values written at the positions the
// index tensors give, as torch.index_put (t[indices] = values in
// Python): indices[j] (Int32 or Int64, negative counting from the end)
// indexes dim j of t, the index tensors broadcast together to a shape B,
// and values broadcasts to B followed by t's dims after the indexed ones.
// With accumulate the values are added (a repeated position adds each of
// its values; t floating), without it they replace the entries (a
// repeated position keeps its last value, as IndexCopy). Bool masks are
// not taken as indices: select with Where or MaskedFill instead. It is
// IndexCopy (IndexAdd with accumulate) along the indexed dims taken as
// one, so it runs wherever those run, compiled and on a GPU. t is
// unchanged.
func (t *Tensor) IndexPut(indices []*Tensor, values *Tensor, accumulate bool) *Tensor {
	defer rethrow()
	p := planIndexPut("IndexPut", t, indices, values, accumulate)
	return p.result(t, indices, values, accumulate)
}

// result is IndexPut's result for its plan p.
func (p indexPut) result(t *Tensor, indices []*Tensor, values *Tensor, accumulate bool) *Tensor {
	flat := t.Reshape(p.flatShape...)
	var out *Tensor
	p.write("IndexPut", t, indices, values, func() {
		if accumulate {
			out = flat.IndexAdd(0, p.at, p.values)
		} else {
			out = flat.IndexCopy(0, p.at, p.values)
		}
	})
	return out.Reshape(t.shape()...)
}

// write runs the index write of op, naming op's own index, dim and size
// where the write rejects a position: on a device the write checks the
// flat positions, which name neither.
func (p indexPut) write(op string, t *Tensor, indices []*Tensor, values *Tensor, f func()) {
	if err := Try(f); err != nil {
		// Only op's own range error replaces the write's: reading the
		// indices back may fail for reasons of its own.
		operands := append([]*Tensor{t, values}, indices...)
		if e := Try(func() { checkIndexValues(op, operands, indices, t.shape(), true) }); e != nil {
			if te, ok := e.(*Error); ok && te.Op == op {
				panic(e)
			}
		}
		panic(err)
	}
}

// IndexPutInPlace is IndexPut written into t, as torch's index_put_, and
// returns t. Inside a compiled function it is a write of t like
// IndexCopyInPlace: where t's indexed dims can be viewed as one, an index
// write of that view (a KV cache's positions), else a Copy of IndexPut's
// result into t.
func (t *Tensor) IndexPutInPlace(indices []*Tensor, values *Tensor, accumulate bool) *Tensor {
	defer rethrow()
	p := planIndexPut("IndexPutInPlace", t, indices, values, accumulate)
	t.noInPlaceOnProxy("IndexPutInPlace")
	if _, ok := ir.ViewStrides(t.shape(), t.strides(), p.flatShape); ok && !accumulate {
		p.write("IndexPutInPlace", t, indices, values, func() { t.View(p.flatShape...).IndexCopyInPlace(0, p.at, p.values) })
		return t
	}
	return t.Copy(p.result(t, indices, values, accumulate))
}

// indexPut is an IndexPut as an index write along one dim: t's indexed
// dims taken as one (flatShape), the flat positions (at, 1-D Int64) and
// the values for them (values, [len(at), t's other dims…], t's type).
type indexPut struct {
	flatShape []int
	at        *Tensor
	values    *Tensor
}

// planIndexPut checks op's operands and makes its index write.
func planIndexPut(op string, t *Tensor, indices []*Tensor, values *Tensor, accumulate bool) indexPut {
	operands := append([]*Tensor{t, values}, indices...)
	mustOperands(op, operands...)
	shape := t.shape()
	k := len(indices)
	if k == 0 || k > len(shape) {
		throw(op, operands, "give one index tensor for each of t's leading dims, at least one",
			"%d index tensors for a tensor of %d dims", k, len(shape))
	}
	if accumulate && !t.dtype().IsFloat() {
		throw(op, operands, "accumulate into a floating tensor (To(Float32)), or write without accumulate",
			"accumulate into a tensor of type %v", t.dtype())
	}
	ishapes := make([][]int, k)
	for j, ix := range indices {
		if !ix.dtype().IsInt() {
			fix := "cast the index with To(Int64)"
			if ix.dtype() == Bool {
				fix = "select with Where or MaskedFill: a bool mask is not an index here"
			}
			throw(op, operands, fix, "index %d has type %v", j, ix.dtype())
		}
		if ix.Device() != t.Device() {
			throw(op, operands, "move the indices to the tensor's device (ToDevice)",
				"index %d is on %v, the tensor on %v", j, ix.Device(), t.Device())
		}
		ishapes[j] = ix.shape()
	}
	b, err := ir.Broadcast(op, ishapes...)
	check(err, op, operands...)
	rest := shape[k:]
	target := append(append([]int(nil), b...), rest...)
	if !broadcastsTo(values.shape(), target) {
		throw(op, operands, "give values that broadcast to the indexed shape (the indices' broadcast shape, then the tensor's other dims)",
			"values of shape %s do not broadcast to %s", ir.FormatShape(values.shape()), ir.FormatShape(target))
	}
	checkIndexValues(op, operands, indices, shape, false)

	// The flat position of each indexed entry: dims 0..k-1 taken as one,
	// row-major, each index wrapped once where negative. A position out of
	// range along its own dim could land in range once flattened, so it
	// becomes one past the end, which the index write rejects.
	n := ir.Numel(shape[:k])
	strides := ir.ContiguousStrides(shape[:k])
	var at, bad *Tensor
	for j, ix := range indices {
		size, stride := shape[j], strides[j]
		i := ix.To(Int64)
		wrapped := i.Add(i.LtScalar(0).To(Int64).MulScalar(float64(size)))
		out := wrapped.LtScalar(0).LogicalOr(wrapped.GeScalar(float64(size)))
		term := wrapped.MulScalar(float64(stride))
		if j == 0 {
			at, bad = term, out
		} else {
			at, bad = at.Add(term), bad.LogicalOr(out)
		}
	}
	at = at.MaskedFill(bad, float64(n)).Expand(b...).Reshape(-1)
	flatShape := append([]int{n}, rest...)
	vals := values.To(t.dtype()).Expand(target...).Reshape(append([]int{ir.Numel(b)}, rest...)...)
	return indexPut{flatShape: flatShape, at: at, values: vals}
}

// checkIndexValues rejects out-of-range indices on the host, with the
// index, dim and size, where every index is a CPU tensor (or, with
// anyDevice, on any device: after a device's index write failed) outside
// a compiled function; elsewhere the index write checks them on the
// device.
func checkIndexValues(op string, operands []*Tensor, indices []*Tensor, shape []int, anyDevice bool) {
	for _, ix := range indices {
		if ix.px != nil || ix.Device() != CPU && !anyDevice {
			return
		}
	}
	for j, ix := range indices {
		for _, i := range ix.Int64s() {
			if i < -int64(shape[j]) || i >= int64(shape[j]) {
				throw(op, operands, "use indices in [-size, size) of their dims",
					"index %d is out of range for dim %d of size %d", i, j, shape[j])
			}
		}
	}
}
