package ir

import (
	"fmt"
	"math"
)

// JointSplit is a joint graph of forward and backward split in two, as
// AOTAutograd's partitioner splits one: Forward computes the results and
// the saved values from the inputs; Backward computes the gradients from
// the inputs, the upstream gradient and the saved values.
type JointSplit struct {
	// Forward takes the joint graph's inputs but the upstream gradient,
	// in order, and outputs its results, then Saved's values.
	Forward *Graph
	// Backward takes the joint graph's inputs (the upstream gradient in
	// its place), then one input per saved value, and outputs the
	// gradients.
	Backward *Graph
	// Saved are the joint graph's nodes whose values Forward keeps for
	// Backward; Recomputed are those Backward computes again instead.
	Saved, Recomputed []*Node
}

// SavedBytes is the memory the saved values take.
func (s *JointSplit) SavedBytes() int64 {
	var n int64
	for _, v := range s.Saved {
		n += nodeBytes(v)
	}
	return n
}

func nodeBytes(n *Node) int64 { return int64(Numel(n.Shape)) * int64(n.DType.Size()) }

// SplitJoint splits g, a joint graph whose first nresults outputs are the
// forward's results and whose other outputs are gradients computed with
// the upstream gradient input upstream, into a forward and a backward
// graph. The values the backward needs from the forward are chosen by a
// minimum cut, as AOTAutograd's partitioner chooses them: each forward
// value may be saved at the cost of its bytes, or recomputed in the
// backward where it is pointwise or a view (cheap) and its own operands
// are saved or recomputed in turn; products, reductions and other ops are
// never recomputed. Of the cuts that leave the backward able to run, the
// one saving the fewest bytes wins: a chain of pointwise ops saves its
// input, not each intermediate.
func SplitJoint(g *Graph, upstream *Node, nresults int) (*JointSplit, error) {
	if upstream == nil || upstream.Kind != InputNode || nresults > len(g.Outputs) {
		return nil, fmt.Errorf("ir: SplitJoint needs the upstream gradient as an input and %d results among %d outputs", nresults, len(g.Outputs))
	}
	// The backward's nodes: those that depend on the upstream gradient.
	tangent := map[*Node]bool{upstream: true}
	for _, n := range g.Nodes {
		for _, a := range nodeArgs(n) {
			if tangent[a] {
				tangent[n] = true
			}
		}
	}
	for _, o := range g.Outputs[:nresults] {
		if tangent[o] {
			return nil, fmt.Errorf("ir: result %s depends on the upstream gradient", o.Name())
		}
	}
	// The forward's values the backward reads, or returns as gradients.
	needed := map[*Node]bool{}
	for _, n := range g.Nodes {
		if tangent[n] {
			for _, a := range nodeArgs(n) {
				if !tangent[a] {
					needed[a] = true
				}
			}
		}
	}
	for _, o := range g.Outputs[nresults:] {
		if !tangent[o] {
			needed[o] = true
		}
	}
	cut := minCut(g, tangent, needed)

	s := &JointSplit{}
	saved := map[*Node]bool{}
	for _, n := range g.Nodes {
		if cut[n] {
			saved[n] = true
			s.Saved = append(s.Saved, n)
		}
	}
	// Forward: the results and the saved values.
	fwd := &Graph{}
	fmap := map[*Node]*Node{}
	for _, in := range g.Inputs {
		if in != upstream {
			fmap[in] = fwd.Input(in.Shape, in.DType, in.Device, in.Loc)
		}
	}
	var fouts []*Node
	fouts = append(fouts, g.Outputs[:nresults]...)
	fouts = append(fouts, s.Saved...)
	if err := copyNodes(fwd, g, fmap, fouts, nil); err != nil {
		return nil, err
	}
	for _, o := range fouts {
		fwd.Outputs = append(fwd.Outputs, fmap[o])
	}
	// Backward: the gradients, from the inputs, the upstream gradient and
	// the saved values, recomputing the rest.
	bwd := &Graph{}
	bmap := map[*Node]*Node{}
	for _, in := range g.Inputs {
		bmap[in] = bwd.Input(in.Shape, in.DType, in.Device, in.Loc)
	}
	for _, v := range s.Saved {
		bmap[v] = bwd.Input(v.Shape, v.DType, v.Device, v.Loc)
	}
	recomputed := map[*Node]bool{}
	if err := copyNodes(bwd, g, bmap, g.Outputs[nresults:], func(n *Node) {
		if !tangent[n] && n.Kind == CallNode {
			recomputed[n] = true
		}
	}); err != nil {
		return nil, err
	}
	for _, n := range g.Nodes {
		if recomputed[n] {
			if !recomputable(n) {
				return nil, fmt.Errorf("ir: the cut recomputes %s (%s), which only the forward may compute", n.Name(), n.Op.Name)
			}
			s.Recomputed = append(s.Recomputed, n)
		}
	}
	for _, o := range g.Outputs[nresults:] {
		bwd.Outputs = append(bwd.Outputs, bmap[o])
	}
	s.Forward, s.Backward = fwd, bwd
	return s, nil
}

