package program

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"text/tabwriter"

	"gocompile/array"
	"gocompile/fuse"
	"gocompile/inductor"
	"gocompile/internal/logs"
	"gocompile/internal/stats"
	"gocompile/ir"
	"gocompile/kcache"
)

// Config is what a program is compiled for beyond its graph.
type Config struct {
	// Artifacts keeps the graph's fusion layout, its generated kernels and
	// autotuning choices, and names the function they are for (nil: the
	// process-wide artifact cache).
	Artifacts *array.Artifacts
	// CUDAGraphs captures each input layout's launches on a GPU into a
	// CUDA graph and replays it (torch.compile's reduce-overhead mode).
	CUDAGraphs bool
	// Autotune times candidate launch shapes and library algorithms on the
	// device and keeps the fastest (max-autotune).
	Autotune bool
	// GemmConfig picks the launch shape of generated GEMM kernels from m,
	// n, k, the SM count, the architecture (major*10+minor) and whether
	// the operands allow vector loads (nil: inductor.ChooseGemmConfig).
	// A choice that does not fit the product is replaced by the default.
	GemmConfig func(m, n, k, sms, arch int, vec bool) inductor.GemmConfig
}

// Compile partitions g into fusion regions and returns the program that
// runs them.
func Compile(g *ir.Graph, cfg Config) (array.Program, error) {
	p, err := newInductorProgramWith(g, cfg)
	if err != nil {
		return nil, err // not a nil *inductorProgram in a non-nil interface
	}
	return p, nil
}

type inductorProgram struct {
	g      *ir.Graph
	cfg    Config
	index  map[*ir.Node]int
	steps  []inductorStep
	plan   *fuse.Plan
	arenas array.ArenaPool
	// eager is set once a generated kernel failed to build: the graph then
	// runs with the eager kernels.
	eager    atomic.Pointer[array.EagerProgram]
	fellBack sync.Once
	graphs   array.GraphSet // Config.CUDAGraphs: each input layout's captured CUDA graph
	cats     []catStore     // Cats whose parts' kernels write them in place
	// firstGPURun is set by the first run on a GPU, which queues its
	// launches so that its kernels compile in parallel (array.LaunchQueue).
	firstGPURun atomic.Bool
	// ran is set once a run has completed: its kernels are built. Until
	// then writes copy their storage instead of updating it in place
	// (and no kernel stores into one), so that a run a kernel build
	// failure stops has changed nothing the eager fallback reads.
	ran atomic.Bool
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
	// before its store (gemm.go).
	epilogue *gemmEpilogue
	// prologue is the row step before a matrix product whose kernel may
	// compute the product's first operand (gemm.go); deferred marks that
	// row step, which then runs only where the kernel cannot.
	prologue *gemmPrologue
	deferred bool
	tuned    *sync.Map // a product's step: the GEMM launch shape MaxAutotune chose, per shape
	// stores gives, per member, the node index of the storage the member's
	// value overwrites whole (an in-place write of it, its only use), or
	// -1: the member's kernel then stores into that storage directly,
	// where storeInto allows it, and the write copies nothing.
	stores []int
	writes []*ir.Node // per member with a store, the write
	// dependent marks a product whose kernel may start before the
	// kernel ahead of it finishes (cuda.Stream.LaunchDependent): its
	// weight is an input or constant (node bBase), and a kernel of the
	// program runs before it. readyA marks a dependent product whose
	// first operand is an input or constant too (node aBase): its kernel
	// reads A ahead of the wait as well, and waits only before its
	// stores (inductor.GemmKernel.ReadyA). See findDependentProducts.
	dependent, readyA bool
	aBase, bBase      int
	// catOut gives, per member, the part of an in-place Cat it writes
	// (cat.go), or is nil; cat is a Cat step's catStore, plus one (0:
	// none).
	catOut []catRef
	cat    int
}

