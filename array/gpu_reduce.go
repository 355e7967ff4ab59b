package array

import (
	"cmp"
	"fmt"
	"slices"
	"sync"

	"gocompile/cuda"
	"gocompile/inductor"
	"gocompile/ir"
)

// gpuReduce reduces x over the dims red (kept dims keep, in order) into
// res, accumulating in kind k.
func gpuReduce(r ir.Reducer, x *Array, k ir.Kind, keptShape, keptStrides, redShape, redStrides []int, res *Array) {
	nOut, nRed := res.Numel(), ir.Numel(redShape)
	if nOut == 0 {
		return
	}
	g := res.st.gpu.g
	if gpuReduceColumns(r, x, k, keptShape, keptStrides, redShape, redStrides, res) {
		return
	}
	oshape, ostr := Coalesce(keptShape, keptStrides)
	rshape, rstr := Coalesce(redShape, redStrides)
	if len(oshape) > inductor.MaxRank || len(rshape) > inductor.MaxRank {
		Throw(r.String(), []*Array{x}, "make the input contiguous first", "too many dims for a GPU reduction")
	}
	var geo inductor.ReduceGeometry
	geo.OuterRank, geo.InnerRank = len(oshape), len(rshape)
	for d, s := range oshape {
		geo.OuterSize[d], geo.OuterStr[d] = int64(s), int64(ostr[0][d])
	}
	for d, s := range rshape {
		geo.InnerSize[d], geo.InnerStr[d] = int64(s), int64(rstr[0][d])
	}
	kern := &inductor.ReduceKernel{Reducer: r, In: x.dtype, Kind: k, Out: res.dtype, Unroll: reduceUnroll}
	gen := reduceSource(kern)
	fn := g.kernel(kern.Name(), gen)

	// Long rows with few outputs are split across blocks so every SM works:
	// reduceWaves times as many blocks as the device holds at once (one
	// wave: every block starts at once and none waits for a straggler),
	// each with at least reduceMinChunk elements. Chunks are whole vectors,
	// so that a contiguous row aligned at its start stays aligned in every
	// chunk.
	parts := 1
	if nOut < 2*g.dev.SMCount && nRed > 8*inductor.ReduceBlock {
		resident := reduceWaves * g.residentBlocks(fn, inductor.ReduceBlock) * g.dev.SMCount
		parts = max(1, min((nRed+reduceMinChunk-1)/reduceMinChunk, (resident+nOut-1)/nOut, 65535))
	}
	chunk := (nRed + parts - 1) / parts
	chunk = max(1, (chunk+inductor.VectorWidth-1)/inductor.VectorWidth) * inductor.VectorWidth
	parts = max(1, (nRed+chunk-1)/chunk)
	// Short rows are reduced a warp each, as are rows up to
	// reduceWarpRowsLong when there are enough of them to fill the device
	// four times over.
	warpRows := parts == 1 && (nRed <= reduceWarpRowsMax ||
		nRed <= reduceWarpRowsLong && nOut >= 4*inductor.WarpRowsPerBlock*g.dev.SMCount)
	partial := reducePartials(res, kern, nOut, parts)
	args := g.GetArgs()
	defer g.PutArgs(args)
	reduceArgs(args, nOut, nRed, chunk, x, res, partial)
	grid := cuda.Dim3{X: uint32(nOut), Y: uint32(parts), Z: 1}
	if warpRows {
		args.I32(1)
		grid.X = uint32((nOut + inductor.WarpRowsPerBlock - 1) / inductor.WarpRowsPerBlock)
	} else {
		args.I32(0)
	}
	args.Bytes(geo.Bytes(), 8)
	err := g.stream.Launch(fn, grid, cuda.Dim3{X: inductor.ReduceBlock, Y: 1, Z: 1}, 0, args)
	if err != nil {
		panic(fmt.Sprintf("array: %v: launch: %v", r, err))
	}
	if parts > 1 {
		final := g.kernel(kern.Name()+"_final", gen)
		args.Reset().I64(int64(nOut)).I64(int64(parts)).I64(int64(nRed)).Ptr(partial.DevicePtr()).Ptr(res.DevicePtr())
		err := g.stream.Launch(final, cuda.Dim3{X: uint32(nOut), Y: 1, Z: 1}, cuda.Dim3{X: inductor.ReduceBlock, Y: 1, Z: 1}, 0, args)
		if err != nil {
			panic(fmt.Sprintf("array: %v: launch: %v", r, err))
		}
	}
}

