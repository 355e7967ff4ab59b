package tensor

import (
	"errors"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"

	"gocompile/internal/logs"
	"gocompile/ir"
	"gocompile/trace"
)

// Compiled gradients. A compiled function called while gradients are
// recorded, with arguments or captured tensors that require them, is
// traced by a twin of it kept per set of such arguments: its ops record
// gradient nodes on proxies, and Backward inside the function records the
// derivatives into the same graph (the joint graph of forward and
// backward). Each leaf's gradient becomes an output of the graph, and
// every run (the first and each replay) adds it to the leaf's Grad, as an
// eager Backward would. The compiled program fuses forward and backward
// together.
//
// A function that returns a tensor requiring gradients without calling
// Backward (a compiled model whose loss is taken after the call) gives
// that result a gradient node. Its first backward is a compiled function
// of the same arguments and the upstream gradient that runs fn again and
// calls Backward on the result inside (forward and backward as one graph,
// the forward recomputed); that joint graph is then split (partition.go),
// and later calls run its forward half, saving what its backward half
// reads.
//
// What the twin cannot trace it runs eagerly, with one warning: a graph
// break (reading a value) in the function, more than one result requiring
// gradients, an argument requiring gradients that is not a leaf, or a
// variadic function.

// errGradEager stops a twin's trace: the function runs eagerly.
type errGradEager struct{ why string }

func (e *errGradEager) Error() string { return e.why }

// errNeedGradTwin stops a trace that met a captured tensor requiring
// gradients: the call goes to the gradient twin.
var errNeedGradTwin = errors.New("gocompile: a captured tensor requires gradients")

// anyRequiresGrad reports whether one of a call's tensors requires
// gradients: gradMask's question without building its string.
func anyRequiresGrad(ts []*Tensor) bool {
	for _, t := range ts {
		if t.RequiresGrad() {
			return true
		}
	}
	return false
}

// gradMask says which of a call's tensors require gradients ("" when
// none does).
func gradMask(ts []*Tensor) string {
	if !anyRequiresGrad(ts) {
		return ""
	}
	var b strings.Builder
	for _, t := range ts {
		if t.RequiresGrad() {
			b.WriteByte('1')
		} else {
			b.WriteByte('0')
		}
	}
	return b.String()
}

// gradTwin is c's twin for calls whose tensors require gradients as mask
// says.
func (c *compiled) gradTwin(mask string) *compiled {
	if v, ok := c.twins.Load(mask); ok {
		return v.(*compiled)
	}
	t := &compiled{fn: c.fn, opts: c.opts, backend: c.backend, name: c.name, isGrad: true, base: c}
	v, _ := c.twins.LoadOrStore(mask, t)
	return v.(*compiled)
}

// Gradients inside a traced function. A leaf's gradient is traced like
// any value: Backward adds to it, SetGrad and ZeroGrad replace or clear
// it, and Grad reads it as the run has it so far, so that an optimizer's
// step (or gradient clipping) inside the function computes on every call.
// The gradient the leaf held when the call began is a graph input, bound
// on each call (held sources, flatten); whether it was nil is guarded.
// When the run ends each leaf the function touched gets its result: the
// gradients Backward added are added to what it held, or, if the function
// set or cleared it, replace it.

// leafGrad is one leaf's gradient as a traced run has it.
type leafGrad struct {
	leaf *Tensor // the real leaf: captured, or the argument a proxy stands for
	// via is how the run first reached it (use): the argument, or the
	// captured tensor, that its held gradient and its result bind to.
	via gradTarget
	// replaced says SetGrad or ZeroGrad ran: value then replaces the
	// leaf's gradient (nil clears it); otherwise value, what Backward
	// added, is added to it.
	replaced bool
	value    *Tensor
}

// gradTarget is where a gradient output of a compiled graph goes: the
// call's argument arg, or (arg < 0) the captured tensor t. replace says
// the output replaces the leaf's gradient rather than adding to it, and
// clear (with replace) that the gradient becomes nil, taking no output.
// It also names a held source: a leaf whose gradient at call time is a
// graph input.
type gradTarget struct {
	arg            int
	t              *Tensor
	replace, clear bool
}

// leafOf is the leaf tg names, for a call with arguments args.
func (tg gradTarget) leafOf(args []*Tensor) *Tensor {
	if tg.arg >= 0 {
		return args[tg.arg]
	}
	return tg.t
}

// realLeaf is the tensor whose gradient x's is: the argument a traced
// proxy stands for, or x.
func realLeaf(x *Tensor) *Tensor {
	if x.ag != nil && x.ag.arg != nil {
		return x.ag.arg
	}
	return x
}

