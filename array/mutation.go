package array

import "gocompile/ir"

// Storage is the whole storage t views, as a 1-D contiguous array, and a
// key equal for every view of that storage (Compile tracks writes into a
// tensor's storage by it).
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
// storage x with the view replaced by src.
func asStridedScatterKernel(op *ir.Op, a ir.Attrs, args []ir.Value) *Array {
	x, src := args[0].(*Array), args[1].(*Array)
	shape, _, out := externTypes(op, &a, []*Array{x, src})
	res := newOn(x.st.dev, out, shape)
	copyInto(res, x)
	l, err := ir.OpAsStrided.View(res.Layout(), &a)
	Check(err, op.Title, x, src)
	copyInto(res.withLayout(l), src)
	return res
}
