package array

import (
	"fmt"
	"sync"
	"sync/atomic"
	"unsafe"

	"gocompile/cuda"
	"gocompile/ir"
)

// Index kernels check their indices on the device. Run plainly, the host
// waits for the kernel and reads the check back, so a bad index is an
// error from the op that met it. Captured into a CUDA graph, which may not
// wait for the device, each such kernel instead records into a slot of
// the device's fault log, kept for the graph's life, and the host reads
// the log whenever it next reads device memory (ToDevice to the CPU): a
// bad index met in a replay is an error there, naming the op, the index
// and the dim's size. The kernel skips the bad element, so it reads and
// writes nothing out of range.

// faultSlots is how many captured index kernels a device's fault log
// holds; a capture needing more fails and its program runs plainly.
const faultSlots = 4096

// faultLog is a device's fault log: faultSlots slots of two int64 (a flag
// and an offending index) in device memory, and what each slot checks.
type faultLog struct {
	once  sync.Once
	err   error
	block cuda.Block
	mu    sync.Mutex
	sites []faultSite // the slots in use, in order
	// armed is set by the replay of a graph with slots: only then does the
	// next read of device memory read the log.
	armed atomic.Bool
}

// used is how many slots are reserved.
func (f *faultLog) used() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.sites)
}

// faultSite is the op a slot's kernel runs for and the size of the dim it
// indexes.
type faultSite struct {
	op     string
	size   int
	shapes [][]int
}

// init allocates and zeroes the log, outside any capture.
func (f *faultLog) init(g *GPU) error {
	f.once.Do(func() {
		if f.block, f.err = g.allocBlock(faultSlots * 16); f.err != nil {
			return
		}
		if f.err = g.stream.Memset8(f.block.Ptr, 0, faultSlots*16); f.err == nil {
			f.err = g.stream.Synchronize()
		}
	})
	return f.err
}

// faultSlot reserves a slot of g's fault log for a captured index kernel
// of op over a dim of the given size, or reports false when the log is
// full or could not be made.
func (g *GPU) faultSlot(op string, size int, operands []*Array) (cuda.DevicePtr, bool) {
	f := &g.faults
	if f.block.Ptr == 0 { // made before the first capture (see BeginCapture's callers)
		return 0, false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.sites) == faultSlots {
		return 0, false
	}
	shapes := make([][]int, len(operands))
	for i, t := range operands {
		shapes[i] = t.shape
	}
	f.sites = append(f.sites, faultSite{op: op, size: size, shapes: shapes})
	return f.block.Ptr + cuda.DevicePtr(16*(len(f.sites)-1)), true
}

// checkFaults reads g's fault log, after the stream has been
// synchronized, when a graph that checks indices there has been replayed
// since the last check, and panics with an *ir.Error for the first bad index a
// captured kernel met (clearing the log).
func (g *GPU) checkFaults() {
	f := &g.faults
	if !f.armed.Swap(false) {
		return // no replay since the last check could have met a bad index
	}
	n := f.used()
	flags := make([]int64, 2*n)
	Check(g.stream.CopyDtoH(unsafe.Pointer(&flags[0]), f.block.Ptr, 16*n), "ToDevice")
	Check(g.stream.Synchronize(), "ToDevice")
	for i := range n {
		if flags[2*i] == 0 {
			continue
		}
		Check(g.stream.Memset8(f.block.Ptr, 0, 16*n), "ToDevice")
		Check(g.stream.Synchronize(), "ToDevice")
		f.mu.Lock()
		s := f.sites[i]
		f.mu.Unlock()
		panic(&ir.Error{Op: s.op, Shapes: s.shapes, Fix: "indices must lie in [-size, size)",
			Reason: fmt.Sprintf("index %d is out of range for a dim of size %d (met in a CUDA graph replay; found when device memory was next read)",
				flags[2*i+1], s.size)})
	}
}

// indexCheck is where an index kernel records a bad index: a slot of the
// fault log while the stream is captured (deferred, and true), else a
// fresh pair zeroed on the stream, which the caller reads back after the
// kernel (not deferred).
func (g *GPU) indexCheck(op string, size int, operands []*Array) (ptr cuda.DevicePtr, deferred bool, bad *Array) {
	if g.stream.CapturingHere() {
		if p, ok := g.faultSlot(op, size, operands); ok {
			return p, true, nil
		}
	}
	dev := operands[0].st.dev
	bad = newGPUArray(dev, ir.Int64, []int{2})
	Check(g.stream.Memset8(bad.DevicePtr(), 0, 16), op, operands...)
	return bad.DevicePtr(), false, bad
}

// readIndexCheck waits for the kernel that wrote bad and panics with an
// *ir.Error if it met an index out of range for a dim of size.
func (g *GPU) readIndexCheck(op string, size int, bad *Array, operands []*Array) {
	var flag [2]int64
	Check(g.stream.CopyDtoH(unsafe.Pointer(&flag[0]), bad.DevicePtr(), 16), op, operands...)
	Check(g.stream.Synchronize(), op, operands...)
	if flag[0] != 0 {
		Throw(op, operands, "indices must lie in [-size, size)",
			"index %d is out of range for a dim of size %d", flag[1], size)
	}
}
