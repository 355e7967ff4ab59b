package program

import (
	"fmt"
	"os"
	"runtime"

	"gocompile/array"
	"gocompile/cuda"
	"gocompile/inductor"
	"gocompile/ir"
)

// Row regions over dims other than the last alone (fuse.Row.Dims): on a
// GPU one generated column kernel (inductor.ColKernel), on the CPU the row
// walk of row_cpu.go with rows over the kept dims and each row's elements
// over the reduced dims.

// runDims is run for a region with Row.Dims set, and on a GPU for one over
// the last dim whose layout a column kernel reads better (columnOnGPU) or
// whose rows are short and many (short, shortRowsOnGPU).
func (s *rowStep) runDims(args []*array.Array, dst func(ir.Device, []int) *array.Array, q *array.LaunchQueue, short bool) *array.Array {
	n := s.r.Root
	full, _ := broadcastArgs(n.Op, args)
	dims := s.r.Row.ReducedDims()
	if len(full) != len(s.r.Row.Full) {
		q.Drain()
		return s.runNodes(args)
	}
	nOut, nRed := ir.Numel(ir.ReduceShape(full, dims, false)), 1
	for _, d := range dims {
		nRed *= full[d]
	}
	shape := full
	if s.root == nil {
		shape = ir.ReduceShape(full, dims, len(n.Shape) == len(full))
	}
	dev := args[0].Device()
	if nRed == 0 || nOut == 0 || s.dimsOpByOp(args, full, nOut, nRed) {
		q.Drain() // the eager ops launch now
		return s.runNodes(args)
	}
	if dev == array.CPU {
		return s.runDimsCPU(args, full, shape, dst)
	}
	var res *array.Array
	if dst != nil {
		res = dst(dev, shape)
	}
	if res == nil {
		res = array.New(dev, n.DType, shape)
	}
	if views, merged, ok := trailingRows(args, full, dims); ok && !short {
		// Rows in memory order: the row kernels, which split few long
		// rows of any region across blocks.
		if s.opByOp(views[0], nOut, nRed) {
			q.Drain()
			return s.runNodes(args)
		}
		s.runGPU(views, merged, res, q)
		return res
	}
	if !s.runDimsGPU(args, full, nOut, nRed, res, q) {
		q.Drain()
		return s.runNodes(args)
	}
	return res
}

// trailingRows is args viewed as rows of one dim, with the merged full
// shape, where a region over full reduces its trailing dims dims and every
// input's layout merges them into one (a var over the last three dims of
// a contiguous tensor): the largest input reading along the row with
// stride 1, others too or uniform along it. ok is false otherwise.
func trailingRows(args []*array.Array, full, dims []int) (views []*array.Array, merged []int, ok bool) {
	kept := len(full) - len(dims)
	for i, d := range dims {
		if d != kept+i {
			return nil, nil, false
		}
	}
	merged = append(append([]int(nil), full[:kept]...), ir.Numel(full[kept:]))
	primary := 0
	for i, t := range args {
		if t.Numel() > args[primary].Numel() {
			primary = i
		}
	}
	for i, t := range args {
		if !ir.SameShape(t.Shape(), full) {
			t = t.Expand(full...)
		}
		st, ok := ir.ViewStrides(t.Shape(), t.Strides(), merged)
		if !ok || (i == primary || st[kept] != 0) && st[kept] != 1 {
			return nil, nil, false
		}
		views = append(views, t.View(merged...))
	}
	return views, merged, true
}

// columnOnGPU reports whether a region over the last dim runs better as a
// column kernel on a GPU: its largest input holds its stride-1 dim among
// the kept dims (a transposed or permuted input), so that a row kernel
// would read it uncoalesced.
func (s *rowStep) columnOnGPU(args []*array.Array) bool {
	if len(args) == 0 || args[0].Device() == array.CPU {
		return false
	}
	p := largest(args)
	shape, st := p.Shape(), p.Strides()
	last := len(shape) - 1
	if last < 1 || st[last] == 1 || shape[last] <= 1 {
		return false
	}
	for d := range last {
		if st[d] == 1 && shape[d] > 1 {
			return true
		}
	}
	return false
}

