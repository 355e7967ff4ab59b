package tensor

import (
	"errors"
	"reflect"
	"strings"

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

// gradMask says which of a call's tensors require gradients ("" when
// none does).
func gradMask(ts []*Tensor) string {
	var b strings.Builder
	any := false
	for _, t := range ts {
		if t.RequiresGrad() {
			b.WriteByte('1')
			any = true
		} else {
			b.WriteByte('0')
		}
	}
	if !any {
		return ""
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

// gradTarget is where a gradient output of a compiled graph goes: the
// call's argument arg, or (arg < 0) the captured tensor t.
type gradTarget struct {
	arg int
	t   *Tensor
}

// addLeafGrad adds gx, the traced gradient of leaf x (a captured tensor,
// or a proxy of an argument), to the gradient the run outputs for it.
func (tr *tracer) addLeafGrad(x, gx *Tensor) {
	leaf := x
	if x.ag.arg != nil {
		leaf = x.ag.arg
	}
	for i, l := range tr.gradLeaves {
		if l == leaf {
			tr.gradVals[i] = tr.gradVals[i].Add(gx)
			return
		}
	}
	tr.gradLeaves = append(tr.gradLeaves, leaf)
	tr.gradVals = append(tr.gradVals, gx)
}

// gradTargets maps the traced run's leaves to the call's arguments or
// the captured tensors.
func (tr *tracer) gradTargets() []gradTarget {
	out := make([]gradTarget, len(tr.gradLeaves))
	for i, l := range tr.gradLeaves {
		out[i] = gradTarget{arg: -1, t: l}
		for j, a := range tr.args {
			if a == l {
				out[i] = gradTarget{arg: j}
				break
			}
		}
	}
	return out
}

// applyGrads adds a run's gradient outputs to their leaves' gradients.
func applyGrads(targets []gradTarget, grads, args []*Tensor) {
	for i, tg := range targets {
		leaf := tg.t
		if tg.arg >= 0 {
			leaf = args[tg.arg]
		}
		if leaf.ag == nil || !leaf.ag.requires {
			continue
		}
		g := grads[i]
		if g.dtype() != leaf.dtype() {
			g = g.To(leaf.dtype())
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
			if p := v.(*partSlot).p.Load(); p != nil {
				return p.call(fa, k, leaves)
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
