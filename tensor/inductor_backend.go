package tensor

import (
	"fmt"
	"hash/fnv"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"gocompile/fuse"
	"gocompile/inductor"
	"gocompile/ir"
	"gocompile/kcache"
)

// The "inductor" backend runs a graph as fusion regions (package fuse):
// each fused pointwise region is one kernel that reads the region's inputs
// once and writes its result once, with no intermediate tensors: on the
// CPU a block program of the region's expression, on a GPU a CUDA kernel
// generated from it. Other nodes run with the eager kernels.

func init() {
	RegisterBackend("inductor", BackendFunc(newInductorProgram))
}

type inductorProgram struct {
	g      *ir.Graph
	index  map[*ir.Node]int
	steps  []inductorStep
	plan   *fuse.Plan
	arenas arenaPool
	// eager is set once a generated kernel failed to build: the graph then
	// runs with the eager kernels.
	eager    atomic.Pointer[eagerProgram]
	fellBack sync.Once
}

type inductorStep struct {
	r     *fuse.Region
	root  int
	args  []int     // node indices of a fused region's inputs
	kinds []ir.Kind // the kind each input is loaded in
	blk   *ir.Block // the CPU program of a fused region
	label string    // a fused region's kernel label
	row   *rowStep  // a row region
	slot  int       // the buffer of the plan the step writes, or -1
	// A horizontal group: its runner, and per member the node index and
	// planned buffer (or -1) of its value.
	group      *groupStep
	roots      []int
	groupSlots []int
}

func newInductorProgram(g *ir.Graph) (Program, error) {
	regions, err := partition(g)
	if err != nil {
		return nil, err
	}
	p := &inductorProgram{g: g, index: make(map[*ir.Node]int, len(g.Nodes))}
	for i, n := range g.Nodes {
		p.index[n] = i
	}
	for _, r := range regions {
		s := inductorStep{r: r, root: p.index[r.Root]}
		if r.Group != nil {
			if s.group, err = newGroupStep(r); err != nil {
				return nil, err
			}
			for _, in := range s.group.inputs {
				s.args = append(s.args, p.index[in.Node])
			}
			for _, m := range r.Group {
				s.roots = append(s.roots, p.index[m.Root])
			}
		} else if r.Row != nil {
			for _, in := range r.Inputs {
				s.args = append(s.args, p.index[in.Node])
			}
			if s.row, err = newRowStep(r, compileFused); err != nil {
				return nil, err
			}
		} else if r.Fused() && len(r.Nodes) > 1 {
			for _, in := range r.Inputs {
				s.args = append(s.args, p.index[in.Node])
				s.kinds = append(s.kinds, in.Kind)
			}
			if s.blk, err = compileFused(r.Expr, s.kinds, r.Compute); err != nil {
				return nil, fmt.Errorf("region %v: %w", r, err)
			}
			h := fnv.New64a()
			fmt.Fprint(h, r.Expr.String())
			s.label = fmt.Sprintf("fused%d_%x", len(r.Nodes), h.Sum64()>>32)
		}
		p.steps = append(p.steps, s)
	}
	p.plan = fuse.PlanBuffers(g, regions, plannable)
	p.arenas.plan = p.plan
	for i, s := range p.steps {
		p.steps[i].slot = -1
		if slot, ok := p.plan.Slot[s.r.Root]; ok {
			p.steps[i].slot = slot
		}
		for _, m := range s.r.Members() {
			slot, ok := p.plan.Slot[m.Root]
			if !ok {
				slot = -1
			}
			p.steps[i].groupSlots = append(p.steps[i].groupSlots, slot)
		}
	}
	if logOn("fusion") {
		slog.Info("gocompile: buffer plan", "regions", len(regions), "plan", p.plan.String())
		for _, s := range p.steps {
			switch {
			case s.group != nil:
				slog.Info("gocompile: fusion", "region", s.r.String(), "nodes", s.r.Describe(), "kernel", "horizontal")
			case s.row != nil:
				slog.Info("gocompile: fusion", "region", s.r.String(), "nodes", s.r.Describe(), "kernel", "row")
			case s.blk != nil:
				slog.Info("gocompile: fusion", "region", s.r.String(), "nodes", s.r.Describe(), "expr", s.r.Expr.String())
			}
		}
	}
	return p, nil
}

