package program

import (
	"fmt"
	"hash/fnv"

	"gocompile/array"
	"gocompile/fuse"
	"gocompile/inductor"
	"gocompile/ir"
)

// A fused pointwise region, or a horizontal group of them
// (fuse.Horizontal), runs as one pass over its iteration space that reads
// each input once and writes every member's value: on the CPU one block
// loop running each member's program per chunk, on a GPU one kernel with
// an output per member.

type groupStep struct {
	r      *fuse.Region
	inputs []fuse.Input
	kinds  []ir.Kind
	blks   []*ir.Block
	kernel inductor.PointwiseKernel
	reads  [][]bool // per member, per input: whether its expression reads it
	// combo is set for a combo (fuse.Region.Combo): members of different
	// shapes, each run over its own inputs, on a GPU as one
	// inductor.ComboKernel launch.
	combo []comboMember
	cache *array.Artifacts // where its GPU kernels are kept (nil: the process-wide cache)
	tune  bool             // MaxAutotune: time launch shapes
}

func newGroupStep(r *fuse.Region) (*groupStep, error) {
	s := &groupStep{r: r}
	var exprs []*ir.Expr
	s.inputs, exprs = r.GroupExprs()
	for _, in := range s.inputs {
		s.kinds = append(s.kinds, in.Kind)
	}
	members := r.Members()
	for i := range members {
		s.reads = append(s.reads, inputsRead(exprs[i], len(s.inputs)))
	}
	if r.Combo() { // each member runs over its own inputs
		if err := s.newCombo(); err != nil {
			return nil, err
		}
		return s, nil
	}
	h := fnv.New64a()
	for i, m := range members {
		blk, err := compileFused(exprs[i], s.kinds, m.Compute)
		if err != nil {
			return nil, fmt.Errorf("region %v: %w", m, err)
		}
		s.blks = append(s.blks, blk)
		fmt.Fprintln(h, exprs[i])
		if i > 0 {
			s.kernel.Extra = append(s.kernel.Extra, inductor.ExtraOutput{Expr: exprs[i], Compute: m.Compute, Out: m.Root.DType})
		}
	}
	lead := members[0]
	s.kernel.Expr, s.kernel.Compute, s.kernel.Out = exprs[0], lead.Compute, lead.Root.DType
	s.kernel.Label = fmt.Sprintf("fused%d_%016x", len(members), h.Sum64())
	return s, nil
}

// comboMember is one member of a combo: the inputs (of the group's) it
// reads, their kinds, its CPU program and its kernel.
type comboMember struct {
	inputs []int
	kinds  []ir.Kind
	blk    *ir.Block
	kernel inductor.PointwiseKernel
}

// newCombo compiles each member of a combo over its own inputs.
func (s *groupStep) newCombo() error {
	index := map[fuse.Input]int{}
	for i, in := range s.inputs {
		index[in] = i
	}
	for _, m := range s.r.Members() {
		var c comboMember
		for _, in := range m.Inputs {
			c.inputs = append(c.inputs, index[in])
			c.kinds = append(c.kinds, in.Kind)
		}
		var err error
		if c.blk, err = compileFused(m.Expr, c.kinds, m.Compute); err != nil {
			return fmt.Errorf("region %v: %w", m, err)
		}
		h := fnv.New64a()
		fmt.Fprintln(h, m.Expr)
		c.kernel = inductor.PointwiseKernel{Expr: m.Expr, Compute: m.Compute, Out: m.Root.DType, Label: fmt.Sprintf("fused_%016x", h.Sum64())}
		s.combo = append(s.combo, c)
	}
	return nil
}

// runCombo runs a combo's members, each over its own inputs: on a GPU as
// one launch where every member is a dense kernel, else one by one.
func (s *groupStep) runCombo(args []*array.Array, dst func(m int, dev ir.Device, dt ir.DType, shape []int) *array.Array, q *array.LaunchQueue) []*array.Array {
	members := s.r.Members()
	dev := args[0].Device()
	res := make([]*array.Array, len(members))
	ms := make([]array.ComboMember, len(members))
	for m, mem := range members {
		c := &s.combo[m]
		margs := make([]*array.Array, len(c.inputs))
		for j, i := range c.inputs {
			margs[j] = args[i]
		}
		shape, vals := broadcastArgs(mem.Root.Op, margs)
		if res[m] = dst(m, dev, mem.Root.DType, shape); res[m] == nil {
			res[m] = array.New(dev, mem.Root.DType, shape)
		}
		if dev == array.CPU {
			array.RunBlocks([]*ir.Block{c.blk}, vals, nil, res[m:m+1])
			continue
		}
		ms[m] = array.ComboMember{Kernel: c.kernel, Args: vals, Kinds: c.kinds, Res: res[m]}
	}
	if dev != array.CPU {
		for _, m := range array.GPUComboIn(s.cache, q, ms) {
			k := ms[m].Kernel
			array.GPUKernelIn(s.cache, q, s.tune, &k, "fused "+members[m].Root.Op.Title, nil, ms[m].Args, ms[m].Kinds, ms[m].Res)
		}
	}
	return res
}

// run computes every member's value from the region's inputs; dst gives
// member m's result tensor (a planned buffer) or nil. On a GPU the launch
// is queued on q when q is not nil.
func (s *groupStep) run(args []*array.Array, dst func(m int, dev ir.Device, dt ir.DType, shape []int) *array.Array, q *array.LaunchQueue) []*array.Array {
	if s.combo != nil {
		return s.runCombo(args, dst, q)
	}
	members := s.r.Members()
	lead := members[0].Root
	shape, vals := broadcastArgs(lead.Op, args)
	dev := args[0].Device()
	res := make([]*array.Array, len(members))
	for m, mem := range members {
		if res[m] = dst(m, dev, mem.Root.DType, shape); res[m] == nil {
			res[m] = array.New(dev, mem.Root.DType, shape)
		}
	}
	if dev != array.CPU {
		k := s.kernel
		array.GPUKernelIn(s.cache, q, s.tune, &k, "fused "+lead.Op.Title, nil, vals, s.kinds, res[0], res[1:]...)
		return res
	}
	array.RunBlocks(s.blks, vals, nil, res)
	return res
}
