package fuse

import "gocompile/ir"

// CatPart is an argument of a Cat that the kernel computing it writes
// straight into its slice of the Cat's result: the value of member Member
// of region Region.
type CatPart struct {
	Region *Region
	Member int
}

// InPlaceCats finds the Cats whose parts the kernels that compute them can
// write into the Cat's result, each into its slice, so that the Cat itself
// copies nothing (a rotary embedding's two halves): for each such Cat
// node, per argument, the region member that computes it, or nil where
// the Cat copies that part (an input, a view, a value something else
// reads too). A part qualifies when it is the value of a member of a
// region that kernel says a kernel writes into a buffer it is given, in
// any layout, the Cat reads it once and nothing else does, it is no output
// of the graph, it has the Cat's dtype, and the Cat and its parts have
// static shapes. Cats with no qualifying part are left out.
func InPlaceCats(g *ir.Graph, regions []*Region, kernel func(*Region) bool) map[*ir.Node][]*CatPart {
	users, outputs := g.Users(), g.IsOutput()
	member := map[*ir.Node]*CatPart{} // a member's value → where it is computed
	for _, r := range regions {
		if !kernel(r) {
			continue
		}
		for m, mem := range r.Members() {
			member[mem.Root] = &CatPart{Region: r, Member: m}
		}
	}
	var cats map[*ir.Node][]*CatPart
	for _, n := range g.Nodes {
		if n.Kind != ir.CallNode || n.Op != ir.OpCat || n.Sym != nil {
			continue
		}
		parts := make([]*CatPart, len(n.Args))
		found := false
		for i, a := range n.Args {
			p, ok := a.(*ir.Node)
			// One user: the Cat, which reads it once.
			if ok && p != nil && p.Sym == nil && p.DType == n.DType && !outputs[p] && len(users[p]) == 1 && member[p] != nil {
				parts[i], found = member[p], true
			}
		}
		if found {
			if cats == nil {
				cats = map[*ir.Node][]*CatPart{}
			}
			cats[n] = parts
		}
	}
	return cats
}