// compileFused compiles a fused expression for the CPU, as the fused
// pointwise regions are.
func compileFused(e *ir.Expr, kinds []ir.Kind, compute ir.Kind) (*ir.Block, error) {
	return ir.CompileBlock(e, kinds, compute, ir.FastMath())
}

func (p *inductorProgram) Run(inputs []*Tensor) (outs []*Tensor) {
	if ep := p.eager.Load(); ep != nil {
		return ep.Run(inputs)
	}
	defer func() {
		if e := recover(); e != nil {
			ke, ok := e.(*kernelError)
			if !ok {
				panic(e)
			}
			p.fellBack.Do(func() {
				slog.Warn("gocompile: a generated kernel failed to build; running this graph with the eager kernels",
					"kernel", ke.name, "err", ke.err)
				p.eager.Store(newEagerProgram(p.g))
			})
			outs = p.eager.Load().Run(inputs)
		}
	}()
	vals := make([]*Tensor, len(p.g.Nodes))
	for i, n := range p.g.Nodes {
		switch n.Kind {
		case ir.InputNode:
			vals[i] = inputs[n.Index]
		case ir.ConstNode:
			vals[i] = n.Value.(*Tensor)
		}
	}
	a := p.arenas.get()
	defer p.arenas.put(a)
	for _, s := range p.steps {
		n := s.r.Root
		if s.group != nil {
			args := make([]*Tensor, len(s.args))
			for j, a := range s.args {
				args[j] = vals[a]
			}
			args = viewInputs(s.group.inputs, args)
			res := s.group.run(args, func(m int, dev Device, shape []int) *Tensor {
				if slot := s.groupSlots[m]; slot >= 0 {
					return a.tensor(slot, dev, s.r.Group[m].Root.DType, shape)
				}
				return nil
			})
			for m, t := range res {
				vals[s.roots[m]] = t
			}
			continue
		}
		if s.row != nil {
			args := make([]*Tensor, len(s.args))
			for j, a := range s.args {
				args[j] = vals[a]
			}
			vals[s.root] = s.row.run(args, p.dst(a, s))
			continue
		}
		if s.blk == nil { // a node of its own: the eager kernel
			vals[s.root] = runNode(n, n.Attrs, nodeArgs(n, vals, p.index))
			continue
		}
		ins := make([]*Tensor, len(s.args))
		for j, a := range s.args {
			ins[j] = vals[a]
		}
		ins = viewInputs(s.r.Inputs, ins)
		args := make([]ir.Value, len(ins))
		for j, t := range ins {
			args[j] = t
		}
		vals[s.root] = p.runFused(s, args, p.dst(a, s))
	}
	out := make([]*Tensor, len(p.g.Outputs))
	for i, n := range p.g.Outputs {
		out[i] = vals[p.index[n]]
	}
	return out
}

// dst returns, for a step whose value the plan puts in a buffer, a
// function that gives that buffer as a tensor of the value's type and the
// shape of the call; nil for other steps.
func (p *inductorProgram) dst(a *arena, s inductorStep) func(dev Device, shape []int) *Tensor {
	if s.slot < 0 {
		return nil
	}
	return func(dev Device, shape []int) *Tensor { return a.tensor(s.slot, dev, s.r.Root.DType, shape) }
}

