package program

import (
	"runtime"
	"slices"
	"sync"
	"weak"

	"gocompile/array"
	"gocompile/fuse"
	"gocompile/ir"
)

// The CPU half of row regions: block programs over chunks of each row.

// cpuPlan is how a row region runs on the CPU when its rows are short
// enough to keep: a reduction stage whose per-element value a later
// program reads again (softmax's exp(x - max), summed, then divided) keeps
// the values of the row it computes while folding them, and the later
// programs read them back instead of computing them again.
type cpuPlan struct {
	stages []*ir.Block // each stage's program, reading kept values
	root   *ir.Block
	keep   []int // per stage, the kept-values operand it fills, or -1
	kinds  []ir.Kind
	nKept  int
}

// keepLimit is the longest row whose values a worker keeps: a row or two
// of 32K values (128 KB in float32) stays within a core's L2 cache.
const keepLimit = 1 << 15

// cpuPlans holds each step's plan (nil: none) while the step lives.
var cpuPlans sync.Map // weak.Pointer[rowStep] → *cpuPlan

// keepValues turns kept values on; tests turn it off to compare.
var keepValues = true

// cpuPlan returns the step's plan with kept values, or nil when no later
// program reads a stage's values again.
func (s *rowStep) cpuPlan() *cpuPlan {
	key := weak.Make(s)
	if p, ok := cpuPlans.Load(key); ok {
		return p.(*cpuPlan)
	}
	p, loaded := cpuPlans.LoadOrStore(key, newCPUPlan(s.r, s.kinds))
	if !loaded {
		runtime.AddCleanup(s, func(k weak.Pointer[rowStep]) { cpuPlans.Delete(k) }, key)
	}
	return p.(*cpuPlan)
}

func newCPUPlan(r *fuse.Region, kinds []ir.Kind) *cpuPlan {
	stages := r.Row.Stages
	// exprs are the programs in order: the stages', then the root's.
	exprs := make([]*ir.Expr, 0, len(stages)+1)
	for _, st := range stages {
		exprs = append(exprs, st.Expr)
	}
	if r.Expr != nil {
		exprs = append(exprs, r.Expr)
	}
	p := &cpuPlan{keep: make([]int, len(stages)), kinds: append([]ir.Kind(nil), kinds...)}
	from := map[*ir.Expr]*ir.Expr{}
	for k, st := range stages {
		p.keep[k] = -1
		e := st.Expr
		// The values must be typed alike wherever they are read: the same
		// compute kind, and an expression that computes (not an operand).
		if !st.Reduce || e.Prim == ir.PArg || e.Prim == ir.PConst || e.Prim == ir.PParam || st.Compute != r.Compute {
			continue
		}
		if _, kept := from[e]; kept {
			// Another reduction of the same values (two maxima of one
			// row): the earlier stage's kept values serve both, so the
			// later stage computes its own and keeps none.
			continue
		}
		read := false
		for _, later := range exprs[k+1:] {
			read = read || contains(later, e, map[*ir.Expr]bool{})
		}
		if !read {
			continue
		}
		blk, err := compileFused(e, p.kinds, st.Compute)
		if err != nil {
			continue
		}
		p.keep[k] = p.nKept
		p.nKept++
		from[e] = ir.Arg(len(p.kinds))
		p.kinds = append(p.kinds, blk.OutKind())
	}
	if p.nKept == 0 {
		return nil
	}
	compile := func(e *ir.Expr, compute ir.Kind) *ir.Block {
		blk, err := compileFused(e, p.kinds, compute)
		if err != nil {
			return nil
		}
		return blk
	}
	for _, st := range stages {
		// A stage's own values are computed, then kept; what it reads of
		// earlier stages is read back.
		mine := map[*ir.Expr]*ir.Expr{}
		for e, a := range from {
			if e != st.Expr {
				mine[e] = a
			}
		}
		blk := compile(replace(st.Expr, mine, map[*ir.Expr]*ir.Expr{}), st.Compute)
		if blk == nil {
			return nil
		}
		p.stages = append(p.stages, blk)
	}
	if r.Expr != nil {
		if p.root = compile(replace(r.Expr, from, map[*ir.Expr]*ir.Expr{}), r.Compute); p.root == nil {
			return nil
		}
	}
	return p
}

