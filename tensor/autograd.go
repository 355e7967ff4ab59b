package tensor

import (
	"bytes"
	"cmp"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"

	"gocompile/ir"
	"gocompile/trace"
)

// Reverse-mode automatic differentiation, eagerly, as PyTorch's autograd.
//
// A floating tensor marked with SetRequiresGrad(true) is a leaf. Every op
// applied to tensors of which one requires a gradient records a gradNode
// on its result: the op, its operands and its result, kept for the
// backward pass. Backward walks the nodes from a result back to the
// leaves in reverse order of creation, applying each op's derivative (its
// VJP in the registry, written as ops, so gradients run on the device the
// tensors live on) and adding the gradients of tensors used more than
// once; each leaf's gradient is added to its Grad, across calls, until
// ZeroGrad. Composite ops (Softmax, LayerNorm, …) that take part are
// recorded op by op, through their decomposition, so they need no
// derivative of their own.
//
// Results of integer or bool type do not require gradients (comparisons,
// ArgMax, …). An op with no derivative yet (IndexCopy, the AsStrided
// writes) is an error when its gradient is needed, naming the op.
//
// The tensors an op saves for its derivative carry the version of their
// storage: writing into one in place (Copy, Fill, IndexCopyInPlace) before
// Backward reads it is an error naming the op, as PyTorch's version
// counter makes it. Writing in place into a tensor that requires a
// gradient is an error at the write.

// gradState is a tensor's part in autograd.
type gradState struct {
	mu       sync.Mutex
	requires bool
	grad     *Tensor   // a leaf's accumulated gradient
	node     *gradNode // the op that made a non-leaf
	// arg is the real tensor a traced argument's proxy stands for: its
	// gradient goes to that tensor (see tracer.addLeafGrad).
	arg *Tensor
}

// accumulate adds g to a leaf's gradient.
func (s *gradState) accumulate(g *Tensor) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.grad == nil {
		s.grad = g
	} else {
		s.grad = s.grad.Add(g)
	}
}

// gradNode is one recorded op.
type gradNode struct {
	op       *ir.Op
	attrs    ir.Attrs
	args     []ir.Value // as applied: tensors, scalars, nil
	out      *Tensor
	versions []uint64 // each tensor operand's storage version when recorded, then out's
	seq      uint64   // creation order: Backward runs later nodes first
}

var gradSeq atomic.Uint64

// SetRequiresGrad marks t, a floating tensor, as a leaf whose gradient
// Backward computes (on), or stops it being one (off), and returns t.
func (t *Tensor) SetRequiresGrad(on bool) *Tensor {
	defer rethrow()
	t.must("SetRequiresGrad")
	if t.px != nil {
		throw("SetRequiresGrad", []*Tensor{t}, "call SetRequiresGrad before calling the compiled function, or on a captured tensor",
			"a tensor traced by Compile cannot become a leaf")
	}
	if on && !t.dtype().IsFloat() {
		throw("SetRequiresGrad", []*Tensor{t}, "convert it with To(Float32) first",
			"only floating tensors have gradients; this one is %v", t.dtype())
	}
	if t.ag != nil && t.ag.node != nil {
		throw("SetRequiresGrad", []*Tensor{t}, "call Detach first for a new leaf",
			"the tensor is the result of %s on tensors that require gradients, not a leaf", t.ag.node.op.Title)
	}
	if !on {
		t.ag = nil
		return t
	}
	if t.ag == nil {
		t.ag = &gradState{}
	}
	t.ag.requires = true
	return t
}

// RequiresGrad reports whether Backward computes gradients through t.
func (t *Tensor) RequiresGrad() bool { return t != nil && t.ag != nil && t.ag.requires }

// IsLeaf reports whether t was not made by an op that gradients flow
// through: tensors made by users, and results of ops on tensors that
// require no gradient.
func (t *Tensor) IsLeaf() bool { return t.ag == nil || t.ag.node == nil }

// Grad is the gradient Backward accumulated in t, a leaf that requires
// gradients, or nil before any. Inside a compiled function it is the
// gradient as the call has it so far (traced: see compilegrad.go).
func (t *Tensor) Grad() *Tensor {
	if t.ag == nil {
		return nil
	}
	if tr := t.traced(); tr != nil {
		return tr.grad(t)
	}
	t.ag.mu.Lock()
	defer t.ag.mu.Unlock()
	return t.ag.grad
}

