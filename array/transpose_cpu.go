package array

import "gocompile/ir"

// Operands whose contiguous run crosses the order of a CPU block loop.
//
// RunBlocks walks its output in memory order and gathers every operand in
// that order. An operand whose stride-1 dim is another of the output's
// dims (a transposed or permuted input) is then read one element per
// cache line, and in a loop over several operands each line is evicted
// before the loop comes back for its next element: a fused kernel reading
// four tensors ran slower than the eager ops it replaces, which read two
// at a time. Such an operand is first copied into the output's order in
// tiles that use every line they read.

// crossingMin is the operand size, in elements, from which RunBlocks lays
// a crossing operand out in the output's order first; below it the
// operand fits in the caches anyway.
const crossingMin = 1 << 16

// laidOutForBlocks returns args with each large CPU operand of shape shape
// (not broadcast) whose stride-1 dim is not the output's innermost dim
// replaced by a contiguous copy made by copyTiled.
func laidOutForBlocks(args []ir.Value, shape []int) []ir.Value {
	var out []ir.Value
	for i, v := range args {
		t, ok := v.(*Array)
		if !ok || t.st.dev != CPU || t.Numel() < crossingMin || !ir.SameShape(t.shape, shape) || !crosses(t) {
			continue
		}
		if out == nil {
			out = append([]ir.Value(nil), args...)
		}
		c := newArray(t.dtype, t.shape)
		copyTiled(c, t)
		out[i] = c
	}
	if out == nil {
		return args
	}
	return out
}

// crosses reports whether gathering t in the order of its shape would
// read a cache line, then come back for its next element only after more
// than crossingReuse others: where the innermost dim along which t steps
// by less than a line (a dim along which it is contiguous, or nearly)
// lies outside dims of more than crossingReuse elements. A transposed
// matrix does; a permutation that keeps a short stride near the inside
// (each line reused a few dozen elements later) does not.
func crosses(t *Array) bool {
	inner := 1
	for d := len(t.shape) - 1; d >= 0; d-- {
		if t.shape[d] == 1 {
			continue
		}
		if st := t.strides[d]; st != 0 && abs(st)*t.dtype.Size() < cacheLine {
			if inner > crossingReuse && hasUnitStride(t) {
				return true
			}
			_, e := shortRun(t.shape, t.strides, t.dtype.Size())
			return e >= 0 && ir.Numel(t.shape[e+1:]) > crossingReuse
		}
		inner *= t.shape[d]
	}
	return false
}

// shortRun finds, for a view of shape and strides whose innermost dims
// are contiguous, how many elements run contiguously in its order (run)
// and, where that is less than a cache line of elements of size bytes,
// the dim whose stride is run (e): its next index holds the rest of the
// line. e is -1 where there is no such dim or the run fills lines. A
// permutation that keeps the innermost dim but moves the next one
// outward (a [26, 4, 38, 298, 27] tensor permuted (3, 1, 0, 2, 4)) runs
// 27 elements and comes back to the line 4·26·38·27 elements later.
func shortRun(shape, strides []int, size int) (run, e int) {
	last := len(shape) - 1
	for last >= 0 && shape[last] == 1 {
		last--
	}
	if last < 0 || strides[last] != 1 {
		return 0, -1
	}
	run = shape[last]
	for d := last - 1; d >= 0 && (shape[d] == 1 || strides[d] == run); d-- {
		run *= shape[d]
	}
	if run*size >= cacheLine {
		return run, -1
	}
	for d := range shape {
		if shape[d] > 1 && strides[d] == run {
			return run, d
		}
	}
	return run, -1
}

// cacheLine is the CPU's cache line, in bytes; crossingReuse the elements a
// gathered line may wait for its next use (lines of the four or five
// operands of a fused loop stay in a core's cache for about that long).
const (
	cacheLine     = 64
	crossingReuse = 4096
)

// hasUnitStride reports whether t is contiguous along some dim, which
// copyTiled needs.
func hasUnitStride(t *Array) bool {
	for d, st := range t.strides {
		if st == 1 && t.shape[d] > 1 {
			return true
		}
	}
	return false
}

func abs(x int) int {
	if x < 0 {
		return -x
	}
	return x
}