func newInductorProgramWith(g *ir.Graph, cfg Config) (*inductorProgram, error) {
	regions, err := partition(g, cfg.Artifacts)
	if err != nil {
		return nil, err
	}
	p := &inductorProgram{g: g, cfg: cfg, index: array.NodeIndex(g)}
	p.plan = fuse.PlanBuffers(g, regions, Plannable)
	p.arenas.Plan = p.plan
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
			s.row.cache, s.row.tune = cfg.Artifacts, cfg.Autotune
			inputs = r.Inputs
		case Plannable(r): // a group, or a fused pointwise region of several nodes
			if s.group, err = newGroupStep(r); err != nil {
				return nil, err
			}
			s.group.cache, s.group.tune = cfg.Artifacts, cfg.Autotune
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
	p.findPrologues()
	p.findDependentProducts()
	p.findDirectStores()
	p.findCatStores(regions)
	if logs.On("fusion") {
		plan, fused := p.fusionPlan()
		logs.Text("gocompile: fusion", "plan", plan, cfg.Artifacts.LogArgs("regions", len(regions), "fused", fused)...)
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
		switch {
		case s.group != nil || s.row != nil:
			fmt.Fprintf(tw, "%s\t%s\n", s.r, s.r.Describe())
			fused++
		case s.prologue != nil || s.epilogue != nil:
			// A product that may compute its operand or apply the region
			// after it on a GPU.
			var with []string
			if s.prologue != nil {
				with = append(with, "prologue "+p.steps[s.prologue.step].r.Root.Name())
			}
			if s.epilogue != nil {
				with = append(with, "epilogue "+p.steps[s.epilogue.step].r.Root.Name())
			}
			fmt.Fprintf(tw, "%s\t%s\n", s.r, strings.Join(with, ", "))
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

func (p *inductorProgram) Run(inputs []*array.Array) (outs []*array.Array) {
	if ep := p.eager.Load(); ep != nil {
		return ep.Run(inputs)
	}
	defer func() {
		if e := recover(); e != nil {
			ke, ok := e.(*array.KernelError)
			if !ok {
				panic(e)
			}
			p.fellBack.Do(func() {
				logs.Warn("gocompile: a generated kernel failed to build; running this graph with the eager kernels",
					p.cfg.Artifacts.LogArgs("kernel", ke.Name, "err", ke.Err)...)
				p.eager.Store(array.NewEagerProgram(p.g, nil))
			})
			outs = p.eager.Load().Run(inputs)
		}
	}()
	if p.cfg.CUDAGraphs {
		run := func(in []*array.Array, a *array.Arena) []*array.Array { return p.runWith(in, a, nil) }
		if outs, ok := p.graphs.Run(inputs, len(p.plan.SlotBytes), run); ok {
			return outs
		}
	}
	a := p.arenas.Get()
	defer p.arenas.Put(a)
	var q *array.LaunchQueue
	if len(inputs) > 0 && inputs[0] != nil && inputs[0].OnGPU() && !p.firstGPURun.Load() && p.firstGPURun.CompareAndSwap(false, true) {
		// The first run on a GPU compiles its kernels in parallel.
		q = array.NewLaunchQueue()
	}
	return p.runWith(inputs, a, q)
}

// runWith runs the program's steps with arena a.
func (p *inductorProgram) runWith(inputs []*array.Array, a *array.Arena, q *array.LaunchQueue) []*array.Array {
	vals := array.BindLeaves(p.g, inputs)
	inPlace := p.ran.Load()
	var cats []*array.Array // the in-place Cats' results, as their first parts allocate them
	if len(p.cats) > 0 {
		cats = make([]*array.Array, len(p.cats))
	}
	for i := range p.steps {
		s := &p.steps[i]
		if vals[s.roots[0]] != nil {
			continue // an epilogue the product's kernel applied
		}
		if s.group == nil && s.row == nil { // a node of its own: the eager kernel
			n := s.r.Root
			if s.cat > 0 && cats[s.cat-1] != nil { // a Cat its parts' kernels wrote
				p.cats[s.cat-1].finish(cats[s.cat-1], vals, q)
				vals[s.roots[0]] = cats[s.cat-1]
				continue
			}
			if n.Op == ir.OpMatMul {
				p.runMatMul(s, vals, a, q)
				continue
			}
			q.Drain() // the eager kernel launches now
			attrs := n.Attrs
			if !inPlace && (n.Op == ir.OpAsStridedScatter || n.Op == ir.OpAsStridedIndexCopy) {
				attrs.KeepDim = false
			}
			vals[s.roots[0]] = array.RunNode(n, attrs, array.NodeArgs(n, vals, p.index))
			continue
		}
		args := s.argsIn(vals)
		if s.deferred && len(args) > 0 && args[0].Device() != array.CPU {
			continue // the product after it computes it, or runs it (runMatMul)
		}
		// dst gives member m's planned buffer, or nil.
		dst := func(m int, dev ir.Device, dt ir.DType, shape []int) *array.Array {
			if slot := s.slots[m]; slot >= 0 {
				return a.Array(slot, dev, dt, shape)
			}
			return nil
		}
		if s.row != nil {
			vals[s.roots[0]] = s.row.run(args, func(dev ir.Device, shape []int) *array.Array {
				return dst(0, dev, s.r.Root.DType, shape)
			}, q)
			continue
		}
		if s.catOut != nil {
			planned := dst
			dst = func(m int, dev ir.Device, dt ir.DType, shape []int) *array.Array {
				if r := s.catOut[m]; r.cat >= 0 {
					if x := p.catSlice(cats, r, dev, dt, shape); x != nil {
						stats.CatParts.Add(1)
						return x
					}
				}
				return planned(m, dev, dt, shape)
			}
		}
		if s.stores != nil && inPlace {
			in, planned := viewInputs(s.group.inputs, args), dst
			dst = func(m int, dev ir.Device, dt ir.DType, shape []int) *array.Array {
				if st := s.stores[m]; st >= 0 {
					if x := s.group.canStoreInto(m, vals[st], s.writes[m], dt, shape, in); x != nil {
						stats.DirectStores.Add(1)
						return x
					}
				}
				return planned(m, dev, dt, shape)
			}
			args = in
		} else {
			args = viewInputs(s.group.inputs, args)
		}
		res := s.group.run(args, dst, q)
		for m, t := range res {
			vals[s.roots[m]] = t
		}
	}
	q.Drain()
	p.ran.Store(true)
	return array.OutputsOf(p.g, p.index, vals)
}

// argsIn is the step's inputs (its region's, in order) among vals.
func (s *inductorStep) argsIn(vals []*array.Array) []*array.Array {
	args := make([]*array.Array, len(s.args))
	for j, a := range s.args {
		args[j] = vals[a]
	}
	return args
}

// kernelStep makes step t, a lone pointwise op the eager kernel would run,
// a group step: a generated kernel that writes its value into the buffer
// it is given (a product's epilogue, a Cat's part). It leaves t as it is
// where the op has no kernel.
func (p *inductorProgram) kernelStep(t *inductorStep) {
	g, err := newGroupStep(t.r)
	if err != nil {
		return
	}
	g.cache, g.tune = p.cfg.Artifacts, p.cfg.Autotune
	t.group, t.args = g, t.args[:0]
	for _, in := range g.inputs {
		t.args = append(t.args, p.index[in.Node])
	}
}

// Plannable reports whether the backend writes the region's value into a
// buffer it is given (fuse.PlanBuffers plans those): generated kernels do;
// eager ops allocate their own.
func Plannable(r *fuse.Region) bool {
	return r.Group != nil || r.Row != nil || (r.Fused() && len(r.Nodes) > 1)
}

// layoutVersion versions the fusion decisions a cached layout records:
// bump it when Partition or Horizontal would decide differently.
const layoutVersion = "10"

// partition splits g into regions and groups them, or rebuilds the
// regions a previous compile of the same graph (in this process or an
// earlier one) recorded in the program cache, skipping the search.
func partition(g *ir.Graph, a *array.Artifacts) ([]*fuse.Region, error) {
	c := a.Cache()
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
			} else if logs.On("cache") {
				logs.Info("gocompile: cached fusion layout does not fit; partitioning again", "err", err)
			}
		}
	}
	regions, err := fuse.Partition(g)
	if err != nil {
		return nil, err
	}
	stats.Partitions.Add(1)
	regions = fuse.Horizontal(regions)
	if b, err := fuse.NewLayout(g, regions).MarshalMsg(nil); err == nil {
		c.Put(key, a.Label(kcache.Entry{Program: &kcache.Program{Kind: "gocompile/fuse.Layout", Payload: b}}, ""))
	}
	return regions, nil
}

