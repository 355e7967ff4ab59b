package array

import (
	"slices"
	"sync/atomic"

	"gocompile/cuda"
)

// LastPlan keeps the launch plan of one call site's last call (a compiled
// program's step, an eager op): a call whose key (the device, and what
// the plan depends on in its tensors, see AppendLayoutKey) equals the
// last one's takes its plan without planning. Safe for concurrent use; a
// call with another key replaces the plan. The zero value is empty.
type LastPlan[P any] struct{ last atomic.Pointer[keptPlan[P]] }

type keptPlan[P any] struct {
	g    *GPU
	key  []int
	plan P
}

// Get is the plan kept for g and key, unless stale reports that it no
// longer holds (nil: it always does); otherwise plan's, kept from now on.
// key may be a buffer the caller reuses: a kept key is a copy.
func (m *LastPlan[P]) Get(g *GPU, key []int, stale func(P) bool, plan func() P) P {
	if k := m.last.Load(); k != nil && k.g == g && slices.Equal(k.key, key) && (stale == nil || !stale(k.plan)) {
		return k.plan
	}
	p := plan()
	m.last.Store(&keptPlan[P]{g: g, key: slices.Clone(key), plan: p})
	return p
}

// LoadedKernel keeps a plan's kernel once loaded, so that later launches
// skip GPU.KernelIn's lookup by name. Safe for concurrent use.
type LoadedKernel struct{ fn atomic.Pointer[cuda.Function] }

// Get is the kernel name on g (built from gen when new), as KernelIn.
func (l *LoadedKernel) Get(g *GPU, c *Artifacts, name string, gen func() (string, error)) *cuda.Function {
	if fn := l.fn.Load(); fn != nil {
		return fn
	}
	fn := g.KernelIn(c, name, gen)
	l.fn.Store(fn)
	return fn
}

// For is the kernel name on g: the kept one where name is the plan's
// (planned), else (a tuned variant) KernelIn's.
func (l *LoadedKernel) For(g *GPU, c *Artifacts, planned, name string, gen func() (string, error)) *cuda.Function {
	if name == planned {
		return l.Get(g, c, name, gen)
	}
	return g.KernelIn(c, name, gen)
}
