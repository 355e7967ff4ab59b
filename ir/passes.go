package ir

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// This file holds graph checks and rewrites.
//
// Every pass works in place on g and returns how many changes it made (0
// means g is untouched). Passes keep the invariants callers rely on:
//
//   - g.Inputs and every input node stay as they are (never removed, never
//     renumbered, Index unchanged), even when unused;
//   - surviving nodes keep their *Node identity and ID; new nodes get fresh
//     IDs from the graph's counter;
//   - g.Outputs keeps its length and order; an entry whose node is replaced
//     points at the replacement (which may be another output or an input);
//   - g.Nodes stays in topological order.
//
// Use Clone first to keep the original graph.

// Validate checks g's invariants: nodes are distinct with distinct IDs and in
// topological order; call arguments are nodes of g (or scalars, or nil),
// appear earlier, and the call's metadata equals what InferMeta gives;
// inputs are the input nodes of g in Index order; outputs are nodes of g.
func (g *Graph) Validate() error {
	pos := make(map[*Node]int, len(g.Nodes))
	ids := make(map[int]*Node, len(g.Nodes))
	nInputs := 0
	for i, n := range g.Nodes {
		if n == nil {
			return fmt.Errorf("ir: node %d of the graph is nil", i)
		}
		if _, dup := pos[n]; dup {
			return fmt.Errorf("ir: node %s appears twice in the graph", n.Name())
		}
		if other, dup := ids[n.ID]; dup {
			return fmt.Errorf("ir: nodes %s and %s share ID %d", other.Name(), n.Name(), n.ID)
		}
		if n.ID >= g.nextID && g.nextID > 0 {
			return fmt.Errorf("ir: node %s has ID %d beyond the graph's counter %d", n.Name(), n.ID, g.nextID)
		}
		pos[n], ids[n.ID] = i, n
	}
	for _, n := range g.Nodes {
		if !n.DType.Valid() {
			return fmt.Errorf("ir: node %s has invalid dtype %v", n.Name(), n.DType)
		}
		switch n.Kind {
		case InputNode:
			nInputs++
			if n.Index < 0 || n.Index >= len(g.Inputs) || g.Inputs[n.Index] != n {
				return fmt.Errorf("ir: input node %s is not g.Inputs[%d]", n.Name(), n.Index)
			}
		case ConstNode:
		case CallNode:
			if err := validateCall(n, pos); err != nil {
				return err
			}
		default:
			return fmt.Errorf("ir: node %d has unknown kind %d", n.ID, n.Kind)
		}
	}
	if nInputs != len(g.Inputs) {
		return fmt.Errorf("ir: the graph lists %d inputs but holds %d input nodes", len(g.Inputs), nInputs)
	}
	for i, o := range g.Outputs {
		if o == nil {
			return fmt.Errorf("ir: output %d is nil", i)
		}
		if _, ok := pos[o]; !ok {
			return fmt.Errorf("ir: output %d (%s) is not a node of the graph", i, o.Name())
		}
	}
	return nil
}

func validateCall(n *Node, pos map[*Node]int) (err error) {
	if n.Op == nil {
		return fmt.Errorf("ir: call node %s has no op", n.Name())
	}
	if n.Op.Arity >= 0 && len(n.Args) != n.Op.Arity {
		return fmt.Errorf("ir: %s := %s takes %d operands, has %d", n.Name(), n.Op.Name, n.Op.Arity, len(n.Args))
	}
	self := pos[n]
	for i, a := range n.Args {
		switch a := a.(type) {
		case nil, Scalar:
		case *Node:
			if a == nil {
				continue
			}
			p, ok := pos[a]
			if !ok {
				return fmt.Errorf("ir: argument %d of %s (%s) is not a node of the graph", i, n.Name(), a.Name())
			}
			if p >= self {
				return fmt.Errorf("ir: argument %d of %s (%s) does not come before it: not in topological order", i, n.Name(), a.Name())
			}
		default:
			return fmt.Errorf("ir: argument %d of %s has type %T", i, n.Name(), a)
		}
	}
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("ir: %s := %s: metadata inference failed: %v", n.Name(), callExpr(n), r)
		}
	}()
	shape, dt, dev, ierr := InferMeta(n.Op, n.Attrs, n.Args)
	if ierr != nil {
		return fmt.Errorf("ir: %s := %s: %w", n.Name(), callExpr(n), ierr)
	}
	if !equalInts(shape, n.Shape) || dt != n.DType || dev != n.Device {
		return fmt.Errorf("ir: %s := %s is recorded as %s but infers %s", n.Name(), callExpr(n),
			n.TypeString(), typeString(shape, dt, dev))
	}
	return nil
}

