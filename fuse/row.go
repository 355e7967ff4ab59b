package fuse

import (
	"slices"

	"gocompile/ir"
)

// Row describes a row region: reductions over the last dim of the
// region's full shape together with their pointwise prologue and epilogue
// (softmax, log-softmax, layer norm, RMS norm, mean and variance). The
// full shape is viewed as rows of its last dim; a kernel handles a row at a
// time, computing the stages in order and then the root.
//
// Every node of a row region is either full-shaped (a pointwise op over the
// full shape, computed per element) or row-level (a reduction over the last
// dim, keeping it as size 1, or a pointwise op of that reduced shape),
// computed once per row. Row-level nodes are the stages: their values are
// what the later expressions read per row. The root may also be a
// reduction that drops the last dim.
//
// With Dims set the region reduces over those dims of the full shape
// instead (a reduction over dim 0, over middle dims, or several, as in
// Var([0, 2]) or Softmax(0)): a "row" is then the set of elements that
// share one index of the kept dims, and row-level nodes have the reduced
// shape, with the reduced dims kept as size 1 or, for nodes that read
// only other row-level nodes of that shape (the epilogue of a reduction
// that drops them), dropped.
type Row struct {
	Full []int // the full shape at trace time
	// Dims are the reduced dims of Full, ascending, when they are other
	// than the last dim alone; nil for a reduction over the last dim.
	Dims   []int
	Stages []Stage
}

// Stage is one row-level value of a row region.
type Stage struct {
	Node *ir.Node
	// Reduce is true for a reduction: Expr is then the value reduced, per
	// element of the row, combined by Reducer in kind Compute. Otherwise
	// Expr is the value itself, computed once per row.
	Reduce  bool
	Reducer ir.Reducer
	Expr    *ir.Expr
	Compute ir.Kind
	// Kind is the kind of the stage's value as later expressions read it
	// (the value is first rounded to Node.DType, as storing it would).
	Kind ir.Kind
}

// ReducedDims are the dims of Full the region reduces over: Dims, or the
// last dim.
func (w *Row) ReducedDims() []int {
	if w.Dims != nil {
		return w.Dims
	}
	return []int{len(w.Full) - 1}
}

// rowLevel reports whether n has the row region's reduced shape (the full
// shape with its reduced dims 1, or dropped: only a root reduction, or
// with Dims an epilogue, drops them).
func (w *Row) rowLevel(n *ir.Node) bool {
	return ir.SameShape(n.Shape, keptShape(w.Full, w.ReducedDims(), true)) ||
		ir.SameShape(n.Shape, keptShape(w.Full, w.ReducedDims(), false))
}

func keptShape(full, dims []int, keepDim bool) []int { return ir.ReduceShape(full, dims, keepDim) }

// rowReduction reports whether n reduces its input over the input's last
// dim only, with a reducer a row kernel can run, and returns the input's
// shape.
func rowReduction(n *ir.Node) ([]int, bool) {
	full, dims, ok := reductionDims(n)
	if !ok || len(dims) != 1 || dims[0] != len(full)-1 {
		return nil, false
	}
	return full, true
}

// reductionDims reports whether n is a reduction a row or column kernel
// can run (a value reducer over floating types, every reduced dim longer
// than 1), and returns its input's shape and its reduced dims, ascending.
func reductionDims(n *ir.Node) ([]int, []int, bool) {
	if n.Kind != ir.CallNode || n.Op.Kind != ir.Reduction || n.Op.Reducer.IsArg() || len(n.Args) != 1 {
		return nil, nil, false
	}
	in, ok := n.Args[0].(*ir.Node)
	if !ok || in == nil || len(in.Shape) == 0 || !rowKind(in.DType) || !rowKind(n.DType) {
		return nil, nil, false
	}
	dims, err := ir.NormDims(n.Op.Title, in.Shape, n.Attrs.Dims)
	if err != nil || len(dims) == 0 {
		return nil, nil, false
	}
	dims = slices.Clone(dims)
	slices.Sort(dims)
	for _, d := range dims {
		if in.Shape[d] <= 1 {
			return nil, nil, false
		}
	}
	return in.Shape, dims, true
}

// lastDimOnly reports whether dims is the last dim of full alone.
func lastDimOnly(full, dims []int) bool { return len(dims) == 1 && dims[0] == len(full)-1 }

// rowKind reports whether a row kernel reduces values of dt: floating
// types, which accumulate in float32 or float64.
func rowKind(dt ir.DType) bool { return dt.IsFloat() }

