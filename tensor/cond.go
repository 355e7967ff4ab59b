package tensor

import "gocompile/ir"

// Cond returns then(args...) where pred is true and els(args...) where it
// is false, as torch.cond: pred is a one-element Bool tensor, and both
// branches must return tensors of the same shape and dtype.
//
// Run eagerly it reads pred and calls one branch. Inside a compiled
// function it records both branches and selects with Where, so a
// data-dependent branch costs no graph break (and both branches run: keep
// them free of side effects).
func Cond(pred *Tensor, then, els func(args ...*Tensor) *Tensor, args ...*Tensor) *Tensor {
	pred.must("Cond")
	if then == nil || els == nil {
		throw("Cond", []*Tensor{pred}, "pass both branches as functions", "a branch is a nil func")
	}
	if pred.Numel() != 1 || pred.dtype() != Bool {
		throw("Cond", []*Tensor{pred}, "pass a one-element Bool tensor, e.g. x.Sum().GtScalar(0)",
			"the predicate must be a one-element Bool tensor, not %v with %d elements", pred.dtype(), pred.Numel())
	}
	tracing := pred.px != nil || tracingHere() != nil // a captured predicate is read on every call too
	for _, a := range args {
		tracing = tracing || (a != nil && a.px != nil)
	}
	if !tracing {
		if pred.Item() != 0 {
			return then(args...)
		}
		return els(args...)
	}
	t, e := then(args...), els(args...)
	mustOperands("Cond", t, e) // what the branches returned
	if t.dtype() != e.dtype() || !ir.SameShape(t.shape(), e.shape()) {
		throw("Cond", []*Tensor{t, e}, "make both branches return the same shape and dtype",
			"the branches return %v%v and %v%v", t.dtype(), t.shape(), e.dtype(), e.shape())
	}
	return Where(pred.Reshape(), t, e)
}
