package tensor

import (
	"fmt"
	"runtime"
	"sync"

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
	cache  *artifacts // where its GPU kernels are kept (nil: the process-wide cache)
	tune   bool       // MaxAutotune: time threads and persistence
	tuned  sync.Map   // rowTuneKey → the chosen [threads, persist]
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
func (s *rowStep) run(args []*Tensor, dst func(Device, []int) *Tensor, q *launchQueue) *Tensor {
	n := s.r.Root
	shapes := make([][]int, len(args))
	vals := make([]ir.Value, len(args))
	for i, t := range args {
		shapes[i], vals[i] = t.shape, t
	}
	checkDevices(n.Op, vals)
	full, err := ir.Broadcast(n.Op.Title, shapes...)
	check(err, n.Op.Title, args...)
	R := full[len(full)-1]
	shape := full
	if s.root == nil {
		shape = ir.ReduceShape(full, []int{len(full) - 1}, n.Attrs.KeepDim)
	}
	dev := args[0].st.dev
	if R == 0 || ir.Numel(shape) == 0 || s.opByOp(args[0], ir.Numel(full[:len(full)-1]), R) {
		q.drain() // the eager ops launch now
		return s.runNodes(args)
	}
	var res *Tensor
	if dst != nil {
		res = dst(dev, shape)
	}
	if res == nil {
		res = newOn(dev, n.DType, shape)
	}
	if dev != CPU {
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
func (s *rowStep) opByOp(t *Tensor, rows, R int) bool {
	if s.kernel.CanSplit() {
		return false
	}
	if t.st.dev == CPU {
		return rows < runtime.GOMAXPROCS(0) && R >= 2*minParallel
	}
	sms := t.st.gpu.g.dev.SMCount
	return rows < sms/2 && R >= 1<<15
}

// runNodes runs the region's nodes one by one with the eager kernels.
func (s *rowStep) runNodes(args []*Tensor) *Tensor {
	vals := map[*ir.Node]*Tensor{}
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
		vals[n] = runNode(n, n.Attrs, a)
	}
	return vals[s.r.Root]
}

// rowLayout splits each input's strides over the full shape into strides
// over the rows and the stride along a row.
func rowLayout(args []*Tensor, full []int) (outer [][]int, inner []int) {
	last := len(full) - 1
	for _, t := range args {
		st := ir.BroadcastStrides(t.shape, t.strides, full)
		outer = append(outer, st[:last])
		inner = append(inner, st[last])
	}
	return outer, inner
}

func (s *rowStep) runCPU(args []*Tensor, full []int, res *Tensor) {
	last := len(full) - 1
	R, outerShape := full[last], full[:last]
	rows := ir.Numel(outerShape)
	outer, inner := rowLayout(args, full)
	nIn := len(args)
	stages := s.r.Row.Stages
	// Fewer rows than cores, and long: a lone reduction splits each row
	// across the cores (opByOp took the other regions).
	if rows < runtime.GOMAXPROCS(0) && R >= 2*minParallel {
		s.splitCPU(args, outerShape, outer, inner, R, res)
		return
	}
	// A stage's value is repeated over a chunk only for the programs that
	// read it.
	needVec := make([]bool, len(stages))
	for k := range stages {
		for _, blk := range append(append([]*ir.Block(nil), s.stages[k+1:]...), s.root) {
			needVec[k] = needVec[k] || (blk != nil && blk.Uses(nIn+k))
		}
	}
	parallelRows(rows, max(1, minParallel/R), func(lo, hi int) {
		chunk := min(blockSize, R)
		frames := make([]*ir.Frame, len(stages))
		for k, blk := range s.stages {
			frames[k] = blk.NewFrame(chunk, nil)
		}
		var rootFrame *ir.Frame
		if s.root != nil {
			rootFrame = s.root.NewFrame(chunk, nil)
		}
		ops := make([]*operand, nIn)
		for i, t := range args {
			ops[i] = newOperand(t.st.data, t.dtype, []int{R}, []int{inner[i]}, 0)
		}
		stageVecs := make([]ir.Vec, len(stages)) // each stage's value, repeated over a chunk
		for k, st := range stages {
			stageVecs[k] = ir.NewVec(st.Kind, chunk)
		}
		one := make([]ir.Vec, len(stages)) // each stage's value
		rounders := make([]*rounder, len(stages))
		for k, st := range stages {
			one[k] = ir.NewVec(st.Kind, 1)
			rounders[k] = newRounder(st.Node.DType, st.Kind)
		}
		idx := make([]int, len(outerShape))
		// bind makes f read every input at [start, start+n) of the row and
		// the stages computed so far.
		bind := func(f *ir.Frame, blk *ir.Block, start, n, done int) {
			for i, o := range ops {
				if blk.Uses(i) {
					f.SetArg(i, o.load(start, n, f.ArgKind(i), f.ArgBuf(i)))
				}
			}
			for k := range done {
				f.SetArg(nIn+k, stageVecs[k])
			}
		}
		for row := lo; row < hi; row++ {
			for i, t := range args {
				ops[i].offset = t.offset
				if len(outerShape) > 0 {
					ops[i].offset += unravel(row, outerShape, outer[i], idx)
				}
			}
			var val ir.Vec
			for k, st := range stages {
				f, blk := frames[k], s.stages[k]
				if st.Reduce {
					acc := foldRange(st.Reducer, blk.OutKind(), 0, R, func(s0, m int) ir.Vec {
						bind(f, blk, s0, m, k)
						return f.Run(m, nil)
					})
					rounders[k].result(st.Reducer, acc, R, one[k])
				} else {
					bind(f, blk, 0, 1, k)
					rounders[k].value(f.Run(1, nil), blk.OutKind(), one[k])
				}
				if needVec[k] {
					stageVecs[k].Fill(st.Kind, kindAt(one[k], st.Kind))
				}
				val = one[k]
			}
			if s.root == nil {
				store(res.st.data, res.dtype, row, val, stages[len(stages)-1].Kind, 1)
				continue
			}
			for s0 := 0; s0 < R; s0 += chunk {
				m := min(chunk, R-s0)
				bind(rootFrame, s.root, s0, m, len(stages))
				store(res.st.data, res.dtype, row*R+s0, rootFrame.Run(m, nil), s.root.OutKind(), m)
			}
		}
	})
}

// splitCPU runs a region whose one stage is a reduction and the root with
// each row split across the cores, the parts merged in order.
func (s *rowStep) splitCPU(args []*Tensor, outerShape []int, outer [][]int, inner []int, R int, res *Tensor) {
	st, blk := s.r.Row.Stages[0], s.stages[0]
	idx := make([]int, len(outerShape))
	one := ir.NewVec(st.Kind, 1)
	round := newRounder(st.Node.DType, st.Kind)
	for row := range ir.Numel(outerShape) {
		offsets := make([]int, len(args))
		for i, t := range args {
			offsets[i] = t.offset
			if len(outerShape) > 0 {
				offsets[i] += unravel(row, outerShape, outer[i], idx)
			}
		}
		acc := foldSplit(st.Reducer, st.Compute == ir.I64, R, func() func(lo, hi int) ir.Acc {
			f := blk.NewFrame(min(blockSize, R), nil)
			ops := make([]*operand, len(args))
			for i, t := range args {
				ops[i] = newOperand(t.st.data, t.dtype, []int{R}, []int{inner[i]}, offsets[i])
			}
			return func(lo, hi int) ir.Acc {
				return foldRange(st.Reducer, blk.OutKind(), lo, hi, func(s0, m int) ir.Vec {
					for i, o := range ops {
						if blk.Uses(i) {
							f.SetArg(i, o.load(s0, m, f.ArgKind(i), f.ArgBuf(i)))
						}
					}
					return f.Run(m, nil)
				})
			}
		})
		round.result(st.Reducer, acc, R, one)
		store(res.st.data, res.dtype, row, one, st.Kind, 1)
	}
}

// rounder gives a stage's value as storing it in the stage node's dtype
// and reading it back in the stage's kind gives (a row kernel keeps it in
// registers, but eager code would have stored it): the storage's own
// conversions, through a one-element cell. One per goroutine.
type rounder struct {
	dt   DType
	kind ir.Kind
	cell any
	f    [1]float64
}

func newRounder(dt DType, k ir.Kind) *rounder {
	return &rounder{dt: dt, kind: k, cell: allocData(dt, 1)}
}

// result rounds the floating result of a reduction over n values into v.
func (r *rounder) result(red ir.Reducer, acc ir.Acc, n int, v ir.Vec) {
	r.f[0] = red.ResultF(acc, n)
	storeFrom(r.cell, r.dt, 0, r.f[:])
	convert(v, r.kind, r.cell, r.dt, 0, 1)
}

// value rounds x[0], of kind k, into v.
func (r *rounder) value(x ir.Vec, k ir.Kind, v ir.Vec) {
	store(r.cell, r.dt, 0, x, k, 1)
	convert(v, r.kind, r.cell, r.dt, 0, 1)
}

// kindAt is v[0] as a float64.
func kindAt(v ir.Vec, k ir.Kind) float64 {
	switch k {
	case ir.F32:
		return float64(v.F32[0])
	case ir.F64:
		return v.F64[0]
	}
	return float64(v.I64[0])
}

func (s *rowStep) runGPU(args []*Tensor, full []int, res *Tensor, q *launchQueue) {
	g := res.st.gpu.g
	last := len(full) - 1
	R := full[last]
	outerStrides, inner := rowLayout(args, full)
	oshape, ostrides := coalesce(full[:last], outerStrides...)
	if len(oshape) > inductor.MaxRank {
		throw(s.r.Root.Op.Title, args, "make the inputs contiguous first",
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
			if t.devicePtr()%cuda.DevicePtr(4*t.dtype.Size()) != 0 {
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
	if rows < 2*g.dev.SMCount && R >= 1<<15 && k.CanSplit() {
		q.drain()
		s.splitGPU(g, &k, args, rows, R, geo, res)
		return
	}
	a := q.args(g)
	defer q.release(g, a)
	a.I64(int64(rows)).I64(int64(R))
	for _, t := range args {
		a.Ptr(t.devicePtr())
	}
	a.Ptr(res.devicePtr()).Bytes(geo.Bytes(), 8)
	title := "fused " + s.r.Root.Op.Title
	if s.tune && !g.stream.CapturingHere() {
		key := rowTuneKey{g.dev.Ordinal, k.Name(), rows, R}
		if c, ok := s.tuned.Load(key); ok {
			k.Threads, k.Persist = c.([2]int)[0], c.([2]int)[1]
		} else {
			q.drain() // the search launches now
			s.tuneGPU(g, &k, rows, R, a)
			s.tuned.Store(key, [2]int{k.Threads, k.Persist})
		}
	}
	kernelOrQueue(q, g, s.cache, k.Name(), k.Source, func(fn *cuda.Function) { g.launch(title, fn, min(rows, 1<<24), k.Threads, a) },
		append([]*Tensor{res}, args...)...)
}

// tuneGPU sets k's threads per block and persistence to the fastest of
// the candidates for rows of R elements, timed with the arguments a
// (MaxAutotune): every block size from 32 to 1024, each looped and, where
// a thread holds at most 8 vectors of the row, persistent.
func (s *rowStep) tuneGPU(g *gpu, k *inductor.RowKernel, rows, R int, a *cuda.Args) {
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
	best := autotune(s.cache, g, "row", key, names, def,
		func(i int) { c := kc(i); g.kernelIn(s.cache, c.Name(), c.Source) },
		func(i int) error {
			c := kc(i)
			return g.stream.Launch(g.kernelIn(s.cache, c.Name(), c.Source), cuda.Dim3{X: uint32(min(rows, 1<<24)), Y: 1, Z: 1},
				cuda.Dim3{X: uint32(c.Threads), Y: 1, Z: 1}, 0, a)
		})
	*k = kc(best)
}

// splitGPU launches the split form of k: grid (rows, parts), each block
// reducing chunk columns of a row into a partial accumulator, then the
// final pass over each row's partials.
func (s *rowStep) splitGPU(g *gpu, k *inductor.RowKernel, args []*Tensor, rows, R int, geo inductor.RowGeometry, res *Tensor) {
	k.Split, k.Persist, k.Threads = true, 0, 512
	step := k.Threads * k.Vec * 4 // columns a block covers in four passes
	parts := min((R+step-1)/step, (4*g.dev.SMCount+rows-1)/rows, 65535)
	chunk := (R + parts - 1) / parts
	chunk = (chunk + k.Vec - 1) / k.Vec * k.Vec
	parts = (R + chunk - 1) / chunk
	acc := Float32
	if k.Stages[0].Compute == ir.F64 {
		acc = Float64
	}
	partial := newGPUTensor(res.st.dev, acc, []int{rows * parts})
	fn := g.kernelIn(s.cache, k.Name(), k.Source)
	final := g.kernelIn(s.cache, k.Name()+"_final", k.Source)
	a := g.getArgs()
	defer g.putArgs(a)
	a.I64(int64(rows)).I64(int64(R)).I64(int64(chunk))
	for _, t := range args {
		a.Ptr(t.devicePtr())
	}
	a.Ptr(res.devicePtr()).Ptr(partial.devicePtr()).Bytes(geo.Bytes(), 8)
	title := "fused " + s.r.Root.Op.Title
	if err := g.stream.Launch(fn, cuda.Dim3{X: uint32(rows), Y: uint32(parts), Z: 1}, cuda.Dim3{X: uint32(k.Threads), Y: 1, Z: 1}, 0, a); err != nil {
		panic(fmt.Sprintf("tensor: %s: launch: %v", title, err))
	}
	a.Reset().I64(int64(rows)).I64(int64(parts)).I64(int64(R)).Ptr(partial.devicePtr()).Ptr(res.devicePtr())
	g.launch(title, final, rows, k.Threads, a)
}
