package array

import "gocompile/ir"

// Program runs a compiled graph: it takes the values of the graph's inputs
// and returns the values of its outputs. Backends compile an ir.Graph into
// a Program; package tensor calls it with its tensors' arrays.
type Program interface {
	// Run computes the outputs for one call. It may be called from many
	// goroutines at once.
	Run(inputs []*Array) []*Array
}

// EagerProgram runs a graph node by node with the eager kernels, bit for
// bit as the ops would run one at a time.
type EagerProgram struct {
	g     *ir.Graph
	index map[*ir.Node]int
	// slots holds where the dynamic scalars enter the graph, by node index.
	slots map[int][]ScalarSlot
}

// ScalarSlot is one place a dynamic scalar (a number passed to the graph
// on each call) enters it.
type ScalarSlot struct {
	Node   int // index in the graph's nodes
	Arg    int // index among the node's args, or -1: Attrs.Scalars[Attr]
	Attr   int // with Arg -1, the index in the node's Attrs.Scalars
	Scalar int // index among the call's dynamic scalars
}

// NewEagerProgram runs g with the eager kernels; slots, if any, are where
// RunScalars puts each call's dynamic scalars.
func NewEagerProgram(g *ir.Graph, slots []ScalarSlot) *EagerProgram {
	p := &EagerProgram{g: g, index: NodeIndex(g)}
	for _, s := range slots {
		if p.slots == nil {
			p.slots = map[int][]ScalarSlot{}
		}
		p.slots[s.Node] = append(p.slots[s.Node], s)
	}
	return p
}

// HasScalars reports whether the program takes dynamic scalars.
func (p *EagerProgram) HasScalars() bool { return p.slots != nil }

// Run runs the graph on inputs.
func (p *EagerProgram) Run(inputs []*Array) []*Array { return p.RunScalars(inputs, nil) }

// RunScalars runs the graph with the call's dynamic scalars in their slots.
func (p *EagerProgram) RunScalars(inputs []*Array, scalars []float64) []*Array {
	vals := BindLeaves(p.g, inputs)
	for i, n := range p.g.Nodes {
		if n.Kind == ir.CallNode {
			args := NodeArgs(n, vals, p.index)
			attrs := n.Attrs
			if slots := p.slots[i]; slots != nil {
				attrs = patched(n, args, slots, scalars)
			}
			vals[i] = RunNode(n, attrs, args)
		}
	}
	return OutputsOf(p.g, p.index, vals)
}

// patched returns node n's attrs, and fills args, with the dynamic scalars
// of this call in their slots.
func patched(n *ir.Node, args []ir.Value, slots []ScalarSlot, scalars []float64) ir.Attrs {
	a := n.Attrs
	if a.Scalars != nil {
		a.Scalars = append([]float64(nil), a.Scalars...)
	}
	for _, s := range slots {
		if s.Arg >= 0 {
			sc := args[s.Arg].(ir.Scalar)
			sc.Value = scalars[s.Scalar]
			args[s.Arg] = sc
		} else {
			a.Scalars[s.Attr] = scalars[s.Scalar]
		}
	}
	return a
}

// NodeIndex maps each node of g to its index.
func NodeIndex(g *ir.Graph) map[*ir.Node]int {
	index := make(map[*ir.Node]int, len(g.Nodes))
	for i, n := range g.Nodes {
		index[n] = i
	}
	return index
}

// NodeArgs is n's operands as values: the arrays computed for its node
// operands (vals, by index) and its scalars.
func NodeArgs(n *ir.Node, vals []*Array, index map[*ir.Node]int) []ir.Value {
	args := make([]ir.Value, len(n.Args))
	for j, a := range n.Args {
		if an, ok := a.(*ir.Node); ok && an != nil {
			args[j] = vals[index[an]]
		} else {
			args[j] = a
		}
	}
	return args
}

// RunNode runs one call node with the eager kernels.
func RunNode(n *ir.Node, attrs ir.Attrs, args []ir.Value) *Array {
	if n.Op == ir.OpReshape {
		// Reshape copies where the layout at run time needs it.
		return args[0].(*Array).Reshape(attrs.Dims...)
	}
	return apply(n.Op, attrs, args...)
}

// BindLeaves gives a graph's values by node index with its inputs and
// constants (whose values are *Array) filled in, ready for a program to
// compute the rest.
func BindLeaves(g *ir.Graph, inputs []*Array) []*Array {
	vals := make([]*Array, len(g.Nodes))
	for i, n := range g.Nodes {
		switch n.Kind {
		case ir.InputNode:
			vals[i] = inputs[n.Index]
		case ir.ConstNode:
			vals[i] = n.Value.(*Array)
		}
	}
	return vals
}

// OutputsOf picks a graph's outputs from its values.
func OutputsOf(g *ir.Graph, index map[*ir.Node]int, vals []*Array) []*Array {
	out := make([]*Array, len(g.Outputs))
	for i, n := range g.Outputs {
		out[i] = vals[index[n]]
	}
	return out
}