// contains reports whether e is x or has x among its operands, at any
// depth (expressions share nodes, so x is found by identity).
func contains(e, x *ir.Expr, seen map[*ir.Expr]bool) bool {
	if e == x {
		return true
	}
	if seen[e] {
		return false
	}
	seen[e] = true
	for _, a := range e.Args {
		if contains(a, x, seen) {
			return true
		}
	}
	return false
}

// replace is e with every node in from replaced by its image, sharing
// kept (memo holds the copies made).
func replace(e *ir.Expr, from, memo map[*ir.Expr]*ir.Expr) *ir.Expr {
	if to, ok := from[e]; ok {
		return to
	}
	if c, ok := memo[e]; ok {
		return c
	}
	c := *e
	if len(e.Args) > 0 {
		c.Args = make([]*ir.Expr, len(e.Args))
		for i, a := range e.Args {
			c.Args[i] = replace(a, from, memo)
		}
	}
	memo[e] = &c
	return &c
}

func (s *rowStep) runCPU(args []*array.Array, full []int, res *array.Array) {
	l := s.cpuRows(args, full)
	if l.R < cpuShortRow && s.r.Row.Dims == nil {
		s.tilesCPU(args, full, l, res)
		return
	}
	// Fewer rows than cores, and long: each row is split across the cores.
	if ir.Numel(l.outerShape) < runtime.GOMAXPROCS(0) && l.R >= 2*array.MinParallel {
		s.splitCPU(args, l, res)
		return
	}
	plan := &cpuPlan{stages: s.stages, root: s.root, keep: make([]int, len(s.stages))}
	for k := range plan.keep {
		plan.keep[k] = -1
	}
	if keepValues && l.R <= keepLimit {
		if p := s.cpuPlan(); p != nil {
			plan = p
		}
	}
	s.rowsCPU(plan, args, l, res)
}

// rowsCPU runs the region a row at a time, the rows split across the
// cores.
func (s *rowStep) rowsCPU(plan *cpuPlan, args []*array.Array, l cpuRows, res *array.Array) {
	outerShape, R := l.outerShape, l.R
	rows := ir.Numel(outerShape)
	nIn := len(args)
	stages := s.r.Row.Stages
	nKeep := nIn + len(stages) // the first kept-values operand
	// A lone reduction of an input as it is stores its rows' results
	// together, as the eager reduction does (the same values: the
	// result's dtype is the stage's).
	lone := len(stages) == 1 && stages[0].Reduce && plan.root == nil && !plan.stages[0].Computes()
	array.ParallelRows(rows, max(1, array.MinParallel/R), func(lo, hi int) {
		chunk := min(array.BlockSize, R)
		frames, rootFrame, put := takeFrames(plan.stages, plan.root, chunk)
		defer put()
		ops := make([]*array.Operand, nIn)
		for i, t := range args {
			ops[i] = t.Operand(l.redShape[i], l.red[i], 0)
		}
		one, rounders := stageValues(stages, 1) // each stage's value
		kept := make([]ir.Vec, plan.nKept)      // the kept values of the row
		for _, c := range plan.keep {
			if c >= 0 {
				kept[c] = ir.NewVec(plan.kinds[nKeep+c], R)
			}
		}
		idx := make([]int, len(outerShape))
		// bind makes f read every input at [start, start+n) of the row,
		// the stages computed so far, and the values kept so far.
		bind := func(f *ir.Frame, blk *ir.Block, start, n, done int) {
			loadArgs(f, blk, ops, start, n)
			for k := range done {
				f.SetUniform(nIn+k, one[k])
				if c := plan.keep[k]; c >= 0 {
					f.SetArg(nKeep+c, kept[c].Slice(start, start+n))
				}
			}
		}
		if lone {
			s.loneRows(plan.stages[0], args, l, res, lo, hi)
			return
		}
		for row := lo; row < hi; row++ {
			for i, t := range args {
				ops[i].SetOffset(l.rowOffset(t, i, row, idx))
			}
			var val ir.Vec
			for k, st := range stages {
				f, blk := frames[k], plan.stages[k]
				if st.Reduce {
					c := plan.keep[k]
					var acc ir.Acc
					if c < 0 {
						acc = foldRow(st.Reducer, blk, ops, 0, R, func(s0, m int) ir.Vec {
							bind(f, blk, s0, m, k)
							return f.Run(m, nil)
						})
					} else {
						acc = array.FoldRange(st.Reducer, blk.OutKind(), 0, R, func(s0, m int) ir.Vec {
							bind(f, blk, s0, m, k)
							dst := kept[c].Slice(s0, s0+m) // compute into the kept values
							return f.Run(m, &dst)
						})
					}
					rounders[k].Result(st.Reducer, acc, R, one[k])
				} else {
					bind(f, blk, 0, 1, k)
					rounders[k].Value(f.Run(1, nil), blk.OutKind(), one[k])
				}
				val = one[k]
			}
			switch {
			case plan.root == nil:
				res.Store(row, val, stages[len(stages)-1].Kind, 1)
			default:
				k := plan.root.OutKind()
				for s0 := 0; s0 < R; s0 += chunk {
					m := min(chunk, R-s0)
					bind(rootFrame, plan.root, s0, m, len(stages))
					if dst, ok := res.HostVec(row*R+s0, row*R+s0+m, k); ok && plan.root.Computes() {
						rootFrame.Run(m, &dst) // straight into the result
						continue
					}
					res.StoreBlock(row*R+s0, rootFrame.Run(m, nil), k, m)
				}
			}
		}
	})
}