// shortRowsOnGPU reports whether a region over the last dim runs as a
// column kernel on a GPU because its rows are short and many
// (array.ShortRunsAsColumns: a thread a row, which reads its row whole,
// where the row kernel would share each row among a few threads that
// combine their parts by shuffles): its largest input's rows lie in
// memory in order, and it is a lone reduction with a value per row
// (RowKernel.CanSplit). On an H200 a max over rows of 5 bfloat16 elements
// ran 2.3x faster so; regions of several passes over the row or a value
// per element did not (a softmax over rows of 12 float16 elements 4x
// slower, a variance over 16 float32 ones 2.5x): each pass re-reads the
// row a thread at a time, and per-element stores a row apart do not
// coalesce. GOCOMPILE_ROW_SHORT=off keeps every region in the row
// kernels (for measuring).
func (s *rowStep) shortRowsOnGPU(args []*array.Array) bool {
	if !shortRowsAsColumns || !s.kernel.CanSplit() || len(args) == 0 || args[0].Device() == array.CPU {
		return false
	}
	p := largest(args)
	shape, st := p.Shape(), p.Strides()
	last := len(shape) - 1
	if last < 0 || st[last] != 1 {
		return false
	}
	R := shape[last]
	return R > 1 && array.ShortRunsAsColumns(R, p.Numel()/R)
}

var shortRowsAsColumns = os.Getenv("GOCOMPILE_ROW_SHORT") != "off"

// largest is the input with the most elements (the first of those).
func largest(args []*array.Array) *array.Array {
	p := args[0]
	for _, t := range args {
		if t.Numel() > p.Numel() {
			p = t
		}
	}
	return p
}

// planKey appends what a row or column step's launch plan depends on: the
// full shape and the result's and inputs' layouts (array.AppendLayoutKey).
func planKey(key, full []int, res *array.Array, args []*array.Array) []int {
	key = append(key, full...)
	key = array.AppendLayoutKey(key, res)
	for _, t := range args {
		key = array.AppendLayoutKey(key, t)
	}
	return key
}

// complement is the dims of a rank-n shape not in dims.
func complement(n int, dims []int) []int {
	in := make([]bool, n)
	for _, d := range dims {
		in[d] = true
	}
	var out []int
	for d := range n {
		if !in[d] {
			out = append(out, d)
		}
	}
	return out
}

// dimsOpByOp reports whether the region runs better op by op: few outputs
// over long reduced ranges, which only a lone reduction splits across
// blocks or cores (the eager reductions split them themselves); and on the
// CPU a region whose largest input is not contiguous along the innermost
// reduced dim (a reduction over dim 0 or a middle dim of a row-major
// tensor, a softmax over dim 0): the row walk would read it element by
// element with a stride, where the eager reductions fold tiles of
// neighbouring outputs and the eager pointwise ops read memory in order;
// and on the CPU a lone reduction, which is the eager kernel's own work.
func (s *rowStep) dimsOpByOp(args []*array.Array, full []int, nOut, nRed int) bool {
	t := args[0]
	if t.Device() != array.CPU {
		return false // runDimsGPU decides, from its launch
	}
	if s.loneReduction() {
		return true // the eager kernel's own work
	}
	dims := s.r.Row.ReducedDims()
	p := largest(args)
	if st := ir.BroadcastStrides(p.Shape(), p.Strides(), full); st[dims[len(dims)-1]] != 1 {
		return true
	}
	return !s.kernel.CanSplit() && nOut < runtime.GOMAXPROCS(0) && nRed >= 2*array.MinParallel
}