// Clone returns a deep copy of g: new nodes with the same IDs, kinds, ops,
// attributes, metadata and locations, arguments and outputs pointing into
// the copy. Constant Values are shared, not copied.
func (g *Graph) Clone() *Graph {
	c, _ := g.CloneMap()
	return c
}

// CloneMap is Clone that also returns the map from g's nodes to the copy's.
func (g *Graph) CloneMap() (*Graph, map[*Node]*Node) {
	m := make(map[*Node]*Node, len(g.Nodes))
	c := &Graph{nextID: g.nextID, Nodes: make([]*Node, 0, len(g.Nodes))}
	get := func(n *Node) *Node {
		if n == nil {
			return nil
		}
		if cn, ok := m[n]; ok {
			return cn
		}
		return n // not a node of g: left shared, as Validate would report
	}
	for _, n := range g.Nodes {
		cn := *n
		cn.Shape = clone(n.Shape)
		cn.Attrs = cloneAttrs(n.Attrs)
		if n.Args != nil {
			cn.Args = make([]Value, len(n.Args))
			for i, a := range n.Args {
				if an, ok := a.(*Node); ok && an != nil {
					cn.Args[i] = get(an)
				} else {
					cn.Args[i] = a
				}
			}
		}
		m[n] = &cn
		c.Nodes = append(c.Nodes, &cn)
	}
	for _, in := range g.Inputs {
		c.Inputs = append(c.Inputs, get(in))
	}
	for _, o := range g.Outputs {
		c.Outputs = append(c.Outputs, get(o))
	}
	return c, m
}

func cloneAttrs(a Attrs) Attrs {
	if a.Dims != nil {
		a.Dims = clone(a.Dims)
	}
	if a.Scalars != nil {
		a.Scalars = append([]float64(nil), a.Scalars...)
	}
	return a
}

// attrsKey is a canonical text of every field of a; nil and empty slices
// print alike, floats exactly (by their bits).
func attrsKey(a Attrs) string {
	var b strings.Builder
	b.WriteString("{")
	b.WriteString(intsString(a.Dims))
	fmt.Fprintf(&b, " %d %d %d %d %d %t [", a.Dim, a.Dim2, a.Start, a.Stop, a.Step, a.KeepDim)
	for i, s := range a.Scalars {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(floatKey(s))
	}
	b.WriteString("] ")
	b.WriteString(a.DType.String())
	b.WriteString("}")
	return b.String()
}

// floatKey prints v readably when that round-trips, by its bits otherwise
// (NaN payloads, negative zero).
func floatKey(v float64) string {
	if v == 0 && math.Signbit(v) {
		return "-0"
	}
	if math.IsNaN(v) {
		return "nan:" + strconv.FormatUint(math.Float64bits(v), 16)
	}
	return strconv.FormatFloat(v, 'g', -1, 64)
}

// AttrsEqual reports whether two attribute sets are equal field by field
// (nil and empty slices are equal; scalars compare by their bits).
func AttrsEqual(a, b Attrs) bool { return attrsKey(a) == attrsKey(b) }

