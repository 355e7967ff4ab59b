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
	// Slot maps each planned value (a region's root) to its buffer.
	Slot map[*ir.Node]int
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

// step is one launch of a program: the values it writes and reads.
type step struct {
	writes, reads []*ir.Node
}

// steps lists what each region (a horizontal group as one) writes and
// reads, in order.
func steps(regions []*Region) []step {
	var out []step
	for _, r := range regions {
		var st step
		for _, m := range r.Members() {
			st.writes = append(st.writes, m.Root)
			if m.Expr != nil || m.Row != nil {
				for _, in := range m.Inputs {
					st.reads = append(st.reads, in.Node)
				}
			} else {
				st.reads = append(st.reads, nodeArgs(m.Root)...)
			}
		}
		out = append(out, st)
	}
	return out
}

// PlanBuffers plans the buffers of regions (as Partition or Horizontal
// return them for g). planned says which regions the backend can write
// into given buffers.
func PlanBuffers(g *ir.Graph, regions []*Region, planned func(*Region) bool) *Plan {
	p := &Plan{Slot: map[*ir.Node]int{}}
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

	var eager []step
	for _, n := range g.Nodes {
		st := step{reads: nodeArgs(n)}
		if n.Kind == ir.CallNode {
			st.writes = []*ir.Node{n}
		}
		eager = append(eager, st)
	}
	p.EagerPeakBytes = peak(eager, g.Outputs, baseOf)
	order := steps(regions)
	p.PeakBytes = peak(order, g.Outputs, baseOf)

	// Assign buffers in step order.
	last := lastUses(order, g.Outputs, baseOf)
	var free []int
	live := map[*ir.Node]int{}
	for i, r := range regions {
		if planned(r) {
			for _, m := range r.Members() {
				n := m.Root
				if escapes[n] || mayAlias(n) {
					continue
				}
				s := p.take(&free, Bytes(n))
				p.Slot[n] = s
				live[n] = s
			}
		}
		// Values whose last reader is this step free their buffers.
		for n, s := range live {
			if last[n] == i {
				free = append(free, s)
				delete(live, n)
			}
		}
	}
	return p
}

// take returns the free buffer that best fits need bytes (the smallest
// that fits, else the largest, grown), or a new one.
func (p *Plan) take(free *[]int, need int64) int {
	best := -1
	for j, s := range *free {
		fits := p.SlotBytes[s] >= need
		switch {
		case best < 0:
			best = j
		case fits && (p.SlotBytes[(*free)[best]] < need || p.SlotBytes[s] < p.SlotBytes[(*free)[best]]):
			best = j // the smallest that fits
		case !fits && p.SlotBytes[(*free)[best]] < need && p.SlotBytes[s] > p.SlotBytes[(*free)[best]]:
			best = j // none fits yet: the largest, to grow
		}
	}
	if best < 0 {
		p.SlotBytes = append(p.SlotBytes, need)
		return len(p.SlotBytes) - 1
	}
	s := (*free)[best]
	*free = append((*free)[:best], (*free)[best+1:]...)
	p.SlotBytes[s] = max(p.SlotBytes[s], need)
	return s
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

// lastUses is, per base value, the step of its last reader (len(order)
// for outputs, which live on).
func lastUses(order []step, outputs []*ir.Node, baseOf func(*ir.Node) *ir.Node) map[*ir.Node]int {
	last := map[*ir.Node]int{}
	for i, st := range order {
		for _, w := range st.writes {
			last[baseOf(w)] = max(last[baseOf(w)], i)
		}
		for _, a := range st.reads {
			last[baseOf(a)] = i
		}
	}
	for _, o := range outputs {
		last[baseOf(o)] = len(order)
	}
	return last
}

// peak walks the steps, holding each value a step writes (views and
// extern results that may alias hold nothing new) from that step to its
// last use, and returns the most bytes held at once.
func peak(order []step, outputs []*ir.Node, baseOf func(*ir.Node) *ir.Node) int64 {
	last := lastUses(order, outputs, baseOf)
	var live, most int64
	held := map[*ir.Node]int64{}
	for i, st := range order {
		for _, w := range st.writes {
			if !mayAlias(w) {
				held[w] = Bytes(w)
				live += held[w]
			}
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
