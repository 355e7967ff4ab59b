package array

import (
	"slices"

	"gocompile/cuda"
	"gocompile/inductor"
	"gocompile/internal/stats"
	"gocompile/ir"
)

// ComboMember is one member of a combo launch (GPUComboIn): a fused
// pointwise kernel over its own operands into its own result, and its
// Extra outputs' (inductor.PointwiseKernel.Extra).
type ComboMember struct {
	Kernel inductor.PointwiseKernel // Expr, Label, Compute, Out and Extra set
	Args   []ir.Value
	Kinds  []ir.Kind
	Res    *Array
	Extra  []*Array
	// geo and blocks are an N-d member's geometry parameter and block
	// count (comboPlan); nil for a dense member, whose broadcast operands'
	// inner sizes are inners.
	geo    []byte
	blocks int
	inners []int
}

// GPUComboIn runs the members as launches of inductor.ComboKernels, each
// member over a range of blocks, as few launches as the kernel parameters
// allow (cuda.Device.MaxKernelParamBytes), with the kernels kept in cache c and the
// launches queued on q when q is not nil. It returns the members it left
// out, for the caller to run one by one: those whose layouts need a
// tiled kernel (a transposed operand) or more dims than a kernel indexes,
// and any that a launch would hold alone. Members read element for
// element, or broadcast along their rows or columns, run dense; others
// (strided operands, views) as N-d kernels over their own blocks.
func GPUComboIn(c *Artifacts, q *LaunchQueue, ms []ComboMember) (left []int) {
	var batch []int // members of the next launch
	paramBytes, limit := 0, 4096
	for i := range ms {
		if ms[i].Res.Numel() > 0 {
			limit = ms[i].Res.st.gpu.g.dev.MaxKernelParamBytes()
			break
		}
	}
	flush := func() {
		if len(batch) == 1 {
			left = append(left, batch[0])
		} else if len(batch) > 1 {
			launchCombo(c, q, ms, batch)
		}
		batch, paramBytes = batch[:0], 0
	}
	for i := range ms {
		m := &ms[i]
		if m.Res.Numel() == 0 {
			continue
		}
		if !comboPlan(m) {
			left = append(left, i)
			continue
		}
		// n, the result and the extra results, each operand, aligned and
		// the inner sizes or the geometry, end.
		bytes := 8*(4+len(m.Extra)+len(m.Args)+len(m.inners)) + len(m.geo)
		if paramBytes+bytes > limit {
			flush()
		}
		batch = append(batch, i)
		paramBytes += bytes
	}
	flush()
	slices.Sort(left)
	return left
}

// comboPlan reports whether member m runs in a combo, setting its
// kernel's operands and layout: as a dense kernel (its operands element
// for element or broadcast, m.inners their inner sizes, aligned for
// vector loads) or an N-d one (m.geo set), not a tiled one.
func comboPlan(m *ComboMember) bool {
	k := &m.Kernel
	tensors := tensorsOf(m.Args)
	var strides [][]int
	var lts []layoutTensor
	outs := append([]*Array{m.Res}, m.Extra...)
	for _, x := range outs {
		if !ir.SameShape(x.shape, m.Res.shape) {
			return false
		}
		strides = append(strides, x.strides)
		lts = append(lts, layoutTensor{uintptr(x.DevicePtr()), x.dtype.Size()})
	}
	for _, t := range tensors {
		strides = append(strides, ir.BroadcastStrides(t.shape, t.strides, m.Res.shape))
		lts = append(lts, layoutTensor{uintptr(t.DevicePtr()), t.dtype.Size()})
	}
	k.Operands = nil
	for i, v := range m.Args {
		o := inductor.Operand{Kind: m.Kinds[i], Access: inductor.ScalarArg}
		if t, ok := v.(*Array); ok {
			o.DType, o.Access = t.dtype, inductor.Strided
		}
		k.Operands = append(k.Operands, o)
	}
	k.Unroll = pointwiseUnroll
	geo, inners, ok := planPointwise(k, m.Res.shape, strides, len(outs), k.Operands, lts)
	m.geo, m.blocks, m.inners = nil, 0, inners
	switch {
	case !ok || k.Tile:
		return false
	case geo != nil:
		m.geo = k.Bytes(geo)
		m.blocks, _ = k.Launch(geo, pointwiseBlock)
		return m.blocks > 0
	}
	return true
}

// launchCombo launches the members of ms at indices batch as one combo.
func launchCombo(c *Artifacts, q *LaunchQueue, ms []ComboMember, batch []int) {
	combo := &inductor.ComboKernel{}
	for _, i := range batch {
		combo.Members = append(combo.Members, ms[i].Kernel)
	}
	g := ms[batch[0]].Res.st.gpu.g
	args := q.Args(g)
	defer q.Release(g, args)
	var uses []*Array
	end, elems := 0, 0
	for j, i := range batch {
		m := &ms[i]
		k := &combo.Members[j]
		n := m.Res.Numel()
		elems += n
		args.I64(int64(n))
		tensors := tensorsOf(m.Args)
		for _, t := range tensors {
			args.Ptr(t.DevicePtr())
		}
		args.Ptr(m.Res.DevicePtr())
		for _, x := range m.Extra {
			args.Ptr(x.DevicePtr())
		}
		for j, v := range m.Args {
			if s, ok := v.(ir.Scalar); ok {
				addKind(args, m.Kinds[j], s.Value)
			}
		}
		addLayoutArgs(args, k, m.geo, m.inners)
		if m.geo != nil {
			end += m.blocks
		} else {
			tile := k.TileElems(pointwiseBlock)
			end += (n + tile - 1) / tile
		}
		args.I64(int64(end))
		uses = append(uses, m.Res)
		uses = append(uses, m.Extra...)
		uses = append(uses, tensors...)
	}
	grid := end
	stats.ComboLaunches.Add(1)
	KernelOrQueue(q, g, c, combo.Name(), combo.Source, func(fn *cuda.Function) { g.launchSmall("combo", fn, grid, pointwiseBlock, args, elems) }, uses...)
}

// MaxKernelParamBytes is the most parameter memory one kernel launch may
// take on GPU d (cuda.Device.MaxKernelParamBytes), which bounds how many
// members a combo launch holds; 0 where d is no GPU this process can use.
func MaxKernelParamBytes(d Device) int {
	g, err := gpuFor(d)
	if err != nil || g == nil {
		return 0
	}
	return g.dev.MaxKernelParamBytes()
}
