package fuse

import (
	"strings"

	"gocompile/ir"
)

// MaxGroup is the most pointwise regions a horizontal group over one
// iteration space holds; MaxCombo the most a combo (members of different
// shapes) holds, each a few kernel parameters; MaxComboElems the most
// elements a combo member computes. Combos save launches, which matter
// for small regions; a large one is bandwidth-bound and keeps its own
// kernel, whose loads a group over its iteration space shares (a combo's
// members each load their own inputs).
const (
	MaxGroup      = 8
	MaxCombo      = 32
	MaxComboElems = 1 << 20
)

// Members is the regions a region runs: the members of a horizontal group,
// or the region itself.
func (r *Region) Members() []*Region {
	if r.Group != nil {
		return r.Group
	}
	return []*Region{r}
}

// Combo reports whether r is a horizontal group of members of different
// shapes, each flat (see Flat): its kernel runs each member over its own
// elements, a range of blocks each, as a multi-tensor kernel does.
func (r *Region) Combo() bool {
	for _, m := range r.Group {
		if !ir.SameShape(m.Root.Shape, r.Group[0].Root.Shape) {
			return true
		}
	}
	return false
}

// Flat reports whether r is a fused pointwise region that reads every
// input element for element or as one element: its value's element i
// depends on element i of inputs of its own shape and on single-element
// inputs only, with no views between, so that it can run over its flat
// elements beside regions of other shapes.
func (r *Region) Flat() bool {
	if !r.Fused() || r.Group != nil {
		return false
	}
	full := false // an input gives the iteration space
	for _, in := range r.Inputs {
		same := ir.SameShape(in.Node.Shape, r.Root.Shape)
		if in.Views != nil || !same && ir.Numel(in.Node.Shape) != 1 {
			return false
		}
		full = full || same
	}
	return full
}

// Horizontal merges independent pointwise regions into groups, each run
// as one kernel: regions over the same iteration space (same shape and
// device) into a group that reads every input once and writes every
// member's value (x.Exp() and x.Sin() become one pass over x), and flat
// regions of any shapes into a combo (an optimizer's update of every
// parameter becomes one launch). A region joins the earliest open group
// whose position comes after everything the region reads, so the group can
// run there; the order stays valid because a member's readers all came
// after the member. An in-place write of a storage (a write the graph
// marked KeepDim) and a view move up to just after what they read, so
// that the regions reading them can join groups early too; a write stays
// after everything that reads the storage's old contents, which it
// depends on. Other regions stay as they are.
func Horizontal(regions []*Region) []*Region {
	type bucket struct {
		r         *Region
		followers []*Region // in-place writes placed right after r
	}
	pos := map[*ir.Node]int{} // the bucket of the region that computes a value
	var out []bucket
	ready := func(r *Region) int { // the last bucket r reads from
		last := -1
		for _, m := range r.Members() {
			ins := m.Inputs
			if !m.Fused() {
				for _, a := range nodeArgs(m.Root) {
					ins = append(ins, Input{Node: a})
				}
			}
			for _, in := range ins {
				if p, ok := pos[in.Node]; ok {
					last = max(last, p)
				}
			}
		}
		return last
	}
	for _, r := range regions {
		placed := false
		switch {
		case r.Fused():
			for gi := ready(r) + 1; gi < len(out) && !placed; gi++ {
				g := out[gi].r
				if !joins(g, r) {
					continue
				}
				if g.Group == nil { // the first partner: g becomes a group
					g = &Region{Root: g.Root, Group: []*Region{g}}
					out[gi].r = g
				}
				g.Group = append(g.Group, r)
				pos[r.Root] = gi
				placed = true
			}
		case movable(r):
			if gi := ready(r); gi >= 0 {
				out[gi].followers = append(out[gi].followers, r)
				pos[r.Root] = gi
				placed = true
			}
		}
		if !placed {
			for _, m := range r.Members() {
				pos[m.Root] = len(out)
			}
			out = append(out, bucket{r: r})
		}
	}
	var flat []*Region
	for _, b := range out {
		flat = append(flat, b.r)
		flat = append(flat, b.followers...)
	}
	return flat
}

// joins reports whether fused region r may join g (a region or group):
// both on one device, and either over g's iteration space (g not a combo)
// with room in the group, or all flat and small with room in a combo.
func joins(g, r *Region) bool {
	lead := g.Members()[0]
	if !lead.Fused() || lead.Row != nil || lead.Root.Device != r.Root.Device {
		return false
	}
	n := len(g.Members())
	if ir.SameShape(lead.Root.Shape, r.Root.Shape) && !g.Combo() {
		return n < MaxGroup // a group over one iteration space: a combo only across shapes
	}
	small := func(m *Region) bool { return m.Flat() && ir.Numel(m.Root.Shape) <= MaxComboElems }
	if n >= MaxCombo || !small(r) {
		return false
	}
	for _, m := range g.Members() {
		if !small(m) {
			return false
		}
	}
	return true
}

// movable reports whether r, alone in its region, is an in-place write
// of a storage (see Horizontal) or a view, which only names its
// operand's elements anew.
func movable(r *Region) bool {
	n := r.Root
	if r.Group != nil || r.Fused() || r.Row != nil || len(r.Nodes) != 1 {
		return false
	}
	return n.Op.Kind == ir.View || n.Attrs.KeepDim && (n.Op == ir.OpAsStridedScatter || n.Op == ir.OpAsStridedIndexCopy)
}

// groupString names a group by its members.
func groupString(g []*Region) string {
	parts := make([]string, len(g))
	for i, m := range g {
		parts[i] = m.String()
	}
	return "horizontal [" + strings.Join(parts, " | ") + "]"
}

// GroupExprs gives a horizontal group's inputs (every member's, each
// once) and each member's expression over them.
func (r *Region) GroupExprs() ([]Input, []*ir.Expr) {
	var inputs []Input
	index := map[Input]int{}
	var exprs []*ir.Expr
	for _, m := range r.Members() {
		args := make([]*ir.Expr, len(m.Inputs))
		for i, in := range m.Inputs {
			k, ok := index[in]
			if !ok {
				k = len(inputs)
				index[in] = k
				inputs = append(inputs, in)
			}
			args[i] = ir.Arg(k)
		}
		exprs = append(exprs, substitute(m.Expr, args, nil, map[*ir.Expr]*ir.Expr{}))
	}
	return inputs, exprs
}