// runFused runs a fused region over its inputs, into dst's tensor when dst
// is not nil.
func (p *inductorProgram) runFused(s inductorStep, args []ir.Value, dst func(Device, []int) *Tensor) *Tensor {
	n := s.r.Root
	dev := args[0].(*Tensor).st.dev
	checkDevices(n.Op, args)
	// The root's shape is its inputs' broadcast shape: with dynamic dims
	// it differs from call to call.
	var shapes [][]int
	for _, t := range tensorsOf(args) {
		shapes = append(shapes, t.shape)
	}
	shape, err := ir.Broadcast(n.Op.Title, shapes...)
	check(err, n.Op.Title, tensorsOf(args)...)
	var res *Tensor
	switch {
	case dst != nil:
		res = dst(dev, shape)
	case dev != CPU:
		res = newGPUTensor(dev, n.DType, shape)
	default:
		res = newTensor(n.DType, shape)
	}
	if dev != CPU {
		k := &inductor.PointwiseKernel{Expr: s.r.Expr, Label: s.label, Compute: s.r.Compute, Out: n.DType}
		return gpuKernel(k, "fused "+n.Op.Title, nil, args, s.kinds, res)
	}
	return runBlockInto(s.blk, args, nil, res)
}

// plannable reports whether the backend writes the region's value into a
// buffer it is given: generated kernels do; eager ops allocate their own.
func plannable(r *fuse.Region) bool {
	return r.Group != nil || r.Row != nil || (r.Fused() && len(r.Nodes) > 1)
}

// artifactCache is where compiled artifacts are kept: the fusion layouts
// of compiled graphs and the GPU kernels (compileCached). Tests point it
// elsewhere.
var artifactCache = kcache.Default

// layoutVersion versions the fusion decisions a cached layout records:
// bump it when Partition or Horizontal would decide differently.
const layoutVersion = "1"

// partition splits g into regions and groups them, or rebuilds the
// regions a previous compile of the same graph (in this process or an
// earlier one) recorded in the program cache, skipping the search.
func partition(g *ir.Graph) ([]*fuse.Region, error) {
	var shapes strings.Builder
	for _, n := range g.Nodes {
		fmt.Fprintln(&shapes, n.Shape)
	}
	key := kcache.ProgramSpec{Kind: "gocompile/fuse.Layout", Graph: g.Key(), Guards: []string{shapes.String()},
		Version: layoutVersion}.Key()
	c := artifactCache()
	if e, ok := c.Get(key); ok && e.Program != nil {
		var l fuse.Layout
		if _, err := l.UnmarshalMsg(e.Program.Payload); err == nil {
			if regions, err := l.Rebuild(g); err == nil {
				return regions, nil
			} else if logOn("cache") {
				slog.Info("gocompile: cached fusion layout does not fit; partitioning again", "err", err)
			}
		}
	}
	regions, err := fuse.Partition(g)
	if err != nil {
		return nil, err
	}
	regions = fuse.Horizontal(regions)
	if b, err := fuse.NewLayout(g, regions).MarshalMsg(nil); err == nil {
		c.Put(key, kcache.Entry{Program: &kcache.Program{Kind: "gocompile/fuse.Layout", Payload: b}})
	}
	return regions, nil
}

// viewInputs gives the tensors a fused kernel reads for its inputs: each
// input a region reads through fused views (fuse.Input.Views) as that
// view of itself, broadcast to the shape the views start from (the shape
// of the fused producer, which all inputs read through one chain
// broadcast to). Views only re-stride, so nothing is copied.
func viewInputs(inputs []fuse.Input, ts []*Tensor) []*Tensor {
	var out []*Tensor
	bases := map[*fuse.ViewChain][]int{}
	for i, in := range inputs {
		if in.Views == nil {
			continue
		}
		if out == nil {
			out = append([]*Tensor(nil), ts...)
		}
		base, ok := bases[in.Views]
		if !ok {
			var shapes [][]int
			for j, other := range inputs {
				if other.Views == in.Views {
					shapes = append(shapes, ts[j].shape)
				}
			}
			var err error
			base, err = ir.Broadcast(in.Views.Views[0].Op.Title, shapes...)
			check(err, in.Views.Views[0].Op.Title, ts[i])
			bases[in.Views] = base
		}
		t := ts[i]
		l := ir.Layout{Shape: base, Strides: ir.BroadcastStrides(t.shape, t.strides, base), Offset: t.offset}
		for _, v := range in.Views.Views {
			a := v.Attrs
			var err error
			l, err = v.Op.View(l, &a)
			check(err, v.Op.Title, t)
		}
		out[i] = t.withLayout(l)
	}
	if out == nil {
		return ts
	}
	return out
}
