package fuse

import (
	"fmt"
	"strings"

	"gocompile/ir"
)

// Region is a group of nodes that produces one value.
type Region struct {
	Root  *ir.Node   // the node whose value the region produces
	Nodes []*ir.Node // the region's nodes in topological order; Root last
	// For fused regions (pointwise and row regions): the values the kernel
	// reads, Expr's Arg(i) being Inputs[i] loaded in kind Inputs[i].Kind
	// (for a row region, Arg(i) for i >= len(Inputs) is the value of
	// Row.Stages[i-len(Inputs)]), and the kind the root is computed in.
	// Expr is the root's value per element; nil for a row region whose
	// root is one of its stages.
	Inputs  []Input
	Expr    *ir.Expr
	Compute ir.Kind
	// Row is set for a row region: see Row.
	Row *Row
	// Group is set for a horizontal group (see Horizontal): pointwise
	// regions over one iteration space, run as one kernel, or a combo of
	// such units over different shapes. Root is then the first member's.
	// A member may read an earlier member of its unit: the kernel keeps
	// that value in registers (GroupExprs).
	Group []*Region
	// Units is set for a combo: the end, in Group, of each unit (members
	// over one iteration space that one device function computes, such as
	// a parameter's moments and its update, which reads them).
	Units []int
}

// Input is one value a fused region reads. When Views is set, the region
// reads it through views of a producer it fused: the value broadcast to
// the shape of the views' operand, then each view applied in order.
type Input struct {
	Node  *ir.Node
	Kind  ir.Kind
	Views *ViewChain
}

// ViewChain is the view ops (transpose, permute, squeeze, unsqueeze,
// slice) between a fused producer and its reader, in the order they apply:
// one view, or views in a row with nothing else read between them.
type ViewChain struct {
	Views []*ir.Node
}

// fusibleView reports whether a fused region may read a producer through
// view n: views that only re-index elements (an expand would make the
// kernel recompute the producer for every copy; a reshape need not be a
// strided view of an arbitrary input).
func fusibleView(n *ir.Node) bool {
	switch n.Op {
	case ir.OpTranspose, ir.OpPermute, ir.OpSqueeze, ir.OpUnsqueeze, ir.OpSlice:
		return true
	}
	return false
}

// Fused reports whether the region runs as one generated pointwise kernel.
func (r *Region) Fused() bool { return r.Expr != nil && r.Row == nil }

func (r *Region) String() string {
	if r.Group != nil {
		return groupString(r)
	}
	if !r.Fused() && r.Row == nil {
		return fmt.Sprintf("%s (%s)", r.Root.Name(), r.Root.Op.Name)
	}
	s := "fused "
	if r.Row != nil {
		s = "row "
	}
	for i, n := range r.Nodes {
		if i > 0 {
			s += "+"
		}
		s += n.Op.Name
	}
	return s + " -> " + r.Root.Name()
}

// Describe lists the region's nodes by name, with their ops.
func (r *Region) Describe() string {
	var b strings.Builder
	if r.Group != nil {
		for u, unit := range r.SplitUnits() {
			if u > 0 {
				b.WriteString(" || ")
			}
			for i, m := range unit {
				if i > 0 {
					b.WriteString(" | ")
				}
				b.WriteString(m.Describe())
			}
		}
		return b.String()
	}
	for i, n := range r.Nodes {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s=%s", n.Name(), n.Op.Name)
	}
	return b.String()
}

// exactIntermediate reports whether storing a value of dt and reloading it
// loses nothing that fusing would keep.
func exactIntermediate(dt ir.DType) bool {
	return dt == ir.Float32 || dt == ir.Float64 || dt == ir.Int64 || dt == ir.Bool
}

