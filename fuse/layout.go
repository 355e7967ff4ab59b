package fuse

import (
	"fmt"
	"slices"

	"gocompile/ir"
)

//go:generate go tool msgp -file layout.go -o layout_gen.go -io=false

// Layout records a graph's fusion regions by node position, so that a
// later process that traces the same graph can rebuild them (Rebuild)
// without partitioning it again. Package tensor stores layouts in the
// program cache (package kcache), keyed by the graph's structural key. The
// buffer plan is not stored: PlanBuffers is cheap, and a plan recomputed
// from the regions cannot be inconsistent with them.
type Layout struct {
	Nodes   int32          `msg:"nodes"` // the graph's node count
	Regions []RegionLayout `msg:"regions,limit=1048576"`
}

// RegionLayout is one region: its kind, its nodes (by position, in
// topological order, the root last), the full shape of a row region and
// its reduced dims when they are not the last alone (Row.Dims), and the
// members of a horizontal group (each a pointwise region's nodes), with a
// combo's unit ends (Region.Units).
type RegionLayout struct {
	Kind    uint8     `msg:"kind"`
	Nodes   []int32   `msg:"nodes,limit=1048576"`
	Full    []int64   `msg:"full,limit=64"`
	Dims    []int64   `msg:"dims,limit=64"`
	Members [][]int32 `msg:"members,limit=4096"`
	Units   []int32   `msg:"units,limit=4096"`
}

// The kinds of RegionLayout.
const (
	layoutSingle uint8 = iota
	layoutPointwise
	layoutRow
	layoutGroup
)

// NewLayout records the regions of g.
func NewLayout(g *ir.Graph, regions []*Region) *Layout {
	pos := make(map[*ir.Node]int32, len(g.Nodes))
	for i, n := range g.Nodes {
		pos[n] = int32(i)
	}
	indices := func(ns []*ir.Node) []int32 {
		out := make([]int32, len(ns))
		for i, n := range ns {
			out[i] = pos[n]
		}
		return out
	}
	l := &Layout{Nodes: int32(len(g.Nodes))}
	for _, r := range regions {
		var rl RegionLayout
		switch {
		case r.Group != nil:
			rl.Kind = layoutGroup
			for _, m := range r.Group {
				rl.Members = append(rl.Members, indices(m.Nodes))
			}
			for _, end := range r.Units {
				rl.Units = append(rl.Units, int32(end))
			}
		case r.Row != nil:
			rl.Kind, rl.Nodes = layoutRow, indices(r.Nodes)
			for _, d := range r.Row.Full {
				rl.Full = append(rl.Full, int64(d))
			}
			for _, d := range r.Row.Dims {
				rl.Dims = append(rl.Dims, int64(d))
			}
		case r.Expr != nil:
			rl.Kind, rl.Nodes = layoutPointwise, indices(r.Nodes)
		default:
			rl.Nodes = indices(r.Nodes)
		}
		l.Regions = append(l.Regions, rl)
	}
	return l
}

// Rebuild gives the regions l records for g, or an error when l does not
// fit g (the caller then partitions g itself). It checks what it relies
// on: positions in range, every call node in exactly one region, operands
// computed before their readers, and the regions' own rules (pointwise
// members, row shapes).
func (l *Layout) Rebuild(g *ir.Graph) ([]*Region, error) {
	if int(l.Nodes) != len(g.Nodes) {
		return nil, fmt.Errorf("fuse: layout of %d nodes for a graph of %d", l.Nodes, len(g.Nodes))
	}
	seen := make([]bool, len(g.Nodes))
	nodes := func(idx []int32) ([]*ir.Node, error) {
		if len(idx) == 0 {
			return nil, fmt.Errorf("fuse: layout has an empty region")
		}
		out := make([]*ir.Node, len(idx))
		for i, k := range idx {
			if k < 0 || int(k) >= len(g.Nodes) || seen[k] || g.Nodes[k].Kind != ir.CallNode {
				return nil, fmt.Errorf("fuse: layout names node %d twice, or one that is not an op", k)
			}
			seen[k] = true
			out[i] = g.Nodes[k]
		}
		return out, nil
	}
	var regions []*Region
	done := map[*ir.Node]bool{} // values earlier regions materialise: their roots
	for _, rl := range l.Regions {
		var r *Region
		switch rl.Kind {
		case layoutGroup:
			if len(rl.Members) < 2 || len(rl.Members) > MaxCombo*MaxGroup {
				return nil, fmt.Errorf("fuse: layout has a group of %d", len(rl.Members))
			}
			r = &Region{}
			for _, idx := range rl.Members {
				m, err := rebuildRegion(nodes, idx, layoutPointwise, nil, nil)
				if err != nil {
					return nil, err
				}
				r.Group = append(r.Group, m)
			}
			r.Root = r.Group[0].Root
			if err := r.rebuildUnits(rl.Units); err != nil {
				return nil, err
			}
		case layoutSingle, layoutPointwise, layoutRow:
			var err error
			if r, err = rebuildRegion(nodes, rl.Nodes, rl.Kind, rl.Full, rl.Dims); err != nil {
				return nil, err
			}
		default:
			return nil, fmt.Errorf("fuse: layout region of kind %d", rl.Kind)
		}
		// Every value a region reads from outside it is computed before:
		// by an earlier region, or an earlier member of its unit.
		for _, unit := range r.SplitUnits() {
			inUnit := map[*ir.Node]bool{}
			for _, m := range unit {
				inside := map[*ir.Node]bool{}
				for _, n := range m.Nodes {
					inside[n] = true
				}
				for _, n := range m.Nodes {
					for _, a := range nodeArgs(n) {
						if !inside[a] && a.Kind == ir.CallNode && !done[a] && !inUnit[a] {
							return nil, fmt.Errorf("fuse: layout reads %s before computing it", a.Name())
						}
					}
				}
				if !readsKept(m, unit[:len(inUnit)]) {
					return nil, fmt.Errorf("fuse: layout has %v read a member of its unit through a view or at another shape", m)
				}
				inUnit[m.Root] = true
			}
		}
		for _, m := range r.Members() {
			done[m.Root] = true
		}
		regions = append(regions, r)
	}
	for _, o := range g.Outputs {
		if o.Kind == ir.CallNode && !done[o] {
			return nil, fmt.Errorf("fuse: layout does not materialise output %s", o.Name())
		}
	}
	for i, n := range g.Nodes {
		if n.Kind == ir.CallNode && !seen[i] {
			return nil, fmt.Errorf("fuse: layout leaves out %s", n.Name())
		}
	}
	return regions, nil
}

