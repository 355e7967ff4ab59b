package array

import (
	"slices"
	"sort"

	"gocompile/inductor"
	"gocompile/ir"
)

// Layouts of GPU pointwise kernels: which order a kernel walks the dims
// in, and how an N-d or tiled kernel reads each tensor (see
// inductor/layout.go for the kernels).

// planPointwise configures k (its operands' accesses, the kind of kernel,
// Index32) to compute over shape: strides holds each tensor's strides
// aligned with shape (broadcast dims 0), the nout outputs first, then the
// tensor operands of operands (whose entries give each argument's DType
// and Kind, ScalarArg for numbers), and ts each tensor's address and
// element size in the same order.
//
// The kernel walks the dims in the output's memory order, merged where
// every tensor allows. When every output is then contiguous, every
// operand dense, uniform, a scalar or a row or column broadcast, and the
// vector tensors aligned, it is a dense kernel over flat indices (inners
// are its broadcasts' parameters); otherwise an N-d kernel, or a tiled
// one when an operand's contiguous dim is not the output's (geo is its
// geometry; see planLayout). ok is false when the layout needs more than
// MaxRank dims.
func planPointwise(k *inductor.PointwiseKernel, shape []int, strides [][]int, nout int, operands []inductor.Operand, ts []layoutTensor) (geo *inductor.LayoutGeometry, inners []int, ok bool) {
	n := 1
	for _, s := range shape {
		n *= s
	}
	oshape, ostrides := orderDims(shape, strides)
	cshape, cstrides := Coalesce(oshape, ostrides...)
	dense := ir.ContiguousStrides(cshape)
	flat := true
	for m := range nout {
		flat = flat && sameInts(cstrides[m], dense, cshape)
	}
	// Vector access needs the outputs and the dense operands aligned.
	aligned := true
	vecAligned := func(t layoutTensor) bool { return t.ptr%uintptr(inductor.VectorWidth*t.size) == 0 }
	for m := range nout {
		aligned = aligned && vecAligned(ts[m])
	}
	k.Strided, k.Tile, k.Rank, k.OutStrided = false, false, 0, false
	k.Index32 = n < 1<<31
	k.Operands = append([]inductor.Operand(nil), operands...)
	t := nout
	for i, o := range k.Operands {
		if o.Access == inductor.ScalarArg {
			continue
		}
		st := cstrides[t]
		switch {
		case allZero(st):
			o.Access = inductor.Uniform
		case sameInts(st, dense, cshape):
			o.Access = inductor.Dense
			aligned = aligned && vecAligned(ts[t])
		default:
			var inner int
			if o.Access, inner = broadcastAccess(st, cshape); o.Access == inductor.Strided {
				flat = false
			} else {
				inners = append(inners, inner)
			}
		}
		k.Operands[i] = o
		t++
	}
	if flat && aligned {
		return nil, inners, true
	}
	if len(cshape) > inductor.MaxRank {
		return nil, nil, false
	}
	return planLayout(k, n, cshape, cstrides, nout, ts), nil, true
}

// orderDims reorders the dims of an iteration space so that the first
// tensor's strides (the output's) decrease: walking the result in order
// writes the output in memory order, whatever view it is. strides holds
// one stride list per tensor, aligned with shape; the results are new
// slices unless the order is already right (Coalesce then merges what it
// can).
func orderDims(shape []int, strides [][]int) ([]int, [][]int) {
	abs := func(v int) int { return max(v, -v) }
	out := strides[0]
	sorted := true
	for d := 1; d < len(shape) && sorted; d++ {
		sorted = abs(out[d-1]) >= abs(out[d])
	}
	if sorted { // the usual case: already in memory order
		return shape, strides
	}
	perm := make([]int, len(shape))
	for d := range perm {
		perm[d] = d
	}
	sort.SliceStable(perm, func(a, b int) bool { return abs(out[perm[a]]) > abs(out[perm[b]]) })
	oshape := make([]int, len(shape))
	ostrides := make([][]int, len(strides))
	for d, p := range perm {
		oshape[d] = shape[p]
	}
	for t, st := range strides {
		ostrides[t] = make([]int, len(shape))
		for d, p := range perm {
			ostrides[t][d] = st[p]
		}
	}
	return oshape, ostrides
}

// minTile is the smallest extent, along both tiled dims, worth a tiled
// kernel: below it an N-d kernel, whose consecutive threads walk the
// second innermost dim once rows are this short, coalesces as well.
const minTile = 16

// tileGroup is how many elements planLayout gathers into the B group of a
// grouped tiled kernel where it can: a tile edge of 64 or more.
const tileGroup = 64