// roundedIntermediate reports whether a region keeps the value of node n
// inside its kernel by rounding it as a store would (ir.CastVia): float16
// and bfloat16 values, whose rounding is an instruction or two on a GPU
// and a bulk conversion of a block on the CPU, so that a chain of 16-bit
// ops, or a reduction with a 16-bit prologue and epilogue, runs as one
// kernel and still gives eager's values, computing its transcendentals
// once in float32 (on 2 CPU cores, 16-bit chains with exp, erf or tanh
// ran 2.4x to 5.4x faster fused than op by op, chains of additions 1.1x
// to 1.4x).
func roundedIntermediate(n *ir.Node) bool {
	return n.DType == ir.Float16 || n.DType == ir.BFloat16
}

// intermediateOf reports whether a region rooted at root may keep node
// q's value inside its kernel: q is on root's device, of a dtype kept
// exactly or rounded as a store would.
func intermediateOf(q, root *ir.Node) bool {
	return q.Device == root.Device && (exactIntermediate(q.DType) || roundedIntermediate(q))
}

// Partition splits the graph's call nodes into regions, in an order in
// which every region's inputs are computed before it.
func Partition(g *ir.Graph) ([]*Region, error) {
	p := &partitioner{users: map[*ir.Node][]*ir.Node{}, isOutput: map[*ir.Node]bool{}, region: map[*ir.Node]*Region{}}
	for _, n := range g.Nodes {
		for _, a := range n.Args {
			if an, ok := a.(*ir.Node); ok && an != nil {
				p.users[an] = append(p.users[an], n)
			}
		}
	}
	for _, o := range g.Outputs {
		p.isOutput[o] = true
	}
	var regions []*Region
	for i := len(g.Nodes) - 1; i >= 0; i-- {
		n := g.Nodes[i]
		if n.Kind != ir.CallNode || p.region[n] != nil {
			continue
		}
		r := &Region{Root: n}
		members := map[*ir.Node]bool{n: true}
		full, dims, isRow := p.rowMembers(n, members)
		if !isRow && n.Op.Kind == ir.Pointwise {
			// First through views; if the views cannot be composed (a
			// value read through two different views), without them.
			p.absorb(members, func(q *ir.Node) bool { return p.pointwiseAbsorbable(q, n, true) })
			// A view is fused only with the producer it views: a view of
			// an input or of another region's value stays a view.
			for changed := true; changed; {
				changed = false
				for m := range members {
					if a, ok := m.Args[0].(*ir.Node); m.Op.Kind == ir.View && (!ok || !members[a]) {
						delete(members, m)
						changed = true
					}
				}
			}
			if err := r.buildFrom(g, members); err != nil {
				*r = Region{Root: n}
				members = map[*ir.Node]bool{n: true}
				p.absorb(members, func(q *ir.Node) bool { return p.pointwiseAbsorbable(q, n, false) })
			}
		}
		*r = Region{Root: n}
		for m := range members {
			p.region[m] = r
		}
		for _, m := range g.Nodes { // topological order
			if members[m] {
				r.Nodes = append(r.Nodes, m)
			}
		}
		switch {
		case isRow:
			r.Row = &Row{Full: full, Dims: dims}
			if err := r.build(); err != nil {
				return nil, err
			}
		case n.Op.Kind == ir.Pointwise:
			if err := r.build(); err != nil {
				return nil, err
			}
		}
		regions = append(regions, r)
	}
	for i, j := 0, len(regions)-1; i < j; i, j = i+1, j-1 {
		regions[i], regions[j] = regions[j], regions[i]
	}
	return regions, nil
}

type partitioner struct {
	users    map[*ir.Node][]*ir.Node
	isOutput map[*ir.Node]bool
	region   map[*ir.Node]*Region
}

// absorb adds producers of members that ok accepts until none qualifies:
// a producer joins once all its users are members.
func (p *partitioner) absorb(members map[*ir.Node]bool, ok func(*ir.Node) bool) {
	for changed := true; changed; {
		changed = false
		for m := range members {
			for _, a := range m.Args {
				q, isNode := a.(*ir.Node)
				if !isNode || q == nil || members[q] || p.region[q] != nil || q.Kind != ir.CallNode || p.isOutput[q] || !ok(q) {
					continue
				}
				all := true
				for _, u := range p.users[q] {
					all = all && members[u]
				}
				if all {
					members[q] = true
					changed = true
				}
			}
		}
	}
}

