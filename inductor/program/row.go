package program

import (
	"fmt"
	"runtime"
	"sync"

	"gocompile/array"
	"gocompile/cuda"
	"gocompile/fuse"
	"gocompile/inductor"
	"gocompile/ir"
)

// Row regions (see fuse.Row) run as one kernel that walks each row of the
// region's full shape: on the CPU, block programs over chunks of the row
// with reductions folded by the registry's reducers; on a GPU, one
// generated kernel (inductor.RowKernel) with a block per row.

// rowStep is a row region ready to run.
type rowStep struct {
	r      *fuse.Region
	kinds  []ir.Kind   // every leaf's kind: the inputs', then the stages'
	stages []*ir.Block // the CPU program of each stage's expression
	root   *ir.Block   // the root's per-element program; nil when the root is the last stage
	kernel inductor.RowKernel
	cache  *array.Artifacts // where its GPU kernels are kept (nil: the process-wide cache)
	tune   bool             // MaxAutotune: time threads and persistence
	tuned  sync.Map         // rowTuneKey → the chosen [threads, persist]
}

// rowTuneKey is what a row kernel's tuned launch shape is kept by in a
// step: the default kernel's name, and the row count and length.
type rowTuneKey struct {
	device  int
	name    string
	rows, R int
}

func newRowStep(r *fuse.Region, compile func(e *ir.Expr, kinds []ir.Kind, compute ir.Kind) (*ir.Block, error)) (*rowStep, error) {
	s := &rowStep{r: r, kernel: *inductor.NewRowKernel(r)}
	for _, in := range r.Inputs {
		s.kinds = append(s.kinds, in.Kind)
	}
	for _, st := range r.Row.Stages {
		s.kinds = append(s.kinds, st.Kind)
	}
	for _, st := range r.Row.Stages {
		blk, err := compile(st.Expr, s.kinds, st.Compute)
		if err != nil {
			return nil, fmt.Errorf("region %v: stage %s: %w", r, st.Node.Name(), err)
		}
		s.stages = append(s.stages, blk)
	}
	if r.Expr != nil {
		blk, err := compile(r.Expr, s.kinds, r.Compute)
		if err != nil {
			return nil, fmt.Errorf("region %v: %w", r, err)
		}
		s.root = blk
	}
	return s, nil
}

// run computes the region's value from its inputs (in r.Inputs order),
// into dst's tensor when dst is not nil.
func (s *rowStep) run(args []*array.Array, dst func(ir.Device, []int) *array.Array, q *array.LaunchQueue) *array.Array {
	if s.r.Row.Dims != nil || s.columnOnGPU(args) {
		return s.runDims(args, dst, q) // colrow.go
	}
	n := s.r.Root
	shapes := make([][]int, len(args))
	vals := make([]ir.Value, len(args))
	for i, t := range args {
		shapes[i], vals[i] = t.Shape(), t
	}
	array.CheckDevices(n.Op, vals)
	full, err := ir.Broadcast(n.Op.Title, shapes...)
	array.Check(err, n.Op.Title, args...)
	R := full[len(full)-1]
	shape := full
	if s.root == nil {
		shape = ir.ReduceShape(full, []int{len(full) - 1}, n.Attrs.KeepDim)
	}
	dev := args[0].Device()
	if R == 0 || ir.Numel(shape) == 0 || s.opByOp(args[0], ir.Numel(full[:len(full)-1]), R) {
		q.Drain() // the eager ops launch now
		return s.runNodes(args)
	}
	var res *array.Array
	if dst != nil {
		res = dst(dev, shape)
	}
	if res == nil {
		res = array.New(dev, n.DType, shape)
	}
	if dev != array.CPU {
		s.runGPU(args, full, res, q)
	} else {
		s.runCPU(args, full, res)
	}
	return res
}

// opByOp reports whether the region runs better op by op with the eager
// kernels: empty rows (their rules are the eager ops'), and few long rows
// that only a lone reduction can split across the cores or SMs (the eager
// reductions split rows themselves).
func (s *rowStep) opByOp(t *array.Array, rows, R int) bool {
	if s.kernel.CanSplit() {
		return false
	}
	if t.Device() == array.CPU {
		return rows < runtime.GOMAXPROCS(0) && R >= 2*array.MinParallel
	}
	sms := t.GPU().Dev().SMCount
	return rows < sms/2 && R >= 1<<15
}