// runDimsGPU launches the region's column kernel: operands are the inputs
// and then the output, laid out by array.ColLayout. It reports false,
// launching nothing, when the region would run on too few blocks to fill
// the device (few outputs over long reduced ranges in a region that cannot
// split them: the eager ops split them), or would read a large input
// uncoalesced (crossesLayout). The plan of the last call serves a call
// whose tensors lie alike.
func (s *rowStep) runDimsGPU(args []*array.Array, full []int, nOut, nRed int, res *array.Array, q *array.LaunchQueue) bool {
	g := res.GPU()
	var buf [96]int
	p := s.lastCol.Get(g, planKey(buf[:0], full, res, args), nil, func() *colPlanned { return s.planDimsGPU(args, full, nOut, nRed, g) })
	if !p.ok {
		return false
	}
	k := &p.k
	if k.Split {
		q.Drain()
		acc := ir.Float32
		if k.Row.Stages[0].Compute == ir.F64 {
			acc = ir.Float64
		}
		partial := array.New(res.Device(), acc, []int{p.parts * nOut})
		a := g.GetArgs()
		defer g.PutArgs(a)
		a.I64(int64(nOut)).I64(int64(nRed)).I64(int64(p.chunk))
		for _, t := range args {
			a.Ptr(t.DevicePtr())
		}
		a.Ptr(res.DevicePtr()).Ptr(partial.DevicePtr()).Bytes(p.geoBytes, 8)
		fn := g.KernelIn(s.cache, p.name, k.Source)
		final := g.KernelIn(s.cache, p.name+"_final", k.Source)
		if err := g.Stream().Launch(fn, p.grid, p.block, 0, a); err != nil {
			panic(fmt.Sprintf("gocompile: %s: launch: %v", s.title, err))
		}
		a.Reset().I64(int64(nOut)).I64(int64(p.parts)).I64(int64(nRed)).Ptr(partial.DevicePtr()).Ptr(res.DevicePtr()).Bytes(p.geoBytes, 8)
		fgrid := cuda.Dim3{X: uint32((nOut + k.TX - 1) / k.TX), Y: 1, Z: 1}
		if err := g.Stream().Launch(final, fgrid, p.block, 0, a); err != nil {
			panic(fmt.Sprintf("gocompile: %s: launch: %v", s.title, err))
		}
		return true
	}
	a := q.Args(g)
	defer q.Release(g, a)
	a.I64(int64(nOut)).I64(int64(nRed))
	for _, t := range args {
		a.Ptr(t.DevicePtr())
	}
	a.Ptr(res.DevicePtr()).Bytes(p.geoBytes, 8)
	if q == nil {
		s.launchCol(g, p, p.fn.Get(g, s.cache, p.name, k.Source), a, nOut*nRed)
		return true
	}
	array.KernelOrQueue(q, g, s.cache, p.name, k.Source, func(fn *cuda.Function) { s.launchCol(g, p, fn, a, nOut*nRed) },
		append([]*array.Array{res}, args...)...)
	return true
}

// launchCol launches fn, p's kernel without Split, with arguments a.
func (s *rowStep) launchCol(g *array.GPU, p *colPlanned, fn *cuda.Function, a *cuda.Args, elems int) {
	if err := g.LaunchSmall(fn, p.grid, p.block, 0, a, elems); err != nil {
		panic(fmt.Sprintf("gocompile: %s: launch: %v", s.title, err))
	}
}

// colPlanned is a column kernel's launch plan; with ok false the region
// runs op by op.
type colPlanned struct {
	ok          bool
	k           inductor.ColKernel
	name        string
	geoBytes    []byte
	grid, block cuda.Dim3
	parts       int
	chunk       int
	fn          array.LoadedKernel // the kernel of a launch without Split, once loaded
}