// copyNodes copies into dst the nodes of src that outs need, in src's
// order, stopping at nodes m already maps (inputs, saved values); each
// node copied is passed to copied.
func copyNodes(dst, src *Graph, m map[*Node]*Node, outs []*Node, copied func(*Node)) error {
	want := map[*Node]bool{}
	var mark func(n *Node)
	mark = func(n *Node) {
		if want[n] || m[n] != nil {
			return
		}
		want[n] = true
		for _, a := range nodeArgs(n) {
			mark(a)
		}
	}
	for _, o := range outs {
		mark(o)
	}
	for _, n := range src.Nodes {
		if !want[n] {
			continue
		}
		switch n.Kind {
		case ConstNode:
			m[n] = dst.Const(n.Value, n.Shape, n.DType, n.Device, n.Loc)
		case InputNode:
			return fmt.Errorf("ir: input %s is not bound", n.Name())
		default:
			c, err := dst.Call(n.Op, n.Attrs, n.Loc, mappedArgs(n, m)...)
			if err != nil {
				return fmt.Errorf("ir: copying %s: %w", n.Name(), err)
			}
			m[n] = c
			if copied != nil {
				copied(n)
			}
		}
	}
	return nil
}

// recomputable reports whether the backward may compute n again rather
// than have it saved: a pointwise op or a view, cheap to redo.
func recomputable(n *Node) bool {
	return n.Kind == CallNode && (n.Op.Kind == Pointwise || n.Op.Kind == View)
}

// minCut chooses the forward values to save: a maximum flow from the
// values only the forward may compute to the values the backward needs,
// through each forward call node as an edge of its bytes, cut where the
// flow saturates (Edmonds–Karp). Inputs and constants cost nothing: the
// backward reads them itself. It returns the nodes to save.
func minCut(g *Graph, tangent, needed map[*Node]bool) map[*Node]bool {
	const inf = math.MaxInt64 / 4
	// Vertices: source 0, sink 1, then per forward call node an in and
	// an out vertex.
	idx := map[*Node]int{}
	var nodes []*Node
	for _, n := range g.Nodes {
		if n.Kind == CallNode && !tangent[n] {
			idx[n] = 2 + 2*len(nodes)
			nodes = append(nodes, n)
		}
	}
	nv := 2 + 2*len(nodes)
	type edge struct {
		to  int
		cap int64
		rev int
	}
	adj := make([][]edge, nv)
	add := func(a, b int, c int64) {
		adj[a] = append(adj[a], edge{b, c, len(adj[b])})
		adj[b] = append(adj[b], edge{a, 0, len(adj[a]) - 1})
	}
	for _, n := range nodes {
		in := idx[n]
		add(in, in+1, max(nodeBytes(n), 1))
		if !recomputable(n) {
			add(0, in, inf)
		}
		if needed[n] {
			add(in+1, 1, inf)
		}
		for _, a := range nodeArgs(n) {
			if ai, ok := idx[a]; ok {
				add(ai+1, in, inf)
			}
		}
	}
	for {
		prev := make([][2]int, nv) // vertex, edge index
		for i := range prev {
			prev[i] = [2]int{-1, -1}
		}
		prev[0] = [2]int{0, -1}
		queue := []int{0}
		for len(queue) > 0 && prev[1][0] < 0 {
			v := queue[0]
			queue = queue[1:]
			for i, e := range adj[v] {
				if e.cap > 0 && prev[e.to][0] < 0 {
					prev[e.to] = [2]int{v, i}
					queue = append(queue, e.to)
				}
			}
		}
		if prev[1][0] < 0 {
			break
		}
		flow := int64(inf)
		for v := 1; v != 0; v = prev[v][0] {
			flow = min(flow, adj[prev[v][0]][prev[v][1]].cap)
		}
		for v := 1; v != 0; v = prev[v][0] {
			e := &adj[prev[v][0]][prev[v][1]]
			e.cap -= flow
			adj[v][e.rev].cap += flow
		}
	}
	// The source's side in the residual graph.
	reach := make([]bool, nv)
	reach[0] = true
	stack := []int{0}
	for len(stack) > 0 {
		v := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		for _, e := range adj[v] {
			if e.cap > 0 && !reach[e.to] {
				reach[e.to] = true
				stack = append(stack, e.to)
			}
		}
	}
	saved := map[*Node]bool{}
	for _, n := range nodes {
		if in := idx[n]; reach[in] && !reach[in+1] {
			saved[n] = true
		}
	}
	return saved
}

// mappedArgs is n's arguments with each node replaced by its image in m
// (scalars and absent operands as they are).
func mappedArgs(n *Node, m map[*Node]*Node) []Value {
	args := make([]Value, len(n.Args))
	for i, a := range n.Args {
		if an, ok := a.(*Node); ok && an != nil {
			args[i] = m[an]
		} else {
			args[i] = a
		}
	}
	return args
}

// nodeArgs lists n's node operands.
func nodeArgs(n *Node) []*Node {
	var out []*Node
	for _, a := range n.Args {
		if an, ok := a.(*Node); ok && an != nil {
			out = append(out, an)
		}
	}
	return out
}
