package array

import (
	"gocompile/inductor"
	"gocompile/ir"
)

// cumsumKernel is CumSum: floats sum in float64 and each result is
// rounded once to the output type, as PyTorch's CPU kernel does;
// integers and bools sum in int64.
func cumsumKernel(op *ir.Op, a ir.Attrs, args []ir.Value) *Array {
	x := args[0].(*Array)
	shape, _, out := externTypes(op, &a, []*Array{x})
	if len(x.shape) == 0 { // a scalar is its own running sum
		return cumsumKernel(op, ir.Attrs{Dim: 0}, []ir.Value{x.View(1)}).View(shape...)
	}
	d := x.normDim(op.Title, a.Dim)
	if dev := x.st.dev; dev != CPU {
		res := newGPUArray(dev, out, shape)
		gpuCumSum(op.Title, x, d, res)
		return res
	}
	outer, L, inner := 1, shape[d], 1
	for _, s := range shape[:d] {
		outer *= s
	}
	for _, s := range shape[d+1:] {
		inner *= s
	}
	acc := ir.Int64
	if x.dtype.IsFloat() {
		acc = ir.Float64
	}
	sums := newArray(acc, shape)
	copyInto(sums, x)
	// Lines run along d with stride inner; each (o, i) pair is one line,
	// and the lines of one o are summed side by side, a row at a time.
	scan := func(o int) {
		base := o * L * inner
		switch v := sums.st.data.(type) {
		case []float64:
			for k := 1; k < L; k++ {
				row, prev := v[base+k*inner:base+(k+1)*inner], v[base+(k-1)*inner:base+k*inner]
				for i := range row {
					row[i] += prev[i]
				}
			}
		case []int64:
			for k := 1; k < L; k++ {
				row, prev := v[base+k*inner:base+(k+1)*inner], v[base+(k-1)*inner:base+k*inner]
				for i := range row {
					row[i] += prev[i]
				}
			}
		}
	}
	parallelFor(outer, max(1, MinParallel/max(L*inner, 1)), func(lo, hi int) {
		for o := lo; o < hi; o++ {
			scan(o)
		}
	})
	if out == acc {
		return sums
	}
	res := newArray(out, shape)
	copyInto(res, sums)
	return res
}

// gpuCumSum runs inductor.ScanKernel over x's lines along dim d into the
// contiguous res: a block a line for lines of ScanThreads elements or
// more, else a thread a line.
func gpuCumSum(op string, x *Array, d int, res *Array) {
	if res.Numel() == 0 {
		return
	}
	g := res.st.gpu.g
	geo, lines, L := lineGeometry(op, x, res, d)
	k := &inductor.ScanKernel{In: x.dtype, Out: res.dtype}
	name, grid, block := k.Name()+"_thread", g.gridFor(lines), threadsPerBlock
	if L >= inductor.ScanThreads {
		name, grid, block = k.Name()+"_block", min(lines, g.dev.SMCount*8), inductor.ScanThreads
	}
	fn := g.kernel(name, func() (string, error) { return k.Source(), nil })
	args := g.GetArgs()
	defer g.PutArgs(args)
	args.I64(int64(lines)).I64(int64(L)).Ptr(x.DevicePtr()).Ptr(res.DevicePtr()).
		I64(int64(x.strides[d])).I64(int64(res.strides[d])).Bytes(geo.Bytes(), 8)
	g.Launch(op, fn, grid, block, args)
}

// lineGeometry is the geometry of the lines of x and res (not empty)
// along dim d, as kernels that take a line each (ScanKernel, SortKernel)
// walk them: the other dims' sizes, x's strides along them (stride[0])
// and res's (stride[1]); and how many lines there are, and their length.
func lineGeometry(op string, x, res *Array, d int) (geo inductor.Geometry, lines, length int) {
	if len(res.shape) > inductor.MaxRank {
		Throw(op, []*Array{x}, "use fewer dims", "GPU kernels over lines index at most %d dims", inductor.MaxRank)
	}
	geo = inductor.Geometry{Strides: make([][inductor.MaxRank]int64, 2)}
	for i, s := range res.shape {
		if i == d {
			continue
		}
		geo.Sizes[geo.Rank] = int64(s)
		geo.Strides[0][geo.Rank] = int64(x.strides[i])
		geo.Strides[1][geo.Rank] = int64(res.strides[i])
		geo.Rank++
	}
	length = res.shape[d]
	return geo, res.Numel() / length, length
}
