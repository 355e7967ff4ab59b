package tensor

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"

	"gocompile/fuse"
	"gocompile/ir"
	"gocompile/kcache"
)

// The "inductor" backend runs a graph as fusion regions (package fuse),
// each one kernel that reads its inputs once and writes its values once:
// pointwise regions and horizontal groups (inductor_group.go) and row
// regions (inductor_row.go), on the CPU as block programs, on a GPU as
// generated CUDA kernels. Other nodes run with the eager kernels. Values
// between regions live in buffers reused by liveness (arena.go); the
// regions of a graph are cached with its kernels (partition).

func init() {
	RegisterBackend("inductor", inductorBackend{})
}

// inductorBackend is the "inductor" backend.
type inductorBackend struct{}

func (inductorBackend) Compile(g *ir.Graph) (Program, error) { return newInductorProgram(g) }

func (inductorBackend) compileWith(g *ir.Graph, cfg backendConfig) (Program, error) {
	return newInductorProgramWith(g, cfg)
}

type inductorProgram struct {
	g      *ir.Graph
	cfg    backendConfig
	index  map[*ir.Node]int
	steps  []inductorStep
	plan   *fuse.Plan
	arenas arenaPool
	// eager is set once a generated kernel failed to build: the graph then
	// runs with the eager kernels.
	eager    atomic.Pointer[eagerProgram]
	fellBack sync.Once
	graphs   graphSet // ReduceOverhead: captured CUDA graphs (cudagraphs.go)
	// firstGPURun is set by the first run on a GPU, which queues its
	// launches so that its kernels compile in parallel (launchqueue.go).
	firstGPURun atomic.Bool
}

type inductorStep struct {
	r    *fuse.Region
	args []int // node indices of the values a generated kernel reads
	// Per member of the region (one, or a horizontal group's): the node
	// index of its value and its planned buffer (-1: none).
	roots, slots []int
	// How the step runs: a pointwise region or horizontal group as one
	// kernel, a row region, or (neither) a node with its eager kernel.
	group *groupStep
	row   *rowStep
	// epilogue is the fused region a matrix product's kernel may apply
	// before its store (inductor_gemm.go).
	epilogue *gemmEpilogue
	tuned    *sync.Map // a product's step: the GEMM launch shape MaxAutotune chose, per shape
	// dependent marks a product whose kernel may start before the
	// kernel ahead of it finishes (cuda.Stream.LaunchDependent): its
	// weight is an input or constant, which no kernel of the program
	// writes, and a kernel of the program runs before it.
	dependent bool
}

func newInductorProgram(g *ir.Graph) (Program, error) {
	return newInductorProgramWith(g, backendConfig{})
}

func newInductorProgramWith(g *ir.Graph, cfg backendConfig) (Program, error) {
	regions, err := partition(g, cfg.cache)
	if err != nil {
		return nil, err
	}
	p := &inductorProgram{g: g, cfg: cfg, index: make(map[*ir.Node]int, len(g.Nodes))}
	for i, n := range g.Nodes {
		p.index[n] = i
	}
	p.plan = fuse.PlanBuffers(g, regions, plannable)
	p.arenas.plan = p.plan
	for _, r := range regions {
		s := inductorStep{r: r}
		if r.Root.Op == ir.OpMatMul {
			s.tuned = new(sync.Map)
		}
		var inputs []fuse.Input
		switch {
		case r.Row != nil:
			if s.row, err = newRowStep(r, compileFused); err != nil {
				return nil, err
			}
			s.row.cache, s.row.tune = cfg.cache, cfg.mode == MaxAutotune
			inputs = r.Inputs
		case plannable(r): // a group, or a fused pointwise region of several nodes
			if s.group, err = newGroupStep(r); err != nil {
				return nil, err
			}
			s.group.cache, s.group.tune = cfg.cache, cfg.mode == MaxAutotune
			inputs = s.group.inputs
		}
		for _, in := range inputs {
			s.args = append(s.args, p.index[in.Node])
		}
		for _, m := range r.Members() {
			slot, ok := p.plan.Slot[m.Root]
			if !ok {
				slot = -1
			}
			s.roots = append(s.roots, p.index[m.Root])
			s.slots = append(s.slots, slot)
		}
		p.steps = append(p.steps, s)
	}
	p.findEpilogues()
	p.findDependentProducts()
	if logOn("fusion") {
		plan, fused := p.fusionPlan()
		logText("gocompile: fusion", "plan", plan, cfg.cache.logArgs("regions", len(regions), "fused", fused)...)
	}
	return p, nil
}