// tileGroups returns a grouped tiled kernel's groups of dims, each fastest
// first: B, the output's innermost dims (the last dims of the ordered
// shape) until they hold tileGroup elements or reach the dim across; A,
// the dims operand op's contiguous run spans from across, its unit-stride
// dim, until the run ends or reaches B. A takes the whole run, as the
// longer a group, the less its last, partial tile wastes.
func tileGroups(shape []int, strides [][]int, across, op int) (a, b []int) {
	r := len(shape)
	n := 1
	for d := r - 1; d >= 0 && d != across && n < tileGroup; d-- {
		b = append(b, d)
		n *= shape[d]
	}
	inB := func(d int) bool { return slices.Contains(b, d) }
	st := strides[op]
	a, n = []int{across}, shape[across]
	for {
		next := -1
		for d := range r {
			if st[d] == n && shape[d] > 1 && !inB(d) && !slices.Contains(a, d) {
				next = d
				break
			}
		}
		if next < 0 {
			break
		}
		a = append(a, next)
		n *= shape[next]
	}
	return a, b
}

// runsThrough reports whether a tensor of strides st steps through the
// dims of a tile group (fastest first) as one run: by one along the
// first, and along each next by the elements of those before.
func runsThrough(shape, st, dims []int) bool {
	n := 1
	for _, d := range dims {
		if st[d] != n && shape[d] > 1 {
			return false
		}
		n *= shape[d]
	}
	return true
}

// groupSize is the number of elements the dims of a tile group span.
func groupSize(shape, dims []int) int {
	n := 1
	for _, d := range dims {
		n *= shape[d]
	}
	return n
}

// permuted is s with its entries in order.
func permuted(s, order []int) []int {
	p := make([]int, len(order))
	for j, d := range order {
		p[j] = s[d]
	}
	return p
}

// layoutTensor is what planLayout needs of a tensor beyond its strides:
// its address and element size.
type layoutTensor struct {
	ptr  uintptr
	size int
}

