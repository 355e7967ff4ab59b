package program

import (
	"slices"

	"gocompile/array"
	"gocompile/ir"
)

// Direct stores: a fused kernel whose value overwrites a storage whole
// (an optimizer's m.Copy(m·β + g·(1−β)), a parameter's update) writes
// into that storage instead of a buffer the write then copies from.

// findDirectStores sets the stores of each pointwise step whose member
// values are the source of an in-place write (AsStridedScatter marked
// KeepDim) of a storage, read otherwise only by later members of the same
// kernel (which keep the value in registers): the write, run after the
// kernel, then finds its source already in place.
func (p *inductorProgram) findDirectStores() {
	users, result := p.g.Users(), p.g.IsOutput()
	for i := range p.steps {
		s := &p.steps[i]
		if s.group == nil {
			continue
		}
		inKernel := map[*ir.Node]bool{}
		for _, mem := range s.r.Members() {
			for _, n := range mem.Nodes {
				inKernel[n] = true
			}
		}
		for m, mem := range s.r.Members() {
			if result[mem.Root] {
				continue
			}
			var w *ir.Node // the write
			ok := true
			for _, u := range users[mem.Root] {
				switch {
				case inKernel[u]:
				case w == nil && u.Op == ir.OpAsStridedScatter && u.Attrs.KeepDim && u.Args[1] == ir.Value(mem.Root):
					w = u
				default:
					ok = false
				}
			}
			if !ok || w == nil {
				continue
			}
			base, ok := w.Args[0].(*ir.Node)
			if !ok {
				continue
			}
			if s.stores == nil {
				s.stores = slices.Repeat([]int{-1}, len(s.r.Members()))
				s.writes = make([]*ir.Node, len(s.r.Members()))
			}
			s.stores[m], s.writes[m] = p.index[base], w
		}
	}
}

// canStoreInto returns where member m of the group may store its value
// (of type dt and shape): x, the storage write w overwrites with it, in
// the layout w writes, or nil where it may not. It may where w covers x
// whole, densely, and the kernel reads x's storage only element for
// element (the layout w writes), so that each element is read before the
// same thread writes it: in member m's own expression, or, on a GPU, in
// those of m's unit (a kernel with several outputs loads every operand
// before it stores any). A CPU block program runs the members one after
// another over a chunk, so there only m may read x.
func (s *groupStep) canStoreInto(m int, x *array.Array, w *ir.Node, dt ir.DType, shape []int, in []*array.Array) *array.Array {
	// MaxAutotune times a kernel by running it again on its arguments,
	// which must not change them.
	if s.tune || x == nil || x.DType() != dt || !x.IsContiguous() || x.Offset() != 0 || x.Numel() != ir.Numel(shape) {
		return nil
	}
	l, err := ir.OpAsStrided.View(x.Layout(), &w.Attrs)
	if err != nil || l.Offset != 0 || !ir.SameShape(l.Shape, shape) || !ir.IsContiguous(l.Shape, l.Strides) {
		return nil
	}
	for j, a := range in {
		if a == nil || !a.SharesStorage(x) {
			continue
		}
		for other, reads := range s.reads {
			if reads[j] && (!s.sameUnit(other, m) || other != m && x.Device() == array.CPU || !a.Layout().Same(l)) {
				return nil
			}
		}
	}
	return x.WithLayout(l)
}

// sameUnit reports whether members a and b are computed by one device
// function: one unit of a combo, or any two of another group.
func (s *groupStep) sameUnit(a, b int) bool {
	return s.unitOf == nil || s.unitOf[a] == s.unitOf[b]
}

// inputsRead gives, per input index, whether e reads it.
func inputsRead(e *ir.Expr, n int) []bool {
	reads := make([]bool, n)
	seen := map[*ir.Expr]bool{}
	var walk func(e *ir.Expr)
	walk = func(e *ir.Expr) {
		if seen[e] {
			return
		}
		seen[e] = true
		if e.Prim == ir.PArg && e.Index < n {
			reads[e.Index] = true
		}
		for _, a := range e.Args {
			walk(a)
		}
	}
	walk(e)
	return reads
}