// planDimsGPU plans runDimsGPU's launch.
func (s *rowStep) planDimsGPU(args []*array.Array, full []int, nOut, nRed int, g *array.GPU) *colPlanned {
	p := &colPlanned{}
	red := make([]bool, len(full))
	for _, d := range s.r.Row.ReducedDims() {
		red[d] = true
	}
	strides := make([][]int, 0, len(args)+1)
	primary := 0
	for i, t := range args {
		strides = append(strides, ir.BroadcastStrides(t.Shape(), t.Strides(), full))
		if t.Numel() > args[primary].Numel() {
			primary = i
		}
	}
	out := make([]int, len(full)) // the output's strides over the full shape
	for d, st := len(full)-1, 1; d >= 0; d-- {
		if s.root == nil && red[d] {
			continue // a reduced output: one element per kept index
		}
		out[d] = st
		st *= full[d]
	}
	strides = append(strides, out)
	geo, column, ok := array.ColLayout(full, red, strides, primary, true)
	if !ok {
		array.Throw(s.r.Root.Op.Title, args, "make the inputs contiguous first",
			"the kept or reduced dims have more dims that cannot be merged than GPU kernels index (%d)", inductor.MaxRank)
	}
	if crossesLayout(&geo, args, primary) {
		return p
	}
	k := inductor.ColKernel{Row: s.kernel, Shape: geo.Shape(nOut, nRed)}
	kr := geo.KeptRank - 1
	maxVec := 1 // the widest vector every ColVec input can be read in
	if column {
		maxVec = 8
	}
	for i, t := range args {
		uniform := true
		for d := range geo.RedRank {
			uniform = uniform && geo.RedStride[i][d] == 0
		}
		acc := inductor.ColStrided
		switch {
		case uniform:
			acc = inductor.ColUniform
		case geo.KeptStride[i][kr] == 1:
			acc = inductor.ColVec
			maxVec = min(maxVec, array.ColVector(&geo, i, t))
		}
		k.Access = append(k.Access, acc)
	}
	k.Rows = !column
	if k.Row.CanSplit() {
		k.TX, k.TY, k.Vec = inductor.ColLaunch(column, int(geo.KeptSize[kr]), nOut, nRed, maxVec)
	} else {
		k.TX, k.TY = inductor.ColLaunchFused(column, int(geo.KeptSize[kr]), nOut, nRed)
		k.Vec = 1
	}
	if k.Vec == 1 {
		for i, acc := range k.Access {
			if acc == inductor.ColVec {
				k.Access[i] = inductor.ColStrided
			}
		}
	}
	tiles := (nOut + k.TX*k.Vec - 1) / (k.TX * k.Vec)
	parts, chunk := 1, nRed
	if k.Row.CanSplit() {
		parts, chunk = inductor.ColParts(tiles, nRed, k.TY, inductor.DefaultColTarget)
	} else if tiles < g.Dev().SMCount && nRed >= 1<<14 {
		return p
	}
	k.Split = parts > 1
	bx, by := k.Block()
	p.ok, p.k, p.name, p.geoBytes = true, k, k.Name(), geo.Bytes()
	p.grid = cuda.Dim3{X: uint32(tiles), Y: uint32(parts), Z: 1}
	p.block = cuda.Dim3{X: uint32(bx), Y: uint32(by), Z: 1}
	p.parts, p.chunk = parts, chunk
	return p
}

// crossesLayout reports whether an input of at least a quarter of the
// primary input's size steps by one element along another dim than the
// primary one (a permuted operand beside a contiguous one): one kernel
// walks both in the primary's order and reads it uncoalesced, where the
// eager ops lay each intermediate out for the next.
func crossesLayout(geo *inductor.ColGeometry, args []*array.Array, primary int) bool {
	unit := func(i int) int { // the dim of unit stride: kept d, or reduced d as MaxRank+d; -1 if none
		for d := range geo.KeptRank {
			if st := geo.KeptStride[i][d]; (st == 1 || st == -1) && geo.KeptSize[d] > 1 {
				return d
			}
		}
		for d := range geo.RedRank {
			if st := geo.RedStride[i][d]; (st == 1 || st == -1) && geo.RedSize[d] > 1 {
				return inductor.MaxRank + d
			}
		}
		return -1
	}
	p := unit(primary)
	for i, t := range args {
		if i == primary || 4*t.Numel() < args[primary].Numel() {
			continue
		}
		if u := unit(i); p >= 0 && u >= 0 && u != p {
			return true
		}
	}
	return false
}