// traced reports whether t's gradient is traced: t is a leaf requiring
// gradients, and the calling goroutine traces a function (or t is a
// proxy of an argument that requires them). It returns the tracer.
func (t *Tensor) traced() *tracer {
	if t.ag == nil || !t.ag.requires || t.ag.node != nil {
		return nil
	}
	if t.px != nil {
		if t.ag.arg != nil {
			return t.px.tr
		}
		return nil
	}
	return tracingHere()
}

// use notes that the run reaches a leaf's gradient through t: an
// argument's proxy (as that argument) or a captured tensor. Which of them
// are the same tensor is guarded (sameLeaves): the graph merges them.
func (tr *tracer) use(t *Tensor) gradTarget {
	u := gradTarget{arg: -1, t: realLeaf(t)}
	if j, ok := tr.argOf[t]; ok {
		u = gradTarget{arg: j}
	}
	if !slices.Contains(tr.leafUses, u) {
		tr.leafUses = append(tr.leafUses, u)
	}
	return u
}

// leafClasses gives each of uses, resolved against a call's arguments,
// the index of the first use that is the same tensor; nil when no use is
// an argument (captured tensors stay themselves).
func leafClasses(uses []gradTarget, args []*Tensor) []int {
	if !slices.ContainsFunc(uses, func(u gradTarget) bool { return u.arg >= 0 }) {
		return nil
	}
	classes := make([]int, len(uses))
	for i, u := range uses {
		classes[i] = i
		for k := range i {
			if uses[k].leafOf(args) == u.leafOf(args) {
				classes[i] = k
				break
			}
		}
	}
	return classes
}

// sameLeaves reports whether the call's arguments are the same leaves as
// each other and as the captured ones that e's trace used them as.
func (e *entry) sameLeaves(args []*Tensor) bool {
	return e.leafClasses == nil || slices.Equal(leafClasses(e.leafUses, args), e.leafClasses)
}

// leafState is the record of the leaf t stands for (a captured tensor, or
// a proxy of an argument), made on first use.
func (tr *tracer) leafState(t *Tensor) *leafGrad {
	via := tr.use(t)
	leaf := realLeaf(t)
	for _, s := range tr.leafGrads {
		if s.leaf == leaf {
			return s
		}
	}
	s := &leafGrad{leaf: leaf, via: via}
	tr.leafGrads = append(tr.leafGrads, s)
	return s
}

// addLeafGrad adds gx, the traced gradient of leaf x (a captured tensor,
// or a proxy of an argument), to the gradient the run gives it.
func (tr *tracer) addLeafGrad(x, gx *Tensor) {
	s := tr.leafState(x)
	if s.value == nil {
		s.value = gx
	} else {
		s.value = s.value.Add(gx)
	}
}

// grad is the gradient of the leaf t stands for as the run has it so far.
func (tr *tracer) grad(t *Tensor) *Tensor {
	s := tr.leafState(t)
	if s.replaced {
		return s.value
	}
	held := tr.heldGrad(s)
	switch {
	case held == nil:
		return s.value
	case s.value == nil:
		return held
	}
	return held.Add(s.value)
}

// setGrad replaces the gradient of the leaf t stands for (nil clears it)
// for the rest of the run and at its end.
func (tr *tracer) setGrad(t, g *Tensor) {
	s := tr.leafState(t)
	s.replaced, s.value = true, g
}

// errNewInput stops a trace that read a value each call binds as a graph
// input and that was not one yet (the gradient a leaf held at call time,
// a ScalarFunc): it is now a source of the function, and the call is
// flattened, planned and traced again with it bound.
var errNewInput = errors.New("gocompile: the trace found a new input")

// heldGrad is the gradient s's leaf held when the call began: the graph
// input bound to it, nil if it held none, or, in a run that is not
// compiling (a function with graph breaks runs live), its value now.
func (tr *tracer) heldGrad(s *leafGrad) *Tensor {
	leaf := s.leaf
	if g, ok := tr.held[leaf]; ok {
		return g
	}
	// Past a graph break the segments before it have run, writes and all:
	// the function runs live on every call, so the trace goes on with the
	// gradient the leaf holds (its value at call time: a run's gradients
	// reach the leaves when it ends).
	if tr.compiling && tr.c != nil && len(tr.breaks) == 0 {
		tr.c.addHeld(s.via)
		panic(errNewInput)
	}
	leaf.ag.mu.Lock()
	g := leaf.ag.grad
	leaf.ag.mu.Unlock()
	if tr.held == nil {
		tr.held = map[*Tensor]*Tensor{}
	}
	tr.held[leaf] = g
	return g
}