// pointwiseAbsorbable reports whether a pointwise region rooted at root
// may fuse q: a pointwise op of the root's shape; or, with views, a
// pointwise op or fusible view every reader of which reads it whole, at
// its own shape or through a view (so the kernel computes each of its
// elements once).
func (p *partitioner) pointwiseAbsorbable(q, root *ir.Node, views bool) bool {
	if !intermediateOf(q, root) {
		return false
	}
	if !views {
		return q.Op.Kind == ir.Pointwise && ir.SameShape(q.Shape, root.Shape)
	}
	if q.Op.Kind != ir.Pointwise && !fusibleView(q) {
		return false
	}
	for _, u := range p.users[q] {
		if u.Op.Kind != ir.View && !ir.SameShape(u.Shape, q.Shape) {
			return false
		}
	}
	return true
}

// buildFrom sets r's nodes to members (in g's order) and builds it.
func (r *Region) buildFrom(g *ir.Graph, members map[*ir.Node]bool) error {
	for _, m := range g.Nodes {
		if members[m] {
			r.Nodes = append(r.Nodes, m)
		}
	}
	return r.build()
}

// build composes the region's expressions from its nodes' registry
// expressions. In a row region, each reduction and each row-level node
// becomes a stage whose value later expressions read as an argument.
func (r *Region) build() error {
	members := map[*ir.Node]bool{}
	for _, n := range r.Nodes {
		members[n] = true
	}
	chains, err := r.viewChains(members)
	if err != nil {
		return err
	}
	inputIndex := map[Input]int{}
	type value struct {
		e    *ir.Expr
		kind ir.Kind
	}
	vals := map[*ir.Node]value{}
	var stageArgs []*ir.Expr // stage k's value: Arg(len(Inputs)+k), numbered at the end
	for _, n := range r.Nodes {
		if n.Op.Kind == ir.View { // a fused view re-indexes its operand's leaves
			vals[n] = vals[n.Args[0].(*ir.Node)]
			continue
		}
		compute, kinds, err := operandKinds(n)
		if err != nil {
			return err
		}
		args := make([]*ir.Expr, len(n.Args))
		for i, a := range n.Args {
			switch a := a.(type) {
			case *ir.Node:
				if members[a] {
					args[i] = readKept(vals[a].e, vals[a].kind, a, kinds[i])
					continue
				}
				in := Input{Node: a, Kind: kinds[i], Views: chains[n]}
				k, ok := inputIndex[in]
				if !ok {
					k = len(r.Inputs)
					inputIndex[in] = k
					r.Inputs = append(r.Inputs, in)
				}
				args[i] = ir.Arg(k)
			case ir.Scalar:
				args[i] = ir.Const(a.Value)
			default:
				return fmt.Errorf("fuse: %s: operand %d is absent", n.Name(), i)
			}
		}
		var v value
		if n.Op.Kind == ir.Reduction {
			v = value{args[0], compute}
		} else {
			_, outKind, err := n.Op.Expr.ParamKinds(kinds, compute)
			if err != nil {
				return fmt.Errorf("fuse: %s: %w", n.Name(), err)
			}
			v = value{ir.Substitute(n.Op.Expr, args, n.Attrs.Scalars), outKind}
		}
		if r.Row != nil && (n.Op.Kind == ir.Reduction || r.Row.rowLevel(n)) {
			st := Stage{Node: n, Expr: v.e, Compute: compute, Kind: v.kind}
			if n.Op.Kind == ir.Reduction {
				st.Reduce, st.Reducer = true, n.Op.Reducer
			}
			r.Row.Stages = append(r.Row.Stages, st)
			a := &ir.Expr{Prim: ir.PArg, Index: -1}
			stageArgs = append(stageArgs, a)
			v.e = a
		}
		vals[n] = v
		if n == r.Root {
			r.Compute = compute
		}
	}
	for k, a := range stageArgs {
		a.Index = len(r.Inputs) + k
	}
	if r.Row == nil || !r.Row.rowLevel(r.Root) && r.Root.Op.Kind != ir.Reduction {
		r.Expr = vals[r.Root].e
	}
	return nil
}

