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
// values are only the source of an in-place write (AsStridedScatter
// marked KeepDim) of a storage: the write, run after the kernel, then
// finds its source already in place.
func (p *inductorProgram) findDirectStores() {
	users, result := p.g.Users(), p.g.IsOutput()
	for i := range p.steps {
		s := &p.steps[i]
		if s.group == nil {
			continue
		}
		for m, mem := range s.r.Members() {
			us := users[mem.Root]
			if len(us) != 1 || result[mem.Root] {
				continue
			}
			w := us[0]
			if w.Op != ir.OpAsStridedScatter || !w.Attrs.KeepDim || w.Args[1] != ir.Value(mem.Root) {
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
// whole, densely, and the kernel reads x's storage only in member m's own
// expression, element for element (the layout w writes), so that each
// element is read before the same thread writes it.
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
			if reads[j] && (other != m || !a.Layout().Same(l)) {
				return nil
			}
		}
	}
	return x.WithLayout(l)
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
