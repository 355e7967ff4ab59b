package tensor

import (
	"errors"
	"reflect"
	"strings"

	"gocompile/internal/logs"
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
// What the twin cannot trace it runs eagerly, with one warning: a graph
// break (reading a value) in the function, or a result that requires
// gradients when the function did not call Backward (gradients through a
// compiled function's results).

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
	t := &compiled{fn: c.fn, opts: c.opts, backend: c.backend, name: c.name, isGrad: true}
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
		leaf.ag.mu.Lock()
		if leaf.ag.grad == nil {
			leaf.ag.grad = g
		} else {
			leaf.ag.grad = leaf.ag.grad.Add(g)
		}
		leaf.ag.mu.Unlock()
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
	switch {
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
