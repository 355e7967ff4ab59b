package fuse

import (
	"fmt"
	"strings"

	"gocompile/ir"
)

// Plan is the buffer plan of a partitioned graph: which regions write
// their value into a reusable buffer, which buffer, and what the plan and
// eager execution hold at their peaks.
//
// A value lives from the region that computes it to the last region that
// reads it or a view of it. Planned values share buffers once dead: a
// region's value takes the best-fitting free buffer (growing the largest
// free one if none fits) and frees it after its last reader. Graph outputs,
// and values an output may alias through views or extern ops, are never
// planned: the caller keeps them.
type Plan struct {
	Slot []int // per region: its value's buffer, or -1
	// SlotBytes is each buffer's size at the graph's trace-time shapes.
	SlotBytes []int64
	// PeakBytes is the most bytes of values the program holds at once
	// (inputs excluded), at trace-time shapes; EagerPeakBytes is the same
	// for running the graph node by node, every op's result materialised.
	PeakBytes      int64
	EagerPeakBytes int64
}

// Bytes is a value's size at trace time.
func Bytes(n *ir.Node) int64 { return int64(ir.Numel(n.Shape)) * int64(n.DType.Size()) }

// mayAlias reports whether n's value may share memory with its operands:
// views do, and extern ops may return an operand unchanged.
func mayAlias(n *ir.Node) bool {
	return n.Kind == ir.CallNode && n.Op.Kind != ir.Pointwise && n.Op.Kind != ir.Reduction
}

// PlanBuffers plans the buffers of regions (as Partition returns them for
// g). planned says which regions the backend can write into a given
// buffer.
func PlanBuffers(g *ir.Graph, regions []*Region, planned func(*Region) bool) *Plan {
	p := &Plan{Slot: make([]int, len(regions))}
	// base maps a node to the node whose memory it may share.
	base := map[*ir.Node]*ir.Node{}
	var baseOf func(n *ir.Node) *ir.Node
	baseOf = func(n *ir.Node) *ir.Node {
		if b, ok := base[n]; ok {
			return b
		}
		b := n
		if mayAlias(n) {
			for _, a := range n.Args {
				if an, ok := a.(*ir.Node); ok && an != nil {
					b = baseOf(an)
					break
				}
			}
		}
		base[n] = b
		return b
	}
	escapes := map[*ir.Node]bool{} // bases the outputs may alias
	for _, o := range g.Outputs {
		escapes[o] = true
		escapes[baseOf(o)] = true
		// An extern output may alias any tensor operand, not just the first.
		for _, a := range o.Args {
			if an, ok := a.(*ir.Node); ok && an != nil && mayAlias(o) {
				escapes[baseOf(an)] = true
			}
		}
	}

	p.EagerPeakBytes = peak(g.Nodes, g.Outputs, baseOf, func(n *ir.Node) []*ir.Node { return nodeArgs(n) }, func(n *ir.Node) bool {
		return n.Kind == ir.CallNode && !mayAlias(n)
	})

	roots := make([]*ir.Node, len(regions))
	reads := map[*ir.Node][]*ir.Node{}
	for i, r := range regions {
		roots[i] = r.Root
		if r.Expr != nil || r.Row != nil {
			for _, in := range r.Inputs {
				reads[r.Root] = append(reads[r.Root], in.Node)
			}
		} else {
			reads[r.Root] = nodeArgs(r.Root)
		}
	}
	p.PeakBytes = peak(roots, g.Outputs, baseOf, func(n *ir.Node) []*ir.Node { return reads[n] }, func(n *ir.Node) bool {
		return !mayAlias(n)
	})

	// Assign buffers in region order.
	last := lastUses(roots, g.Outputs, baseOf, func(n *ir.Node) []*ir.Node { return reads[n] })
	var free []int
	slotOf := map[*ir.Node]int{}
	for i, r := range regions {
		p.Slot[i] = -1
		if planned(r) && !escapes[r.Root] && !mayAlias(r.Root) {
			need := Bytes(r.Root)
			best := -1
			for j, s := range free {
				fits := p.SlotBytes[s] >= need
				switch {
				case best < 0:
					best = j
				case fits && (p.SlotBytes[free[best]] < need || p.SlotBytes[s] < p.SlotBytes[free[best]]):
					best = j // the smallest that fits
				case !fits && p.SlotBytes[free[best]] < need && p.SlotBytes[s] > p.SlotBytes[free[best]]:
					best = j // none fits yet: the largest, to grow
				}
			}
			if best >= 0 {
				s := free[best]
				free = append(free[:best], free[best+1:]...)
				p.SlotBytes[s] = max(p.SlotBytes[s], need)
				p.Slot[i] = s
			} else {
				p.Slot[i] = len(p.SlotBytes)
				p.SlotBytes = append(p.SlotBytes, need)
			}
			slotOf[r.Root] = p.Slot[i]
		}
		// Values whose last reader is this region free their buffers.
		for n, s := range slotOf {
			if last[n] == i {
				free = append(free, s)
				delete(slotOf, n)
			}
		}
	}
	return p
}

func nodeArgs(n *ir.Node) []*ir.Node {
	var out []*ir.Node
	for _, a := range n.Args {
		if an, ok := a.(*ir.Node); ok && an != nil {
			out = append(out, an)
		}
	}
	return out
}

// lastUses is, per base value, the position in order of its last reader
// (len(order) for outputs, which live on).
func lastUses(order, outputs []*ir.Node, baseOf func(*ir.Node) *ir.Node, reads func(*ir.Node) []*ir.Node) map[*ir.Node]int {
	last := map[*ir.Node]int{}
	for i, n := range order {
		last[baseOf(n)] = max(last[baseOf(n)], i)
		for _, a := range reads(n) {
			last[baseOf(a)] = i
		}
	}
	for _, o := range outputs {
		last[baseOf(o)] = len(order)
	}
	return last
}

// peak walks order, holding each allocating node's bytes from its position
// to its base's last use, and returns the most held at once.
func peak(order, outputs []*ir.Node, baseOf func(*ir.Node) *ir.Node, reads func(*ir.Node) []*ir.Node, allocates func(*ir.Node) bool) int64 {
	last := lastUses(order, outputs, baseOf, reads)
	var live, most int64
	held := map[*ir.Node]int64{}
	for i, n := range order {
		if allocates(n) {
			held[n] = Bytes(n)
			live += held[n]
		}
		most = max(most, live)
		for m, b := range held {
			if last[m] == i {
				live -= b
				delete(held, m)
			}
		}
	}
	return most
}

// String summarises the plan.
func (p *Plan) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d reused buffers", len(p.SlotBytes))
	var total int64
	for _, s := range p.SlotBytes {
		total += s
	}
	fmt.Fprintf(&b, " (%d bytes), peak %d bytes (eager %d bytes)", total, p.PeakBytes, p.EagerPeakBytes)
	return b.String()
}