// Launch shape of reductions, tuned on an H200 (see gpuReduce and
// TestGPUTuneLaunch).
var (
	reduceUnroll       = inductor.DefaultReduceUnroll
	reduceWaves        = 1
	reduceMinChunk     = 4096
	reduceWarpRowsMax  = 1024 // rows this short are reduced a warp each,
	reduceWarpRowsLong = 4096 // and rows this short when there are many
	// The column form (gpuReduceColumns): steps in flight per thread, and
	// the blocks a split launch aims at.
	reduceColUnroll = inductor.DefaultReduceUnroll
	reduceColTarget = inductor.DefaultColTarget
)

// residency caches residentBlocks per kernel.
var residency sync.Map // *cuda.Function -> int

// residentBlocks is how many blocks of fn, of block threads each, one SM
// runs at once, as its registers and the SM's threads allow (the kernels
// this serves use little shared memory).
func (g *GPU) residentBlocks(fn *cuda.Function, block int) int {
	if v, ok := residency.Load(fn); ok {
		return v.(int)
	}
	threads := 2048 // threads per SM, by compute capability
	switch d := g.dev; {
	case d.Major == 7 && d.Minor == 5:
		threads = 1024
	case d.Major == 8 && d.Minor > 0 && d.Minor != 7, d.Major >= 12:
		threads = 1536
	}
	n := threads / block
	if regs, _, _, err := fn.Attributes(); err == nil && regs > 0 {
		perWarp := (regs*32 + 255) / 256 * 256 // registers are allocated per warp, 256 at a time
		n = min(n, g.dev.MaxRegistersPerBlock/(perWarp*(block/32)))
	}
	n = max(n, 1)
	residency.Store(fn, n)
	return n
}

// gpuReduceColumns runs the reduction with the column form of the
// reduction kernel when the input's stride-1 dim is a kept one (a
// reduction over dim 0 of a row-major matrix, or over a middle dim):
// threads take adjacent outputs, so their loads coalesce, and walk the
// reduced dims, split across blocks where the outputs are few. Reduced
// ranges of several dims that hold the stride-1 dim (a reduction over dims
// 0 and 2) take it too, a block an output. It reports false, launching
// nothing, for layouts the row form reads better.
func gpuReduceColumns(r ir.Reducer, x *Array, k ir.Kind, keptShape, keptStrides, redShape, redStrides []int, res *Array) bool {
	vector := func(geo *inductor.ColGeometry) int { return ColVector(geo, 0, x) }
	p, ok := planColReduce(r, x.dtype, k, res.dtype, keptShape, keptStrides, redShape, redStrides, vector)
	if !ok {
		return false
	}
	g := res.st.gpu.g
	nOut, nRed := res.Numel(), ir.Numel(redShape)
	gen := reduceSource(p.kern)
	fn := g.kernel(p.kern.Name(), gen)
	partial := reducePartials(res, p.kern, nOut, p.parts)
	geoBytes := p.geo.Bytes()
	args := g.GetArgs()
	defer g.PutArgs(args)
	reduceArgs(args, nOut, nRed, p.chunk, x, res, partial)
	args.Bytes(geoBytes, 8)
	bx, by := p.kern.Block()
	block := cuda.Dim3{X: uint32(bx), Y: uint32(by), Z: 1}
	if err := g.stream.Launch(fn, cuda.Dim3{X: uint32(p.tiles()), Y: uint32(p.parts), Z: 1}, block, 0, args); err != nil {
		panic(fmt.Sprintf("array: %v: launch: %v", r, err))
	}
	if p.parts > 1 {
		final := g.kernel(p.kern.Name()+"_final", gen)
		args.Reset().I64(int64(nOut)).I64(int64(p.parts)).I64(int64(nRed)).Ptr(partial.DevicePtr()).Ptr(res.DevicePtr()).Bytes(geoBytes, 8)
		if err := g.stream.Launch(final, cuda.Dim3{X: uint32(p.finalTiles()), Y: 1, Z: 1}, block, 0, args); err != nil {
			panic(fmt.Sprintf("array: %v: launch: %v", r, err))
		}
	}
	return true
}

// colReducePlan is an eager reduction's column kernel and its launch over
// nOut outputs: tiles() by parts blocks of the kernel's Block, each part
// reducing chunk indices of the range, then, with parts > 1, the final
// pass on finalTiles() blocks.
type colReducePlan struct {
	kern               *inductor.ReduceKernel
	geo                inductor.ColGeometry
	nOut, parts, chunk int
}

