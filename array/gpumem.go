package array

import (
	"runtime"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"weak"

	"gocompile/cuda"
	"gocompile/ir"
)

// gpuBuffer is device memory owned by a storage; it goes back to the
// caching allocator when the storage is found unreachable, by a sweep or
// a collection of the device heap (deviceHeap).
type gpuBuffer struct {
	g     *GPU
	block cuda.Block
	freed atomic.Bool
}

func (b *gpuBuffer) ptr() cuda.DevicePtr { return b.block.Ptr }

// newGPUArray allocates an uninitialised contiguous array on device d.
func newGPUArray(d Device, dt DType, shape []int) *Array {
	g := MustGPU("alloc", d)
	shape = append([]int(nil), shape...)
	blk, err := g.allocBlock(ir.Numel(shape) * dt.Size())
	if err != nil {
		panic(&ir.Error{Op: "alloc", Shapes: [][]int{shape}, Reason: err.Error(),
			Fix: "free tensors you no longer need (drop references), or use smaller batches"})
	}
	buf := &gpuBuffer{g: g, block: blk}
	st := &storage{dev: d, gpu: buf}
	g.heap.track(st, buf)
	if k := g.captured.Load(); k != nil && g.stream.CapturingHere() {
		*k = append(*k, st)
	}
	return &Array{st: st, shape: shape, strides: ir.ContiguousStrides(shape), dtype: dt}
}

// allocBlock takes n bytes on g's stream. Device memory held by
// unreachable tensors is invisible to Go's collector, which paces itself
// by the host heap alone: a loop dropping a large result per call would
// grow the device cache by one result per call until the next collection.
// So before the cache grows, and when the device is out of memory, the
// device heap is collected when due.
func (g *GPU) allocBlock(n int) (cuda.Block, error) {
	sid := g.stream.ID()
	blk, ok, err := g.alloc.AllocCached(n, sid)
	if ok || err != nil {
		return blk, err
	}
	if g.heap.sweep() {
		if blk, ok, err = g.alloc.AllocCached(n, sid); ok || err != nil {
			return blk, err
		}
	}
	if g.heap.due() {
		g.heap.collect()
		if blk, ok, err = g.alloc.AllocCached(n, sid); ok || err != nil {
			return blk, err
		}
	}
	blk, err = g.alloc.Alloc(n, sid)
	if err != nil && cuda.IsOutOfMemory(err) {
		g.heap.collect()
		blk, err = g.alloc.Alloc(n, sid)
	}
	return blk, err
}

// deviceHeap frees the device memory of unreachable storages, which it
// holds weak pointers to: after a Go collection has cleared theirs, a
// sweep (run when the allocator's cache cannot serve a request) or a
// collection of its own frees their blocks. It paces forced collections
// the way GOGC paces the host heap: one is due when the bytes allocated
// have grown past the bytes live after the last collection by as much
// again, or by the floor, whichever is more.
//
// A weak pointer alone, not also a cleanup, keeps a tensor's allocation
// cheap: each costs about a microsecond, which a small compiled call on a
// GPU paid twice per output. Cleanups would free blocks no sooner than a
// sweep: both wait for a Go collection, and a sweep runs before the cache
// grows.
type deviceHeap struct {
	allocated func() int64     // bytes in blocks handed out and not freed
	free      func(cuda.Block) // returns a block to the allocator
	floor     int64

	mu   sync.Mutex // guards live
	live map[*gpuBuffer]weak.Pointer[storage]

	swept      atomic.Int64 // Go collections completed at the last sweep
	collecting sync.Mutex   // one collection at a time
	gen        atomic.Int64 // collections done
	liveAfter  atomic.Int64 // allocated() after the last collection
}

func newDeviceHeap(a *cuda.Allocator, floor int64) *deviceHeap {
	return &deviceHeap{
		allocated: func() int64 { return a.Stats().Allocated },
		free:      a.Free,
		floor:     floor,
		live:      make(map[*gpuBuffer]weak.Pointer[storage]),
	}
}

// heapFloor is the growth of the device heap that never forces a
// collection: a sixteenth of the device's memory, or 1 GiB where the
// device does not say.
func heapFloor(dev *cuda.Device) int64 {
	if _, total, err := dev.MemInfo(); err == nil && total > 0 {
		return int64(total / 16)
	}
	return 1 << 30
}

// track frees buf once st is found unreachable.
func (h *deviceHeap) track(st *storage, buf *gpuBuffer) {
	w := weak.Make(st)
	h.mu.Lock()
	h.live[buf] = w
	h.mu.Unlock()
}

// sweep frees the blocks of storages a Go collection has found
// unreachable since the last sweep, and reports whether a collection had
// run (and so whether blocks may have been freed).
func (h *deviceHeap) sweep() bool {
	n := gcCycles()
	if last := h.swept.Load(); n == last || !h.swept.CompareAndSwap(last, n) {
		return false
	}
	h.freeDead()
	return true
}

// freeDead frees the blocks of storages whose weak pointers are cleared.
func (h *deviceHeap) freeDead() {
	var dead []*gpuBuffer
	h.mu.Lock()
	for b, w := range h.live {
		if w.Value() == nil {
			dead = append(dead, b)
			delete(h.live, b)
		}
	}
	h.mu.Unlock()
	for _, b := range dead {
		h.release(b)
	}
}

// gcCycles is the number of Go collections completed.
func gcCycles() int64 {
	s := [1]metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s[:])
	return int64(s[0].Value.Uint64())
}

// release returns b's memory to the allocator, once. Work queued on the
// stream may still use it: reuse is ordered on the same stream, so that
// is safe.
func (h *deviceHeap) release(b *gpuBuffer) {
	if b.freed.CompareAndSwap(false, true) {
		h.free(b.block)
	}
}

// due reports whether the bytes allocated have grown enough since the
// last collection to force one.
func (h *deviceHeap) due() bool {
	live := h.liveAfter.Load()
	return h.allocated()-live >= max(live, h.floor)
}

// collect runs a Go collection and frees the memory of every storage it
// found unreachable. Callers that queued behind another collection take
// its result instead of running their own.
func (h *deviceHeap) collect() {
	gen := h.gen.Load()
	h.collecting.Lock()
	defer h.collecting.Unlock()
	if h.gen.Load() != gen {
		return
	}
	runtime.GC()
	h.swept.Store(gcCycles())
	h.freeDead()
	h.liveAfter.Store(h.allocated())
	h.gen.Add(1)
}