// rowMembers grows a row region rooted at n into members, and reports its
// full shape and, for reductions over dims other than the last alone, its
// reduced dims; or false when n roots no row region with a reduction in it.
func (p *partitioner) rowMembers(n *ir.Node, members map[*ir.Node]bool) ([]int, []int, bool) {
	full, dims, ok := reductionDims(n)
	switch {
	case ok && lastDimOnly(full, dims):
		return full, nil, p.growRow(n, full, members)
	case ok:
		return p.growDims(n, full, dims, members)
	}
	if n.Op.Kind != ir.Pointwise || len(n.Shape) == 0 {
		return nil, nil, false
	}
	if n.Shape[len(n.Shape)-1] > 1 && p.growRow(n, n.Shape, members) {
		return n.Shape, nil, true
	}
	// A pointwise root at a reduced shape (or of a reduction over other
	// dims): the first reduction it reads (through pointwise ops) names the
	// dims. Over the last dim alone, such a region (Var(-1).Sigmoid(): the
	// sum, then a division and the sigmoid once per row) is a row region
	// like any other.
	if q := p.firstReduction(n); q != nil {
		full, dims, _ := reductionDims(q)
		full, dims, ok := p.growDims(n, full, dims, members)
		if ok && lastDimOnly(full, dims) {
			dims = nil
		}
		return full, dims, ok
	}
	return nil, nil, false
}

// growRow grows a row region (over the last dim of full) rooted at n into
// members, reporting whether it holds a reduction.
func (p *partitioner) growRow(n *ir.Node, full []int, members map[*ir.Node]bool) bool {
	last := []int{len(full) - 1}
	trial := p.absorbRegion(n, func(q *ir.Node) bool {
		return ir.SameShape(q.Shape, full) || ir.SameShape(q.Shape, keptShape(full, last, true))
	}, func(q *ir.Node) bool {
		in, ok := rowReduction(q)
		return ok && q.Attrs.KeepDim && ir.SameShape(in, full)
	})
	reduces := false
	for m := range trial {
		reduces = reduces || m.Op.Kind == ir.Reduction
	}
	if !reduces { // a plain pointwise region
		return false
	}
	for m := range trial {
		members[m] = true
	}
	return true
}

// absorbRegion grows a region rooted at n through the nodes it may hold:
// on n's device, of a dtype a region keeps as an intermediate, pointwise
// ops pointwise accepts and reductions reduction accepts.
func (p *partitioner) absorbRegion(n *ir.Node, pointwise, reduction func(*ir.Node) bool) map[*ir.Node]bool {
	trial := map[*ir.Node]bool{n: true}
	p.absorb(trial, func(q *ir.Node) bool {
		if !intermediateOf(q, n) {
			return false
		}
		switch q.Op.Kind {
		case ir.Pointwise:
			return pointwise(q)
		case ir.Reduction:
			return reduction(q)
		}
		return false
	})
	return trial
}

// firstReduction finds, breadth first through the pointwise ops n reads,
// a reduction a region may fuse; nil if there is none.
func (p *partitioner) firstReduction(n *ir.Node) *ir.Node {
	seen := map[*ir.Node]bool{n: true}
	queue := []*ir.Node{n}
	for len(queue) > 0 {
		m := queue[0]
		queue = queue[1:]
		for _, a := range m.Args {
			q, ok := a.(*ir.Node)
			if !ok || q == nil || seen[q] || q.Kind != ir.CallNode || p.region[q] != nil {
				continue
			}
			seen[q] = true
			if _, _, ok := reductionDims(q); ok {
				return q
			}
			if q.Op.Kind == ir.Pointwise {
				queue = append(queue, q)
			}
		}
	}
	return nil
}

// growDims grows a region reducing dims of full, rooted at n, into members:
// pointwise ops of the full shape or of the reduced shape (dims kept as
// 1 or dropped), and reductions over exactly dims of full. A node of the
// dropped shape must read only row-level members and be read only by
// nodes of that shape: its value is one per kept index, which a node of
// the full shape would broadcast differently. Whole reductions (no kept
// dim) are left to the eager kernels.
func (p *partitioner) growDims(n *ir.Node, full, dims []int, members map[*ir.Node]bool) ([]int, []int, bool) {
	keep, drop := keptShape(full, dims, true), keptShape(full, dims, false)
	if len(drop) == 0 {
		return nil, nil, false
	}
	shaped := func(q *ir.Node) bool {
		return ir.SameShape(q.Shape, full) || ir.SameShape(q.Shape, keep) || ir.SameShape(q.Shape, drop)
	}
	if !shaped(n) {
		return nil, nil, false
	}
	trial := p.absorbRegion(n, shaped, func(q *ir.Node) bool {
		f, d, ok := reductionDims(q)
		return ok && ir.SameShape(f, full) && slices.Equal(d, dims)
	})
	reduces := false
	for m := range trial {
		reduces = reduces || m.Op.Kind == ir.Reduction
		if !ir.SameShape(m.Shape, drop) {
			continue
		}
		if m.Op.Kind == ir.Pointwise {
			for _, a := range m.Args {
				if q, ok := a.(*ir.Node); ok && q != nil && !trial[q] {
					return nil, nil, false // an input read at the dropped shape
				}
			}
		}
		for _, u := range p.users[m] {
			if trial[u] && !ir.SameShape(u.Shape, drop) {
				return nil, nil, false
			}
		}
	}
	if !reduces {
		return nil, nil, false
	}
	for m := range trial {
		members[m] = true
	}
	return full, dims, true
}
