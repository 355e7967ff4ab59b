package tensor

import (
	"errors"

	"gocompile/ir"
)

// Error reports a misuse of an op. Ops panic with an *Error, as slice
// indexing panics on a bad index: misuse is a programming error. A service
// that builds tensors from requests turns such panics into errors with Try.
//
// Its message reads "Op on [shapes]: Reason; Fix", for example
//
//	Add on [2, 3] and [4]: shapes [2, 3] and [4] are not broadcastable; …
type Error struct {
	Op     string  // the op, as users call it: "Add", "MatMul", "LoadNPY" …
	Shapes [][]int // the operands' shapes, in argument order (nil when none apply)
	Reason string  // what is wrong
	Fix    string  // what to do instead
}

// Error formats the op, the shapes, the reason and the fix on one line.
func (e *Error) Error() string { return (*ir.Error)(e).Error() }

// errorf builds an *Error with a formatted reason.
func errorf(op string, shapes [][]int, fix, format string, args ...any) *Error {
	return (*Error)(ir.Errorf(op, shapes, fix, format, args...))
}

// asError returns err as an *Error when it is one, or is one of package
// ir's shape-rule errors (the same fields), and nil otherwise.
func asError(err error) *Error {
	var e *Error
	if errors.As(err, &e) {
		return e
	}
	var ie *ir.Error
	if errors.As(err, &ie) {
		return (*Error)(ie)
	}
	return nil
}

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
	if f == nil {
		return &Error{Op: "Try", Reason: "the function is nil", Fix: "pass the function to run"}
	}
	defer func() {
		if r := recover(); r != nil {
			if re, ok := r.(error); ok {
				if e := asError(re); e != nil {
					err = e
					return
				}
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
	if e := asError(err); e != nil {
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
	panic(errorf(op, shapesOf(operands), fix, format, args...))
}

// rethrow, deferred by the entry points that call package array, turns
// the *ir.Error an array kernel panics with into the *Error it is, so
// that every misuse panics with an *Error however the caller recovers
// (Try, or recover itself). Other panics go on as they were.
func rethrow() {
	if r := recover(); r != nil {
		// Also unwraps the error a compile shared by concurrent first calls
		// (singleflight) wraps a panic in.
		if re, ok := r.(error); ok {
			if e := asError(re); e != nil {
				panic(e)
			}
		}
		panic(r)
	}
}
