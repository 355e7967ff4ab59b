package array

import (
	"runtime"

	"gocompile/ir"
)

// Reductions whose neighbouring outputs read neighbouring values (a Sum(0)
// of a matrix, a Mean over a middle dim): walking each output's values one
// by one would stride through memory, so a tile of outputs is folded
// together, a row of the tile at a time, in the order and with the
// roundings that FoldRange gives each output alone.

// colTile is how many outputs a tile folds together: a row of the tile is
// a page (4 KB) of float32 values, which the hardware prefetchers stream
// (they stop at page ends), and the tile's float64 lanes (see
// ir.Accumulate), 128 KB, stay in a core's L2 cache.
const colTile = 1024

// columnLayout reports whether a reduction's layout suits tiles: one
// reduced dim, not contiguous; the innermost kept dim contiguous and at
// least a few values long.
func columnLayout(keptShape, keptStrides, rshape, rstrides []int) bool {
	if len(rshape) != 1 || len(keptShape) == 0 || rshape[0] == 0 || rstrides[0] == 1 {
		return false
	}
	last := len(keptShape) - 1
	return keptStrides[last] == 1 && keptShape[last] >= 16
}

// foldColumns folds a reduction whose layout suits tiles (columnLayout)
// into accs.
func foldColumns(r ir.Reducer, k ir.Kind, x *Array, keptShape, keptStrides, rshape, rstrides []int, accs []ir.Acc) {
	last := len(keptShape) - 1
	inner := keptShape[last]
	n, rs := rshape[0], rstrides[0]
	outerShape, outerStrides := keptShape[:last], keptStrides[:last]
	perRow := (inner + colTile - 1) / colTile
	tiles := len(accs) / inner * perRow
	// Too few tiles for the cores: each also splits into its parts of
	// FoldPart, folded apart and merged in order, as FoldSplit does.
	nParts := (n + FoldPart - 1) / FoldPart
	if tiles >= runtime.GOMAXPROCS(0) {
		nParts = 1
	}
	var parts []ir.Acc // per tile and part, the part's accumulators
	if nParts > 1 {
		parts = make([]ir.Acc, tiles*nParts*colTile)
	}
	ParallelRows(tiles*nParts, max(1, MinParallel/(min(n, FoldPart)*colTile)), func(lo, hi int) {
		o := newOperand(x.st.data, x.dtype, []int{colTile}, []int{1}, 0)
		buf := ir.NewVec(k, colTile)
		lanes := new([16][colTile]float64)
		idx := make([]int, len(outerShape))
		for item := lo; item < hi; item++ {
			t, p := item/nParts, item%nParts
			oi, j0 := t/perRow, t%perRow*colTile
			w := min(colTile, inner-j0)
			base := x.offset + j0
			if len(outerShape) > 0 {
				base += Unravel(oi, outerShape, outerStrides, idx)
			}
			out, rlo, rhi := accs[oi*inner+j0:oi*inner+j0+w], 0, n
			if nParts > 1 {
				out, rlo, rhi = parts[item*colTile:item*colTile+w], p*FoldPart, min(n, (p+1)*FoldPart)
			}
			for j := range out {
				out[j] = r.Init()
			}
			load := func(i int) ir.Vec {
				o.offset = base + i*rs
				return o.Load(0, w, k, buf)
			}
			switch {
			case (r == ir.RSum || r == ir.RMean) && k != ir.I64:
				sumColumns(r, k, rlo, rhi, out, lanes, load)
			default:
				foldColumnsInOrder(r, k, rlo, rhi, out, load)
			}
		}
	})
	for t := range tiles * min(nParts-1, 1) { // merge the parts in order
		oi, j0 := t/perRow, t%perRow*colTile
		out := accs[oi*inner+j0 : oi*inner+j0+min(colTile, inner-j0)]
		for j := range out {
			out[j] = r.Init()
		}
		for p := range nParts {
			part := parts[(t*nParts+p)*colTile:]
			for j := range out {
				r.Merge(&out[j], part[j], k == ir.I64)
			}
		}
	}
}

// sumColumns sums values [lo, hi) (lo a multiple of FoldPart) into each
// of out's accumulators as FoldRange and ir.Accumulate would: parts of
// FoldPart, blocks of BlockSize, value i of a block into lane i%16, the
// lanes combined pairwise.
func sumColumns(r ir.Reducer, k ir.Kind, lo, hi int, out []ir.Acc, lanes *[16][colTile]float64, load func(i int) ir.Vec) {
	w := len(out)
	var part [colTile]float64
	for p := lo; p < hi; p += FoldPart {
		pe := min(p+FoldPart, hi)
		clear(part[:w])
		for b := p; b < pe; b += BlockSize {
			for l := range lanes {
				clear(lanes[l][:w])
			}
			for i := b; i < min(b+BlockSize, pe); i++ {
				l := lanes[(i-b)%16][:w]
				if v := load(i); k == ir.F32 {
					ir.AddWidened(l, v.F32[:w])
				} else {
					ir.AddWidened(l, v.F64[:w])
				}
			}
			for j := range w {
				var t [8]float64
				for q := range t {
					t[q] = lanes[q][j] + lanes[q+8][j]
				}
				c0, c1, c2, c3 := t[0]+t[4], t[1]+t[5], t[2]+t[6], t[3]+t[7]
				part[j] += (c0 + c2) + (c1 + c3)
			}
		}
		for j := range out {
			r.Merge(&out[j], ir.Acc{F: part[j], Index: -1, Count: int64(pe - p)}, false)
		}
	}
}

// foldColumnsInOrder folds values [lo, hi) of each output in order, a row
// of the tile at a time: integer sums (exact in any order), and max, min
// and the arg reductions (the first NaN, else the first best value).
func foldColumnsInOrder(r ir.Reducer, k ir.Kind, lo, hi int, out []ir.Acc, load func(i int) ir.Vec) {
	for i := lo; i < hi; i++ {
		v := load(i)
		for j := range out {
			switch k {
			case ir.F32:
				ir.Accumulate(r, &out[j], v.F32[j:j+1], int64(i))
			case ir.F64:
				ir.Accumulate(r, &out[j], v.F64[j:j+1], int64(i))
			default:
				ir.Accumulate(r, &out[j], v.I64[j:j+1], int64(i))
			}
		}
	}
}