// viewInputs gives the tensors a fused kernel reads for its inputs: each
// input a region reads through fused views (fuse.Input.Views) as that
// view of itself, broadcast to the shape the views start from (the shape
// of the fused producer, which all inputs read through one chain
// broadcast to). Views only re-stride, so nothing is copied.
func viewInputs(inputs []fuse.Input, ts []*array.Array) []*array.Array {
	var out []*array.Array
	bases := map[*fuse.ViewChain][]int{}
	for i, in := range inputs {
		if in.Views == nil {
			continue
		}
		if out == nil {
			out = append([]*array.Array(nil), ts...)
		}
		base, ok := bases[in.Views]
		if !ok {
			var shapes [][]int
			for j, other := range inputs {
				if other.Views == in.Views {
					shapes = append(shapes, ts[j].Shape())
				}
			}
			var err error
			base, err = ir.Broadcast(in.Views.Views[0].Op.Title, shapes...)
			array.Check(err, in.Views.Views[0].Op.Title, ts[i])
			bases[in.Views] = base
		}
		t := ts[i]
		l := ir.Layout{Shape: base, Strides: ir.BroadcastStrides(t.Shape(), t.Strides(), base), Offset: t.Offset()}
		for _, v := range in.Views.Views {
			a := v.Attrs
			var err error
			l, err = v.Op.View(l, &a)
			array.Check(err, v.Op.Title, t)
		}
		out[i] = t.WithLayout(l)
	}
	if out == nil {
		return ts
	}
	return out
}