// SetGrad replaces t's accumulated gradient by g (nil clears it).
func (t *Tensor) SetGrad(g *Tensor) {
	defer rethrow()
	if !t.RequiresGrad() {
		throw("SetGrad", []*Tensor{t}, "call SetRequiresGrad(true) first", "the tensor does not require gradients")
	}
	if g != nil && (!slices.Equal(g.shape(), t.shape()) || g.dtype() != t.dtype()) {
		throw("SetGrad", []*Tensor{t, g}, "give a gradient of the tensor's shape and type",
			"gradient %v %v for a tensor %v %v", g.dtype(), ir.FormatShape(g.shape()), t.dtype(), ir.FormatShape(t.shape()))
	}
	t.replaceGrad(g)
}

// ZeroGrad clears t's accumulated gradient (sets it to nil, as PyTorch's
// zero_grad does by default).
func (t *Tensor) ZeroGrad() {
	if t.ag != nil {
		t.replaceGrad(nil)
	}
}

// replaceGrad puts g in place of t's gradient: in the trace, inside a
// compiled function.
func (t *Tensor) replaceGrad(g *Tensor) {
	if tr := t.traced(); tr != nil {
		tr.setGrad(t, g)
		return
	}
	t.ag.mu.Lock()
	t.ag.grad = g
	t.ag.mu.Unlock()
}

// Detach returns a tensor sharing t's storage that requires no gradient
// and has no history.
func (t *Tensor) Detach() *Tensor {
	defer rethrow()
	t.must("Detach")
	return &Tensor{v: t.v, px: t.px, dynDims: t.dynDims}
}

// NoGrad runs f with gradient recording off in the calling goroutine (and
// goroutines f's ops do not start): ops in f record no history, as in
// PyTorch's torch.no_grad(). Other goroutines keep recording.
func NoGrad(f func()) {
	id := goroutineID()
	noGradActive.Add(1)
	noGradMu.Lock()
	noGradDepth[id]++
	noGradMu.Unlock()
	defer func() {
		noGradMu.Lock()
		if noGradDepth[id]--; noGradDepth[id] == 0 {
			delete(noGradDepth, id)
		}
		noGradMu.Unlock()
		noGradActive.Add(-1)
	}()
	f()
}

var (
	noGradActive atomic.Int64 // NoGrad scopes open in any goroutine
	noGradMu     sync.Mutex
	noGradDepth  = map[uint64]int{} // by goroutine
)

// recording reports whether the calling goroutine records gradients.
func recording() bool {
	if noGradActive.Load() == 0 {
		return true
	}
	id := goroutineID()
	noGradMu.Lock()
	defer noGradMu.Unlock()
	return noGradDepth[id] == 0
}

// goroutineID is the calling goroutine's number, from its stack header
// ("goroutine N [...]"). Read only while a NoGrad scope is open or a
// function is traced (tracing.go).
func goroutineID() uint64 {
	var buf [64]byte
	b := buf[:runtime.Stack(buf[:], false)]
	b = bytes.TrimPrefix(b, []byte("goroutine "))
	if i := bytes.IndexByte(b, ' '); i > 0 {
		b = b[:i]
	}
	id, _ := strconv.ParseUint(string(b), 10, 64)
	return id
}

// needsGrad reports whether an op on args records a gradient node.
func needsGrad(args []ir.Value) bool {
	found := false
	for _, a := range args {
		if t, ok := a.(*Tensor); ok && t != nil && t.RequiresGrad() {
			found = true
			break
		}
	}
	return found && recording()
}

// tensorBuilder applies ops eagerly to tensors (ir.Builder): derivatives
// and decompositions run through it, recorded when they need gradients.
type tensorBuilder struct{}

// NeedsGrad reports whether v requires a gradient (ir.GradNeeder), so that
// derivatives skip the operands that do not: x in x·w when only w is a
// parameter.
func (tensorBuilder) NeedsGrad(v ir.Value) bool {
	t, ok := v.(*Tensor)
	return ok && t != nil && t.RequiresGrad()
}

func (tensorBuilder) Apply(op *ir.Op, a ir.Attrs, args ...ir.Value) ir.Value {
	return apply(op, a, args...)
}
func (tensorBuilder) Shape(v ir.Value) []int    { return v.(*Tensor).shape() }
func (tensorBuilder) DType(v ir.Value) ir.DType { return v.(*Tensor).dtype() }

