package array

import (
	"gocompile/inductor"
	"gocompile/ir"
)

// triangleKernel is Tril and Triu: a contiguous copy of x with the
// elements outside the triangle zeroed.
func triangleKernel(op *ir.Op, a ir.Attrs, args []ir.Value) *Array {
	x := args[0].(*Array)
	shape, _, out := externTypes(op, &a, []*Array{x})
	upper := op == ir.OpTriu
	if dev := x.st.dev; dev != CPU {
		res := newGPUArray(dev, out, shape)
		gpuTriangle(op.Title, x, upper, a.Start, res)
		return res
	}
	res := newArray(out, shape)
	copyInto(res, x)
	rows, cols := shape[len(shape)-2], shape[len(shape)-1]
	zero := newArray(out, nil)
	for b := range ir.Numel(shape) / max(rows*cols, 1) {
		m := res.View(ir.Numel(shape)/max(rows*cols, 1), rows, cols).selectAt(0, b)
		for i := range rows {
			// The columns to zero in row i: j > i + diag below, j < i + diag above.
			lo, hi := min(max(i+a.Start+1, 0), cols), cols
			if upper {
				lo, hi = 0, min(max(i+a.Start, 0), cols)
			}
			if lo < hi {
				copyInto(m.selectAt(0, i).Slice(0, lo, hi, 1), zero)
			}
		}
	}
	return res
}

// gpuTriangle runs inductor.TriangleKernel over x into the contiguous res.
func gpuTriangle(op string, x *Array, upper bool, diag int, res *Array) {
	n := res.Numel()
	if n == 0 {
		return
	}
	if len(res.shape) > inductor.MaxRank {
		Throw(op, []*Array{x}, "use fewer dims", "GPU triangles index at most %d dims", inductor.MaxRank)
	}
	g := res.st.gpu.g
	k := &inductor.TriangleKernel{Elem: res.dtype, Upper: upper}
	fn := g.kernel(k.Name(), func() (string, error) { return k.Source(), nil })
	geo := inductor.Geometry{Rank: len(res.shape), Strides: make([][inductor.MaxRank]int64, 1)}
	for d, s := range res.shape {
		geo.Sizes[d] = int64(s)
		geo.Strides[0][d] = int64(x.strides[d])
	}
	args := g.GetArgs()
	defer g.PutArgs(args)
	args.I64(int64(n)).Ptr(x.DevicePtr()).Ptr(res.DevicePtr()).I64(int64(diag)).Bytes(geo.Bytes(), 8)
	g.Launch(op, fn, g.gridFor(n), threadsPerBlock, args)
}