// tiles is the grid's x: TX·Vec outputs a block.
func (p *colReducePlan) tiles() int {
	return (p.nOut + p.kern.TX*p.kern.Vec - 1) / (p.kern.TX * p.kern.Vec)
}

// finalTiles is the final pass's grid: TX outputs a block.
func (p *colReducePlan) finalTiles() int { return (p.nOut + p.kern.TX - 1) / p.kern.TX }

// planColReduce plans gpuReduceColumns' kernel for an input of dtype in
// laid out as the kept and reduced shapes and strides say; vector reports
// the widest vector the input can be read in along the outputs
// (ColVector). ok is false for layouts the row form reads better.
func planColReduce(r ir.Reducer, in ir.DType, k ir.Kind, out ir.DType, keptShape, keptStrides, redShape, redStrides []int, vector func(*inductor.ColGeometry) int) (p colReducePlan, ok bool) {
	nOut, nRed := ir.Numel(keptShape), ir.Numel(redShape)
	shape := append(append([]int(nil), keptShape...), redShape...)
	red := make([]bool, len(shape))
	outStrides := make([]int, len(shape))
	for d := range redShape {
		red[len(keptShape)+d] = true
	}
	for d, st := len(keptShape)-1, 1; d >= 0; d-- {
		outStrides[d] = st
		st *= keptShape[d]
	}
	xStrides := append(append([]int(nil), keptStrides...), redStrides...)
	geo, column, ok := ColLayout(shape, red, [][]int{xStrides, outStrides}, 0, !r.IsArg())
	// The row form walks a reduced range of several dims dividing at each
	// element: the column form's walk in its row layout (a block an
	// output) steps through them without.
	if !ok || !column && geo.RedRank < 2 || nRed <= 1 {
		return p, false
	}
	kInner := int(geo.KeptSize[geo.KeptRank-1])
	maxVec := 1
	if geo.KeptStride[0][geo.KeptRank-1] == 1 {
		maxVec = vector(&geo)
	}
	tx, ty, vec := inductor.ColLaunch(column, kInner, nOut, nRed, maxVec)
	p.kern = &inductor.ReduceKernel{Reducer: r, In: in, Kind: k, Out: out, TX: tx, TY: ty, Vec: vec, Rows: !column, Unroll: reduceColUnroll, Col: geo.Shape(nOut, nRed)}
	p.geo, p.nOut = geo, nOut
	p.parts, p.chunk = inductor.ColParts(p.tiles(), nRed, ty, reduceColTarget)
	return p, true
}

// ColLayout is the geometry of a column kernel (inductor.ColGeometry) over
// shape, reducing the dims red marks, for operands with the given strides
// (one list per operand, aligned with shape). The kept dims are ordered by
// the primary operand's strides, largest first (broadcast dims outermost),
// so that its stride-1 dim is innermost and adjacent outputs are adjacent
// in memory; with reorderRed so are the reduced dims (not for arg
// reductions, whose indices count in the logical order). Dims that every
// operand steps through as one are merged. column reports whether the
// primary operand's smallest stride lies in the kept dims, where the
// column form reads it coalesced; ok is false when the dims do not fit a
// kernel's rank.
func ColLayout(shape []int, red []bool, strides [][]int, primary int, reorderRed bool) (geo inductor.ColGeometry, column, ok bool) {
	var kept, reduced []int
	for d := range shape {
		if red[d] {
			reduced = append(reduced, d)
		} else {
			kept = append(kept, d)
		}
	}
	key := func(d int) int { // broadcast dims sort outermost
		if s := strides[primary][d]; s != 0 {
			return max(s, -s)
		}
		return int(^uint(0) >> 1)
	}
	byStride := func(a, b int) int { return cmp.Compare(key(b), key(a)) }
	slices.SortStableFunc(kept, byStride)
	if reorderRed {
		slices.SortStableFunc(reduced, byStride)
	}
	split := func(dims []int) ([]int, [][]int) {
		sh := make([]int, len(dims))
		st := make([][]int, len(strides))
		for i := range strides {
			st[i] = make([]int, len(dims))
		}
		for j, d := range dims {
			sh[j] = shape[d]
			for i := range strides {
				st[i][j] = strides[i][d]
			}
		}
		sh, st = Coalesce(sh, st...)
		if len(sh) == 0 { // one element: a dim of size 1
			sh = []int{1}
			for i := range st {
				st[i] = []int{0}
			}
		}
		return sh, st
	}
	ksh, kst := split(kept)
	rsh, rst := split(reduced)
	if len(ksh) > inductor.MaxRank || len(rsh) > inductor.MaxRank {
		return geo, false, false
	}
	geo.KeptRank, geo.RedRank = len(ksh), len(rsh)
	geo.KeptStride = make([][inductor.MaxRank]int64, len(strides))
	geo.RedStride = make([][inductor.MaxRank]int64, len(strides))
	for d, n := range ksh {
		geo.KeptSize[d] = int64(n)
		for i := range strides {
			geo.KeptStride[i][d] = int64(kst[i][d])
		}
	}
	for d, n := range rsh {
		geo.RedSize[d] = int64(n)
		for i := range strides {
			geo.RedStride[i][d] = int64(rst[i][d])
		}
	}
	// The primary operand's smallest non-zero stride in each set.
	least := func(sh []int, st []int) int {
		m := int(^uint(0) >> 1)
		for d, n := range sh {
			if s := max(st[d], -st[d]); n > 1 && s != 0 {
				m = min(m, s)
			}
		}
		return m
	}
	kl, rl := least(ksh, kst[primary]), least(rsh, rst[primary])
	column = kl < rl || (kl == rl && ir.Numel(rsh) == 1)
	if !column && rl == 1 {
		// A unit-stride reduced run this short would leave most of a
		// warp idle in the row form; in the column form each thread
		// reads its run whole, and a warp's runs share cache lines.
		for d, n := range rsh {
			if st := rst[primary][d]; (st == 1 || st == -1) && ShortRunsAsColumns(n, ir.Numel(ksh)) {
				column = true
			}
		}
	}
	return geo, column, true
}