// Key returns a canonical text of g's structure, identical for two graphs
// with the same inputs (by position and metadata), the same constants (by
// their order among the constants and their metadata, not their values),
// the same calls in the same order (ops, every attribute, scalar operands,
// result metadata, and which earlier node each operand is) and the same
// outputs. Node IDs, locations and constant values do not enter it, so it
// can key a cache of compiled graphs whose constants are bound by position.
// Two graphs that differ only in the order of independent calls get
// different keys.
func (g *Graph) Key() string {
	names := make(map[*Node]string, len(g.Nodes))
	var b strings.Builder
	for _, in := range g.Inputs {
		names[in] = "i" + strconv.Itoa(in.Index)
		fmt.Fprintf(&b, "%s %s\n", names[in], in.TypeString())
	}
	nconst, ncall := 0, 0
	ref := func(v Value) string {
		switch v := v.(type) {
		case nil:
			return "nil"
		case *Node:
			if v == nil {
				return "nil"
			}
			if s, ok := names[v]; ok {
				return s
			}
			return "?" + v.Name()
		case Scalar:
			return "s" + v.DType.String() + ":" + floatKey(v.Value)
		}
		return fmt.Sprintf("<%T>", v)
	}
	for _, n := range g.Nodes {
		switch n.Kind {
		case InputNode:
			if _, ok := names[n]; !ok { // not listed in g.Inputs
				names[n] = "?i" + strconv.Itoa(n.Index)
			}
		case ConstNode:
			names[n] = "k" + strconv.Itoa(nconst)
			nconst++
			fmt.Fprintf(&b, "%s const %s\n", names[n], n.TypeString())
		default:
			names[n] = "n" + strconv.Itoa(ncall)
			ncall++
			op := "<nil>"
			if n.Op != nil {
				op = n.Op.Name
			}
			fmt.Fprintf(&b, "%s %s = %s(", names[n], n.TypeString(), op)
			for i, a := range n.Args {
				if i > 0 {
					b.WriteString(", ")
				}
				b.WriteString(ref(a))
			}
			b.WriteString(") " + attrsKey(n.Attrs) + "\n")
		}
	}
	b.WriteString("out")
	for _, o := range g.Outputs {
		b.WriteString(" " + ref(o))
	}
	b.WriteString("\n")
	return b.String()
}

// rewriter redirects uses of replaced nodes while a pass walks the nodes in
// order.
type rewriter struct {
	repl map[*Node]*Node
}

func newRewriter() *rewriter { return &rewriter{repl: map[*Node]*Node{}} }

func (r *rewriter) resolve(n *Node) *Node {
	for {
		m, ok := r.repl[n]
		if !ok {
			return n
		}
		n = m
	}
}

// remapArgs points n's arguments at replacements; a typed nil *Node becomes
// an untyped nil.
func (r *rewriter) remapArgs(n *Node) {
	for i, a := range n.Args {
		if an, ok := a.(*Node); ok {
			if an == nil {
				n.Args[i] = nil
			} else if rn := r.resolve(an); rn != an {
				n.Args[i] = rn
			}
		}
	}
}

func (r *rewriter) remapOutputs(g *Graph) {
	for i, o := range g.Outputs {
		if o != nil {
			g.Outputs[i] = r.resolve(o)
		}
	}
}

// DCE removes the constants and calls that no output depends on; inputs
// always stay. It returns how many nodes it removed.
func DCE(g *Graph) int {
	live := make(map[*Node]bool, len(g.Nodes))
	for _, o := range g.Outputs {
		if o != nil {
			live[o] = true
		}
	}
	for i := len(g.Nodes) - 1; i >= 0; i-- {
		n := g.Nodes[i]
		if !live[n] {
			continue
		}
		for _, a := range n.Args {
			if an, ok := a.(*Node); ok && an != nil {
				live[an] = true
			}
		}
	}
	kept := g.Nodes[:0]
	removed := 0
	for _, n := range g.Nodes {
		if n.Kind == InputNode || live[n] {
			kept = append(kept, n)
		} else {
			removed++
		}
	}
	clear(g.Nodes[len(kept):])
	g.Nodes = kept
	return removed
}

// callKey identifies a call by op, attributes and operands (nodes by
// identity, scalars by dtype and bits).
func callKey(n *Node) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%p(", n.Op)
	for _, a := range n.Args {
		switch a := a.(type) {
		case *Node:
			if a == nil {
				b.WriteString("nil,")
			} else {
				fmt.Fprintf(&b, "%p,", a)
			}
		case Scalar:
			fmt.Fprintf(&b, "s%d:%x,", a.DType, math.Float64bits(a.Value))
		default:
			b.WriteString("nil,")
		}
	}
	b.WriteString(")")
	b.WriteString(attrsKey(n.Attrs))
	return b.String()
}