// fusionPlan describes the fused regions, a line each with their nodes,
// and the buffer plan, for GOCOMPILE_LOGS=fusion; fused counts the
// regions.
func (p *inductorProgram) fusionPlan() (plan string, fused int) {
	var b strings.Builder
	tw := tabwriter.NewWriter(&b, 0, 8, 2, ' ', 0)
	for _, s := range p.steps {
		if s.group != nil || s.row != nil {
			fmt.Fprintf(tw, "%s\t%s\n", s.r, s.r.Describe())
			fused++
		}
	}
	tw.Flush()
	fmt.Fprintf(&b, "buffer plan: %s", p.plan)
	return b.String(), fused
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
				logWarn("gocompile: a generated kernel failed to build; running this graph with the eager kernels",
					p.cfg.cache.logArgs("kernel", ke.name, "err", ke.err)...)
				p.eager.Store(newEagerProgram(p.g))
			})
			outs = p.eager.Load().Run(inputs)
		}
	}()
	if p.cfg.mode == ReduceOverhead {
		if outs, ok := p.runGraph(inputs); ok {
			return outs
		}
	}
	a := p.arenas.get()
	defer p.arenas.put(a)
	var q *launchQueue
	if len(inputs) > 0 && inputs[0] != nil && inputs[0].st.gpu != nil && !p.firstGPURun.Load() && p.firstGPURun.CompareAndSwap(false, true) {
		// The first run on a GPU compiles its kernels in parallel.
		q = newLaunchQueue()
	}
	return p.runWith(inputs, a, q)
}

// runWith runs the program's steps with arena a.
func (p *inductorProgram) runWith(inputs []*Tensor, a *arena, q *launchQueue) []*Tensor {
	vals := bindLeaves(p.g, inputs)
	for i := range p.steps {
		s := &p.steps[i]
		if vals[s.roots[0]] != nil {
			continue // an epilogue the product's kernel applied
		}
		if s.group == nil && s.row == nil { // a node of its own: the eager kernel
			n := s.r.Root
			if n.Op == ir.OpMatMul {
				p.runMatMul(s, vals, a, q)
				continue
			}
			q.drain() // the eager kernel launches now
			vals[s.roots[0]] = runNode(n, n.Attrs, nodeArgs(n, vals, p.index))
			continue
		}
		args := make([]*Tensor, len(s.args))
		for j, a := range s.args {
			args[j] = vals[a]
		}
		// dst gives member m's planned buffer, or nil.
		dst := func(m int, dev Device, dt DType, shape []int) *Tensor {
			if slot := s.slots[m]; slot >= 0 {
				return a.tensor(slot, dev, dt, shape)
			}
			return nil
		}
		if s.row != nil {
			vals[s.roots[0]] = s.row.run(args, func(dev Device, shape []int) *Tensor {
				return dst(0, dev, s.r.Root.DType, shape)
			}, q)
			continue
		}
		res := s.group.run(viewInputs(s.group.inputs, args), dst, q)
		for m, t := range res {
			vals[s.roots[m]] = t
		}
	}
	q.drain()
	return outputsOf(p.g, p.index, vals)
}

// plannable reports whether the backend writes the region's value into a
// buffer it is given: generated kernels do; eager ops allocate their own.
func plannable(r *fuse.Region) bool {
	return r.Group != nil || r.Row != nil || (r.Fused() && len(r.Nodes) > 1)
}

// artifactCache is where compiled artifacts are kept: the fusion layouts
// of compiled graphs and the GPU kernels (compileCached). It is opened in
// kcache's default directory, as kcache.Default is, but logs through
// SetLogger's logger. Tests point it elsewhere.
var artifactCache = sync.OnceValue(func() *kcache.Cache { return kcache.Open("", kcache.WithLogger(cacheLogger)) })

// layoutVersion versions the fusion decisions a cached layout records:
// bump it when Partition or Horizontal would decide differently.
const layoutVersion = "1"

// partition splits g into regions and groups them, or rebuilds the
// regions a previous compile of the same graph (in this process or an
// earlier one) recorded in the program cache, skipping the search.
func partition(g *ir.Graph, a *artifacts) ([]*fuse.Region, error) {
	c := a.kcache()
	var shapes strings.Builder
	for _, n := range g.Nodes {
		fmt.Fprintln(&shapes, n.Shape)
	}
	key := kcache.ProgramSpec{Kind: "gocompile/fuse.Layout", Graph: g.Key(), Guards: []string{shapes.String()},
		Version: layoutVersion}.Key()
	if e, ok := c.Get(key); ok && e.Program != nil {
		var l fuse.Layout
		if _, err := l.UnmarshalMsg(e.Program.Payload); err == nil {
			if regions, err := l.Rebuild(g); err == nil {
				return regions, nil
			} else if logOn("cache") {
				logInfo("gocompile: cached fusion layout does not fit; partitioning again", "err", err)
			}
		}
	}
	regions, err := fuse.Partition(g)
	if err != nil {
		return nil, err
	}
	partitions.Add(1)
	regions = fuse.Horizontal(regions)
	if b, err := fuse.NewLayout(g, regions).MarshalMsg(nil); err == nil {
		c.Put(key, a.label(kcache.Entry{Program: &kcache.Program{Kind: "gocompile/fuse.Layout", Payload: b}}, ""))
	}
	return regions, nil
}

// partitions counts the graphs this process partitioned (not rebuilt from
// a cached layout).
var partitions atomic.Int64

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
