package array

import (
	"cmp"
	"math"
	"slices"

	"gocompile/inductor"
	"gocompile/ir"
)

// SortKey maps v to an unsigned integer in v's order, as ArgSort sorts:
// NaN above every number, -0 equal to 0.
func SortKey(v float64) uint64 {
	if v != v {
		return math.MaxUint64
	}
	if v == 0 {
		v = 0
	}
	b := math.Float64bits(v)
	if b>>63 != 0 {
		return ^b
	}
	return b | 1<<63
}

// argsortKernel is ArgSort: the stable order of each line along the dim.
func argsortKernel(op *ir.Op, a ir.Attrs, args []ir.Value) *Array {
	x := args[0].(*Array)
	shape, _, out := externTypes(op, &a, []*Array{x})
	desc := a.Step < 0
	if len(x.shape) == 0 {
		res := newOn(x.st.dev, out, shape) // one element: index 0
		if res.st.dev != CPU {
			g := res.st.gpu.g
			Check(g.stream.Memset8(res.DevicePtr(), 0, out.Size()), op.Title, x)
		}
		return res
	}
	d := x.normDim(op.Title, a.Dim)
	if dev := x.st.dev; dev != CPU {
		if shape[d] <= inductor.SortMax {
			res := newGPUArray(dev, out, shape)
			gpuArgSort(op.Title, x, d, desc, res)
			return res
		}
		// Longer lines than a block sorts in shared memory: on the host.
		return argsortKernel(op, a, []ir.Value{x.cpu()}).ToDevice(dev)
	}
	// Keys in row-major order: integers exactly, floats through SortKey.
	n := ir.Numel(shape)
	keys := make([]uint64, n)
	if x.dtype.IsFloat() {
		v := newArray(ir.Float64, shape)
		copyInto(v, x)
		for i, f := range v.st.data.([]float64) {
			keys[i] = SortKey(f)
		}
	} else {
		v := newArray(ir.Int64, shape)
		copyInto(v, x)
		for i, e := range v.st.data.([]int64) {
			keys[i] = uint64(e) ^ 1<<63
		}
	}
	if desc {
		for i := range keys {
			keys[i] = ^keys[i]
		}
	}
	L, inner := shape[d], 1
	for _, s := range shape[d+1:] {
		inner *= s
	}
	res := newArray(out, shape)
	idx := res.st.data.([]int64)
	parallelFor(n/max(L, 1), max(1, MinParallel/max(L, 1)), func(lo, hi int) {
		perm := make([]int, L)
		for line := lo; line < hi; line++ {
			base := line/inner*L*inner + line%inner // the line's first element
			for i := range perm {
				perm[i] = i
			}
			slices.SortStableFunc(perm, func(p, q int) int {
				kp, kq := keys[base+p*inner], keys[base+q*inner]
				return cmp.Compare(kp, kq)
			})
			for i, p := range perm {
				idx[base+i*inner] = int64(p)
			}
		}
	})
	return res
}

// gpuArgSort runs inductor.SortKernel over x's lines along d into the
// contiguous res.
func gpuArgSort(op string, x *Array, d int, desc bool, res *Array) {
	if res.Numel() == 0 {
		return
	}
	g := res.st.gpu.g
	geo, lines, L := lineGeometry(op, x, res, d)
	P := 1
	for P < L {
		P <<= 1
	}
	k := &inductor.SortKernel{Elem: x.dtype}
	fn := g.kernel(k.Name(), func() (string, error) { return k.Source(), nil })
	descArg := int32(0)
	if desc {
		descArg = 1
	}
	args := g.GetArgs()
	defer g.PutArgs(args)
	args.I64(int64(lines)).I64(int64(L)).I64(int64(P)).Ptr(x.DevicePtr()).Ptr(res.DevicePtr()).
		I64(int64(x.strides[d])).I64(int64(res.strides[d])).I32(descArg).Bytes(geo.Bytes(), 8)
	g.Launch(op, fn, min(lines, g.dev.SMCount*8), inductor.SortThreads, args)
}
