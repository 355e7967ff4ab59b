package array

import (
	"fmt"

	"runtime"
	"sync"
	"sync/atomic"

	"gocompile/cuda"
	"gocompile/ir"
)

// GPU is the runtime state of one CUDA device: its stream (every eager op
// on the device runs on it, in order), allocator, cuBLAS handle and the
// kernels compiled for it.
type GPU struct {
	dev    *cuda.Device
	stream *cuda.Stream
	// captured, while a program is captured into a CUDA graph, collects the
	// memory the capturing goroutine allocates: the graph owns it.
	captured atomic.Pointer[[]*storage]
	split    splitScratch // split kernels' workspace (workspace.go)
	// generated holds the CUfunction of every kernel loaded by KernelIn:
	// a captured graph's nodes may only be these, whose parameters are
	// known to be flat (library kernels may pass pointers inside structs).
	generated sync.Map
	alloc     *cuda.Allocator
	heap      *deviceHeap // paces collections by the device memory tensors hold
	kernels   sync.Map    // kernel name → *kernelEntry
	args      sync.Pool
	faults    faultLog // bad indices met by captured kernels (faults.go)
}

type kernelEntry struct {
	once sync.Once
	fn   *cuda.Function
	err  error
}

var gpus sync.Map // ordinal → *gpuInit

type gpuInit struct {
	once sync.Once
	g    *GPU
	err  error
}

// gpuFor returns the runtime of device d, starting it on first use.
func gpuFor(d Device) (*GPU, error) {
	v, _ := gpus.LoadOrStore(d.Index, &gpuInit{})
	gi := v.(*gpuInit)
	gi.once.Do(func() {
		if ok, err := cuda.Available(); !ok {
			gi.err = err
			return
		}
		dev, err := cuda.GetDevice(d.Index)
		if err != nil {
			gi.err = err
			return
		}
		s, err := dev.NewStream()
		if err != nil {
			gi.err = err
			return
		}
		gi.g = &GPU{dev: dev, stream: s, alloc: dev.Allocator()}
		gi.g.heap = newDeviceHeap(gi.g.alloc, heapFloor(dev))
		gi.g.args.New = func() any { return new(cuda.Args) }
		// Creating the cuBLAS handle takes tens of milliseconds: start it
		// now, in the background, so it does not fall on the first matrix
		// product (a service's first request). A failure is reported by
		// the first product that needs it.
		go dev.BLAS()
	})
	return gi.g, gi.err
}

// MustGPU returns the runtime of d or panics with an *ir.Error saying why the
// GPU cannot be used.
func MustGPU(op string, d Device) *GPU {
	if d.Type != ir.DeviceCUDA || d.Index < 0 {
		Throw(op, nil, "use tensor.CUDA(i) with i >= 0", "%v is not a GPU", d)
	}
	g, err := gpuFor(d)
	if err != nil {
		panic(&ir.Error{Op: op, Reason: fmt.Sprintf("device %v is not usable: %v", d, err),
			Fix: "run on a machine with an NVIDIA GPU and driver, or use tensor.CPU"})
	}
	return g
}

// ToDevice returns t on device d: t itself if it is already there, else a
// contiguous copy. Moving to the CPU waits for pending GPU work on t.
func (t *Array) ToDevice(d Device) *Array {
	if t.st.dev == d {
		return t
	}
	switch {
	case t.st.dev == CPU: // host to device
		MustGPU("ToDevice", d) // name this op if the GPU is not usable
		c := Contiguous(t)
		out := newGPUArray(d, t.dtype, t.shape)
		if n := out.Numel() * t.dtype.Size(); n > 0 {
			g := out.st.gpu.g
			Check(g.stream.CopyHtoD(out.st.gpu.ptr(), hostPointer(c), n), "ToDevice", t)
			Check(g.stream.Synchronize(), "ToDevice", t)
			runtime.KeepAlive(c) // the copy read c's memory through a raw pointer
		}
		return out
	case d == CPU: // device to host
		c := Contiguous(t)
		out := newArray(t.dtype, t.shape)
		if n := out.Numel() * t.dtype.Size(); n > 0 {
			g := c.st.gpu.g
			Check(g.stream.CopyDtoH(hostPointer(out), c.DevicePtr(), n), "ToDevice", t)
			Check(g.stream.Synchronize(), "ToDevice", t)
			g.checkFaults()
		}
		return out
	}
	return t.ToDevice(CPU).ToDevice(d) // between GPUs, through the host
}

// cpu returns t, or a copy of it on the CPU.
func (t *Array) cpu() *Array {
	if t.st.dev == CPU {
		return t
	}
	return t.ToDevice(CPU)
}

// DevicePtr is the address of t's first element on its GPU.
func (t *Array) DevicePtr() cuda.DevicePtr {
	return t.st.gpu.ptr() + cuda.DevicePtr(t.offset*t.dtype.Size())
}

// Synchronize waits until every op queued on device d has finished (on the
// CPU it returns at once). Reading a tensor's values synchronizes by itself;
// this is for timing and for handing memory to other code.
func Synchronize(d Device) {
	if d == CPU {
		return
	}
	g := MustGPU("Synchronize", d)
	Check(g.stream.Synchronize(), "Synchronize")
}

// MemoryStats reports the caching allocator's statistics for GPU d: bytes
// held by tensors and reserved from the device, their peaks, and how often
// the device itself was asked for memory.
func MemoryStats(d Device) cuda.AllocatorStats {
	return MustGPU("MemoryStats", d).alloc.Stats()
}

// ResetPeakMemoryStats sets GPU d's peak statistics to the memory held
// now, after collecting the memory of tensors no longer reachable, so
// that the peaks measure what follows.
func ResetPeakMemoryStats(d Device) {
	g := MustGPU("ResetPeakMemoryStats", d)
	g.heap.collect()
	g.alloc.ResetPeakStats()
}

// EmptyCache returns the cached, unused GPU memory of device d to the
// driver, after collecting the memory of tensors no longer reachable
// (tensors still alive keep theirs). On the CPU, which caches
// nothing, it does nothing, as Synchronize.
func EmptyCache(d Device) {
	if d == CPU {
		return
	}
	g := MustGPU("EmptyCache", d)
	g.heap.collect() // unreachable tensors hold memory too
	Check(g.alloc.EmptyCache(), "EmptyCache")
}

// AllowTF32 lets float32 matrix products on GPUs use TensorFloat-32
// tensor cores: several times faster, with inputs rounded to 10-bit
// mantissas. Off by default, so results match the CPU's.
func AllowTF32(on bool) {
	gpus.Range(func(_, v any) bool {
		if g := v.(*gpuInit).g; g != nil {
			if b, err := g.dev.BLAS(); err == nil {
				b.AllowTF32(on)
			}
		}
		return true
	})
	allowTF32.Store(on)
}

var allowTF32 atomic.Bool

// Stream is the device's stream: every kernel on the device runs on it, in
// order.
func (g *GPU) Stream() *cuda.Stream { return g.stream }

// Dev is the driver's device.
func (g *GPU) Dev() *cuda.Device { return g.dev }

// GPU is the runtime of the GPU holding t's storage, or nil on the CPU.
func (t *Array) GPU() *GPU {
	if t.st.gpu == nil {
		return nil
	}
	return t.st.gpu.g
}

// Kernels lists the names of the generated kernels loaded on g.
func (g *GPU) Kernels() []string {
	var names []string
	g.kernels.Range(func(k, _ any) bool {
		names = append(names, k.(string))
		return true
	})
	return names
}