// CSE merges calls with the same op, equal attributes and the same operands
// (the same nodes, equal scalars) into the first of them. It returns how
// many calls it removed.
func CSE(g *Graph) int {
	r := newRewriter()
	seen := map[string]*Node{}
	kept := make([]*Node, 0, len(g.Nodes))
	for _, n := range g.Nodes {
		if n.Kind != CallNode {
			kept = append(kept, n)
			continue
		}
		r.remapArgs(n)
		k := callKey(n)
		if first, ok := seen[k]; ok && sameMeta(first, n) {
			r.repl[n] = first
			continue
		}
		seen[k] = n
		kept = append(kept, n)
	}
	r.remapOutputs(g)
	g.Nodes = kept
	return len(r.repl)
}

func sameMeta(a, b *Node) bool {
	return equalInts(a.Shape, b.Shape) && a.DType == b.DType && a.Device == b.Device
}

// Simplify applies algebraic identities: x*1, 1*x, x+0, 0+x, x-0 and x/1
// with scalar operands, casts to the type x has, permutes and transposes
// that compose to the identity, reshapes, squeezes and unsqueezes that
// return to x's shape, and a view of a write that reads back exactly what
// was written (see writtenSource); a reshape of a reshape, squeeze or unsqueeze reads
// the inner operand directly. A node is replaced only by a node with the
// same shape, dtype and device, so identities that would promote (an int
// tensor times 1.0) or broadcast are left alone. (x + 0 turns -0.0 into
// +0.0; like other compilers, Simplify ignores that.) It returns the number
// of rewrites.
func Simplify(g *Graph) int {
	r := newRewriter()
	kept := make([]*Node, 0, len(g.Nodes))
	changes := 0
	for _, n := range g.Nodes {
		if n.Kind != CallNode {
			kept = append(kept, n)
			continue
		}
		r.remapArgs(n)
		if x := simplifyNode(n); x != nil && x != n && sameMeta(x, n) {
			r.repl[n] = x
			changes++
			continue
		}
		if bypassReshape(n) {
			changes++
		}
		kept = append(kept, n)
	}
	r.remapOutputs(g)
	g.Nodes = kept
	return changes
}

func isScalar(v Value, want float64) bool {
	s, ok := v.(Scalar)
	return ok && s.Value == want
}

func argNode(n *Node, i int) *Node {
	if i >= len(n.Args) {
		return nil
	}
	a, _ := n.Args[i].(*Node)
	return a
}

// simplifyNode returns the existing node n equals, or nil.
func simplifyNode(n *Node) *Node {
	if len(n.Args) == 0 {
		return nil
	}
	x := argNode(n, 0)
	switch n.Op {
	case OpAdd, OpMul:
		unit := 0.0
		if n.Op == OpMul {
			unit = 1
		}
		if len(n.Args) != 2 {
			return nil
		}
		// x + 0 is not x for floats: -0 + 0 is +0. (x * 1, x - 0 and x / 1
		// are x exactly, signed zeros and NaNs included.)
		keeps := func(v *Node) bool { return n.Op == OpMul || (v != nil && !v.DType.IsFloat()) }
		if isScalar(n.Args[1], unit) && keeps(x) {
			return x
		}
		if y := argNode(n, 1); isScalar(n.Args[0], unit) && keeps(y) {
			return y
		}
	case OpSub:
		if len(n.Args) == 2 && isScalar(n.Args[1], 0) {
			return x
		}
	case OpDiv:
		if len(n.Args) == 2 && isScalar(n.Args[1], 1) {
			return x
		}
	case OpCast:
		if x != nil && x.DType == n.Attrs.DType {
			return x
		}
	case OpPermute, OpTranspose:
		return permuteChain(n)
	case OpAsStrided:
		return writtenSource(n)
	case OpReshape, OpSqueeze, OpUnsqueeze, OpExpand, OpSlice:
		if x != nil && equalInts(x.Shape, n.Shape) && (n.Op != OpSlice || sliceIsFull(x, n.Attrs)) {
			return x
		}
		if n.Op == OpReshape || n.Op == OpSqueeze || n.Op == OpUnsqueeze {
			return reshapeChain(n)
		}
	}
	return nil
}

