package tensor

import (
	"gocompile/array"
	"gocompile/ir"
)

// apply runs op: it records a node while a compiled function is traced,
// and otherwise runs the op's eager kernel on the operands' arrays. It is
// the one entry point every method goes through.
func apply(op *ir.Op, a ir.Attrs, args ...ir.Value) *Tensor {
	defer rethrow()
	mustArgs(op.Title, args)
	tr := tracerOf(args)                 // tracing a compiled function
	if tr == nil && op.Kind != ir.View { // views of concrete tensors stay views, bound by reference
		if w := writerOf(args); w != nil {
			return w.record(op, a, args) // reading a buffer a traced function writes
		}
		tr = tracingHere() // captured tensors only, in a traced function (tracing.go)
	}
	if tr != nil {
		if needsGrad(args) { // a traced run that records gradients: the joint graph
			return applyRecorded(op, a, args, tr.record)
		}
		return tr.record(op, a, args)
	}
	if needsGrad(args) {
		return applyRecorded(op, a, args, applyArrays)
	}
	return applyArrays(op, a, args)
}

// applyArrays runs op's kernel on args' arrays.
func applyArrays(op *ir.Op, a ir.Attrs, args []ir.Value) *Tensor {
	res := array.Apply(op, a, arrays(args)...)
	for _, v := range args {
		if t, ok := v.(*Tensor); ok && t.v == res {
			return t // the kernel returned its operand (Contiguous of a contiguous tensor)
		}
	}
	return wrap(res)
}

// val passes an optional tensor to an op: a nil *Tensor becomes a nil
// Value.
func val(t *Tensor) ir.Value {
	if t == nil {
		return nil
	}
	return t
}

func tensorsOf(args []ir.Value) []*Tensor {
	var ts []*Tensor
	for _, a := range args {
		if t, ok := a.(*Tensor); ok && t != nil {
			ts = append(ts, t)
		}
	}
	return ts
}