// StepKind says how a program runs one of its regions.
type StepKind int

const (
	// NodeStep runs one node with its eager kernel (a matrix product with
	// a GEMM kernel or library call).
	NodeStep StepKind = iota
	// GroupStep runs a fused pointwise region, or a horizontal group of
	// them, as one generated kernel.
	GroupStep
	// RowStep runs a reduction over the last dim with its prologue and
	// epilogue as one generated kernel.
	RowStep
)

// Step describes how a program runs one fusion region, in order.
type Step struct {
	Region *fuse.Region // the region the step runs
	Kind   StepKind     // how it runs it
	// Epilogue is set on a matrix product whose kernel applies the
	// pointwise region that reads it before its store.
	Epilogue bool
	// Dependent is set on a matrix product that may launch as a dependent
	// of the kernel ahead (programmatic dependent launch, sm_90); ReadyA
	// on one whose first operand, an input or constant, it may read
	// before the kernel ahead ends.
	Dependent, ReadyA bool
	// Prologue is set on a matrix product whose kernel may compute its
	// first operand, the row region of the step before (a norm), on a GPU.
	Prologue bool
}

// Steps describes p, a program Compile returned: its steps, and how many
// buffers its plan reuses.
func Steps(p array.Program) (steps []Step, bufferSlots int) {
	ip, ok := p.(*inductorProgram)
	if !ok {
		return nil, 0
	}
	for _, s := range ip.steps {
		st := Step{Region: s.r, Epilogue: s.epilogue != nil, Dependent: s.dependent, ReadyA: s.readyA, Prologue: s.prologue != nil}
		switch {
		case s.group != nil:
			st.Kind = GroupStep
		case s.row != nil:
			st.Kind = RowStep
		}
		steps = append(steps, st)
	}
	return steps, len(ip.plan.SlotBytes)
}