// tilesCPU runs a region over the last dim whose rows are short (fewer
// than cpuShortRow columns) a tile of rows at a time: each program runs
// over the tile's elements in one call, as over one long row, instead of
// a call per row, whose fixed cost outweighs a short row's work. Each
// reduction then folds the tile's rows one by one, in the blocks and
// order of rowsCPU (so with its values), and its results are spread over
// their rows' elements for the programs after it; a stage computed once a
// row takes its row's first element's value, as rowsCPU computes it.
func (s *rowStep) tilesCPU(args []*array.Array, full []int, l cpuRows, res *array.Array) {
	R, rows := l.R, ir.Numel(l.outerShape)
	stages := s.r.Row.Stages
	nIn := len(args)
	tile := max(1, min(array.BlockSize/R, rows)) // rows a tile
	// Each input over the full shape, its dims merged where its layout
	// allows (a contiguous input is one run); repeats marks one that is the
	// same row broadcast over all rows (a weight), read once a worker.
	shapes, strides := make([][]int, nIn), make([][]int, nIn)
	repeats := make([]bool, nIn)
	for i, t := range args {
		sh, st := array.Coalesce(full, ir.BroadcastStrides(t.Shape(), t.Strides(), full))
		shapes[i], strides[i] = sh, st[0]
		r := len(sh) - 1
		repeats[i] = r >= 1 && sh[r] == R && st[0][r] == 1 && !slices.ContainsFunc(st[0][:r], func(s int) bool { return s != 0 })
	}
	array.ParallelRows(rows, max(tile, array.MinParallel/R), func(lo, hi int) {
		n := tile * R
		frames, rootFrame, put := takeFrames(s.stages, s.root, n)
		defer put()
		ops := make([]*array.Operand, nIn)
		for i, t := range args {
			ops[i] = t.Operand(shapes[i], strides[i], t.Offset()) // the tile's elements in row-major order
		}
		// A repeated row's tile, per kind a program reads it in.
		type repeat struct {
			i int
			k ir.Kind
		}
		var tiles map[repeat]ir.Vec
		load := func(f *ir.Frame, blk *ir.Block, start, m int) {
			for i, o := range ops {
				if !blk.Uses(i) {
					continue
				}
				if !repeats[i] {
					f.SetArg(i, o.Load(start, m, f.ArgKind(i), f.ArgBuf(i)))
					continue
				}
				key := repeat{i, f.ArgKind(i)}
				v, ok := tiles[key]
				if !ok {
					if tiles == nil {
						tiles = map[repeat]ir.Vec{}
					}
					v = ir.NewVec(key.k, n)
					row := o.Load(0, R, key.k, ir.NewVec(key.k, R))
					for r := range tile {
						copyVec(v.Slice(r*R, r*R+R), row)
					}
					tiles[key] = v
				}
				f.SetArg(i, v.Slice(0, m))
			}
		}
		perRow, rounders := stageValues(stages, tile) // each stage's value for each row of the tile
		spread := make([]ir.Vec, len(stages))         // and repeated over the row's elements
		for k, st := range stages {
			spread[k] = ir.NewVec(st.Kind, n)
		}
		results := make([]float64, tile) // a reduction's results, before rounding
		var firsts map[ir.Kind]ir.Vec    // the rows' first values of a stage computed once a row
		// bind makes f read the inputs' elements [start, start+m) and the
		// stages computed so far.
		bind := func(f *ir.Frame, blk *ir.Block, start, m, done int) {
			load(f, blk, start, m)
			for k := range done {
				f.SetArg(nIn+k, spread[k].Slice(0, m))
			}
		}
		for r0 := lo; r0 < hi; r0 += tile {
			t := min(tile, hi-r0)
			start, m := r0*R, t*R
			for k, st := range stages {
				blk := s.stages[k]
				bind(frames[k], blk, start, m, k)
				v, kind := frames[k].Run(m, nil), blk.OutKind()
				if st.Reduce {
					for row := range t {
						acc := array.FoldVec(st.Reducer, kind, 0, R, v.Slice(row*R, row*R+R))
						results[row] = st.Reducer.ResultF(acc, R)
					}
					rounders[k].Results(results[:t], perRow[k])
				} else {
					first, ok := firsts[kind]
					if !ok {
						if firsts == nil {
							firsts = map[ir.Kind]ir.Vec{}
						}
						first = ir.NewVec(kind, tile)
						firsts[kind] = first
					}
					everyRth(first, v, t, R)
					rounders[k].Values(first, kind, perRow[k], t)
				}
				spreadRows(spread[k], perRow[k], t, R)
			}
			if s.root == nil {
				res.Store(r0, perRow[len(stages)-1], stages[len(stages)-1].Kind, t)
				continue
			}
			bind(rootFrame, s.root, start, m, len(stages))
			k := s.root.OutKind()
			if dst, ok := res.HostVec(start, start+m, k); ok && s.root.Computes() {
				rootFrame.Run(m, &dst) // straight into the result
				continue
			}
			res.StoreBlock(start, rootFrame.Run(m, nil), k, m)
		}
	})
}

