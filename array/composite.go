package array

import (
	"sync/atomic"

	"gocompile/ir"
)

// CompositeRunner runs a composite op (ir.Composite) on arrays some
// faster way than its decomposition op by op: as one generated kernel, say.
// It reports false, having done nothing, when it does not apply (an
// unsupported op, device or layout, or arguments the decomposition would
// reject); the decomposition then runs and reports misuse as it always
// does. The runner is given the arguments Apply was given, whose devices
// are already checked.
type CompositeRunner func(op *ir.Op, a ir.Attrs, args []ir.Value) (*Array, bool)

var compositeRunner atomic.Pointer[CompositeRunner]

// SetCompositeRunner installs f as the way eager composite ops run before
// their decomposition is tried (nil: always the decomposition). Package
// inductor/program installs one that runs row-shaped composites (Softmax,
// LayerNorm, …) on a GPU as one kernel; array cannot import it.
func SetCompositeRunner(f CompositeRunner) {
	if f == nil {
		compositeRunner.Store(nil)
		return
	}
	compositeRunner.Store(&f)
}

// composite runs a composite op: through the installed runner when it
// applies, else through its decomposition with the eager kernels.
func composite(op *ir.Op, a ir.Attrs, args []ir.Value) *Array {
	if f := compositeRunner.Load(); f != nil {
		if res, ok := (*f)(op, a, args); ok {
			return res
		}
	}
	v, err := op.Decompose(eager{}, a, args...)
	Check(err, op.Title, tensorsOf(args)...)
	return v.(*Array)
}