// writtenSource returns src where view n reads back exactly what the
// write it views put there: n = AsStrided(AsStridedScatter(x, src, L), L)
// for a layout L that names each storage element at most once (an
// optimizer's m.Copy(…) read again as m). Readers of the new contents then
// read the written value itself, which a fused kernel can keep in
// registers, instead of the storage's next version.
func writtenSource(n *Node) *Node {
	w := argNode(n, 0)
	if w == nil || w.Kind != CallNode || w.Op != OpAsStridedScatter || w.Attrs.Start != n.Attrs.Start || !equalInts(w.Attrs.Dims, n.Attrs.Dims) {
		return nil
	}
	src := argNode(w, 1)
	r := len(n.Attrs.Dims) / 2
	if src == nil || !nonOverlapping(n.Attrs.Dims[:r], n.Attrs.Dims[r:]) {
		return nil
	}
	return src // Simplify keeps it only with n's shape, type and device
}

// nonOverlapping reports whether a layout of the given sizes and strides
// names every element at most once: sorted by stride, each dim (of size
// above one) steps past everything the smaller strides span.
func nonOverlapping(shape, strides []int) bool {
	type dim struct{ size, stride int }
	var ds []dim
	for i, s := range shape {
		if s == 0 {
			return true
		}
		if s > 1 {
			st := strides[i]
			if st < 0 {
				st = -st
			}
			ds = append(ds, dim{s, st})
		}
	}
	slices.SortFunc(ds, func(a, b dim) int { return a.stride - b.stride })
	span := 0 // the largest offset the dims so far reach
	for _, d := range ds {
		if d.stride <= span {
			return false
		}
		span += (d.size - 1) * d.stride
	}
	return true
}

// sliceIsFull reports whether a slice of x keeps every element in order.
func sliceIsFull(x *Node, a Attrs) bool {
	d, err := NormDim("Slice", x.Shape, a.Dim)
	if err != nil || len(x.Shape) == 0 {
		return false
	}
	return a.Step == 1 || x.Shape[d] <= 1
}

// permOf is the permutation a transpose or permute applies (output dim i
// is input dim p[i]), or nil.
func permOf(n *Node) []int {
	x := argNode(n, 0)
	if x == nil {
		return nil
	}
	r := len(x.Shape)
	switch n.Op {
	case OpPermute:
		if len(n.Attrs.Dims) != r {
			return nil
		}
		p, err := NormDims("Permute", x.Shape, n.Attrs.Dims)
		if err != nil || len(p) != r {
			return nil
		}
		return p
	case OpTranspose:
		p := make([]int, r)
		for i := range p {
			p[i] = i
		}
		if r == 0 {
			return p
		}
		d0, err0 := NormDim("Transpose", x.Shape, n.Attrs.Dim)
		d1, err1 := NormDim("Transpose", x.Shape, n.Attrs.Dim2)
		if err0 != nil || err1 != nil {
			return nil
		}
		p[d0], p[d1] = p[d1], p[d0]
		return p
	}
	return nil
}

// permuteChain follows a chain of permutes and transposes up from n and
// returns the first operand that the composed permutation leaves
// unchanged.
func permuteChain(n *Node) *Node {
	perm := permOf(n)
	if perm == nil {
		return nil
	}
	cur := n
	for {
		x := argNode(cur, 0)
		if isIdentity(perm) {
			return x
		}
		if x == nil || x.Kind != CallNode || (x.Op != OpPermute && x.Op != OpTranspose) {
			return nil
		}
		inner := permOf(x)
		if inner == nil || len(inner) != len(perm) {
			return nil
		}
		// out dim i = x dim perm[i] = x's operand dim inner[perm[i]]
		comp := make([]int, len(perm))
		for i, p := range perm {
			comp[i] = inner[p]
		}
		perm, cur = comp, x
	}
}