// copyVec copies src into dst, of the same kind and length.
func copyVec(dst, src ir.Vec) {
	copy(dst.F32, src.F32)
	copy(dst.F64, src.F64)
	copy(dst.I64, src.I64)
}

// takeFrames takes frames of n values for the stage programs and the
// root (none where root is nil) from their pools; put gives them back.
func takeFrames(stages []*ir.Block, root *ir.Block, n int) (frames []*ir.Frame, rootFrame *ir.Frame, put func()) {
	frames = make([]*ir.Frame, len(stages))
	for k, blk := range stages {
		frames[k] = blk.GetFrame(n, nil)
	}
	if root != nil {
		rootFrame = root.GetFrame(n, nil)
	}
	return frames, rootFrame, func() {
		for k, blk := range stages {
			blk.PutFrame(frames[k])
		}
		if root != nil {
			root.PutFrame(rootFrame)
		}
	}
}

// stageValues gives each stage n values of its kind, and the rounder that
// rounds them through its node's dtype.
func stageValues(stages []fuse.Stage, n int) ([]ir.Vec, []*array.Rounder) {
	vals, rounders := make([]ir.Vec, len(stages)), make([]*array.Rounder, len(stages))
	for k, st := range stages {
		vals[k], rounders[k] = ir.NewVec(st.Kind, n), array.NewRounder(st.Node.DType, st.Kind)
	}
	return vals, rounders
}

