package program

import (
	"fmt"
	"os"
	"strconv"
	"sync"
	"sync/atomic"

	"gocompile/array"
	"gocompile/cuda"
	"gocompile/fuse"
	"gocompile/inductor"
	"gocompile/internal/logs"
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
	cache  *array.Artifacts            // where its GPU kernels are kept (nil: the process-wide cache)
	tune   bool                        // MaxAutotune: time threads and persistence
	tuned  sync.Map                    // rowTuneKey → the chosen inductor.RowPlan
	title  string                      // "fused " and the root op's title, for errors
	last   array.LastPlan[*rowPlanned] // the last call's row kernel plan
	// lastCol is the last call's column kernel plan (regions over dims
	// other than the last alone).
	lastCol array.LastPlan[*colPlanned]
}

// rowTuneKey is what a row kernel's tuned launch shape is kept by in a
// step: the default kernel's name, and the row count and length.
type rowTuneKey struct {
	device  int
	name    string
	rows, R int
}

func newRowStep(r *fuse.Region, compile func(e *ir.Expr, kinds []ir.Kind, compute ir.Kind) (*ir.Block, error)) (*rowStep, error) {
	s := &rowStep{r: r, kernel: *inductor.NewRowKernel(r), title: "fused " + r.Root.Op.Title}
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
	short := s.r.Row.Dims == nil && s.shortRowsOnGPU(args)
	if s.r.Row.Dims != nil || short || s.columnOnGPU(args) {
		return s.runDims(args, dst, q, short) // colrow.go
	}
	n := s.r.Root
	full, _ := broadcastArgs(n.Op, args)
	R := full[len(full)-1]
	shape := s.shape(full)
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

// shape is the shape of the region's value over the full shape full: full
// itself, or without its last dim or with it 1 when the root is a stage
// (a reduction, or a value computed once per row), as the root's rank
// says.
func (s *rowStep) shape(full []int) []int {
	if s.root != nil {
		return full
	}
	return ir.ReduceShape(full, []int{len(full) - 1}, len(s.r.Root.Shape) == len(full))
}

// cpuShortRow is the row length below which row regions run on the CPU a
// tile of rows to a program call (tilesCPU): on 2 cores, compiled softmax
// and RMSNorm over 4M float32 values ran in 22-23 ms as tiles against
// 27-41 ms a row at a time (rowsCPU) at 64 columns, in 17-21 against
// 14-17 at 128.
const cpuShortRow = 128

// loneReduction reports whether the region is a reduction of its inputs
// as they are, with at most an epilogue computed once per output (a sum
// and its negation, a 16-bit sum and its cast): the eager reduction's own
// work, which its kernel does best on the CPU, where the epilogue's own
// pass over the reduced values costs little (on 2 cores, a 16-bit sum over
// dims 0 and 3 and its ReLU ran 0.39x eager as one region).
func (s *rowStep) loneReduction() bool {
	if len(s.r.Nodes) == 1 {
		return true
	}
	if !s.kernel.CanSplit() {
		return false
	}
	e := s.kernel.Stages[0].Expr
	for e.Prim == ir.PCast && e.Via != ir.Float16 && e.Via != ir.BFloat16 { // a widening, not a rounding
		e = e.Args[0]
	}
	return e.Prim == ir.PArg
}

// opByOp reports whether the region runs better op by op with the eager
// kernels: on a GPU, few long rows that neither a lone reduction's split
// nor a cluster keeping the row on chip spreads over the SMs (the eager
// reductions split rows themselves); on the CPU, lone reductions of rows
// of cpuShortRow columns or more.
func (s *rowStep) opByOp(t *array.Array, rows, R int) bool {
	if t.Device() == array.CPU {
		// Few long rows: splitCPU splits them across the cores. Short
		// rows run a tile of rows to a program call (tilesCPU): a call
		// per row cost more than one pass of each eager op over the whole
		// tensor, and a tile less than the eager reduction's row walk
		// (a float32 Sum(-1) over 4M values in rows of 2 to 16 ran in 68
		// to 12 ms as tiles, 121 to 17 eagerly). A lone reduction of
		// longer rows is the eager reduction's own work, which its kernel
		// does best.
		return s.loneReduction() && R >= cpuShortRow
	}
	if s.kernel.CanSplit() || s.kernel.CanStage() {
		return false // planGPU splits rows that leave SMs idle
	}
	g := t.GPU()
	sms := g.Dev().SMCount
	if rows >= sms/2 || R < 1<<15 {
		return false
	}
	// Rows that a cluster keeps on chip run as one kernel.
	p := inductor.ChooseRowPlan(rowDevice(g, nil), R, 1, rows, stashBytes(&s.kernel))
	return !p.Stash
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

// rowLaunch is how a row region runs on a GPU for one layout of its
// inputs: the kernel, its launch shape and the geometry it is passed.
type rowLaunch struct {
	k           inductor.RowKernel
	rows, R     int
	geo         inductor.RowGeometry
	geoBytes    []byte
	grid, block int
	shared      int  // dynamic shared memory, bytes (a stashed kernel)
	parts       int  // > 1: rows split across this many blocks a row (splitGPU, or stagedGPU when staged)
	staged      bool // a pass per reduction split across blocks (stagedGPU)
	name        string
}

// planGPU chooses the kernel and launch shape for args (in r.Inputs order)
// over the full shape full on g, writing to a result at out (0: a new
// allocation, which is aligned).
func (s *rowStep) planGPU(args []*array.Array, full []int, g *array.GPU, out cuda.DevicePtr) rowLaunch {
	last := len(full) - 1
	R := full[last]
	outerStrides, inner := rowLayout(args, full)
	oshape, ostrides := array.Coalesce(full[:last], outerStrides...)
	if len(oshape) > inductor.MaxRank {
		array.Throw(s.r.Root.Op.Title, args, "make the inputs contiguous first",
			"the rows have %d dims that cannot be merged; GPU kernels index at most %d", len(oshape), inductor.MaxRank)
	}
	l := rowLaunch{k: s.kernel.ForLayout(), rows: ir.Numel(oshape), R: R}
	k := &l.k
	geo := inductor.RowGeometry{OuterRank: len(oshape), OuterStride: make([][inductor.MaxRank]int64, len(args)), InnerStride: make([]int64, len(args))}
	for d, sz := range oshape {
		geo.OuterSize[d] = int64(sz)
	}
	ts := make([]inductor.RowTensor, len(args))
	for i, t := range args {
		geo.InnerStride[i] = int64(inner[i])
		for d := range oshape {
			geo.OuterStride[i][d] = int64(ostrides[i][d])
		}
		ts[i] = inductor.RowTensor{Size: t.DType().Size(), Addr: uint64(t.DevicePtr()), Outer: geo.OuterStride[i][:len(oshape)], Inner: int64(inner[i])}
	}
	var res *inductor.RowTensor
	if k.Expr != nil { // a result per element: rows of R, one after another
		res = &inductor.RowTensor{Size: k.Out.Size(), Addr: uint64(out), Outer: make([]int64, len(oshape)), Inner: 1}
		for d, st := range ir.ContiguousStrides(oshape) {
			res.Outer[d] = int64(st * R)
		}
	}
	shift := rowShift
	setVector := func(maxVec int) {
		rv := inductor.ChooseRowVector(R, k.Out.Size(), maxVec, shift, ts, res)
		for i := range k.Inputs {
			k.Inputs[i].Access = rv.Access[i]
		}
		k.Vec, k.Shifted, k.Ref = rv.Vec, rv.Shifted, rv.Ref
	}
	k.Index32 = R < 1<<30
	l.geo = geo
	// Vectors of 8 pay only where a thread keeps its elements in registers
	// (persistent kernels): split and looped kernels of 16-bit rows ran up
	// to 1.7x slower with them than with vectors of 4 (H200).
	const loopedVec = 4
	var stash func(int) int
	var dev inductor.RowDevice
	var p inductor.RowPlan
	plan := func() {
		setVector(8)
		stash, dev = stashBytes(k), rowDevice(g, k)
		p = inductor.ChooseRowPlan(dev, k.Span(R), k.Vec, l.rows, stash)
		if p.Persist == 0 && k.Vec > loopedVec {
			setVector(loopedVec)
			stash, dev = stashBytes(k), rowDevice(g, k)
			p = inductor.ChooseRowPlan(dev, k.Span(R), k.Vec, l.rows, stash)
		}
	}
	plan()
	if k.Shifted && !shiftPays(p, R) {
		shift = false
		plan()
	}
	// Rows too few or too long to fill the SMs a block a row, looped,
	// are split across blocks: a lone reduction (with its prologue and
	// epilogue) in one pass and a final one, other regions in a split pass
	// per reduction and one for the root (staged). Rows kept on chip (in
	// registers or the stash) are read once, which splitting would undo.
	if p.Persist == 0 && !p.Stash && (k.CanSplit() || k.CanStage()) {
		choose := inductor.ChooseRowSplit
		if !k.CanSplit() {
			choose = inductor.ChooseRowStage
		}
		if l.parts = choose(dev, k.Span(R), k.Vec, l.rows, p.Threads); l.parts > 1 {
			l.staged = !k.CanSplit()
			return l
		}
	}
	k.Threads, k.Groups, k.Persist, k.Stash, k.Cluster = p.Threads, p.Groups, p.Persist, p.Stash, p.Cluster
	if k.Cluster > 1 && !clusterBuilds(g, s.cache, k) {
		p = inductor.ChooseRowPlan(rowDevice(g, k), k.Span(R), k.Vec, l.rows, stash)
		k.Threads, k.Groups, k.Persist, k.Stash, k.Cluster = p.Threads, p.Groups, p.Persist, p.Stash, p.Cluster
	}
	l.finish()
	return l
}

// shiftPays reports whether a Shifted kernel of plan p over rows of R
// elements beats the plain one, which reads them a scalar at a time. On
// an H200 it did where each thread keeps at most two vectors of a row
// (softmax of 3437 float16 columns 59.5 -> 39.6 µs, of 3983 bfloat16 ones
// 121 -> 104) and over rows of tens of thousands of elements and more
// (log-softmax of 123775 float32 columns 59.6 -> 45.2 µs, softmax of
// 76047 38.6 -> 35.7); it did not where a persistent thread keeps more of
// the row (softmax of 18079 bfloat16 columns 92.6 -> 120.9 µs, layer norm
// of 24375 float16 ones 51.6 -> 66.2) or a norm's row of 16919 float32
// elements is stashed (23.9 -> 30.4).
func shiftPays(p inductor.RowPlan, R int) bool {
	return p.Persist > 0 && p.Persist <= 2 || R >= shiftLongRow
}

// shiftLongRow is the row length from which Shifted kernels are used
// whatever their plan (see shiftPays).
const shiftLongRow = 1 << 15

// stashBytes is k.StashBytes for ChooseRowPlan, or nil where a stash
// would save no reads.
func stashBytes(k *inductor.RowKernel) func(int) int {
	if !k.Rereads() {
		return nil
	}
	return k.StashBytes
}

// clustersFail is set once a cluster row kernel failed to build (a driver
// or toolchain without thread block clusters): rows are planned without
// clusters from then on.
var clustersFail atomic.Bool

// clusterBuilds builds the cluster kernel k now, and reports whether it
// could be; if not, it logs why and plans without clusters from then on.
func clusterBuilds(g *array.GPU, c *array.Artifacts, k *inductor.RowKernel) (ok bool) {
	defer func() {
		if e := recover(); e != nil {
			ke, isKernel := e.(*array.KernelError)
			if !isKernel {
				panic(e)
			}
			if !clustersFail.Swap(true) {
				logs.Warn("gocompile: a thread block cluster row kernel failed to build; rows are planned without clusters", "kernel", ke.Name, "err", ke.Err)
			}
			ok = false
		}
	}()
	g.KernelIn(c, k.Name(), k.Source)
	return true
}

// rowDevice describes g for inductor.ChooseRowPlan of kernel k (nil: a
// plain one). A Shifted kernel's persistent blocks take at most
// shiftedPersist threads: it holds more registers than a plain one (64
// against 50 at 1024 threads a block), and a block of 1024 was then
// alone on its SM, where its loads, reductions and stores did not overlap
// another block's (on an H200, persistent shifted rows of 17,000 to
// 24,000 elements in blocks of 1024 ran 1.2x to 1.9x slower than the
// same rows stashed and read a scalar at a time).
func rowDevice(g *array.GPU, k *inductor.RowKernel) inductor.RowDevice {
	d := g.Dev()
	rd := inductor.RowDevice{SMs: d.SMCount, MaxShared: maxStash(g), Clusters: rowClusters && d.Major >= 9 && !clustersFail.Load(),
		MaxPersist: rowPersistThreads}
	if k != nil && k.Shifted && (rd.MaxPersist == 0 || rd.MaxPersist > shiftedPersist) {
		rd.MaxPersist = shiftedPersist
	}
	return rd
}

// shiftedPersist is the most threads of a Shifted kernel's persistent
// block (see rowDevice).
const shiftedPersist = 512

// rowShift lets row kernels read rows of any length and alignment by
// vectors (inductor.RowKernel.Shifted); GOCOMPILE_ROW_SHIFT=off reads
// rows that are not multiples of a vector, or not aligned, an element at
// a time, for comparisons.
var rowShift = os.Getenv("GOCOMPILE_ROW_SHIFT") != "off"

// rowPersistThreads caps the threads of a persistent row kernel's block
// (GOCOMPILE_ROW_PERSIST_THREADS, a power of two from 32 to 1024; 0 or
// unset: 1024).
var rowPersistThreads = envPow2("GOCOMPILE_ROW_PERSIST_THREADS")

// envPow2 is the environment variable name as a power of two from 32 to
// 1024, or 0 when it is unset or not one.
func envPow2(name string) int {
	n, err := strconv.Atoi(os.Getenv(name))
	if err != nil || n < 32 || n > 1024 || n&(n-1) != 0 {
		return 0
	}
	return n
}

// rowClusters lets rows be split across thread block clusters. It is off
// unless GOCOMPILE_ROW_CLUSTERS=1: the cluster row kernels build but fail
// at launch on an H200 (an unspecified launch failure in
// TestGPUEagerCompositeIsOneKernel), so rows too long for one block's
// shared memory run looped until they are fixed.
var rowClusters = os.Getenv("GOCOMPILE_ROW_CLUSTERS") == "1"

// maxStash is the dynamic shared memory a stashed row kernel may use on
// g: the device's opt-in limit less room for the kernel's static shared
// memory (block_allreduce's partials).
func maxStash(g *array.GPU) int { return max(g.Dev().MaxSharedMemPerBlockOptin-2048, 0) }

// finish sets the launch shape and geometry bytes from l.k.
func (l *rowLaunch) finish() {
	G, C := max(l.k.Groups, 1), max(l.k.Cluster, 1)
	l.block = l.k.Threads * G
	l.grid = min((l.rows+G-1)/G, 1<<24)
	l.shared = 0
	if l.k.Stash {
		chunk := (l.k.Span(l.R) + C - 1) / C
		chunk = (chunk + l.k.Vec - 1) / l.k.Vec * l.k.Vec
		l.shared = l.k.StashBytes(chunk)
		l.grid = min(l.rows, (1<<24)/C) * C // a cluster a row
	}
	l.geoBytes = l.geo.Bytes()
	l.name = l.k.Name()
}

// launchRow launches fn with l's shape on g's stream, allowing the
// dynamic shared memory a stashed kernel needs. A cluster kernel the
// device refuses to launch (too few SMs free together, say) makes rows
// plan without clusters from then on, and its row kernel without a
// cluster (from cache c) launches instead.
func launchRow(g *array.GPU, c *array.Artifacts, title string, fn *cuda.Function, l *rowLaunch, a *cuda.Args) {
	if l.shared > 48<<10 {
		allowShared(g, fn)
	}
	err := g.LaunchSmall(fn, cuda.Dim3{X: uint32(l.grid), Y: 1, Z: 1}, cuda.Dim3{X: uint32(l.block), Y: 1, Z: 1}, l.shared, a, l.rows*l.R)
	if err != nil && l.k.Cluster > 1 {
		if !clustersFail.Swap(true) {
			logs.Warn("gocompile: a thread block cluster row kernel failed to launch; rows are planned without clusters", "kernel", l.name, "err", err)
		}
		nl := *l
		p := inductor.ChooseRowPlan(rowDevice(g, &l.k), l.k.Span(l.R), l.k.Vec, l.rows, stashBytes(&l.k))
		nl.k.Threads, nl.k.Groups, nl.k.Persist, nl.k.Stash, nl.k.Cluster = p.Threads, p.Groups, p.Persist, p.Stash, p.Cluster
		nl.finish()
		launchRow(g, c, title, g.KernelIn(c, nl.name, nl.k.Source), &nl, a)
		return
	}
	if err != nil {
		panic(fmt.Sprintf("gocompile: %s: launch: %v", title, err))
	}
}

var sharedAllowed sync.Map // *cuda.Function → true once it may use maxStash bytes

// allowShared lets fn use up to maxStash(g) bytes of dynamic shared
// memory, once per kernel.
func allowShared(g *array.GPU, fn *cuda.Function) {
	if _, ok := sharedAllowed.Load(fn); ok {
		return
	}
	if err := fn.SetMaxDynamicShared(maxStash(g)); err != nil {
		panic(fmt.Sprintf("gocompile: row kernel %s: shared memory: %v", fn.Name, err))
	}
	sharedAllowed.Store(fn, true)
}

// rowArgs appends a row kernel's parameters for args into res.
func rowArgs(a *cuda.Args, l *rowLaunch, args []*array.Array, res *array.Array) {
	a.I64(int64(l.rows)).I64(int64(l.R))
	for _, t := range args {
		a.Ptr(t.DevicePtr())
	}
	a.Ptr(res.DevicePtr()).Bytes(l.geoBytes, 8)
}

func (s *rowStep) runGPU(args []*array.Array, full []int, res *array.Array, q *array.LaunchQueue) {
	g := res.GPU()
	// The plan of the last call serves a call whose tensors lie alike.
	var buf [96]int
	m := s.last.Get(g, planKey(buf[:0], full, res, args), func(m *rowPlanned) bool {
		// A plan of clusters goes once clusters have failed to launch
		// (launchRow), as the eager composites' does.
		return m.l.k.Cluster > 1 && clustersFail.Load()
	}, func() *rowPlanned { return &rowPlanned{l: s.planGPU(args, full, g, res.DevicePtr())} })
	l := m.l
	if l.parts > 1 {
		q.Drain()
		if l.staged {
			s.stagedGPU(g, &l.k, args, l.rows, l.R, l.parts, l.geo, res)
		} else {
			s.splitGPU(g, &l.k, args, l.rows, l.R, l.parts, l.geo, res)
		}
		return
	}
	a := q.Args(g)
	defer q.Release(g, a)
	rowArgs(a, &l, args, res)
	if s.tune && !g.Stream().CapturingHere() {
		key := rowTuneKey{g.Dev().Ordinal, l.name, l.rows, l.R}
		if c, ok := s.tuned.Load(key); ok {
			c := c.(inductor.RowPlan)
			l.k.Threads, l.k.Groups, l.k.Persist, l.k.Stash, l.k.Cluster = c.Threads, c.Groups, c.Persist, c.Stash, c.Cluster
		} else {
			q.Drain() // the search launches now
			s.tuneGPU(g, &l, a)
			s.tuned.Store(key, inductor.RowPlan{Threads: l.k.Threads, Groups: l.k.Groups, Persist: l.k.Persist, Stash: l.k.Stash, Cluster: l.k.Cluster})
		}
		l.finish()
	}
	k := &l.k
	if q == nil {
		launchRow(g, s.cache, s.title, m.fn.For(g, s.cache, m.l.name, l.name, k.Source), &l, a)
		return
	}
	array.KernelOrQueue(q, g, s.cache, l.name, k.Source, func(fn *cuda.Function) { launchRow(g, s.cache, s.title, fn, &l, a) },
		append([]*array.Array{res}, args...)...)
}

// rowPlanned is a row step's launch plan and its kernel, once loaded.
type rowPlanned struct {
	l  rowLaunch
	fn array.LoadedKernel
}

// tuneGPU sets l's kernel shape to the fastest of the candidates for its
// rows (MaxAutotune), timed with the arguments a: the default, and every
// block size from 32 to 1024, each looped, stashed where the row fits in
// shared memory and, where a thread holds at most 8 vectors of the row,
// persistent.
func (s *rowStep) tuneGPU(g *array.GPU, l *rowLaunch, a *cuda.Args) {
	k := &l.k
	def := inductor.RowPlan{Threads: k.Threads, Groups: k.Groups, Persist: k.Persist, Stash: k.Stash, Cluster: k.Cluster}
	cands := []inductor.RowPlan{def}
	names := []string{"default"}
	span := k.Span(l.R)
	vectors := (span + k.Vec - 1) / k.Vec
	stash := k.Rereads() && k.StashBytes(span) <= maxStash(g) // a block a row
	for t := 32; t <= 1024; t *= 2 {
		ps := []inductor.RowPlan{{Threads: t, Groups: 1}}
		if stash {
			ps = append(ps, inductor.RowPlan{Threads: t, Groups: 1, Stash: true})
		}
		if per := (vectors + t - 1) / t; per <= 8 {
			ps = append(ps, inductor.RowPlan{Threads: t, Groups: 1, Persist: per})
		}
		for _, p := range ps {
			if p != def {
				cands = append(cands, p)
				names = append(names, fmt.Sprintf("t%dp%ds%v", p.Threads, p.Persist, p.Stash))
			}
		}
	}
	lc := func(i int) rowLaunch {
		c := *l
		c.k.Threads, c.k.Groups, c.k.Persist, c.k.Stash, c.k.Cluster = cands[i].Threads, cands[i].Groups, cands[i].Persist, cands[i].Stash, cands[i].Cluster
		c.finish()
		return c
	}
	base := *k
	base.Threads, base.Groups, base.Persist, base.Stash, base.Cluster = 0, 0, 0, false, 0
	key := fmt.Sprintf("%s rows%d R%d", base.Name(), l.rows, l.R)
	best := array.Autotune(s.cache, g, "row", key, names, 0,
		func(i int) { c := lc(i); g.KernelIn(s.cache, c.name, c.k.Source) },
		func(i int) error {
			c := lc(i)
			fn := g.KernelIn(s.cache, c.name, c.k.Source)
			if c.shared > 48<<10 {
				allowShared(g, fn)
			}
			return g.Stream().Launch(fn, cuda.Dim3{X: uint32(c.grid), Y: 1, Z: 1}, cuda.Dim3{X: uint32(c.block), Y: 1, Z: 1}, c.shared, a)
		})
	*l = lc(best)
}

// splitGPU launches the split form of k: grid (rows, parts), each block
// reducing a chunk of about R/parts columns of a row into a partial
// accumulator, then the final pass over each row's partials.
func (s *rowStep) splitGPU(g *array.GPU, k *inductor.RowKernel, args []*array.Array, rows, R, parts int, geo inductor.RowGeometry, res *array.Array) {
	k.Split, k.Persist, k.Threads, k.Stash, k.Groups, k.Cluster = true, 0, inductor.SplitThreads, false, 1, 0
	chunk, parts := splitChunk(k, R, parts)
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
	if err := g.Stream().Launch(fn, cuda.Dim3{X: uint32(rows), Y: uint32(parts), Z: 1}, cuda.Dim3{X: uint32(k.Threads), Y: 1, Z: 1}, 0, a); err != nil {
		panic(fmt.Sprintf("gocompile: %s: launch: %v", s.title, err))
	}
	a.Reset().I64(int64(rows)).I64(int64(parts)).I64(int64(R)).Ptr(partial.DevicePtr()).Ptr(res.DevicePtr())
	g.Launch(s.title, final, rows, k.Threads, a)
}

// splitChunk is the columns each of about parts blocks takes of a row of
// R elements in k's split or staged form, a whole number of vectors, and
// the blocks that takes.
func splitChunk(k *inductor.RowKernel, R, parts int) (chunk, n int) {
	span := k.Span(R)
	chunk = (span + parts - 1) / parts
	chunk = (chunk + k.Vec - 1) / k.Vec * k.Vec
	return chunk, (span + chunk - 1) / chunk
}

// stagedGPU runs the staged form of k (inductor.RowKernel.Staged): for
// each reduction stage, a pass over grid (rows, parts) writing partial
// accumulators and its final pass keeping each row's stage values in a
// prev buffer, then the root's pass over grid (rows, parts) where the root
// is per element.
func (s *rowStep) stagedGPU(g *array.GPU, k *inductor.RowKernel, args []*array.Array, rows, R, parts int, geo inductor.RowGeometry, res *array.Array) {
	k.Persist, k.Threads, k.Stash, k.Groups, k.Cluster = 0, inductor.SplitThreads, false, 1, 0
	chunk, parts := splitChunk(k, R, parts)
	prev := array.New(res.Device(), k.PrevDType(), []int{rows * len(k.Stages)})
	partial := array.New(res.Device(), ir.Float64, []int{rows * parts}) // room for any stage's accumulators
	geoBytes := geo.Bytes()
	a := g.GetArgs()
	defer g.PutArgs(a)
	for _, stage := range k.StagedPasses() {
		pk := *k
		pk.Staged, pk.Stage = true, stage
		fn := g.KernelIn(s.cache, pk.Name(), pk.Source)
		a.Reset().I64(int64(rows)).I64(int64(R)).I64(int64(chunk))
		for _, t := range args {
			a.Ptr(t.DevicePtr())
		}
		a.Ptr(res.DevicePtr()).Ptr(partial.DevicePtr()).Ptr(prev.DevicePtr()).Bytes(geoBytes, 8)
		if err := g.Stream().Launch(fn, cuda.Dim3{X: uint32(rows), Y: uint32(parts), Z: 1}, cuda.Dim3{X: uint32(pk.Threads), Y: 1, Z: 1}, 0, a); err != nil {
			panic(fmt.Sprintf("gocompile: %s: launch: %v", s.title, err))
		}
		if stage == len(k.Stages) {
			continue // the root's pass has no final
		}
		final := g.KernelIn(s.cache, pk.Name()+"_final", pk.Source)
		a.Reset().I64(int64(rows)).I64(int64(parts)).I64(int64(R)).Ptr(partial.DevicePtr()).Ptr(prev.DevicePtr()).Ptr(res.DevicePtr())
		g.Launch(s.title, final, rows, pk.Threads, a)
	}
}

// broadcastArgs checks that a region's inputs share a device and returns
// the shape they broadcast to (and the inputs as values), panicking as op
// would otherwise.
func broadcastArgs(op *ir.Op, args []*array.Array) ([]int, []ir.Value) {
	shapes := make([][]int, len(args))
	vals := make([]ir.Value, len(args))
	for i, t := range args {
		shapes[i], vals[i] = t.Shape(), t
	}
	array.CheckDevices(op, vals)
	full, err := ir.Broadcast(op.Title, shapes...)
	array.Check(err, op.Title, args...)
	return full, vals
}
