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
	// combo is set for a combo (fuse.Region.Combo): units of different
	// shapes, each run over its own inputs, on a GPU as one
	// inductor.ComboKernel launch.
	combo  []comboUnit
	unitOf []int               // a combo's unit of each member (nil: one unit)
	cache  *array.Artifacts    // where its GPU kernels are kept (nil: the process-wide cache)
	tune   bool                // MaxAutotune: time launch shapes
	memo   array.PointwiseMemo // the kernel's last launch plan
	title  string              // "fused " and the lead member's op title, for errors
	// unitMemos are a combo's units' plans, for units launched apart.
	unitMemos []array.PointwiseMemo
}

func newGroupStep(r *fuse.Region) (*groupStep, error) {
	s := &groupStep{r: r, title: "fused " + r.Members()[0].Root.Op.Title}
	var exprs []*ir.Expr
	s.inputs, exprs = r.GroupExprs()
	for _, in := range s.inputs {
		s.kinds = append(s.kinds, in.Kind)
	}
	members := r.Members()
	for i := range members {
		s.reads = append(s.reads, inputsRead(exprs[i], len(s.inputs)))
	}
	if r.Combo() { // each unit runs over its own inputs
		if err := s.newCombo(exprs); err != nil {
			return nil, err
		}
		return s, nil
	}
	var err error
	if s.blks, s.kernel, err = fusedOutputs(members, exprs, s.kinds); err != nil {
		return nil, err
	}
	return s, nil
}

// fusedOutputs compiles members' expressions (over operands of kinds)
// into a CPU program each and one kernel with an output per member: the
// first member's its value, the others' its Extra outputs.
func fusedOutputs(members []*fuse.Region, exprs []*ir.Expr, kinds []ir.Kind) ([]*ir.Block, inductor.PointwiseKernel, error) {
	var blks []*ir.Block
	var k inductor.PointwiseKernel
	h := fnv.New64a()
	for i, m := range members {
		blk, err := compileFused(exprs[i], kinds, m.Compute)
		if err != nil {
			return nil, k, fmt.Errorf("region %v: %w", m, err)
		}
		blks = append(blks, blk)
		fmt.Fprintln(h, exprs[i])
		if i > 0 {
			k.Extra = append(k.Extra, inductor.ExtraOutput{Expr: exprs[i], Compute: m.Compute, Out: m.Root.DType})
		}
	}
	k.Expr, k.Compute, k.Out = exprs[0], members[0].Compute, members[0].Root.DType
	k.Label = fmt.Sprintf("fused%d_%016x", len(members), h.Sum64())
	return blks, k, nil
}

// comboUnit is one unit of a combo (fuse.Region.SplitUnits): its members
// (from first to end, in the group), the inputs (of the group's) it reads
// and their kinds, its CPU programs and its kernel, a member's value each
// (the first the kernel's, the others its Extra outputs).
type comboUnit struct {
	first, end int
	inputs     []int
	kinds      []ir.Kind
	blks       []*ir.Block
	kernel     inductor.PointwiseKernel
	title      string // "fused " and the unit's first member's op title
}

// newCombo compiles each unit of a combo over its own inputs, from exprs,
// its members' expressions over the group's inputs.
func (s *groupStep) newCombo(exprs []*ir.Expr) error {
	members := s.r.Members()
	first := 0
	for _, unit := range s.r.SplitUnits() {
		c := comboUnit{first: first, end: first + len(unit), title: "fused " + members[first].Root.Op.Title}
		first = c.end
		for range unit {
			s.unitOf = append(s.unitOf, len(s.combo))
		}
		// The unit's inputs: those its members read, in the group's order.
		read := make([]bool, len(s.inputs))
		for m := c.first; m < c.end; m++ {
			for j, r := range s.reads[m] {
				read[j] = read[j] || r
			}
		}
		local := make([]*ir.Expr, len(s.inputs))
		for j, r := range read {
			if r {
				local[j] = ir.Arg(len(c.inputs))
				c.inputs = append(c.inputs, j)
				c.kinds = append(c.kinds, s.kinds[j])
			}
		}
		es := make([]*ir.Expr, 0, c.end-c.first)
		for m := c.first; m < c.end; m++ {
			es = append(es, ir.Substitute(exprs[m], local, nil))
		}
		var err error
		if c.blks, c.kernel, err = fusedOutputs(members[c.first:c.end], es, c.kinds); err != nil {
			return err
		}
		s.combo = append(s.combo, c)
	}
	s.unitMemos = make([]array.PointwiseMemo, len(s.combo))
	return nil
}

// runCombo runs a combo's units, each over its own inputs: on a GPU as
// one launch of the units that run as dense or N-d kernels (a few where
// the parameters need), the others (tiled) one by one.
func (s *groupStep) runCombo(args []*array.Array, dst func(m int, dev ir.Device, dt ir.DType, shape []int) *array.Array, q *array.LaunchQueue) []*array.Array {
	members := s.r.Members()
	dev := args[0].Device()
	res := make([]*array.Array, len(members))
	ms := make([]array.ComboMember, len(s.combo))
	for u := range s.combo {
		c := &s.combo[u]
		margs := make([]*array.Array, len(c.inputs))
		for j, i := range c.inputs {
			margs[j] = args[i]
		}
		shape, vals := broadcastArgs(members[c.first].Root.Op, margs)
		for m := c.first; m < c.end; m++ {
			if res[m] = dst(m, dev, members[m].Root.DType, shape); res[m] == nil {
				res[m] = array.New(dev, members[m].Root.DType, shape)
			}
		}
		if dev == array.CPU {
			array.RunBlocks(c.blks, vals, nil, res[c.first:c.end])
			continue
		}
		ms[u] = array.ComboMember{Kernel: c.kernel, Args: vals, Kinds: c.kinds, Res: res[c.first], Extra: res[c.first+1 : c.end]}
	}
	if dev != array.CPU {
		for _, u := range array.GPUComboIn(s.cache, q, ms) {
			k := ms[u].Kernel
			array.GPUKernelMemo(&s.unitMemos[u], s.cache, q, s.tune, &k, s.combo[u].title, nil, ms[u].Args, ms[u].Kinds, ms[u].Res, ms[u].Extra...)
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
		array.GPUKernelMemo(&s.memo, s.cache, q, s.tune, &k, s.title, nil, vals, s.kinds, res[0], res[1:]...)
		return res
	}
	array.RunBlocks(s.blks, vals, nil, res)
	return res
}
