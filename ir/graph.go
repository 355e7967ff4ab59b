package ir

import "fmt"

// NodeKind says what a graph node is.
type NodeKind uint8

const (
	// InputNode is a placeholder for one flattened argument of the traced
	// function.
	InputNode NodeKind = iota
	// ConstNode is a concrete tensor met while tracing (a closure-captured
	// weight, say), bound by reference: Value holds it.
	ConstNode
	// CallNode applies Op to Args.
	CallNode
)

// Node is one value of a graph: an input, a constant, or an op applied to
// earlier nodes and scalars.
type Node struct {
	ID    int
	Kind  NodeKind
	Op    *Op     // CallNode
	Args  []Value // *Node, Scalar, or nil for an absent optional operand
	Attrs Attrs
	Shape []int
	// Sym marks symbolic dims (see InferSymbols): nil when every dim is
	// static, else per dim SymStatic, symbol k as k+1, or SymDerived.
	Sym    []int
	DType  DType
	Device Device
	// Loc is the file:line of the user code that produced the node.
	Loc string
	// Value is the bound tensor of a ConstNode (opaque to ir).
	Value any
	// Index is the position of an InputNode among the graph's inputs.
	Index int
}

// Graph is a traced computation: nodes in topological order (every node's
// arguments come before it), the inputs in argument order, and the outputs.
type Graph struct {
	Nodes   []*Node
	Inputs  []*Node
	Outputs []*Node
	nextID  int
}

func (g *Graph) add(n *Node) *Node {
	n.ID = g.nextID
	g.nextID++
	g.Nodes = append(g.Nodes, n)
	return n
}

// Input appends an input placeholder of the given metadata.
func (g *Graph) Input(shape []int, dt DType, dev Device, loc string) *Node {
	n := g.add(&Node{Kind: InputNode, Shape: clone(shape), DType: dt, Device: dev, Loc: loc, Index: len(g.Inputs)})
	g.Inputs = append(g.Inputs, n)
	return n
}

// Const appends a constant bound to value.
func (g *Graph) Const(value any, shape []int, dt DType, dev Device, loc string) *Node {
	return g.add(&Node{Kind: ConstNode, Value: value, Shape: clone(shape), DType: dt, Device: dev, Loc: loc})
}

// Users maps each node of g to the nodes that take it as an argument, in
// graph order (once per argument it is).
func (g *Graph) Users() map[*Node][]*Node {
	users := map[*Node][]*Node{}
	for _, n := range g.Nodes {
		for _, a := range n.Args {
			if an, ok := a.(*Node); ok && an != nil {
				users[an] = append(users[an], n)
			}
		}
	}
	return users
}

// SortTopological reorders g.Nodes so that every node comes after its
// arguments, keeping the present order wherever it allows (a node moves
// only to follow an argument placed after it): for a pass that gave a node
// an argument computed later.
func (g *Graph) SortTopological() {
	placed := make(map[*Node]bool, len(g.Nodes))
	out := make([]*Node, 0, len(g.Nodes))
	var visit func(n *Node)
	visit = func(n *Node) {
		if placed[n] {
			return
		}
		placed[n] = true
		for _, a := range n.Args {
			if an, ok := a.(*Node); ok && an != nil {
				visit(an)
			}
		}
		out = append(out, n)
	}
	for _, n := range g.Nodes {
		visit(n)
	}
	g.Nodes = out
}

// IsOutput reports, per node, whether it is one of g's outputs.
func (g *Graph) IsOutput() map[*Node]bool {
	out := make(map[*Node]bool, len(g.Outputs))
	for _, o := range g.Outputs {
		out[o] = true
	}
	return out
}

// Call appends op applied to args, inferring the result's metadata with the
// registry's rules. Composite ops are recorded as one node (see Decompose).
func (g *Graph) Call(op *Op, attrs Attrs, loc string, args ...Value) (*Node, error) {
	shape, dt, dev, err := InferMeta(op, attrs, args)
	if err != nil {
		return nil, err
	}
	// The rules compute any shape (symbols are probed with sizes whose
	// products may overflow); a node stands for a real tensor.
	if err := CheckShape(op.Title, argShapes(args), shape); err != nil {
		return nil, err
	}
	return g.add(&Node{Kind: CallNode, Op: op, Attrs: attrs, Args: args, Shape: shape, DType: dt, Device: dev, Loc: loc}), nil
}

// argShapes lists the shapes of the node arguments among args.
func argShapes(args []Value) [][]int {
	var shapes [][]int
	for _, a := range args {
		if n, ok := a.(*Node); ok && n != nil {
			shapes = append(shapes, n.Shape)
		}
	}
	return shapes
}