// readKept is the value of node a, e of kind k in a kernel that keeps it
// (intermediateOf), as a reader loading a in kind want would see it after
// a store and a load.
func readKept(e *ir.Expr, k ir.Kind, a *ir.Node, want ir.Kind) *ir.Expr {
	switch {
	case a.DType == ir.Bool: // a store as bool keeps only non-zero-ness
		e, k = ir.Ne(e, ir.Const(0)), ir.I64
	case roundedIntermediate(a): // rounded as its store and load would be
		e, k = ir.CastVia(e, a.DType, want), want
	}
	if k != want {
		e = ir.Cast(e, want)
	}
	return e
}

// operandKinds is the kind node n computes in and the kind each of its
// operands is loaded in, by the registry's type rule.
func operandKinds(n *ir.Node) (ir.Kind, []ir.Kind, error) {
	types := make([]ir.Operand, 0, len(n.Args)+len(n.Attrs.Scalars))
	for _, a := range n.Args {
		switch a := a.(type) {
		case *ir.Node:
			types = append(types, ir.Operand{DType: a.DType, Rank0: len(a.Shape) == 0})
		case ir.Scalar:
			types = append(types, ir.Operand{DType: a.DType, Scalar: true})
		}
	}
	if n.Op.Rule == ir.Promote {
		for _, s := range n.Attrs.Scalars {
			types = append(types, ir.Operand{DType: ir.ScalarOf(s).DType, Scalar: true})
		}
	}
	compute, _, err := n.Op.Types(types, &n.Attrs)
	if err != nil {
		return 0, nil, err
	}
	kinds := make([]ir.Kind, len(n.Args))
	for i := range kinds {
		kinds[i] = compute.Compute()
		for _, m := range n.Op.Masks {
			if m == i {
				kinds[i] = ir.I64
			}
		}
	}
	return compute.Compute(), kinds, nil
}

// viewChains gives each member read through fused views the chain of
// views between it and the root, or an error when a member is read
// through two different chains (one kernel cannot index it both ways).
func (r *Region) viewChains(members map[*ir.Node]bool) (map[*ir.Node]*ViewChain, error) {
	chains := map[*ir.Node]*ViewChain{}
	byFirst := map[*ir.Node]*ViewChain{} // one chain per first view
	extended := map[*ViewChain]bool{}    // chains a view in a row continues
	decided := map[*ir.Node]bool{r.Root: true}
	for i := len(r.Nodes) - 1; i >= 0; i-- { // readers before what they read
		u := r.Nodes[i]
		if !decided[u] {
			return nil, fmt.Errorf("fuse: %s is not read inside its region", u.Name())
		}
		for _, a := range u.Args {
			n, ok := a.(*ir.Node)
			if !ok || n == nil || !members[n] {
				continue
			}
			c := chains[u]
			if u.Op.Kind == ir.View {
				c = byFirst[u]
				if c == nil {
					c = &ViewChain{Views: []*ir.Node{u}}
					if outer := chains[u]; outer != nil { // views in a row
						c.Views = append(c.Views, outer.Views...)
						extended[outer] = true
					}
					byFirst[u] = c
				}
			}
			if decided[n] && chains[n] != c {
				return nil, fmt.Errorf("fuse: %s is read through different views", n.Name())
			}
			chains[n], decided[n] = c, true
		}
	}
	// A chain continued by a view in a row must hold nothing but that view:
	// the kernel finds the shape a chain starts from from the inputs read
	// through it, so no level between two views may read anything else.
	count := map[*ViewChain]int{}
	for _, c := range chains {
		count[c]++
	}
	for c := range extended {
		if count[c] != 1 {
			return nil, fmt.Errorf("fuse: values are read between views %v", c.Views[0].Name())
		}
	}
	return chains, nil
}