// everyRth writes src's values 0, r, 2r, … (rows of them) into dst.
func everyRth(dst, src ir.Vec, rows, r int) { copyGrid(dst, 1, 0, src, r, 0, rows, 1) }

// spreadRows writes each of the first rows values of per over its row's
// r elements of spread.
func spreadRows(spread, per ir.Vec, rows, r int) { copyGrid(spread, r, 1, per, 1, 0, rows, r) }

// copyGrid copies a grid of rows × cols values of src into dst (both of
// one kind), value (i, j) at i·srcRow + j·srcCol in src and i·dstRow +
// j·dstCol in dst.
func copyGrid(dst ir.Vec, dstRow, dstCol int, src ir.Vec, srcRow, srcCol, rows, cols int) {
	switch {
	case src.F32 != nil:
		copyGridOf(dst.F32, dstRow, dstCol, src.F32, srcRow, srcCol, rows, cols)
	case src.F64 != nil:
		copyGridOf(dst.F64, dstRow, dstCol, src.F64, srcRow, srcCol, rows, cols)
	default:
		copyGridOf(dst.I64, dstRow, dstCol, src.I64, srcRow, srcCol, rows, cols)
	}
}

func copyGridOf[T float32 | float64 | int64](dst []T, dstRow, dstCol int, src []T, srcRow, srcCol, rows, cols int) {
	for i := range rows {
		d, s := dst[i*dstRow:], src[i*srcRow:]
		for j := range cols {
			d[j*dstCol] = s[j*srcCol]
		}
	}
}

// loneRows folds rows [lo, hi) of a region that is one reduction of an
// input as it is (a Sum(-1)) and stores the results, as the eager
// reduction does.
func (s *rowStep) loneRows(blk *ir.Block, args []*array.Array, l cpuRows, res *array.Array, lo, hi int) {
	st := s.r.Row.Stages[0]
	ops := make([]*array.Operand, len(args))
	for i, t := range args {
		ops[i] = t.Operand(l.redShape[i], l.red[i], 0)
	}
	f := blk.GetFrame(min(array.BlockSize, l.R), nil)
	defer blk.PutFrame(f)
	idx := make([]int, len(l.outerShape))
	array.StoreRowResults(res, st.Reducer, false, l.R, lo, hi, func(row int) ir.Acc {
		for i, t := range args {
			ops[i].SetOffset(l.rowOffset(t, i, row, idx))
		}
		return foldRow(st.Reducer, blk, ops, 0, l.R, func(s0, m int) ir.Vec {
			loadArgs(f, blk, ops, s0, m)
			return f.Run(m, nil)
		})
	})
}

