package array

import (
	"gocompile/ir"
)

// StorageKey is a key equal for every view of t's storage (Compile tracks
// writes into a tensor's storage by it).
func (t *Array) StorageKey() any { return t.st }

// Storage is the whole storage t views, as a 1-D contiguous array, and its
// StorageKey.
func (t *Array) Storage() (whole *Array, key any) {
	n := 0
	if t.st.gpu != nil {
		n = t.st.gpu.block.Size / t.dtype.Size()
	} else {
		n = dataLen(t.st.data)
	}
	return &Array{st: t.st, shape: []int{n}, strides: []int{1}, dtype: t.dtype}, t.st
}

// asStridedScatterKernel is AsStridedScatter on any device: a copy of the
// storage x with the view replaced by src, or x itself, written in place,
// where the graph allows it (Attrs.KeepDim).
func asStridedScatterKernel(op *ir.Op, a ir.Attrs, args []ir.Value) *Array {
	x, src := args[0].(*Array), args[1].(*Array)
	shape, _, out := externTypes(op, &a, []*Array{x, src})
	res := x // in place (Attrs.KeepDim): nothing else reads x
	if !a.KeepDim || !x.IsContiguous() || x.offset != 0 {
		res = newOn(x.st.dev, out, shape)
		copyInto(res, x)
	}
	l, err := ir.OpAsStrided.View(res.Layout(), &a)
	Check(err, op.Title, x, src)
	if !src.SharesStorage(res) || !src.Layout().Same(l) { // else a kernel stored src in place
		copyInto(res.withLayout(l), src)
	}
	return res
}

// asStridedIndexCopyKernel is AsStridedIndexCopy on any device: IndexCopy
// into the view of a copy of the storage x, or of x itself where the
// graph allows it (Attrs.KeepDim).
func asStridedIndexCopyKernel(op *ir.Op, a ir.Attrs, args []ir.Value) *Array {
	x, idx, src := args[0].(*Array), args[1].(*Array), args[2].(*Array)
	shape, _, out := externTypes(op, &a, []*Array{x, idx, src})
	res := x
	if !a.KeepDim || !x.IsContiguous() || x.offset != 0 {
		res = newOn(x.st.dev, out, shape)
		copyInto(res, x)
	}
	l, err := ir.OpAsStrided.View(res.Layout(), &a)
	Check(err, op.Title, x, src)
	view := res.withLayout(l)
	indexCopyInto(op.Title, view, view.normDim(op.Title, a.Dim), idx, src)
	return res
}
