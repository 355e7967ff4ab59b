package tensor

import (
	"fmt"

	"gocompile/array"
	"gocompile/ir"
	"gocompile/trace"
)

// While a compiled function is traced it runs on proxy tensors: tensors
// with metadata (shape, dtype, device) and no data, each standing for a
// node of the graph being recorded. An op with a proxy operand records a
// node (apply calls tracer.record) instead of computing.

type proxy struct {
	tr   *tracer
	node *ir.Node
	// arg is set on an argument's proxy and on the views taken of it
	// (argwrite.go): their layouts are over the argument's elements.
	arg *argState
}

// tracer records one traced run of a compiled function. The graph is cut
// into segments at graph breaks: reading a proxy's values runs the current
// segment and continues in a new one, where earlier values are inputs.
type tracer struct {
	c      *compiled
	g      *ir.Graph
	bound  []*Tensor // the value of each input of the current segment
	consts map[*Tensor]*ir.Node
	// fromEarlier maps nodes of finished segments to inputs of this one.
	fromEarlier map[*ir.Node]*ir.Node
	realized    map[*ir.Node]*Tensor // values of finished segments' nodes
	breaks      []trace.Break
	segments    []*ir.Graph
	fullGraph   bool
	// onShapeRead is told about every size user code reads from a proxy.
	onShapeRead func(sizes []int)
	mut         mutation    // the storages the function writes (mutation.go)
	args        []*Tensor   // the call's tensor arguments
	argWrites   []*argState // the arguments fn wrote, in order of first write (argwrite.go)
	// Gradients (compilegrad.go): whether an op recorded a gradient node,
	// whether Backward ran, each leaf's gradient as the run has it, and
	// the gradients leaves held at call time (inputs, or nil for none).
	gradActive, backwardCalled bool
	leafGrads                  []*leafGrad
	held                       map[*Tensor]*Tensor
	// leafUses are the tensors the run reached leaves' gradients through
	// (use), and argOf each argument proxy's index.
	leafUses []gradTarget
	argOf    map[*Tensor]int
	// scalarIns are the inputs bound to the function's scalar sources
	// scalarSrcs (ScalarFunc).
	scalarIns  []*Tensor
	scalarSrcs []scalarSource
	// compiling says the run is traced to be compiled (not a live run of
	// a function with graph breaks): a held gradient it reads must be an
	// input (heldGrad).
	compiling bool
	// checks are the conditions Guard asked to hold.
	checks []guardCheck
}

// compileTracer is a tracer for a trace c compiles (compiling set).
func (c *compiled) compileTracer() *tracer {
	tr := newTracer(c, c.opts.fullGraph)
	tr.compiling = true
	return tr
}

func newTracer(c *compiled, fullGraph bool) *tracer {
	tr := &tracer{c: c, fullGraph: fullGraph, realized: map[*ir.Node]*Tensor{}}
	tr.newSegment()
	return tr
}

func (tr *tracer) newSegment() {
	tr.g = &ir.Graph{}
	tr.bound = nil
	tr.consts = map[*Tensor]*ir.Node{}
	tr.fromEarlier = map[*ir.Node]*ir.Node{}
	tr.mut.versions, tr.mut.bases, tr.mut.order = map[any]*ir.Node{}, map[any]*ir.Node{}, nil
	if tr.mut.stores == nil {
		tr.mut.stores = map[any]*array.Array{}
	}
	for _, st := range tr.argWrites { // the arguments now hold their last versions
		st.version, st.base, st.contiguous = nil, nil, nil
	}
}

// proxyFor wraps a node as a tensor.
func (tr *tracer) proxyFor(n *ir.Node) *Tensor {
	return tr.proxyWith(n, ir.Layout{Strides: ir.ContiguousStrides(n.Shape)})
}

// proxyWith wraps a node as a tensor with the strides and offset of l.
func (tr *tracer) proxyWith(n *ir.Node, l ir.Layout) *Tensor {
	v := array.Meta(n.Device, n.DType, n.Shape, l.Strides)
	if l.Offset != 0 {
		v = v.WithLayout(ir.Layout{Shape: n.Shape, Strides: l.Strides, Offset: l.Offset})
	}
	return &Tensor{v: v, px: &proxy{tr: tr, node: n}}
}

// input adds an input of the current segment bound to value.
func (tr *tracer) input(value *Tensor, loc string) *ir.Node {
	n := tr.g.Input(value.shape(), value.dtype(), value.v.Device(), loc)
	tr.bound = append(tr.bound, value)
	return n
}

// tracerOf returns the tracer of the first proxy among args.
func tracerOf(args []ir.Value) *tracer {
	for _, a := range args {
		if t, ok := a.(*Tensor); ok && t != nil && t.px != nil {
			return t.px.tr
		}
	}
	return nil
}