// splitCPU runs the region with each row split across the cores: a
// reduction stage folds its parts on all of them (the parts and their
// order are FoldRange's, so the values are those of rowsCPU), and the root
// computes its chunks on all of them.
func (s *rowStep) splitCPU(args []*array.Array, l cpuRows, res *array.Array) {
	outerShape, R := l.outerShape, l.R
	nIn := len(args)
	stages := s.r.Row.Stages
	chunk := min(array.BlockSize, R)
	idx := make([]int, len(outerShape))
	offsets := make([]int, nIn)
	one, rounders := stageValues(stages, 1) // each stage's value: read by all workers, written between
	// worker is one goroutine's program k (len(stages) for the root)
	// reading the row at offsets, with the stages before it bound.
	type worker struct {
		f   *ir.Frame
		blk *ir.Block
		ops []*array.Operand
	}
	newWorker := func(k int) *worker {
		blk := s.root
		if k < len(stages) {
			blk = s.stages[k]
		}
		w := &worker{f: blk.NewFrame(chunk, nil), blk: blk, ops: make([]*array.Operand, nIn)}
		for i, t := range args {
			w.ops[i] = t.Operand(l.redShape[i], l.red[i], offsets[i])
		}
		for j := range k {
			w.f.SetUniform(nIn+j, one[j])
		}
		return w
	}
	// run computes values [s0, s0+m) of the row.
	run := func(w *worker, s0, m int, dst *ir.Vec) ir.Vec {
		loadArgs(w.f, w.blk, w.ops, s0, m)
		return w.f.Run(m, dst)
	}
	for row := range ir.Numel(l.outerShape) {
		for i, t := range args {
			offsets[i] = l.rowOffset(t, i, row, idx)
		}
		var val ir.Vec
		for k, st := range stages {
			if !st.Reduce {
				w := newWorker(k)
				rounders[k].Value(run(w, 0, 1, nil), w.blk.OutKind(), one[k])
				val = one[k]
				continue
			}
			acc := array.FoldSplit(st.Reducer, st.Compute == ir.I64, R, func() func(lo, hi int) ir.Acc {
				w := newWorker(k)
				return func(lo, hi int) ir.Acc {
					return foldRow(st.Reducer, w.blk, w.ops, lo, hi, func(s0, m int) ir.Vec { return run(w, s0, m, nil) })
				}
			})
			rounders[k].Result(st.Reducer, acc, R, one[k])
			val = one[k]
		}
		if s.root == nil {
			res.Store(row, val, stages[len(stages)-1].Kind, 1)
			continue
		}
		k := s.root.OutKind()
		nChunks := (R + chunk - 1) / chunk
		array.ParallelRows(nChunks, max(1, array.MinParallel/chunk), func(lo, hi int) {
			w := newWorker(len(stages))
			for c := lo; c < hi; c++ {
				s0 := c * chunk
				m := min(chunk, R-s0)
				at := row*R + s0
				if dst, ok := res.HostVec(at, at+m, k); ok && s.root.Computes() {
					run(w, s0, m, &dst)
					continue
				}
				res.StoreBlock(at, run(w, s0, m, nil), k, m)
			}
		})
	}
}

// rowOffset is where row (of the kept dims) of input i, t, starts in
// its storage.
func (l cpuRows) rowOffset(t *array.Array, i, row int, idx []int) int {
	off := t.Offset()
	if len(l.outerShape) > 0 {
		off += array.Unravel(row, l.outerShape, l.outer[i], idx)
	}
	return off
}

// loadArgs binds f to values [start, start+n) of the row of each input blk
// reads.
func loadArgs(f *ir.Frame, blk *ir.Block, ops []*array.Operand, start, n int) {
	for i, o := range ops {
		if blk.Uses(i) {
			f.SetArg(i, o.Load(start, n, f.ArgKind(i), f.ArgBuf(i)))
		}
	}
}

// foldRow folds values [lo, hi) of the row with blk's reducer r: in place
// where plainRow allows, else through FoldRange with run(s0, m) computing
// each block (the same blocks and order either way).
func foldRow(r ir.Reducer, blk *ir.Block, ops []*array.Operand, lo, hi int, run func(s0, m int) ir.Vec) ir.Acc {
	if v, ok := plainRow(blk, ops, lo, hi); ok {
		return array.FoldVec(r, blk.OutKind(), lo, hi, v)
	}
	return array.FoldRange(r, blk.OutKind(), lo, hi, run)
}

// plainRow is values [lo, hi) of the row of the input blk reads as it is,
// in storage, when blk computes nothing else (a lone Sum(-1) reads its
// input) and the input is contiguous along the row and stored in the kind
// blk reads.
func plainRow(blk *ir.Block, ops []*array.Operand, lo, hi int) (ir.Vec, bool) {
	if blk.Computes() {
		return ir.Vec{}, false
	}
	var in *array.Operand
	for i, o := range ops {
		if blk.Uses(i) {
			if in != nil {
				return ir.Vec{}, false
			}
			in = o
		}
	}
	if in == nil {
		return ir.Vec{}, false
	}
	return in.Alias(lo, hi-lo, blk.OutKind())
}