// planLayout makes k an N-d or tiled kernel over the ordered, coalesced
// iteration space shape with strides (the nout outputs first, then one per
// tensor operand of k.Operands, whose ScalarArg entries are already set)
// and returns its geometry. ts gives each tensor's address and element
// size, in the order of strides.
//
// An operand whose unit stride lies along a dim other than the outputs'
// innermost one (a transposed or permuted view) is read through shared
// memory tiles when both dims are long enough; that dim is moved next to
// the innermost so the tile's dims are the kernel's two innermost. When
// either is short, a grouped tiled kernel tiles the operand's contiguous
// run and the output's innermost dims instead, each flattened, where both
// span a tile.
func planLayout(k *inductor.PointwiseKernel, n int, shape []int, strides [][]int, nout int, ts []layoutTensor) *inductor.LayoutGeometry {
	r := len(shape)
	if r == 0 { // one element
		shape = []int{1}
		for t := range strides {
			strides[t] = []int{1}
		}
		r = 1
	}
	// The operand whose contiguous dim disagrees with the outputs', largest
	// first: its contiguous dim is tiled with the innermost.
	unitOut := true
	for m := range nout {
		unitOut = unitOut && strides[m][r-1] == 1
	}
	across := -1 // the dim to move next to the innermost
	best, bestOperand := 0, -1
	for t := nout; t < len(strides) && r >= 2; t++ {
		st := strides[t]
		if st[r-1] == 0 || st[r-1] == 1 {
			continue
		}
		foot := 1
		for d, s := range st {
			if s != 0 {
				foot *= shape[d]
			}
		}
		for d := r - 2; d >= 0; d-- {
			if st[d] == 1 && foot > best {
				across, best, bestOperand = d, foot, t
				break
			}
		}
	}
	// Where the output's innermost dim or the operand's contiguous dim is
	// short, tile groups of dims instead (see inductor's grouped tiled
	// kernels): B, the output's innermost dims, and A, the dims the
	// operand's contiguous run spans (tileGroups). Only where a plain tile
	// cannot be had: reading through the offset tables costs a plain
	// tile's speed about a tenth (H100).
	var groupA, groupB []int // fastest first
	if across >= 0 && unitOut && (shape[across] < minTile || shape[r-1] < minTile) {
		groupA, groupB = tileGroups(shape, strides, across, bestOperand)
	}
	grouped := len(groupA)+len(groupB) > 2 && groupSize(shape, groupA) >= minTile && groupSize(shape, groupB) >= minTile
	// A grouped kernel writes its outputs along B as one run.
	for m := range nout {
		grouped = grouped && runsThrough(shape, strides[m], groupB)
	}
	// The dims in the order rest, then the tiled ones: grouped, A then B,
	// each group's fastest last; else across next to the innermost.
	var tiled []int // slowest first
	switch {
	case grouped:
		for _, g := range [][]int{groupA, groupB} {
			for j := len(g) - 1; j >= 0; j-- {
				tiled = append(tiled, g[j])
			}
		}
	case across >= 0 && across != r-2:
		tiled = []int{across, r - 1}
	}
	if tiled != nil {
		var order []int
		for d := range r {
			if !slices.Contains(tiled, d) {
				order = append(order, d)
			}
		}
		order = append(order, tiled...)
		shape = permuted(shape, order)
		for t := range strides {
			strides[t] = permuted(strides[t], order)
		}
		for j := range groupB { // the groups' dims in the new order
			groupB[j] = r - 1 - j
		}
		for j := range groupA {
			groupA[j] = r - len(groupB) - 1 - j
		}
	}
	k.Rank = r
	k.TileEdge = pointwiseTileEdge
	k.Tile = grouped || across >= 0 && unitOut && shape[r-2] >= minTile && shape[r-1] >= minTile
	k.TileA, k.TileB = 0, 0
	if grouped {
		k.TileA, k.TileB = len(groupA), len(groupB)
	}
	k.Strided = !k.Tile
	k.OutStrided = !unitOut
	// A grouped kernel stages the operands that run through the A dims
	// as the chosen one does, and reads the others through its tables.
	nA, nB := len(groupA), len(groupB)
	runsLikeBest := func(st []int) bool {
		for d := r - nB - nA; d < r-nB; d++ {
			if st[d] != strides[bestOperand][d] {
				return false
			}
		}
		return true
	}
	t, staged := nout, 0
	for i, o := range k.Operands {
		if o.Access == inductor.ScalarArg {
			continue
		}
		st := strides[t]
		t++
		switch {
		case allZero(st):
			o.Access = inductor.Uniform
		case grouped && runsLikeBest(st) && staged < inductor.MaxTiled:
			o.Access = inductor.Tiled
			staged++
		case grouped && st[r-1] == 1 && runsThrough(shape, st, groupB):
			o.Access = inductor.InnerContiguous // one run along B, as the outputs
		case grouped:
			o.Access = inductor.Strided
		case k.Tile && st[r-2] == 1 && st[r-1] != 0 && st[r-1] != 1 && staged < inductor.MaxTiled:
			o.Access = inductor.Tiled
			staged++
		case st[r-1] == 1:
			o.Access = inductor.InnerContiguous
		case st[r-1] == 0:
			o.Access = inductor.InnerBroadcast
		default:
			o.Access = inductor.Strided
		}
		k.Operands[i] = o
	}

	// Chunks are vector-aligned when every tensor read or written a vector
	// at a time starts its rows equally misaligned: the head peels that.
	geo := &inductor.LayoutGeometry{Sizes: shape, Strides: strides}
	if !k.Tile {
		// Rows misaligned differently (outer strides not multiples of
		// VectorWidth) take a head per row when every vector tensor's
		// rows are misaligned as the first output's.
		vec, head, rowHead := true, -1, false
		check := func(st []int, lt layoutTensor) {
			for d, s := range st[:r-1] {
				switch {
				case !unitOut:
					vec = vec && s%inductor.VectorWidth == 0
				case (s-strides[0][d])%inductor.VectorWidth != 0:
					vec = false
				case s%inductor.VectorWidth != 0:
					rowHead = true
				}
			}
			if lt.ptr%uintptr(lt.size) != 0 {
				vec = false
				return
			}
			a := int(lt.ptr/uintptr(lt.size)) % inductor.VectorWidth
			if head >= 0 && a != head {
				vec = false
			}
			head = a
		}
		if unitOut {
			for m := range nout {
				check(strides[m], ts[m])
			}
		}
		t := nout
		for _, o := range k.Operands {
			if o.Access == inductor.ScalarArg {
				continue
			}
			if o.Access == inductor.InnerContiguous {
				check(strides[t], ts[t])
			}
			t++
		}
		if vec && head >= 0 {
			geo.Vec, geo.Head, geo.RowHead = true, head, rowHead
		}
	}
	// 32-bit indices and offsets when every index and offset fits.
	k.Index32 = n < 1<<31
	for _, st := range strides {
		span := 0
		for d, s := range st {
			span += (shape[d] - 1) * max(s, -s)
		}
		k.Index32 = k.Index32 && span < 1<<31
	}
	k.Index32 = k.Index32 && k.Work(geo) < 1<<31
	return geo
}
