package array

import (
	"errors"

	"gocompile/ir"
)

// Misuse panics with an *ir.Error naming the op, the operands' shapes and
// the fix, as package tensor documents; tensor.Try recovers it.

// Check panics with err if it is not nil, as an *ir.Error naming op and
// the operands' shapes (filled in where the rule that failed did not know
// them).
func Check(err error, op string, operands ...*Array) {
	if err == nil {
		return
	}
	var e *ir.Error
	if errors.As(err, &e) {
		if e.Shapes == nil {
			e.Shapes = shapesOf(operands)
		}
		if e.Op == "" {
			e.Op = op
		}
		panic(e)
	}
	panic(&ir.Error{Op: op, Shapes: shapesOf(operands), Reason: err.Error()})
}

func shapesOf(ts []*Array) [][]int {
	var s [][]int
	for _, t := range ts {
		if t != nil {
			s = append(s, append([]int(nil), t.shape...))
		}
	}
	return s
}

// Throw panics with an *ir.Error naming op, the operands' shapes, what
// is wrong (format, args) and the fix.
func Throw(op string, operands []*Array, fix, format string, args ...any) {
	panic(ir.Errorf(op, shapesOf(operands), fix, format, args...))
}