// rebuildUnits sets group r's units from a layout's (none: a group over
// one iteration space), checking the rules Horizontal keeps: units end in
// order, each over one shape with at most MaxGroup members, at most
// MaxCombo of them.
func (r *Region) rebuildUnits(ends []int32) error {
	if len(ends) == 0 {
		ends = []int32{int32(len(r.Group))}
	} else {
		if len(ends) > MaxCombo {
			return fmt.Errorf("fuse: layout has a combo of %d units", len(ends))
		}
		for _, e := range ends {
			r.Units = append(r.Units, int(e))
		}
	}
	start := 0
	for _, e := range ends {
		end := int(e)
		if end <= start || end > len(r.Group) || end-start > MaxGroup {
			return fmt.Errorf("fuse: layout has a unit from member %d to %d of %d", start, end, len(r.Group))
		}
		for _, m := range r.Group[start:end] {
			if !ir.SameShape(m.Root.Shape, r.Group[start].Root.Shape) {
				return fmt.Errorf("fuse: layout has a unit over shapes %v and %v", r.Group[start].Root.Shape, m.Root.Shape)
			}
		}
		start = end
	}
	if start != len(r.Group) {
		return fmt.Errorf("fuse: layout's units end at member %d of %d", start, len(r.Group))
	}
	return nil
}

// rebuildRegion makes the region of the given kind over the nodes at idx.
func rebuildRegion(nodes func([]int32) ([]*ir.Node, error), idx []int32, kind uint8, full, dims []int64) (*Region, error) {
	ns, err := nodes(idx)
	if err != nil {
		return nil, err
	}
	r := &Region{Root: ns[len(ns)-1], Nodes: ns}
	switch kind {
	case layoutSingle:
		if len(ns) != 1 {
			return nil, fmt.Errorf("fuse: layout has a single-node region of %d nodes", len(ns))
		}
		if r.Root.Op.Kind == ir.Pointwise { // a lone pointwise node is a fused region of one
			err = r.build()
		}
	case layoutPointwise:
		for _, n := range ns {
			if n.Op.Kind != ir.Pointwise && !fusibleView(n) {
				return nil, fmt.Errorf("fuse: layout fuses %s (%s) as pointwise", n.Name(), n.Op.Name)
			}
		}
		err = r.build()
	case layoutRow:
		if len(full) == 0 {
			return nil, fmt.Errorf("fuse: layout has a row region without a shape")
		}
		r.Row = &Row{}
		for _, d := range full {
			r.Row.Full = append(r.Row.Full, int(d))
		}
		for i, d := range dims {
			if d < 0 || int(d) >= len(full) || i > 0 && d <= dims[i-1] {
				return nil, fmt.Errorf("fuse: layout has a row region reducing dims %v of %v", dims, full)
			}
			r.Row.Dims = append(r.Row.Dims, int(d))
		}
		for _, n := range ns {
			ok := n.Op.Kind == ir.Pointwise && (ir.SameShape(n.Shape, r.Row.Full) || r.Row.rowLevel(n))
			if n.Op.Kind == ir.Reduction {
				f, d, isRed := reductionDims(n)
				ok = isRed && ir.SameShape(f, r.Row.Full) && slices.Equal(d, r.Row.ReducedDims())
			}
			if !ok {
				return nil, fmt.Errorf("fuse: layout puts %s (%s) in a row region", n.Name(), n.Op.Name)
			}
		}
		err = r.build()
	}
	if err != nil {
		return nil, err
	}
	return r, nil
}
