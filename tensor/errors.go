package tensor

import (
	"errors"

	"gocompile/ir"
)

// Error reports a misuse of an op: the op, the shapes of its operands, what
// is wrong and how to fix it. Ops panic with an *Error, as slice indexing
// panics on a bad index: misuse is a programming error. A service that
// builds tensors from requests turns such panics into errors with Try.
type Error = ir.Error

// Try runs f and returns the *Error that an op panicked with, if any; it
// returns nil if f returns normally. Panics that are not an *Error (bugs,
// runtime errors) are not recovered. A service handles one bad request
// without dying:
//
//	err := tensor.Try(func() { y = model(x) })
//	if err != nil {
//		http.Error(w, err.Error(), http.StatusBadRequest)
//		return
//	}
func Try(f func()) (err error) {
	defer func() {
		if r := recover(); r != nil {
			var e *Error
			if re, ok := r.(error); ok && errors.As(re, &e) {
				err = e
				return
			}
			panic(r)
		}
	}()
	f()
	return nil
}

// check panics with err if it is not nil, filling in the op and shapes when
// the rule that failed did not know them.
func check(err error, op string, operands ...*Tensor) {
	if err == nil {
		return
	}
	var e *Error
	if errors.As(err, &e) {
		if e.Shapes == nil {
			e.Shapes = shapesOf(operands)
		}
		if e.Op == "" {
			e.Op = op
		}
		panic(e)
	}
	panic(&Error{Op: op, Shapes: shapesOf(operands), Reason: err.Error()})
}

func shapesOf(ts []*Tensor) [][]int {
	var s [][]int
	for _, t := range ts {
		if t != nil {
			s = append(s, t.Shape())
		}
	}
	return s
}

func throw(op string, operands []*Tensor, fix, format string, args ...any) {
	panic(ir.Errorf(op, shapesOf(operands), fix, format, args...))
}