// addHeld makes src a held source of c: later calls bind the gradient it
// held as a graph input.
func (c *compiled) addHeld(src gradTarget) {
	c.heldMu.Lock()
	defer c.heldMu.Unlock()
	appendNew(&c.held, src, func(s gradTarget) bool { return s == src })
}

// appendNew appends v to the list p points to, copying it (readers load
// it without locking), unless an element is the same; the caller
// serialises writers.
func appendNew[T any](p *atomic.Pointer[[]T], v T, same func(T) bool) {
	var old []T
	if l := p.Load(); l != nil {
		old = *l
	}
	if slices.ContainsFunc(old, same) {
		return
	}
	l := append(slices.Clip(old), v)
	p.Store(&l)
}

// heldSources are the leaves whose gradients at call time c's graphs read.
func (c *compiled) heldSources() []gradTarget {
	if p := c.held.Load(); p != nil {
		return *p
	}
	return nil
}

// gradOutputs lists where the run's leaf gradients go, and the values
// that are graph outputs (one per target that does not clear).
func (tr *tracer) gradOutputs() ([]gradTarget, []*Tensor) {
	var targets []gradTarget
	var values []*Tensor
	for _, s := range tr.leafGrads {
		if s.value == nil && !s.replaced {
			continue // only read
		}
		tg := s.via
		tg.replace, tg.clear = s.replaced, s.value == nil
		targets = append(targets, tg)
		if s.value != nil {
			values = append(values, s.value)
		}
	}
	return targets, values
}

// numGradOutputs is how many graph outputs targets take.
func numGradOutputs(targets []gradTarget) int {
	n := 0
	for _, tg := range targets {
		if !tg.clear {
			n++
		}
	}
	return n
}

// applyGrads gives a run's gradient outputs to their leaves: added to
// what each holds, or in its place.
func applyGrads(targets []gradTarget, grads, args []*Tensor) {
	k := 0
	for _, tg := range targets {
		var g *Tensor
		if !tg.clear {
			g = grads[k]
			k++
		}
		leaf := tg.leafOf(args)
		if leaf.ag == nil || !leaf.ag.requires {
			continue
		}
		if g != nil && g.dtype() != leaf.dtype() {
			g = g.To(leaf.dtype())
		}
		if tg.replace {
			leaf.ag.mu.Lock()
			leaf.ag.grad = g
			leaf.ag.mu.Unlock()
			continue
		}
		leaf.ag.accumulate(g)
	}
}

// gradFallback runs a twin eagerly from now on, with one warning.
func (c *compiled) gradFallback(why string) {
	c.eager.Store(true)
	c.gradWarned.Do(func() {
		logs.Warn("gocompile: running this compiled function eagerly so gradients flow", "function", c.name, "reason", why)
	})
}

// recoverGrad, deferred by a compiled call, serves the call another way
// when its trace stopped for gradients: through the gradient twin
// (errNeedGradTwin), or eagerly (errGradEager, in a twin).
func (c *compiled) recoverGrad(res *[]reflect.Value, args []reflect.Value, fa *flatArgs) {
	r := recover()
	if r == nil {
		return
	}
	err, _ := r.(error)
	var ge *errGradEager
	var gr *errGradResult
	switch {
	case err != nil && errors.As(err, &gr) && c.isGrad:
		c.viaResult.Store(int64(gr.k + 1))
		*res = c.callViaResult(args, fa, gr.k)
	case err != nil && errors.Is(err, errNeedGradTwin) && !c.isGrad:
		c.capturesGrad.Store(true)
		*res = c.gradTwin(gradMask(fa.tensors)).call(args)
	case err != nil && errors.As(err, &ge) && c.isGrad:
		c.gradFallback(ge.why)
		*res = c.invoke(args)
	default:
		panic(r)
	}
}

// errGradResult stops a twin's trace whose function returned a tensor
// requiring gradients (result k of its flattened tensor results) without
// calling Backward: calls then go through callViaResult.
type errGradResult struct{ k int }

func (e *errGradResult) Error() string { return "gocompile: a result requires gradients" }

