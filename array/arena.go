package array

import (
	"sync"

	"gocompile/fuse"
	"gocompile/ir"
)

// An Arena holds the reusable buffers of a compiled program's buffer plan
// (fuse.Plan) for one call at a time. Programs keep their arenas in a pool:
// a call takes one, writes its planned intermediates into it, and returns
// it when its outputs are computed. Intermediates never escape a call (the
// plan leaves out outputs and what they may alias), and GPU work is
// ordered on the device's stream, so the next call may reuse the memory
// while earlier kernels are still queued.
type Arena struct {
	slots []arenaSlot
}

type arenaSlot struct {
	dev   Device
	bytes int                // capacity of gpu
	gpu   *storage           // device memory
	cpu   map[DType]*storage // host memory, by element type
	elems map[DType]int
}

// ArenaPool keeps the arenas of one buffer plan.
type ArenaPool struct {
	Plan *fuse.Plan // the buffer plan; set before the first Get
	pool sync.Pool
}

// Get takes an arena for one call.
func (p *ArenaPool) Get() *Arena {
	if a, ok := p.pool.Get().(*Arena); ok {
		return a
	}
	return &Arena{slots: make([]arenaSlot, len(p.Plan.SlotBytes))}
}

// Put returns an arena whose call has computed its outputs.
func (p *ArenaPool) Put(a *Arena) { p.pool.Put(a) }

// Array is a contiguous array of the given type and shape in buffer slot,
// valid until the arena is reused.
func (a *Arena) Array(slot int, dev Device, dt DType, shape []int) *Array {
	s := &a.slots[slot]
	n := ir.Numel(shape)
	var st *storage
	if dev == CPU {
		if s.cpu == nil {
			s.cpu, s.elems = map[DType]*storage{}, map[DType]int{}
		}
		if st = s.cpu[dt]; st == nil || s.elems[dt] < n {
			st = newArray(dt, []int{n}).st
			s.cpu[dt], s.elems[dt] = st, n
		}
	} else {
		bytes := n * dt.Size()
		if st = s.gpu; st == nil || s.dev != dev || s.bytes < bytes {
			st = newGPUArray(dev, ir.Bool, []int{bytes}).st // raw bytes
			s.gpu, s.dev, s.bytes = st, dev, bytes
		}
	}
	shape = append([]int(nil), shape...)
	return &Array{st: st, shape: shape, strides: ir.ContiguousStrides(shape), dtype: dt}
}
