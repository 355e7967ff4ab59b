package tensor

import (
	"fmt"
	"reflect"
	"sync/atomic"

	"gocompile/guard"
	"gocompile/internal/logs"
	"gocompile/internal/stats"
	"gocompile/ir"
	"gocompile/trace"
)

// The partitioned backward of a compiled function whose result requires
// gradients and whose Backward is taken after the call (a compiled model,
// its loss taken outside). The first backward for a call signature runs
// backwardFn (forward and backward in one graph, the forward recomputed)
// and then traces that joint graph once more, with the upstream gradient
// as an input, and splits it with ir.SplitJoint: a forward graph that
// returns the results and the values the backward needs (a minimum cut
// chooses them, recomputing cheap pointwise values rather than saving
// them), and a backward graph from those values and the upstream
// gradient. Later calls of that signature run the forward half, keeping
// its saved values on the result's gradient node, and Backward runs the
// backward half: nothing is computed twice but what the cut chose to
// recompute.

// partitioned is the two halves for one call signature.
type partitioned struct {
	split    *ir.JointSplit
	fwd, bwd Program
	// fwdSources, bwdSources: per output, an input or constant returned
	// as is (resultSources).
	fwdSources, bwdSources []resultSource
	nresults               int
	template               []reflect.Value // fn's results with proxies, rebuilt per call
	grads                  []gradTarget
	name                   string
	// checks are the Guard conditions of the joint graph's trace: when
	// one fails the halves are stale (callViaResult).
	checks []guardCheck
}

// valid reports whether every Guard condition of the halves holds.
func (p *partitioned) valid() bool { return checksHold(p.checks) }

// partSlot is the value of a call signature's guard entry in parts: its
// halves once split, nil while being split or where they cannot be;
// stale says a Guard condition of the last halves failed, so the next
// backward splits again.
type partSlot struct {
	p     atomic.Pointer[partitioned]
	stale atomic.Bool
}

// partition splits the joint graph of the call fa (of args; g is its
// result k's upstream gradient) and keeps the halves behind static guards
// on the call, once per signature; where it cannot, it says why in the
// log and the signature keeps backwardFn.
func (c *compiled) partition(fa *flatArgs, args []reflect.Value, g *Tensor, k int) {
	c.partsMu.Lock()
	gc := c.parts.Load()
	if gc == nil {
		gc = guard.NewCache(guard.Policy{}, c.opts.limit) // static: the halves are compiled for these shapes
		c.parts.Store(gc)
	}
	var slot *partSlot
	if _, v, ok := gc.Lookup(&fa.call); ok {
		slot = v.(*partSlot)
		// Split, being split, or refused already; or its halves went
		// stale (a Guard condition), split again up to the limit.
		if !slot.stale.CompareAndSwap(true, false) || c.stale.Add(1) > int64(c.opts.limit) {
			c.partsMu.Unlock()
			return
		}
	} else {
		ge, reason := gc.Plan(&fa.call)
		if reason.LimitReached {
			c.partsMu.Unlock()
			return
		}
		slot = &partSlot{}
		gc.Insert(ge, slot)
	}
	c.partsMu.Unlock()

	var p *partitioned
	var why string
	err := tryTrace(func() { enableGrad(func() { p, why = c.split(args, g, k) }) })
	if err != nil {
		why = err.Error()
	}
	if p != nil && err == nil {
		slot.p.Store(p)
		return
	}
	if logs.On("recompiles") {
		logs.Info("gocompile: the backward recomputes the forward", "function", c.name, "reason", why)
	}
}

// split traces backwardFn's twin on args and g, as its compiled call
// does, splits the joint graph and compiles both halves; it returns nil
// and the reason where the graph does not allow it.
func (c *compiled) split(args []reflect.Value, g *Tensor, k int) (*partitioned, string) {
	bwd := c.backwardFn(k)
	in := append(append([]reflect.Value(nil), args...), reflect.ValueOf(g))
	fa := bwd.flatten(in)
	if len(fa.dyn) > 0 {
		return nil, "dynamic scalars"
	}
	for _, t := range fa.tensors {
		if t == nil {
			return nil, "a nil tensor argument"
		}
	}
	tw := bwd.gradTwin(gradMask(fa.tensors))
	ge, _ := guard.NewCache(tw.policy(fa), 1).Plan(&fa.call)
	if len(ge.DynamicDims()) > 0 {
		return nil, "dynamic dims"
	}
	e, again := tw.compileEntry(ge, fa, in)
	if again || len(e.breaks) > 0 || len(e.stores) > 0 || len(e.argWrites) > 0 || len(e.graphs) != 1 {
		return nil, "graph breaks or writes in the function"
	}
	jg := e.graphs[0]
	if len(jg.Inputs) != len(fa.tensors) {
		return nil, "an argument is not a graph input"
	}
	s, err := ir.SplitJoint(jg, jg.Inputs[len(jg.Inputs)-1], e.nresults)
	if err != nil {
		return nil, err.Error()
	}
	p := &partitioned{split: s, nresults: e.nresults, template: e.template, grads: e.grads, name: c.name, checks: e.checks}
	p.fwd = c.compileGraph(s.Forward, nil, false)
	p.fwdSources = c.resultSources(s.Forward)
	p.bwd = c.compileGraph(s.Backward, nil, false)
	p.bwdSources = c.resultSources(s.Backward)
	return p, ""
}

// call runs the forward half on the call's tensors and gives result k a
// gradient node over leaves whose backward runs the backward half with
// the saved values.
func (p *partitioned) call(fa *flatArgs, k int, leaves []ir.Value) []reflect.Value {
	ins := append([]*Tensor(nil), fa.tensors...)
	var outs []*Tensor
	NoGrad(func() { outs = runProgram(p.fwd, p.fwdSources, ins) })
	if len(outs) != len(p.split.Forward.Outputs) {
		throw("Compile", nil, "fix the backend: Program.Run returns one tensor per graph output",
			"the forward returned %d outputs for a graph with %d", len(outs), len(p.split.Forward.Outputs))
	}
	saved := outs[p.nresults:]
	i := 0
	next := func() reflect.Value { i++; return reflect.ValueOf(outs[i-1]) }
	res := make([]reflect.Value, len(p.template))
	for j, r := range p.template {
		res[j] = trace.Rebuild(r, tensorType, next)
	}
	return attachResultGrad(res, k, leaves, p.name, func(g *Tensor) {
		bin := append(append(append([]*Tensor(nil), ins...), g), saved...)
		var grads []*Tensor
		NoGrad(func() { grads = runProgram(p.bwd, p.bwdSources, bin) })
		stats.PartitionedBackwards.Add(1)
		applyGrads(p.grads, grads, ins)
	})
}

// runProgram runs prog on in and returns its outputs as tensors.
func runProgram(prog Program, sources []resultSource, in []*Tensor) []*Tensor {
	if ap, ok := prog.(arrayProgram); ok {
		return tensorsFor(ap.runArrays(in, nil), sources, in)
	}
	return prog.Run(in)
}

// String describes the split: each half's graph and what the backward
// keeps from the forward.
func (p *partitioned) String() string {
	return fmt.Sprintf("forward:\n%s\nbackward:\n%s\nsaved: %d values, %d bytes; recomputed: %d",
		p.split.Forward, p.split.Backward, len(p.split.Saved), p.split.SavedBytes(), len(p.split.Recomputed))
}