// runNodes runs the region's nodes one by one with the eager kernels.
func (s *rowStep) runNodes(args []*array.Array) *array.Array {
	vals := map[*ir.Node]*array.Array{}
	for i, in := range s.r.Inputs {
		vals[in.Node] = args[i]
	}
	for _, n := range s.r.Nodes {
		a := make([]ir.Value, len(n.Args))
		for j, v := range n.Args {
			if an, ok := v.(*ir.Node); ok && an != nil {
				a[j] = vals[an]
			} else {
				a[j] = v
			}
		}
		vals[n] = array.RunNode(n, n.Attrs, a)
	}
	return vals[s.r.Root]
}

// rowLayout splits each input's strides over the full shape into strides
// over the rows and the stride along a row.
func rowLayout(args []*array.Array, full []int) (outer [][]int, inner []int) {
	last := len(full) - 1
	for _, t := range args {
		st := ir.BroadcastStrides(t.Shape(), t.Strides(), full)
		outer = append(outer, st[:last])
		inner = append(inner, st[last])
	}
	return outer, inner
}

func (s *rowStep) runGPU(args []*array.Array, full []int, res *array.Array, q *array.LaunchQueue) {
	g := res.GPU()
	last := len(full) - 1
	R := full[last]
	outerStrides, inner := rowLayout(args, full)
	oshape, ostrides := array.Coalesce(full[:last], outerStrides...)
	if len(oshape) > inductor.MaxRank {
		array.Throw(s.r.Root.Op.Title, args, "make the inputs contiguous first",
			"the rows have %d dims that cannot be merged; GPU kernels index at most %d", len(oshape), inductor.MaxRank)
	}
	rows := ir.Numel(oshape)
	k := s.kernel // a copy: the layout of this call's inputs
	k.Inputs = append([]inductor.RowInput(nil), s.kernel.Inputs...)
	vec := 4
	if R%4 != 0 {
		vec = 1
	}
	geo := inductor.RowGeometry{OuterRank: len(oshape), OuterStride: make([][inductor.MaxRank]int64, len(args)), InnerStride: make([]int64, len(args))}
	for d, sz := range oshape {
		geo.OuterSize[d] = int64(sz)
	}
	for i, t := range args {
		switch inner[i] {
		case 0:
			k.Inputs[i].Access = inductor.RowUniform
		case 1:
			k.Inputs[i].Access = inductor.RowContig
			if t.DevicePtr()%cuda.DevicePtr(4*t.DType().Size()) != 0 {
				vec = 1
			}
		default:
			k.Inputs[i].Access = inductor.RowStrided
		}
		geo.InnerStride[i] = int64(inner[i])
		for d := range oshape {
			st := ostrides[i][d]
			geo.OuterStride[i][d] = int64(st)
			if k.Inputs[i].Access == inductor.RowContig && st%4 != 0 {
				vec = 1
			}
		}
	}
	k.Vec = vec
	k.Threads, k.Persist = inductor.ChooseRowConfig(R, vec)
	k.Index32 = R < 1<<30

	// Few long rows: a lone reduction (with its prologue) splits each row
	// across blocks so that every SM works (opByOp took the other regions).
	if rows < 2*g.Dev().SMCount && R >= 1<<15 && k.CanSplit() {
		q.Drain()
		s.splitGPU(g, &k, args, rows, R, geo, res)
		return
	}
	a := q.Args(g)
	defer q.Release(g, a)
	a.I64(int64(rows)).I64(int64(R))
	for _, t := range args {
		a.Ptr(t.DevicePtr())
	}
	a.Ptr(res.DevicePtr()).Bytes(geo.Bytes(), 8)
	title := "fused " + s.r.Root.Op.Title
	if s.tune && !g.Stream().CapturingHere() {
		key := rowTuneKey{g.Dev().Ordinal, k.Name(), rows, R}
		if c, ok := s.tuned.Load(key); ok {
			k.Threads, k.Persist = c.([2]int)[0], c.([2]int)[1]
		} else {
			q.Drain() // the search launches now
			s.tuneGPU(g, &k, rows, R, a)
			s.tuned.Store(key, [2]int{k.Threads, k.Persist})
		}
	}
	array.KernelOrQueue(q, g, s.cache, k.Name(), k.Source, func(fn *cuda.Function) { g.Launch(title, fn, min(rows, 1<<24), k.Threads, a) },
		append([]*array.Array{res}, args...)...)
}