// nodeOf is the node of the current segment that stands for t.
func (tr *tracer) nodeOf(t *Tensor, loc string) *ir.Node {
	if t.px == nil { // a concrete tensor: a constant bound by reference
		if t.RequiresGrad() && recording() && tr.c != nil && !tr.c.isGrad {
			panic(errNeedGradTwin) // the call goes to the twin that traces gradients
		}
		if tr.written(t) { // on a storage the function writes: its current version
			return tr.readWritten(t, loc)
		}
		if n, ok := tr.consts[t]; ok {
			return n
		}
		if len(tr.argWrites) > 0 {
			tr.checkCaptured(t)
		}
		n := tr.g.Const(t.v, t.shape(), t.dtype(), t.v.Device(), loc)
		tr.consts[t] = n
		if tr.c != nil {
			tr.c.consts.Store(t.v, t)
		}
		return n
	}
	if t.px.tr != tr {
		panic(&Error{Op: "Compile", Reason: "a proxy tensor of another compiled call was used",
			Fix: "do not keep tensors from inside a compiled function between calls"})
	}
	if st := t.px.arg; st != nil && st.writes > 0 { // a view of a written argument: its current version
		return tr.readArg(st, t.v.Layout(), loc)
	}
	return tr.segmentNode(t.px.node)
}

// segmentNode is the node of the current segment for n, a node of this
// segment or of a finished one (an input of this one).
func (tr *tracer) segmentNode(n *ir.Node) *ir.Node {
	if v, done := tr.realized[n]; done { // from a finished segment
		in, ok := tr.fromEarlier[n]
		if !ok {
			in = tr.input(v, n.Loc)
			tr.fromEarlier[n] = in
		}
		return in
	}
	return n
}

// record adds op applied to args to the graph and returns its proxy.
func (tr *tracer) record(op *ir.Op, a ir.Attrs, args []ir.Value) *Tensor {
	loc := trace.Loc()
	nodeArgs := make([]ir.Value, len(args))
	for i, v := range args {
		switch v := v.(type) {
		case *Tensor: // apply checked it is a tensor
			nodeArgs[i] = tr.nodeOf(v, loc)
		default:
			nodeArgs[i] = v
		}
	}
	n, err := tr.g.Call(op, a, loc, nodeArgs...)
	check(err, op.Title, tensorsOf(args)...)
	if op.Kind == ir.View {
		// A view keeps its input's layout, as eagerly: a transpose is not
		// contiguous, so Reshape of it records a copy first. A view of an
		// argument is one too: a write through it writes the argument.
		in := args[0].(*Tensor)
		if l, err := op.View(in.v.Layout(), &a); err == nil {
			p := tr.proxyWith(n, l)
			if in.px != nil {
				p.px.arg = in.px.arg
			}
			return p
		}
	}
	return tr.proxyFor(n)
}

// materialize runs the graph recorded so far and returns t's value: a
// graph break. Under FullGraph it is an error naming the reason and the
// place.
func (t *Tensor) materialize(reason string) *Tensor {
	tr := t.px.tr
	loc := trace.Loc()
	if tr.fullGraph {
		panic(&Error{Op: "Compile", Reason: fmt.Sprintf("graph break at %s: %s needs the values of a traced tensor", loc, reason),
			Fix: "move the read out of the compiled function, or express the branch with tensor.Cond; without FullGraph the function compiles in segments"})
	}
	n := t.px.node
	if st := t.px.arg; st != nil && st.writes > 0 {
		n = nil // a view of a written argument: read from its last version below
	} else if v, ok := tr.realized[n]; ok {
		return v
	}
	if tr.c != nil && tr.c.isGrad {
		panic(&errGradEager{why: fmt.Sprintf("graph break at %s: %s reads a traced value, and gradients are traced as one graph", loc, reason)})
	}
	tr.breaks = append(tr.breaks, trace.Break{Reason: reason, Loc: loc})
	if n == nil {
		n = tr.readArg(t.px.arg, t.v.Layout(), loc)
	}
	tr.finishSegment(nil)
	return tr.realized[n]
}

// finishSegment runs the current segment, keeping the value of every node
// (later code may use any of them), and starts a new one. It returns the
// values of outputs.
func (tr *tracer) finishSegment(outputs []*ir.Node) []*Tensor {
	g := tr.g
	var all []*ir.Node
	if outputs == nil {
		for _, n := range g.Nodes {
			if n.Kind != ir.InputNode {
				all = append(all, n)
			}
		}
	} else {
		all = outputs
	}
	versions, stores := tr.versionNodes()
	nres := len(all)
	all = append(all, versions...)
	argVersions, written := tr.argVersions()
	all = append(all, argVersions...)
	g.Outputs = append([]*ir.Node(nil), all...) // passes rewrite Outputs in place
	// The segment's constants become its inputs: runSegment shares one
	// program among segments of like structure, whose constants (weights
	// in a loop, tensors computed while tracing) differ, so each run binds
	// its own.
	for _, n := range g.Nodes {
		if a, ok := n.Value.(*array.Array); ok && n.Kind == ir.ConstNode {
			n.Kind, n.Value, n.Index = ir.InputNode, nil, len(g.Inputs)
			g.Inputs = append(g.Inputs, n)
			tr.bound = append(tr.bound, wrap(a))
		}
	}
	vals := tr.c.runSegment(g, tr.bound)
	if targets := append(stores, arraysOf(written)...); len(targets) > 0 {
		// Values read before the writes keep what they read.
		detachAliases(vals[:nres], targets)
		tr.detachRealized(targets)
	}
	writeBack(stores, vals[nres:nres+len(stores)])
	writeArgs(written, vals[nres+len(stores):])
	for i, n := range g.Inputs {
		tr.realized[n] = tr.bound[i]
	}
	for i, n := range all {
		tr.realized[n] = vals[i]
	}
	tr.segments = append(tr.segments, g)
	tr.newSegment()
	return vals[:nres]
}
