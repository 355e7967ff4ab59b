package fuse

import (
	"slices"
	"strings"

	"gocompile/ir"
)

// MaxGroup is the most pointwise regions a group over one iteration space
// (or a combo's unit) holds; MaxCombo the most units a combo (members of
// different shapes) holds, each a few kernel parameters; MaxComboElems
// the most elements a combo member computes. Combos save launches, which
// matter for small regions; a large one is bandwidth-bound and keeps its
// own kernel, whose loads a group over its iteration space shares (a
// combo's units each load their own inputs).
const (
	MaxGroup      = 8
	MaxCombo      = 64
	MaxComboElems = 1 << 20
)

// Members is the regions a region runs: the members of a horizontal group
// or combo (each unit's in turn), or the region itself.
func (r *Region) Members() []*Region {
	if r.Group != nil {
		return r.Group
	}
	return []*Region{r}
}

// SplitUnits gives the members by unit: a combo's units, or every member
// as one unit.
func (r *Region) SplitUnits() [][]*Region {
	if r.Units == nil {
		return [][]*Region{r.Members()}
	}
	out := make([][]*Region, len(r.Units))
	start := 0
	for u, end := range r.Units {
		out[u], start = r.Group[start:end], end
	}
	return out
}

// Combo reports whether r is a combo: units of different shapes (or of
// one shape, flat and sharing no input), each of small fused members, that
// its kernel runs over their own elements, a range of blocks each, as a
// multi-tensor kernel does.
func (r *Region) Combo() bool { return r.Units != nil }

// Flat reports whether r is a fused pointwise region that reads every
// input element for element or as one element: its value's element i
// depends on element i of inputs of its own shape and on single-element
// inputs only, with no views between, so that it runs as a dense kernel
// over its flat elements.
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