func isIdentity(p []int) bool {
	for i, v := range p {
		if v != i {
			return false
		}
	}
	return true
}

func isReshapeLike(n *Node) bool {
	return n != nil && n.Kind == CallNode && (n.Op == OpReshape || n.Op == OpSqueeze || n.Op == OpUnsqueeze)
}

// reshapeChain follows reshapes, squeezes and unsqueezes up from n (they
// keep the row-major order of the elements) and returns an operand along
// the chain with n's shape.
func reshapeChain(n *Node) *Node {
	for cur := argNode(n, 0); isReshapeLike(cur); {
		x := argNode(cur, 0)
		if x == nil {
			return nil
		}
		if equalInts(x.Shape, n.Shape) {
			return x
		}
		cur = x
	}
	return nil
}

// bypassReshape makes a reshape of a reshape-like node read that node's
// operand directly, which leaves n's metadata unchanged.
func bypassReshape(n *Node) bool {
	if n.Op != OpReshape {
		return false
	}
	inner := argNode(n, 0)
	if !isReshapeLike(inner) || argNode(inner, 0) == nil {
		return false
	}
	n.Args[0] = argNode(inner, 0)
	return true
}

// FoldConstants replaces each call whose tensor operands are all constants
// by a constant holding eval's result: the node becomes a ConstNode in place
// (same *Node, ID, metadata and location, Value set, Op, Args and Attrs
// cleared). eval gets the node (still a call) and its operands in order:
// a constant's Value, a Scalar, or nil. eval may decline a node by
// returning (nil, nil); an error stops the pass and is returned. Folding
// proceeds in order, so chains of constant calls fold completely. It
// returns the number of folded nodes.
func FoldConstants(g *Graph, eval func(n *Node, args []any) (any, error)) (int, error) {
	folded := 0
	for _, n := range g.Nodes {
		if n.Kind != CallNode {
			continue
		}
		args := make([]any, len(n.Args))
		tensors, allConst := 0, true
		for i, a := range n.Args {
			switch a := a.(type) {
			case *Node:
				if a == nil {
					continue
				}
				tensors++
				if a.Kind != ConstNode {
					allConst = false
				}
				args[i] = a.Value
			case Scalar:
				args[i] = a
			}
		}
		if tensors == 0 || !allConst {
			continue
		}
		v, err := eval(n, args)
		if err != nil {
			return folded, fmt.Errorf("ir: folding %s := %s: %w", n.Name(), callExpr(n), err)
		}
		if v == nil {
			continue
		}
		n.Kind, n.Value, n.Op, n.Args, n.Attrs = ConstNode, v, nil, nil, Attrs{}
		folded++
	}
	return folded, nil
}

// decompBuilder records into a graph, expanding composite ops recursively.
type decompBuilder struct{ b *GraphBuilder }

func (d *decompBuilder) Apply(op *Op, attrs Attrs, args ...Value) Value {
	if op.Kind != Composite || d.b.Err != nil {
		return d.b.Apply(op, attrs, args...)
	}
	v, err := op.Decompose(d, attrs, args...)
	if err != nil {
		d.b.Err = err
		return &Node{}
	}
	return v
}
func (d *decompBuilder) Shape(v Value) []int { return d.b.Shape(v) }
func (d *decompBuilder) DType(v Value) DType { return d.b.DType(v) }