// applyRecorded runs op on args, some of which require gradients, with
// run (the kernels, or a tracer's record): a composite (or an extern
// defined by ops) op by op through its definition, so each op is
// recorded; else the op, with a node on its result.
func applyRecorded(op *ir.Op, a ir.Attrs, args []ir.Value, run func(*ir.Op, ir.Attrs, []ir.Value) *Tensor) *Tensor {
	if op.VJP == nil {
		def := op.Decompose
		if op.Kind != ir.Composite {
			def = op.Math
		}
		if def != nil {
			v, err := def(tensorBuilder{}, a, args...)
			if err != nil {
				panic(err)
			}
			return v.(*Tensor)
		}
	}
	out := run(op, a, args)
	if !out.dtype().IsFloat() {
		return out // indices, masks: no gradient flows through them
	}
	n := &gradNode{op: op, attrs: a, args: args, out: out, seq: gradSeq.Add(1)}
	tr := n.tracer()
	if tr != nil {
		tr.gradActive = true // a traced run's writes are versions of the graph
	}
	for _, v := range args {
		if t, ok := v.(*Tensor); ok && t != nil {
			n.versions = append(n.versions, t.version(tr))
		}
	}
	n.versions = append(n.versions, out.version(tr))
	if out.ag != nil { // the kernel returned an operand (Contiguous): a new handle
		out = &Tensor{v: out.v, px: out.px}
	}
	out.ag = &gradState{requires: true, node: n}
	n.out = out
	return out
}

// Backward computes the gradient of t with respect to every leaf it
// depends on that requires gradients, adding it to the leaf's Grad. t is
// a scalar (one element), or grad gives the gradient of the loss with
// respect to t (t's shape).
func (t *Tensor) Backward(grad ...*Tensor) {
	defer rethrow()
	t.must("Backward")
	if !t.RequiresGrad() {
		throw("Backward", []*Tensor{t}, "call SetRequiresGrad(true) on the inputs the gradient is for",
			"the tensor does not require gradients: no input it was computed from does")
	}
	var g *Tensor
	switch {
	case len(grad) > 1:
		throw("Backward", []*Tensor{t}, "give one gradient", "%d gradients given", len(grad))
	case len(grad) == 1 && grad[0] != nil:
		g = grad[0]
		if !slices.Equal(g.shape(), t.shape()) {
			throw("Backward", []*Tensor{t, g}, "give a gradient of the tensor's shape",
				"gradient of shape %s for a tensor of shape %s", ir.FormatShape(g.shape()), ir.FormatShape(t.shape()))
		}
		g = g.To(t.dtype()).To(t.Device())
	case t.Numel() != 1:
		throw("Backward", []*Tensor{t}, "reduce it to a scalar (Sum, Mean), or pass the gradient with respect to it",
			"a gradient is implied only for a scalar, and the tensor has %d elements", t.Numel())
	default:
		g = Ones(t.dtype(), t.shape()...).To(t.Device())
	}
	if t.px != nil {
		t.px.tr.backwardCalled = true
	}
	NoGrad(func() { backward(t, g) })
}

// resultsRequiringGrad lists which of a traced run's flattened tensor
// results require gradients.
func resultsRequiringGrad(results []reflect.Value) []int {
	var l trace.Leaves
	for _, r := range results {
		if trace.Flatten(r, tensorType, &l) != nil {
			return nil
		}
	}
	var ks []int
	for i, v := range l.Tensors {
		if t, _ := v.Interface().(*Tensor); t.RequiresGrad() {
			ks = append(ks, i)
		}
	}
	return ks
}