// ShortRunsAsColumns reports whether a reduction over contiguous runs of
// run elements with outputs outputs reads them in the column form (a
// thread a run): runs of at most colShortRun elements, and at least
// colShortRunOutputs outputs (enough threads to fill a GPU with one
// output each).
func ShortRunsAsColumns(run, outputs int) bool {
	return run <= colShortRun && outputs >= colShortRunOutputs
}

var (
	colShortRun        = 16
	colShortRunOutputs = 1 << 14 // a variable for tests
)

// ColVector is the widest vector, of up to 16 bytes and 8 elements, in
// which tensor i of the column geometry geo, x, can be read along its
// unit-stride inner kept dim: its address and every other stride are
// multiples of its elements.
func ColVector(geo *inductor.ColGeometry, i int, x *Array) int {
	p, size := x.DevicePtr(), cuda.DevicePtr(x.dtype.Size())
	if p%size != 0 {
		return 1
	}
	widest := max(1, min(8, 16/x.dtype.Size()))
	return colVector(geo, i, int(p/size%cuda.DevicePtr(widest)), widest)
}

// colVector is ColVector for a tensor whose first element lies elem
// elements past an address aligned for widest, the widest vector its
// elements allow.
func colVector(geo *inductor.ColGeometry, i, elem, widest int) int {
	for w := widest; w > 1; w /= 2 {
		ok := elem%w == 0
		for d := range geo.KeptRank - 1 {
			ok = ok && geo.KeptStride[i][d]%int64(w) == 0
		}
		for d := range geo.RedRank {
			ok = ok && geo.RedStride[i][d]%int64(w) == 0
		}
		if ok {
			return w
		}
	}
	return 1
}

// reduceSource generates kern's source once for both the kernels compiled
// from it (the reduction and its _final pass).
func reduceSource(kern *inductor.ReduceKernel) func() (string, error) {
	var src string
	return func() (string, error) {
		if src == "" {
			src = kern.Source()
		}
		return src, nil
	}
}

// reducePartials is the buffer of parts partial accumulators per output of
// a split reduction, or nil when it is not split.
func reducePartials(res *Array, kern *inductor.ReduceKernel, nOut, parts int) *Array {
	if parts <= 1 {
		return nil
	}
	return newGPUArray(res.st.dev, ir.Int64, []int{nOut * parts * kern.AccBytes() / 8})
}

// reduceArgs appends the parameters a reduction kernel's two forms share:
// the counts, the input, the result and the partials (0 when unsplit).
func reduceArgs(args *cuda.Args, nOut, nRed, chunk int, x, res, partial *Array) {
	args.I64(int64(nOut)).I64(int64(nRed)).I64(int64(chunk)).Ptr(x.DevicePtr()).Ptr(res.DevicePtr())
	if partial != nil {
		args.Ptr(partial.DevicePtr())
	} else {
		args.Ptr(0)
	}
}