// Decompose replaces every composite call by its decomposition, recorded
// with a GraphBuilder in the composite's place and with its location, so
// that only pointwise, reduction, view and extern calls remain. Users and
// outputs of a composite move to the decomposition's result. A composite
// whose decomposition fails stays as it is and the first such error is
// returned with the count of the others, replaced as usual.
func Decompose(g *Graph) (int, error) {
	if !slices.ContainsFunc(g.Nodes, isComposite) {
		return 0, nil
	}
	r := newRewriter()
	old := g.Nodes
	g.Nodes = make([]*Node, 0, 2*len(old))
	count := 0
	var first error
	for _, n := range old {
		if n.Kind == CallNode {
			r.remapArgs(n)
		}
		if !isComposite(n) {
			g.Nodes = append(g.Nodes, n)
			continue
		}
		mark := len(g.Nodes)
		b := &GraphBuilder{G: g, Loc: n.Loc}
		v := (&decompBuilder{b}).Apply(n.Op, n.Attrs, n.Args...)
		err := b.Err
		res, ok := v.(*Node)
		if err == nil && (!ok || res == nil) {
			err = errors.New("the decomposition did not return a tensor")
		}
		if err == nil && !sameMeta(res, n) {
			err = fmt.Errorf("the decomposition gives %s, the node is %s", res.TypeString(), n.TypeString())
		}
		if err != nil {
			clear(g.Nodes[mark:])
			g.Nodes = append(g.Nodes[:mark], n)
			if first == nil {
				first = fmt.Errorf("ir: decomposing %s := %s: %w", n.Name(), callExpr(n), err)
			}
			continue
		}
		r.repl[n] = res
		count++
	}
	r.remapOutputs(g)
	return count, first
}

func isComposite(n *Node) bool {
	return n.Kind == CallNode && n.Op != nil && n.Op.Kind == Composite
}

// Optimize runs Decompose, Simplify, SinkCasts, CSE, FoldConstants (when eval is not
// nil) and DCE, in that order, until a round changes nothing (at most 10
// rounds). It returns the total number of changes and the first error of
// Decompose or FoldConstants, which stops it.
func Optimize(g *Graph, eval func(n *Node, args []any) (any, error)) (int, error) {
	total := 0
	for range 10 {
		n, err := Decompose(g)
		total += n
		if err != nil {
			return total, err
		}
		round := n + Simplify(g) + SinkCasts(g) + CSE(g)
		if eval != nil {
			f, err := FoldConstants(g, eval)
			round += f
			if err != nil {
				return total + round - n, err
			}
		}
		round += DCE(g)
		total += round - n
		if round == 0 {
			break
		}
	}
	return total, nil
}

func isCast(n *Node) bool { return n.Kind == CallNode && n.Op == OpCast }

// readersOf lists each node's distinct reading calls, in graph order, and
// marks the graph's outputs.
func readersOf(g *Graph) (readers map[*Node][]*Node, outputs map[*Node]bool) {
	readers, outputs = map[*Node][]*Node{}, map[*Node]bool{}
	for _, n := range g.Nodes {
		if n.Kind != CallNode {
			continue
		}
		for _, a := range n.Args {
			if an, ok := a.(*Node); ok && an != nil && !slices.Contains(readers[an], n) {
				readers[an] = append(readers[an], n)
			}
		}
	}
	for _, o := range g.Outputs {
		outputs[o] = true
	}
	return readers, outputs
}

// sinkableViews are the views SinkCasts moves a cast past: each keeps a
// value's elements as they are, and reading a tensor through it needs no
// copy. Not Expand: a cast of an expanded tensor that some op (a
// product) reads whole would be computed at the expanded size.
var sinkableViews = map[*Op]bool{OpSlice: true, OpTranspose: true, OpPermute: true, OpSqueeze: true, OpUnsqueeze: true}