// backward runs the recorded nodes from t's back.
func backward(t, g *Tensor) {
	// The nodes t depends on, by a walk over the operands.
	var nodes []*gradNode
	seen := map[*gradNode]bool{}
	stack := []*Tensor{t}
	for len(stack) > 0 {
		x := stack[len(stack)-1]
		stack = stack[:len(stack)-1]
		if x.ag == nil || x.ag.node == nil || seen[x.ag.node] {
			continue
		}
		n := x.ag.node
		seen[n] = true
		nodes = append(nodes, n)
		for _, a := range n.args {
			if at, ok := a.(*Tensor); ok && at != nil && at.RequiresGrad() {
				stack = append(stack, at)
			}
		}
	}
	// Later nodes first: every use of a result is later than the result.
	slices.SortFunc(nodes, func(a, b *gradNode) int { return cmp.Compare(b.seq, a.seq) })
	grads := map[*Tensor]*Tensor{t: g}
	var tr *tracer // tracing a compiled function: leaves' gradients are its outputs
	if t.px != nil {
		tr = t.px.tr
	}
	addGrad := func(x, gx *Tensor) {
		if x.ag.node == nil && tr != nil {
			tr.addLeafGrad(x, gx)
			return
		}
		if x.ag.node == nil { // a leaf
			x.ag.accumulate(gx)
			return
		}
		if old := grads[x]; old != nil {
			gx = old.Add(gx)
		}
		grads[x] = gx
	}
	if t.ag.node == nil {
		addGrad(t, g)
		return
	}
	for _, n := range nodes {
		gn := grads[n.out]
		if gn == nil {
			continue
		}
		delete(grads, n.out)
		n.checkVersions()
		if n.op.VJP == nil {
			panic(errorf(n.op.Title, n.shapes(), "compute it without gradients (Detach the operands), or write it with ops that have them",
				"%s has no derivative yet", n.op.Title))
		}
		vs, err := n.op.VJP(tensorBuilder{}, n.attrs, n.args, n.out, gn)
		if err != nil {
			panic(err)
		}
		for i, a := range n.args {
			x, ok := a.(*Tensor)
			if !ok || x == nil || !x.RequiresGrad() || i >= len(vs) || vs[i] == nil {
				continue
			}
			gx := vs[i].(*Tensor)
			gx = ir.SumTo(tensorBuilder{}, gx, x.shape()).(*Tensor)
			if gx.dtype() != x.dtype() {
				gx = gx.To(x.dtype())
			}
			addGrad(x, gx)
		}
	}
}

// shapes are the shapes of n's tensor operands.
func (n *gradNode) shapes() [][]int {
	var s [][]int
	for _, a := range n.args {
		if t, ok := a.(*Tensor); ok && t != nil {
			s = append(s, t.shape())
		}
	}
	return s
}

// checkVersions panics if a tensor n saved was written in place since
// (in a traced node, by a write the tracer recorded: a gradient op would
// read the latest version, not the one n saw).
func (n *gradNode) checkVersions() {
	tr := n.tracer()
	i := 0
	check := func(t *Tensor, what string) {
		if v := t.version(tr); v != n.versions[i] {
			panic(errorf(n.op.Title, n.shapes(), "write into a new tensor instead, or compute the gradient before the write",
				"%s that %s saved for its gradient was written in place after it was used (version %d, now %d)",
				what, n.op.Title, n.versions[i], v))
		}
		i++
	}
	for j, a := range n.args {
		if t, ok := a.(*Tensor); ok && t != nil {
			check(t, "operand "+strconv.Itoa(j))
		}
	}
	check(n.out, "the result")
}

// tracer is the tracer that recorded n, or nil for an eager node.
func (n *gradNode) tracer() *tracer {
	if n.out.px != nil {
		return n.out.px.tr
	}
	return nil
}

// version is t's storage version as autograd compares it. In a node tr
// traces it counts the writes tr recorded so far: of the argument t views,
// or of a captured tensor's storage; values computed in the traced
// function are never written.
func (t *Tensor) version(tr *tracer) uint64 {
	switch {
	case tr == nil:
		return t.v.Version()
	case t.px == nil:
		return tr.mut.count[t.v.StorageKey()]
	case t.px.arg != nil:
		return t.px.arg.writes
	}
	return 0
}

// noInPlaceOnGrad panics if t takes part in gradients and op would write
// into it.
func (t *Tensor) noInPlaceOnGrad(op string) {
	if t.RequiresGrad() && recording() {
		what := "a leaf that requires gradients"
		if !t.IsLeaf() {
			what = "the result of " + t.ag.node.op.Title + ", which gradients flow through"
		}
		throw(op, []*Tensor{t}, "write inside NoGrad (as optimizers do), or into a Detach'ed copy",
			"the tensor is %s: writing into it in place would change what the backward pass reads", what)
	}
}
