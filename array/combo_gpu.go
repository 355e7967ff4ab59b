package array

import (
	"gocompile/cuda"
	"gocompile/inductor"
	"gocompile/internal/stats"
	"gocompile/ir"
)

// maxKernelParamBytes is the most parameter memory a launch may take on
// every device and driver (4 KB; later drivers allow more on sm_70 and up).
const maxKernelParamBytes = 4096

// ComboMember is one member of a combo launch (GPUComboIn): a fused
// pointwise kernel over its own operands into its own result.
type ComboMember struct {
	Kernel inductor.PointwiseKernel // Expr, Label, Compute and Out set
	Args   []ir.Value
	Kinds  []ir.Kind
	Res    *Array
}

// GPUComboIn runs the members as one launch of an inductor.ComboKernel,
// each member over a range of blocks, with the kernel kept in cache c and
// the launch queued on q when q is not nil. It returns the members it
// left out, for the caller to run one by one: those that are no dense
// kernel (an operand strided or broadcast along some dims, or not aligned
// for vector loads), and all of them where the launch's parameters would
// pass maxKernelParamBytes.
func GPUComboIn(c *Artifacts, q *LaunchQueue, ms []ComboMember) (left []int) {
	combo := &inductor.ComboKernel{}
	var live []*ComboMember
	paramBytes := 0
	for i := range ms {
		m := &ms[i]
		if m.Res.Numel() == 0 {
			continue
		}
		k := m.Kernel
		tensors := tensorsOf(m.Args)
		strides := [][]int{m.Res.strides}
		lts := []layoutTensor{{uintptr(m.Res.DevicePtr()), m.Res.dtype.Size()}}
		for _, t := range tensors {
			strides = append(strides, ir.BroadcastStrides(t.shape, t.strides, m.Res.shape))
			lts = append(lts, layoutTensor{uintptr(t.DevicePtr()), t.dtype.Size()})
		}
		var operands []inductor.Operand
		for i, v := range m.Args {
			o := inductor.Operand{Kind: m.Kinds[i], Access: inductor.ScalarArg}
			if t, ok := v.(*Array); ok {
				o.DType, o.Access = t.dtype, inductor.Strided
			}
			operands = append(operands, o)
		}
		k.Unroll = pointwiseUnroll
		geo, inners, ok := planPointwise(&k, m.Res.shape, strides, 1, operands, lts)
		if !ok || geo != nil || len(inners) > 0 || len(k.Extra) > 0 {
			left = append(left, i)
			continue
		}
		combo.Members = append(combo.Members, k)
		live = append(live, m)
		paramBytes += 8 * (4 + len(m.Args)) // n, the result, aligned, end, and each operand
	}
	if paramBytes > maxKernelParamBytes || len(live) < 2 {
		left = left[:0]
		for i := range ms {
			left = append(left, i)
		}
		return left
	}
	g := live[0].Res.st.gpu.g
	args := q.Args(g)
	defer q.Release(g, args)
	var uses []*Array
	end := 0
	for i, m := range live {
		k := &combo.Members[i]
		n := m.Res.Numel()
		args.I64(int64(n))
		tensors := tensorsOf(m.Args)
		for _, t := range tensors {
			args.Ptr(t.DevicePtr())
		}
		args.Ptr(m.Res.DevicePtr())
		for j, v := range m.Args {
			if s, ok := v.(ir.Scalar); ok {
				addKind(args, m.Kinds[j], s.Value)
			}
		}
		args.I32(1) // aligned
		tile := k.TileElems(pointwiseBlock)
		end += (n + tile - 1) / tile
		args.I64(int64(end))
		uses = append(uses, m.Res)
		uses = append(uses, tensors...)
	}
	grid := end
	stats.ComboLaunches.Add(1)
	KernelOrQueue(q, g, c, combo.Name(), combo.Source, func(fn *cuda.Function) { g.Launch("combo", fn, grid, pointwiseBlock, args) }, uses...)
	return left
}
