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
	reads  [][]bool         // per member, per input: whether its expression reads it
	cache  *array.Artifacts // where its GPU kernels are kept (nil: the process-wide cache)
	tune   bool             // MaxAutotune: time launch shapes
}

func newGroupStep(r *fuse.Region) (*groupStep, error) {
	s := &groupStep{r: r}
	var exprs []*ir.Expr
	s.inputs, exprs = r.GroupExprs()
	for _, in := range s.inputs {
		s.kinds = append(s.kinds, in.Kind)
	}
	h := fnv.New64a()
	members := r.Members()
	for i, m := range members {
		blk, err := compileFused(exprs[i], s.kinds, m.Compute)
		if err != nil {
			return nil, fmt.Errorf("region %v: %w", m, err)
		}
		s.blks = append(s.blks, blk)
		s.reads = append(s.reads, inputsRead(exprs[i], len(s.inputs)))
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

// run computes every member's value from the region's inputs; dst gives
// member m's result tensor (a planned buffer) or nil. On a GPU the launch
// is queued on q when q is not nil.
func (s *groupStep) run(args []*array.Array, dst func(m int, dev ir.Device, dt ir.DType, shape []int) *array.Array, q *array.LaunchQueue) []*array.Array {
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