// copyTiled copies src into dst, a contiguous array of its shape and
// dtype. With P the dim along which src is contiguous and B the innermost
// other dims of dst (at least copyTileB elements where there are as many),
// it copies a tile of copyTileP indices of P by all of B at a time, for
// every index of the remaining dims: the tile reads whole lines of src
// and writes whole lines of dst, all of which stay in the first-level
// cache while it does.
func copyTiled(dst, src *Array) {
	shape, strides := Coalesce(src.shape, ir.ContiguousStrides(src.shape), src.strides)
	ds, ss := strides[0], strides[1]
	p := -1
	for d := range shape {
		if ss[d] == 1 && shape[d] > 1 {
			p = d
		}
	}
	// A run shorter than a line, innermost in both (Coalesce made it one
	// dim): the tiles copy whole runs, and P is the dim along which src
	// continues the run.
	run := 1
	if r, e := shortRun(shape, ss, src.dtype.Size()); e >= 0 && len(shape) > 1 && ds[len(shape)-1] == 1 && shape[len(shape)-1] == r {
		last := len(shape) - 1
		shape, ds, ss, run, p = shape[:last], ds[:last], ss[:last], r, e
	}
	if p < 0 {
		copyInto(dst, src)
		return
	}
	// B: dst's innermost dims but P, up to copyTileB elements.
	var bdims, odims []int
	nb := 1
	for d := len(shape) - 1; d >= 0; d-- {
		switch {
		case d == p:
		case nb*run < copyTileB:
			bdims = append(bdims, d)
			nb *= shape[d]
		default:
			odims = append(odims, d)
		}
	}
	dOff, sOff := make([]int, nb), make([]int, nb)
	offsets(shape, bdims, ds, dOff)
	offsets(shape, bdims, ss, sOff)
	outer := 1
	for _, d := range odims {
		outer *= shape[d]
	}
	g := tiling{shape: shape, ds: ds, ss: ss, p: p, odims: odims, dOff: dOff, sOff: sOff,
		tiles: (shape[p] + copyTileP - 1) / copyTileP, offset: src.offset, run: run}
	ParallelRows(outer*g.tiles, max(1, MinParallel/(copyTileP*nb*run)), func(lo, hi int) {
		switch d := dst.st.data.(type) {
		case []float32:
			copyTiles(d, src.st.data.([]float32), &g, lo, hi)
		case []float64:
			copyTiles(d, src.st.data.([]float64), &g, lo, hi)
		case []uint16:
			copyTiles(d, src.st.data.([]uint16), &g, lo, hi)
		case []int32:
			copyTiles(d, src.st.data.([]int32), &g, lo, hi)
		case []int64:
			copyTiles(d, src.st.data.([]int64), &g, lo, hi)
		case []bool:
			copyTiles(d, src.st.data.([]bool), &g, lo, hi)
		}
	})
}

// tiling is copyTiled's plan: the coalesced shape with dst's and src's
// strides, src's contiguous dim p (in runs, for a short run), the other dims (inner to outer) that
// units run over, the B offset tables, the tiles along p, and src's
// offset.
type tiling struct {
	shape, ds, ss []int
	p             int
	odims         []int
	dOff, sOff    []int
	tiles, offset int
	run           int // elements copied at each index: 1, or a short run (then src steps by it along p)
}

// The tile of copyTiled: copyTileP indices along src's contiguous dim by
// at least copyTileB of dst's innermost (16 KB of float32 at most, with
// B up to copyTileB·shape).
const (
	copyTileP = 32
	copyTileB = 32
)

// copyTiles copies units [lo, hi) of g, each a tile of copyTileP indices
// along the contiguous dim by all of B for one index of the other dims.
func copyTiles[T any](d, s []T, g *tiling, lo, hi int) {
	dp := g.ds[g.p]
	for u := lo; u < hi; u++ {
		o, a0 := u/g.tiles, u%g.tiles*copyTileP
		dbase, sbase := 0, g.offset
		for _, dim := range g.odims {
			i := o % g.shape[dim]
			o /= g.shape[dim]
			dbase += i * g.ds[dim]
			sbase += i * g.ss[dim]
		}
		a1 := min(a0+copyTileP, g.shape[g.p])
		for b := range g.dOff {
			db, sb := dbase+g.dOff[b], sbase+g.sOff[b]
			if r := g.run; r > 1 {
				for a := a0; a < a1; a++ {
					copy(d[db+a*dp:db+a*dp+r], s[sb+a*r:sb+a*r+r])
				}
				continue
			}
			for a := a0; a < a1; a++ {
				d[db+a*dp] = s[sb+a]
			}
		}
	}
}

// offsets fills off with the offset, by strides, of every index of the
// dims dims of shape (dims[0] varying fastest).
func offsets(shape, dims, strides, off []int) {
	for b := range off {
		o, rem := 0, b
		for _, d := range dims {
			o += rem % shape[d] * strides[d]
			rem /= shape[d]
		}
		off[b] = o
	}
}