// callViaResult runs fn's forward and gives its result k a gradient node.
// Once a backward has run for the call's signature, the forward is the
// forward half of the joint graph split by ir.SplitJoint (its results and
// the values the backward saves) and the backward the other half (see
// partitioned); before, the forward is the plain compiled program and the
// backward backwardFn, which runs the forward again.
func (c *compiled) callViaResult(args []reflect.Value, fa *flatArgs, k int) []reflect.Value {
	var leaves []ir.Value
	for _, t := range fa.tensors {
		if t.RequiresGrad() {
			if !t.IsLeaf() {
				c.gradFallback("an argument that requires gradients is the result of ops that record them (not a leaf)")
				return c.invoke(args)
			}
			leaves = append(leaves, t)
		}
	}
	bwd := c.backwardFn(k)
	if bwd == nil {
		c.gradFallback("a variadic function's result requires gradients")
		return c.invoke(args)
	}
	if gc := c.parts.Load(); gc != nil {
		if _, v, ok := gc.Lookup(&fa.call); ok {
			slot := v.(*partSlot)
			if p := slot.p.Load(); p != nil {
				if p.valid() {
					return p.call(fa, k, leaves)
				}
				// A Guard condition failed: this call's backward runs the
				// forward again, and splits anew (partition).
				if slot.p.CompareAndSwap(p, nil) {
					slot.stale.Store(true)
				}
			}
		}
	}
	var res []reflect.Value
	NoGrad(func() { res = c.base.call(args) })
	kept := append([]reflect.Value(nil), args...)
	return attachResultGrad(res, k, leaves, c.name, func(g *Tensor) {
		// The compiled backward adds the leaves' gradients itself.
		enableGrad(func() { bwd.call(append(kept, reflect.ValueOf(g))) })
		c.partition(fa, kept, g, k)
	})
}

// attachResultGrad gives result k of res (counted over its flattened
// tensors) a gradient node over leaves whose backward is backward, and
// returns res with that result in place.
func attachResultGrad(res []reflect.Value, k int, leaves []ir.Value, name string, backward func(g *Tensor)) []reflect.Value {
	var l trace.Leaves
	for _, r := range res {
		if err := trace.Flatten(r, tensorType, &l); err != nil {
			panic(err)
		}
	}
	out := l.Tensors[k].Interface().(*Tensor)
	op := &ir.Op{Name: "compiled_backward", Title: "Compile(" + name + ")",
		VJP: func(_ ir.Builder, _ ir.Attrs, _ []ir.Value, _, g ir.Value) ([]ir.Value, error) {
			backward(g.(*Tensor))
			return nil, nil
		}}
	w := &Tensor{v: out.v}
	n := &gradNode{op: op, args: leaves, out: w, seq: gradSeq.Add(1)}
	for _, v := range leaves {
		n.versions = append(n.versions, v.(*Tensor).v.Version())
	}
	n.versions = append(n.versions, w.v.Version())
	w.ag = &gradState{requires: true, node: n}
	i := 0
	next := func() reflect.Value {
		i++
		if i-1 == k {
			return reflect.ValueOf(w)
		}
		return l.Tensors[i-1]
	}
	out2 := make([]reflect.Value, len(res))
	for j, r := range res {
		out2[j] = trace.Rebuild(r, tensorType, next)
	}
	return out2
}

// backwardFn is the compiled backward of a function whose result k
// requires gradients: fn's arguments and the upstream gradient in, fn run
// and Backward called on result k with it (nil for a variadic fn).
func (c *compiled) backwardFn(k int) *compiled {
	c.bwdOnce.Do(func() {
		ft := c.fn.Type()
		if ft.IsVariadic() {
			return
		}
		n := ft.NumIn()
		ins := make([]reflect.Type, n+1)
		for i := range n {
			ins[i] = ft.In(i)
		}
		ins[n] = tensorType
		outs := make([]reflect.Type, ft.NumOut())
		for i := range outs {
			outs[i] = ft.Out(i)
		}
		fn := c.fn
		wrapper := reflect.MakeFunc(reflect.FuncOf(ins, outs, false), func(in []reflect.Value) []reflect.Value {
			res := fn.Call(in[:n])
			var l trace.Leaves
			for _, r := range res {
				if err := trace.Flatten(r, tensorType, &l); err != nil {
					panic(err)
				}
			}
			l.Tensors[k].Interface().(*Tensor).Backward(in[n].Interface().(*Tensor))
			return res
		})
		c.bwd = &compiled{fn: wrapper, opts: c.opts, backend: c.backend, name: c.name + " (backward)"}
	})
	return c.bwd
}

// enableGrad runs f with gradients recorded in the calling goroutine even
// inside NoGrad (as torch.enable_grad): a compiled backward, which runs
// inside Backward, traces its forward with gradients.
func enableGrad(f func()) {
	id := goroutineID()
	noGradMu.Lock()
	depth := noGradDepth[id]
	delete(noGradDepth, id)
	noGradMu.Unlock()
	noGradActive.Add(-int64(depth))
	defer func() {
		noGradMu.Lock()
		if depth > 0 {
			noGradDepth[id] = depth
		}
		noGradMu.Unlock()
		noGradActive.Add(int64(depth))
	}()
	f()
}