// metaOf is the metadata of a node argument.
func metaOf(v Value) (shape []int, dt DType, dev Device, ok bool) {
	if n, isNode := v.(*Node); isNode && n != nil {
		return n.Shape, n.DType, n.Device, true
	}
	return nil, 0, Device{}, false
}

// InferMeta computes the shape, dtype and device of op applied to args
// (graph nodes and scalars) without computing anything, using exactly the
// rules eager execution checks.
func InferMeta(op *Op, attrs Attrs, args []Value) (shape []int, dt DType, dev Device, err error) {
	var shapes [][]int
	var types []Operand
	first := true
	for i, a := range args {
		switch a := a.(type) {
		case *Node:
			if a == nil {
				continue
			}
			if first {
				dev, first = a.Device, false
			} else if a.Device != dev {
				return nil, 0, dev, Errorf(op.Title, shapes, "move them to one device with To(device)",
					"operands are on different devices: operand 0 is on %v, operand %d on %v", dev, i, a.Device)
			}
			shapes = append(shapes, a.Shape)
			types = append(types, Operand{DType: a.DType, Rank0: len(a.Shape) == 0})
		case Scalar:
			types = append(types, Operand{DType: a.DType, Scalar: true})
		}
	}
	if op.Kind == Pointwise && op.Rule == Promote {
		for _, s := range attrs.Scalars {
			types = append(types, Operand{DType: ScalarOf(s).DType, Scalar: true})
		}
	}
	switch op.Kind {
	case Pointwise:
		if _, dt, err = op.Types(types, &attrs); err != nil {
			return nil, 0, dev, err
		}
		shape, err = Broadcast(op.Title, shapes...)
		return shape, dt, dev, err
	case Reduction:
		if _, dt, err = op.Types(types, &attrs); err != nil {
			return nil, 0, dev, err
		}
		dims, err := NormDims(op.Title, shapes[0], attrs.Dims)
		if err != nil {
			return nil, 0, dev, err
		}
		return ReduceShape(shapes[0], dims, attrs.KeepDim), dt, dev, nil
	case View:
		s := shapes[0]
		l, err := op.View(Layout{Shape: s, Strides: ContiguousStrides(s)}, &attrs)
		return l.Shape, types[0].DType, dev, err
	case Extern:
		if shape, err = op.Shape(shapes, &attrs); err != nil {
			return nil, 0, dev, err
		}
		_, dt, err = op.Types(types, &attrs)
		return shape, dt, dev, err
	case Composite:
		mb := &metaBuilder{dev: dev}
		v, err := op.Decompose(mb, attrs, args...)
		if err != nil {
			return nil, 0, dev, err
		}
		if mb.err != nil {
			return nil, 0, dev, mb.err
		}
		m := v.(*Node)
		return m.Shape, m.DType, dev, nil
	}
	return nil, 0, dev, fmt.Errorf("%s: unknown op kind", op.Name)
}

// metaBuilder runs a decomposition on metadata alone, to learn the result
// metadata of a composite op.
type metaBuilder struct {
	dev Device
	err error
}

func (b *metaBuilder) Apply(op *Op, attrs Attrs, args ...Value) Value {
	if b.err != nil {
		return &Node{Device: b.dev}
	}
	shape, dt, dev, err := InferMeta(op, attrs, args)
	if err != nil {
		b.err = err
	}
	return &Node{Shape: shape, DType: dt, Device: dev}
}
func (b *metaBuilder) Shape(v Value) []int { s, _, _, _ := metaOf(v); return s }
func (b *metaBuilder) DType(v Value) DType { _, d, _, _ := metaOf(v); return d }

// GraphBuilder records ops into a graph: the Builder that decompositions
// and passes use to add nodes.
type GraphBuilder struct {
	G   *Graph
	Loc string // the location given to new nodes
	Err error  // the first error met; later Applies do nothing
}

// Apply records op, or remembers the first error.
func (b *GraphBuilder) Apply(op *Op, attrs Attrs, args ...Value) Value {
	if b.Err != nil {
		return &Node{}
	}
	n, err := b.G.Call(op, attrs, b.Loc, args...)
	if err != nil {
		b.Err = err
		return &Node{}
	}
	return n
}
func (b *GraphBuilder) Shape(v Value) []int { s, _, _, _ := metaOf(v); return s }
func (b *GraphBuilder) DType(v Value) DType { _, d, _, _ := metaOf(v); return d }
