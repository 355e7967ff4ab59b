package tensor

import (
	"math"
	"sync/atomic"
)

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
func (e *entry) valid() bool { return checksHold(e.checks) }

// checksHold reports whether every one of checks holds.
func checksHold(checks []guardCheck) bool {
	for _, c := range checks {
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

// scalarSource is a Go value a compiled function reads on every call
// (ScalarFunc), as a 0-d tensor of type dt on device dev, named key.
type scalarSource struct {
	key  string
	read func() float64
	dt   DType
	dev  Device
	// last is the latest value and its tensor, reused while the value
	// stays (no copy to the device); graphs only read their inputs.
	last *atomic.Pointer[scalarValue]
}

type scalarValue struct {
	v float64
	t *Tensor
}

// same reports whether s and o are one input: the same name, type and
// device.
func (s scalarSource) same(o scalarSource) bool {
	return s.key == o.key && s.dt == o.dt && s.dev == o.dev
}

// value is the source's value now, as a tensor.
func (s scalarSource) value() *Tensor {
	v := s.read()
	if l := s.last.Load(); l != nil && math.Float64bits(l.v) == math.Float64bits(v) {
		return l.t
	}
	t := scalarOn(v, s.dt, s.dev)
	s.last.Store(&scalarValue{v, t})
	return t
}

// ScalarFunc returns read()'s value as a 0-d tensor of type dt on device
// dev. Outside tracing that is all it does. In a function Compile traces,
// it is an input of the graph that every call binds to read()'s value
// then, so a Go value that changes between calls (a scheduled learning
// rate, a temperature) reaches the compiled graph without recompiling it;
// tensor.Guard instead compiles again for each new value, and a plain
// Scalar keeps the value it had while tracing.
//
// key names the value within the compiled function: calls with the same
// key, type and device read one input, bound with the read function of the
// first of them, so a key must name one value (an optimizer's learning
// rate: its name and address).
func ScalarFunc(key string, read func() float64, dt DType, dev Device) *Tensor {
	defer rethrow()
	mustDevice("ScalarFunc", dev)
	tr := tracingHere()
	if tr == nil {
		return scalarOn(read(), dt, dev)
	}
	src := scalarSource{key, read, dt, dev, &atomic.Pointer[scalarValue]{}}
	for i, s := range tr.scalarSrcs {
		if s.same(src) {
			return tr.scalarIns[i]
		}
	}
	// Past a graph break the function runs live on every call: the value
	// is read now. Else it becomes a scalar source of the function.
	if tr.compiling && tr.c != nil && len(tr.breaks) == 0 {
		tr.c.addScalar(src)
		panic(errNewInput)
	}
	return scalarOn(read(), dt, dev)
}

// addScalar makes src a scalar source of c (unless another trace made it
// one meanwhile).
func (c *compiled) addScalar(src scalarSource) {
	c.heldMu.Lock()
	defer c.heldMu.Unlock()
	appendNew(&c.scalars, src, src.same)
}

// scalarSources are the function's ScalarFunc inputs.
func (c *compiled) scalarSources() []scalarSource {
	if p := c.scalars.Load(); p != nil {
		return *p
	}
	return nil
}
