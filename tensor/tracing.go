package tensor

import (
	"sync"
	"sync/atomic"
)

// A function being traced may compute from tensors it captured (weights,
// caches) rather than from its arguments: w.Mul(w), pos.AddScalar(1).
// Such ops are recorded too, as graph ops reading the captured tensors by
// reference, so that every call sees their current values; run once while
// tracing, they would give later calls a stale copy, and a write of one
// into a captured tensor would happen on the first call only. tracing
// maps each goroutine running a traced function to its tracer: ops whose
// operands are all concrete tensors find it there.
var tracing struct {
	m sync.Map // goroutine id -> *tracer
	n atomic.Int32
}

// enter makes tr the calling goroutine's tracer until the returned
// function is called (restoring the tracer it replaced, for a compiled
// function traced inside another).
func (tr *tracer) enter() (leave func()) {
	id := goroutineID()
	prev, had := tracing.m.Swap(id, tr)
	tracing.n.Add(1)
	return func() {
		if had {
			tracing.m.Store(id, prev)
		} else {
			tracing.m.Delete(id)
		}
		tracing.n.Add(-1)
	}
}

// tracingHere is the tracer of the function the calling goroutine is
// tracing, or nil. It costs one atomic load while no function is traced.
func tracingHere() *tracer {
	if tracing.n.Load() == 0 {
		return nil
	}
	if v, ok := tracing.m.Load(goroutineID()); ok {
		return v.(*tracer)
	}
	return nil
}

// suspendTracing ends the calling goroutine's tracing until the returned
// function is called: ops then compute, as they must when a traced
// function's finished segment runs (a backend may apply tensor ops).
func suspendTracing() (resume func()) {
	if tracing.n.Load() == 0 {
		return func() {}
	}
	id := goroutineID()
	prev, had := tracing.m.LoadAndDelete(id)
	if !had {
		return func() {}
	}
	tracing.n.Add(-1)
	return func() {
		tracing.m.Store(id, prev)
		tracing.n.Add(1)
	}
}
