package fuse

import (
	"strings"

	"gocompile/ir"
)

// MaxGroup is the most pointwise regions a horizontal group holds.
const MaxGroup = 8

// Members is the regions a region runs: the members of a horizontal group,
// or the region itself.
func (r *Region) Members() []*Region {
	if r.Group != nil {
		return r.Group
	}
	return []*Region{r}
}

// Horizontal merges independent pointwise regions over the same iteration
// space (same shape and device) into groups, each run as one kernel that
// reads every input once and writes every member's value: x.Exp() and
// x.Sin() become one pass over x. A region joins the earliest open group
// whose position comes after everything the region reads, so the group can
// run there; the order stays valid because a member's readers all came
// after the member. Regions that join nothing stay as they are.
func Horizontal(regions []*Region) []*Region {
	pos := map[*ir.Node]int{} // the position of the region that computes a value
	var out []*Region
	for _, r := range regions {
		placed := false
		if r.Fused() {
			ready := -1 // the last position r reads from
			for _, in := range r.Inputs {
				if p, ok := pos[in.Node]; ok {
					ready = max(ready, p)
				}
			}
			for gi := ready + 1; gi < len(out) && !placed; gi++ {
				g := out[gi]
				if !g.Fused() && g.Group == nil || len(g.Members()) >= MaxGroup {
					continue
				}
				lead := g.Members()[0]
				if !lead.Fused() || lead.Root.Device != r.Root.Device || !ir.SameShape(lead.Root.Shape, r.Root.Shape) {
					continue
				}
				if g.Group == nil { // the first partner: g becomes a group
					out[gi] = &Region{Root: lead.Root, Group: []*Region{lead}}
					g = out[gi]
				}
				g.Group = append(g.Group, r)
				pos[r.Root] = gi
				placed = true
			}
		}
		if !placed {
			for _, m := range r.Members() {
				pos[m.Root] = len(out)
			}
			out = append(out, r)
		}
	}
	return out
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
