package tensor

import (
	"gocompile/array"
	"gocompile/ir"
)

// Checks shared by the entry points that read a tensor's fields directly
// rather than through apply, which checks its operands itself.

const fixTensor = "pass a tensor made by this package (Zeros, FromSlice, an op's result …)"

// must panics with an *Error naming op unless t is a tensor: a nil *Tensor
// or a zero Tensor{} (which has no storage) is not.
func (t *Tensor) must(op string) {
	if t == nil {
		throw(op, nil, fixTensor, "the tensor is a nil *Tensor")
	}
	if t.v == nil {
		throw(op, nil, fixTensor, "the tensor is a zero Tensor{}, which has no storage")
	}
}

// mustOperands is must for the operands of op, named by position.
func mustOperands(op string, ts ...*Tensor) {
	for i, t := range ts {
		mustOperand(op, i, t)
	}
}

// mustArgs is mustOperands for an op's arguments: its tensors, among
// scalars.
func mustArgs(op string, args []ir.Value) {
	for i, v := range args {
		if t, ok := v.(*Tensor); ok {
			mustOperand(op, i, t)
		}
	}
}

func mustOperand(op string, i int, t *Tensor) {
	switch {
	case t == nil:
		throw(op, nil, fixTensor, "operand %d is a nil *Tensor", i)
	case t.v == nil:
		throw(op, nil, fixTensor, "operand %d is a zero Tensor{}, which has no storage", i)
	}
}

// mustDevice panics with an *Error naming op unless d names a device.
func mustDevice(op string, d Device) {
	if !d.Valid() {
		throw(op, nil, "use tensor.CPU or tensor.CUDA(i) with i >= 0", "%v is not a device", d)
	}
}

// checkShape panics with an *Error naming op unless dt is a dtype and
// shape can be allocated: no negative size, at most ir.MaxNumel elements,
// no more bytes than the machine has.
func checkShape(op string, dt DType, shape []int) {
	if !dt.Valid() {
		throw(op, nil, "use one of the DType constants", "invalid dtype %v", dt)
	}
	check(array.AllocError(op, dt, shape), op)
}

// checkCreate is checkShape for creation functions that compute their
// values as float64 first: those must fit in memory too.
func checkCreate(op string, dt DType, shape []int) {
	checkShape(op, dt, shape)
	check(array.AllocError(op, Float64, shape), op)
}