// tuneGPU sets k's threads per block and persistence to the fastest of
// the candidates for rows of R elements, timed with the arguments a
// (MaxAutotune): every block size from 32 to 1024, each looped and, where
// a thread holds at most 8 vectors of the row, persistent.
func (s *rowStep) tuneGPU(g *array.GPU, k *inductor.RowKernel, rows, R int, a *cuda.Args) {
	type cand struct{ threads, persist int }
	var cands []cand
	var names []string
	vectors := (R + k.Vec - 1) / k.Vec
	def := -1
	for t := 32; t <= 1024; t *= 2 {
		ps := []int{0}
		if per := (vectors + t - 1) / t; per <= 8 {
			ps = append(ps, per)
		}
		for _, p := range ps {
			if t == k.Threads && p == k.Persist {
				def = len(cands)
			}
			cands = append(cands, cand{t, p})
			names = append(names, fmt.Sprintf("t%dp%d", t, p))
		}
	}
	kc := func(i int) inductor.RowKernel {
		c := *k
		c.Threads, c.Persist = cands[i].threads, cands[i].persist
		return c
	}
	base := *k
	base.Threads, base.Persist = 0, 0
	key := fmt.Sprintf("%s rows%d R%d", base.Name(), rows, R)
	best := array.Autotune(s.cache, g, "row", key, names, def,
		func(i int) { c := kc(i); g.KernelIn(s.cache, c.Name(), c.Source) },
		func(i int) error {
			c := kc(i)
			return g.Stream().Launch(g.KernelIn(s.cache, c.Name(), c.Source), cuda.Dim3{X: uint32(min(rows, 1<<24)), Y: 1, Z: 1},
				cuda.Dim3{X: uint32(c.Threads), Y: 1, Z: 1}, 0, a)
		})
	*k = kc(best)
}

// splitGPU launches the split form of k: grid (rows, parts), each block
// reducing chunk columns of a row into a partial accumulator, then the
// final pass over each row's partials.
func (s *rowStep) splitGPU(g *array.GPU, k *inductor.RowKernel, args []*array.Array, rows, R int, geo inductor.RowGeometry, res *array.Array) {
	k.Split, k.Persist, k.Threads = true, 0, 512
	step := k.Threads * k.Vec * 4 // columns a block covers in four passes
	parts := min((R+step-1)/step, (4*g.Dev().SMCount+rows-1)/rows, 65535)
	chunk := (R + parts - 1) / parts
	chunk = (chunk + k.Vec - 1) / k.Vec * k.Vec
	parts = (R + chunk - 1) / chunk
	acc := ir.Float32
	if k.Stages[0].Compute == ir.F64 {
		acc = ir.Float64
	}
	partial := array.New(res.Device(), acc, []int{rows * parts})
	fn := g.KernelIn(s.cache, k.Name(), k.Source)
	final := g.KernelIn(s.cache, k.Name()+"_final", k.Source)
	a := g.GetArgs()
	defer g.PutArgs(a)
	a.I64(int64(rows)).I64(int64(R)).I64(int64(chunk))
	for _, t := range args {
		a.Ptr(t.DevicePtr())
	}
	a.Ptr(res.DevicePtr()).Ptr(partial.DevicePtr()).Bytes(geo.Bytes(), 8)
	title := "fused " + s.r.Root.Op.Title
	if err := g.Stream().Launch(fn, cuda.Dim3{X: uint32(rows), Y: uint32(parts), Z: 1}, cuda.Dim3{X: uint32(k.Threads), Y: 1, Z: 1}, 0, a); err != nil {
		panic(fmt.Sprintf("gocompile: %s: launch: %v", title, err))
	}
	a.Reset().I64(int64(rows)).I64(int64(parts)).I64(int64(R)).Ptr(partial.DevicePtr()).Ptr(res.DevicePtr())
	g.Launch(title, final, rows, k.Threads, a)
}