// SinkCasts moves casts toward the tensors they convert, so that the
// kernels reading them convert as they load instead of reading a
// converted copy (a bfloat16 product read in float32 through slices, as
// rotary embeddings do):
//   - a view of a cast becomes a cast of the view, where every reader of
//     the cast is such a view and neither is a graph output (an output
//     keeps its layout);
//   - a cast of a Cat becomes a Cat of casts, where the cast is the Cat's
//     only reader; each part is first cast to the Cat's type, so the
//     values are exactly the Cat's cast.
//
// Both leave values unchanged; the casts then fuse into the regions that
// read the views, or that compute the Cat's parts. It returns the number
// of rewrites; DCE removes what they leave unread.
func SinkCasts(g *Graph) int {
	if !slices.ContainsFunc(g.Nodes, isCast) {
		return 0
	}
	readers, outputs := readersOf(g)
	viewsOnly := func(c *Node) bool {
		if c == nil || c.Kind != CallNode || c.Op != OpCast || outputs[c] || len(readers[c]) == 0 {
			return false
		}
		for _, u := range readers[c] {
			if !sinkableViews[u.Op] || outputs[u] {
				return false
			}
		}
		return true
	}
	old := g.Nodes
	g.Nodes = make([]*Node, 0, len(old)+8)
	r := newRewriter()
	changes := 0
	for _, n := range old {
		if n.Kind != CallNode {
			g.Nodes = append(g.Nodes, n)
			continue
		}
		r.remapArgs(n)
		var res Value
		mark := len(g.Nodes)
		b := &GraphBuilder{G: g, Loc: n.Loc}
		switch x := argNode(n, 0); {
		case sinkableViews[n.Op] && viewsOnly(x) && !outputs[n]:
			res = b.Apply(OpCast, x.Attrs, b.Apply(n.Op, n.Attrs, x.Args[0]))
		case n.Op == OpCast && x != nil && x.Kind == CallNode && x.Op == OpCat && len(readers[x]) == 1 && !outputs[x]:
			parts := make([]Value, len(x.Args))
			for i, a := range x.Args {
				if an, ok := a.(*Node); ok && an != nil && an.DType != x.DType {
					a = b.Apply(OpCast, Attrs{DType: x.DType}, a)
				}
				parts[i] = b.Apply(OpCast, n.Attrs, a)
			}
			res = b.Apply(OpCat, x.Attrs, parts...)
		}
		if rn, ok := res.(*Node); ok && b.Err == nil && sameMeta(rn, n) {
			r.repl[n] = rn
			changes++
			continue
		}
		clear(g.Nodes[mark:])
		g.Nodes = append(g.Nodes[:mark], n)
	}
	r.remapOutputs(g)
	return changes
}

// SplitCasts gives each reader of a cast its own copy of the cast where
// that moves fewer bytes than computing the cast once: a fused kernel
// then converts as it loads, and the converted tensor is never written.
// A cast from s-byte to d-byte elements read by k pointwise or view calls
// costs k·s bytes of loads split, against s + d + k·d (read, write, k
// reads) kept, so widening casts always split and narrowing ones for two
// readers. Casts that are graph outputs, or read by other calls (a
// reduction, whose row region takes the cast whole; a product; After,
// which orders an in-place write), stay whole. Run it before in-place
// writes are decided: a copy may run later than the cast it copies. It
// returns the number of copies made; CSE would merge them
// again, so it runs after Optimize, just before the graph is partitioned
// into kernels.
func SplitCasts(g *Graph) int {
	if !slices.ContainsFunc(g.Nodes, isCast) {
		return 0
	}
	readers, outputs := readersOf(g)
	split := func(c *Node) bool {
		x := argNode(c, 0)
		us := readers[c]
		if c.Kind != CallNode || c.Op != OpCast || outputs[c] || x == nil || len(us) < 2 {
			return false
		}
		for _, u := range us {
			// After orders a write after this value's readers: a copy
			// would read the storage once it may be overwritten.
			if k := u.Op.Kind; k != Pointwise && k != View || u.Op == OpAfter {
				return false
			}
		}
		k, s, d := len(us), x.DType.Size(), c.DType.Size()
		return k*s < s+d+k*d
	}
	old := g.Nodes
	g.Nodes = make([]*Node, 0, len(old)+8)
	copies := 0
	for _, n := range old {
		g.Nodes = append(g.Nodes, n)
		if !split(n) {
			continue
		}
		for _, u := range readers[n][1:] {
			c := g.add(&Node{Kind: CallNode, Op: n.Op, Attrs: n.Attrs, Args: n.Args, Shape: n.Shape, DType: n.DType, Device: n.Device, Loc: n.Loc, Sym: n.Sym})
			args := slices.Clone(u.Args)
			for i, a := range args {
				if an, ok := a.(*Node); ok && an == n {
					args[i] = c
				}
			}
			u.Args = args
			copies++
		}
	}
	return copies
}
