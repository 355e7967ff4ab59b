package array

import (
	"sync"

	"gocompile/cuda"
	"gocompile/ir"
)

// splitScratch is a device's workspace for kernels split across blocks
// (GEMMs split along k, attention split along the keys): partial sums and
// counters of finished blocks (zero between launches). Launches on the
// device's one stream run in order, so they share it; a grown workspace
// replaces the old one, which is kept, as graphs captured earlier still
// use it.
type splitScratch struct {
	mu       sync.Mutex
	partials *Array
	counters *Array
	old      []*Array
}

// SplitWorkspace returns a workspace of at least partials float32s and
// counters zeroed counters for op's split kernel. Growing allocates and
// zeroes outside the lock (zeroing passes the stream's capture gate, which
// a capturing goroutine may hold while it waits for the lock), and never
// while capturing: the zeroing would only be recorded, so that capture
// fails instead.
func (g *GPU) SplitWorkspace(op string, partials, counters int) (cuda.DevicePtr, cuda.DevicePtr) {
	s := &g.split
	for {
		s.mu.Lock()
		if s.partials != nil && s.partials.Numel() >= partials && s.counters != nil && s.counters.Numel() >= counters {
			p, c := s.partials.DevicePtr(), s.counters.DevicePtr()
			s.mu.Unlock()
			return p, c
		}
		np, nc := max(partials, 1<<16), max(counters, 1<<12)
		if s.partials != nil {
			np = max(np, s.partials.Numel())
		}
		if s.counters != nil {
			nc = max(nc, s.counters.Numel())
		}
		s.mu.Unlock()
		if g.stream.CapturingHere() {
			panic(&ir.Error{Op: op, Reason: "the split-kernel workspace must grow while a CUDA graph is captured",
				Fix: "none needed: this input layout runs with plain launches"})
		}
		dev := ir.CUDA(g.dev.Ordinal)
		pt, ct := newGPUArray(dev, ir.Float32, []int{np}), newGPUArray(dev, ir.Int32, []int{nc})
		Check(g.stream.Memset8(ct.DevicePtr(), 0, nc*4), op)
		s.mu.Lock()
		if s.partials == nil || s.partials.Numel() < np {
			if s.partials != nil {
				s.old = append(s.old, s.partials)
			}
			s.partials = pt
		}
		if s.counters == nil || s.counters.Numel() < nc {
			if s.counters != nil {
				s.old = append(s.old, s.counters)
			}
			s.counters = ct
		}
		s.mu.Unlock()
	}
}
