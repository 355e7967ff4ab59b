package fuse

import "gocompile/ir"

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
type Row struct {
	Full   []int // the full shape at trace time
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

// rowLevel reports whether n has the row region's reduced shape (the full
// shape with its last dim 1, or dropped: only a root reduction drops it).
func (w *Row) rowLevel(n *ir.Node) bool {
	return ir.SameShape(n.Shape, keptShape(w.Full, true)) || ir.SameShape(n.Shape, keptShape(w.Full, false))
}

func keptShape(full []int, keepDim bool) []int {
	s := append([]int(nil), full[:len(full)-1]...)
	if keepDim {
		s = append(s, 1)
	}
	return s
}

// rowReduction reports whether n reduces its input over the input's last
// dim only, with a reducer a row kernel can run, and returns the input's
// shape.
func rowReduction(n *ir.Node) ([]int, bool) {
	if n.Kind != ir.CallNode || n.Op.Kind != ir.Reduction || n.Op.Reducer.IsArg() || len(n.Args) != 1 {
		return nil, false
	}
	in, ok := n.Args[0].(*ir.Node)
	if !ok || in == nil || len(in.Shape) == 0 || in.Shape[len(in.Shape)-1] <= 1 || !rowKind(in.DType) || !rowKind(n.DType) {
		return nil, false
	}
	dims, err := ir.NormDims(n.Op.Title, in.Shape, n.Attrs.Dims)
	if err != nil || len(dims) != 1 || dims[0] != len(in.Shape)-1 {
		return nil, false
	}
	return in.Shape, true
}

// rowKind reports whether a row kernel reduces values of dt: floating
// types, which accumulate in float32 or float64.
func rowKind(dt ir.DType) bool { return dt.IsFloat() }

// rowMembers grows a row region rooted at n into members, and reports its
// full shape, or false when n roots no row region with a reduction in it.
func (p *partitioner) rowMembers(n *ir.Node, members map[*ir.Node]bool) ([]int, bool) {
	full, ok := rowReduction(n)
	if !ok {
		if n.Op.Kind != ir.Pointwise || len(n.Shape) == 0 || n.Shape[len(n.Shape)-1] <= 1 {
			return nil, false
		}
		full = n.Shape
	}
	trial := map[*ir.Node]bool{n: true}
	p.absorb(trial, func(q *ir.Node) bool {
		if q.Device != n.Device || !exactIntermediate(q.DType) {
			return false
		}
		switch q.Op.Kind {
		case ir.Pointwise:
			return ir.SameShape(q.Shape, full) || ir.SameShape(q.Shape, keptShape(full, true))
		case ir.Reduction:
			in, ok := rowReduction(q)
			return ok && q.Attrs.KeepDim && ir.SameShape(in, full)
		}
		return false
	})
	reduces := false
	for m := range trial {
		reduces = reduces || m.Op.Kind == ir.Reduction
	}
	if !reduces { // a plain pointwise region
		return nil, false
	}
	for m := range trial {
		members[m] = true
	}
	return full, true
}
