package tensor

// Conditions on Go values. A traced function's ops are recorded into a
// graph that later calls replay without running the function's Go code, so
// a Go value the function computes with (an optimizer's learning rate, a
// flag) is fixed in the graph as it was while tracing. Guard lets the code
// that reads such a value say so: the compiled graph then serves a call
// only while the condition holds, and is traced again when it does not,
// as torch.compile's guards on Python values.

// guardCheck is one Guard condition of a compiled entry.
type guardCheck struct {
	what  string
	holds func() bool
}

// Guard, called by code that Compile is tracing, makes the compiled graph
// serve later calls only while holds reports true; on a call where it
// reports false the function is traced and compiled again, which counts
// towards the recompile limit (past it, the function runs eagerly). what
// names the value, for GOCOMPILE_LOGS=recompiles. Outside tracing, Guard
// does nothing.
//
// A library whose traced code reads a Go value that may change between
// calls guards it, as package optim does for an optimizer's learning
// rate and betas:
//
//	lr := o.LR
//	tensor.Guard("AdamW.LR", func() bool { return o.LR == lr })
//
// Values that change on every call belong in tensors instead (an
// optimizer's step count), which the graph reads when it runs.
func Guard(what string, holds func() bool) {
	if tr := tracingHere(); tr != nil {
		tr.checks = append(tr.checks, guardCheck{what, holds})
	}
}

// Compiling reports whether the calling goroutine runs a function that
// Compile is tracing (as torch.compiler.is_compiling): its ops are being
// recorded into a graph that later calls replay without running its Go
// code, so state it keeps in Go values (a counter, a flag) must live in
// tensors instead.
func Compiling() bool { return tracingHere() != nil }

// valid reports whether every Guard condition of e holds.
func (e *entry) valid() bool {
	for _, c := range e.checks {
		if !c.holds() {
			return false
		}
	}
	return true
}

// validFor reports whether e serves the call fa beyond its guards: its
// Guard conditions hold and its leaves are the same (sameLeaves).
func (e *entry) validFor(fa *flatArgs) bool {
	return e.valid() && e.sameLeaves(fa.tensors[:fa.nargs])
}

// failed says why e does not serve the call fa (validFor is false).
func (e *entry) failed(fa *flatArgs) string {
	for _, c := range e.checks {
		if !c.holds() {
			return "guarded value changed: " + c.what
		}
	}
	if !e.sameLeaves(fa.tensors[:fa.nargs]) {
		return "the arguments are other leaves than the traced call's (one of them was, or was not, a captured tensor or another argument)"
	}
	return ""
}