// Horizontal merges pointwise regions into groups, each run as one
// kernel: regions over the same iteration space (same shape and device)
// into a group that reads every input once and writes every member's
// value (x.Exp() and x.Sin() become one pass over x), and small regions of
// any shapes, reading their inputs through views and broadcasts or not,
// into a combo of such units (an optimizer's update of every parameter, a
// decode step's rotations of its queries and of its keys, become one
// launch). A region joins the earliest open group whose position comes
// after everything the region reads, so the group can run there; the
// order stays valid because a member's readers all came after the
// member. A region may also join the group that computes some of what it
// reads, when it reads those values element for element at its own
// shape, in one unit: the kernel then keeps them in registers (an
// optimizer's parameter update and the moments it reads). An in-place
// write of a storage (a write the graph marked KeepDim) and a view move
// up to just after what they read (a view of inputs only, to the start),
// so that the regions reading them can join groups early too; a write
// stays after everything that reads the storage's old contents, which it
// depends on. Other regions stay as they are.
func Horizontal(regions []*Region) []*Region {
	type bucket struct {
		r         *Region
		followers []*Region // in-place writes placed right after r
	}
	pos := map[*ir.Node]int{} // the bucket of the region that computes a value (-1: head)
	var out []bucket
	var head []*Region             // views of inputs, first
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
			last := ready(r)
			if last >= 0 {
				inLast := func(n *ir.Node) bool { p, ok := pos[n]; return ok && p == last }
				if g, ok := joinReading(out[last].r, r, inLast); ok {
					out[last].r, pos[r.Root], placed = g, last, true
				}
			}
			for gi := last + 1; gi < len(out) && !placed; gi++ {
				if g, ok := join(out[gi].r, r); ok {
					out[gi].r, pos[r.Root], placed = g, gi, true
				}
			}
		case movable(r):
			if gi := ready(r); gi >= 0 {
				out[gi].followers = append(out[gi].followers, r)
				pos[r.Root] = gi
				placed = true
			} else if r.Root.Op.Kind == ir.View {
				// A view of inputs only goes first, so that its readers
				// can join groups from the start.
				head = append(head, r)
				pos[r.Root] = -1
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
	flat := head
	for _, b := range out {
		flat = append(flat, b.r)
		flat = append(flat, b.followers...)
	}
	return flat
}

// groupable reports whether fused region r may share a kernel with g (a
// region or group): g's members are fused pointwise regions on r's
// device.
func groupable(g, r *Region) bool {
	lead := g.Members()[0]
	return lead.Fused() && lead.Row == nil && lead.Root.Device == r.Root.Device
}

// small reports whether m may be a combo's member: a fused pointwise
// region (its inputs read through any views or broadcasts) of at most
// MaxComboElems elements.
func small(m *Region) bool {
	return m.Fused() && m.Group == nil && ir.Numel(m.Root.Shape) <= MaxComboElems
}

// join gives g (a region or group) with independent fused region r added,
// or false where r may not join. Over g's iteration space (g not a
// combo), r joins the group where it shares an input with it (the kernel
// loads it once), where either is too large for a combo or either is not
// flat, with room in the group. Otherwise, all small, r joins a combo: the
// unit of its shape that shares an input with it, with room, or a unit of
// its own.
func join(g, r *Region) (*Region, bool) {
	if !groupable(g, r) {
		return nil, false
	}
	combo := small(r) && allSmall(g)
	// Over one iteration space, a group unless both are flat and share no
	// input: a combo runs members that read views or broadcasts each over
	// its own blocks, a group in one pass.
	same := !combo || sharesInput(g.Members(), r) || !r.Flat() || !allFlat(g)
	if !g.Combo() && ir.SameShape(g.Root.Shape, r.Root.Shape) && same {
		if len(g.Members()) >= MaxGroup { // a group over one iteration space: a combo only across shapes
			return nil, false
		}
		return grouped(g, r), true
	}
	if !combo {
		return nil, false
	}
	if !g.Combo() { // g becomes a combo
		g = grouped(g, nil)
		g.Units = []int{len(g.Group)}
	}
	for u, unit := range g.SplitUnits() {
		if ir.SameShape(unit[0].Root.Shape, r.Root.Shape) && len(unit) < MaxGroup && sharesInput(unit, r) {
			return g.insert(u, r), true
		}
	}
	if len(g.Units) >= MaxCombo {
		return nil, false
	}
	g.Group = append(g.Group, r)
	g.Units = append(g.Units, len(g.Group))
	return g, true
}

// sharesInput reports whether r reads an input one of members reads.
func sharesInput(members []*Region, r *Region) bool {
	for _, m := range members {
		for _, a := range m.Inputs {
			for _, b := range r.Inputs {
				if a.Node == b.Node {
					return true
				}
			}
		}
	}
	return false
}

// joinReading gives g with fused region r added where r reads values g's
// bucket computes (inBucket; nothing computed later): those values must
// be members of one unit of r's shape with room (not the writes and views
// placed after g), read at that shape without views, and kept exactly in
// registers (intermediateOf); r must be small where g is a combo. Else it
// reports false.
func joinReading(g, r *Region, inBucket func(*ir.Node) bool) (*Region, bool) {
	if !groupable(g, r) {
		return nil, false
	}
	units := g.SplitUnits()
	unitOf := map[*ir.Node]int{}
	for u, unit := range units {
		for _, m := range unit {
			unitOf[m.Root] = u
		}
	}
	unit := -1
	for _, in := range r.Inputs {
		u, ok := unitOf[in.Node]
		if !ok && inBucket(in.Node) || ok && unit >= 0 && u != unit {
			return nil, false
		}
		if ok {
			unit = u
		}
	}
	if unit < 0 || !ir.SameShape(units[unit][0].Root.Shape, r.Root.Shape) || len(units[unit]) >= MaxGroup || !readsKept(r, units[unit]) {
		return nil, false
	}
	if g.Combo() && !small(r) {
		return nil, false
	}
	if !g.Combo() {
		return grouped(g, r), true
	}
	return g.insert(unit, r), true
}

// readsKept reports whether r may read the values of the regions before
// it in its unit from registers: each at r's shape without views, kept
// exactly (intermediateOf) by an expression without op parameters.
func readsKept(r *Region, before []*Region) bool {
	for _, in := range r.Inputs {
		for _, m := range before {
			if m.Root != in.Node {
				continue
			}
			if _, ok := m.exprKind(); !ok || in.Views != nil || !ir.SameShape(in.Node.Shape, r.Root.Shape) || !intermediateOf(in.Node, r.Root) {
				return false
			}
		}
	}
	return true
}

// grouped gives g as a group (a region alone becomes one) with r, when
// not nil, appended.
func grouped(g, r *Region) *Region {
	if g.Group == nil {
		g = &Region{Root: g.Root, Group: []*Region{g}}
	}
	if r != nil {
		g.Group = append(g.Group, r)
	}
	return g
}

// insert adds r at the end of combo g's unit u.
func (g *Region) insert(u int, r *Region) *Region {
	end := g.Units[u]
	g.Group = slices.Insert(g.Group, end, r)
	for i := u; i < len(g.Units); i++ {
		g.Units[i]++
	}
	return g
}

// allFlat reports whether every member of g is flat (see Flat).
func allFlat(g *Region) bool {
	for _, m := range g.Members() {
		if !m.Flat() {
			return false
		}
	}
	return true
}

// allSmall reports whether every member of g may be a combo's.
func allSmall(g *Region) bool {
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

// groupString names a group by its members, a combo's units apart.
func groupString(g *Region) string {
	var units []string
	for _, unit := range g.SplitUnits() {
		parts := make([]string, len(unit))
		for i, m := range unit {
			parts[i] = m.String()
		}
		units = append(units, strings.Join(parts, " | "))
	}
	if g.Combo() {
		return "combo [" + strings.Join(units, " || ") + "]"
	}
	return "horizontal [" + units[0] + "]"
}

// GroupExprs gives a horizontal group's inputs (every member's, each
// once) and each member's expression over them. A member that reads an
// earlier member of its unit (see Horizontal) reads that member's
// expression, as a store and a load would give it (readKept).
func (r *Region) GroupExprs() ([]Input, []*ir.Expr) {
	var inputs []Input
	index := map[Input]int{}
	var exprs []*ir.Expr
	earlier := map[*ir.Node]int{} // a member's root → its index
	for mi, m := range r.Members() {
		args := make([]*ir.Expr, len(m.Inputs))
		for i, in := range m.Inputs {
			if j, ok := earlier[in.Node]; ok && in.Views == nil {
				p := r.Group[j]
				k, _ := p.exprKind() // checked by joinReading
				args[i] = readKept(exprs[j], k, p.Root, in.Kind)
				continue
			}
			k, ok := index[in]
			if !ok {
				k = len(inputs)
				index[in] = k
				inputs = append(inputs, in)
			}
			args[i] = ir.Arg(k)
		}
		exprs = append(exprs, ir.Substitute(m.Expr, args, nil))
		earlier[m.Root] = mi
	}
	return inputs, exprs
}

// exprKind is the kind a fused region's expression gives (its inputs
// loaded in their kinds, computed in r.Compute), or false where its
// expression takes op parameters.
func (r *Region) exprKind() (ir.Kind, bool) {
	kinds := make([]ir.Kind, len(r.Inputs))
	for i, in := range r.Inputs {
		kinds[i] = in.Kind
	}
	params, k, err := r.Expr.ParamKinds(kinds, r.Compute)
	return k, err == nil && len(params) == 0
}
