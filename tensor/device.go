package tensor

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync/atomic"

	"gocompile/array"
	"gocompile/cuda"
)

// ParseDevice reads a device name: "cpu", "cuda" (GPU 0) or "cuda:N".
func ParseDevice(s string) (Device, error) {
	s = strings.TrimSpace(strings.ToLower(s))
	switch {
	case s == "cpu":
		return CPU, nil
	case s == "cuda" || s == "gpu":
		return CUDA(0), nil
	case strings.HasPrefix(s, "cuda:"):
		n, err := strconv.Atoi(s[len("cuda:"):])
		if err == nil && n >= 0 {
			return CUDA(n), nil
		}
	}
	return CPU, fmt.Errorf("unknown device %q: use cpu, cuda or cuda:N", s)
}

var defaultDevice atomic.Pointer[Device]

// DefaultDevice is where creation functions (FromSlice, Zeros, Randn …)
// put new tensors: the CPU unless the environment variable
// GOCOMPILE_DEVICE names another device or SetDefaultDevice was called.
func DefaultDevice() Device {
	if d := defaultDevice.Load(); d != nil {
		return *d
	}
	d := CPU
	if s := os.Getenv("GOCOMPILE_DEVICE"); s != "" {
		var err error
		if d, err = ParseDevice(s); err != nil {
			// Not err.Error(), which names the devices too: Fix does, once.
			panic(&Error{Op: "DefaultDevice", Reason: fmt.Sprintf("GOCOMPILE_DEVICE=%q names no device", s), Fix: "set it to cpu, cuda or cuda:N"})
		}
	}
	defaultDevice.CompareAndSwap(nil, &d)
	return *defaultDevice.Load()
}

// SetDefaultDevice changes where creation functions put new tensors.
func SetDefaultDevice(d Device) {
	defer rethrow()
	mustDevice("SetDefaultDevice", d)
	if d.Type == DeviceCUDA {
		array.MustGPU("SetDefaultDevice", d)
	}
	defaultDevice.Store(&d)
}

// onDefault moves a freshly created CPU tensor to the default device.
func onDefault(t *Tensor) *Tensor {
	if d := DefaultDevice(); d != CPU {
		return t.ToDevice(d)
	}
	return t
}

// ToDevice returns t on device d: t itself if it is already there, else a
// contiguous copy. Moving to the CPU waits for pending GPU work on t.
func (t *Tensor) ToDevice(d Device) *Tensor {
	defer rethrow()
	t.must("ToDevice")
	mustDevice("ToDevice", d)
	if t.v.Device() == d {
		return t
	}
	if t.px != nil {
		return t.materialize("ToDevice").ToDevice(d)
	}
	flushWrites(t, "ToDevice")
	return wrap(t.v.ToDevice(d))
}

// cpu returns t, or a copy of it on the CPU.
func (t *Tensor) cpu() *Tensor { return t.ToDevice(CPU) }

// Synchronize waits until every op queued on device d has finished (on the
// CPU it returns at once). Reading a tensor's values synchronizes by itself;
// this is for timing and for handing memory to other code.
func Synchronize(d Device) {
	defer rethrow()
	mustDevice("Synchronize", d)
	array.Synchronize(d)
}

// MemoryStats reports the caching allocator's statistics for GPU d: bytes
// held by tensors and reserved from the device, their peaks, and how often
// the device itself was asked for memory.
func MemoryStats(d Device) cuda.AllocatorStats {
	defer rethrow()
	return array.MemoryStats(d)
}

// ResetPeakMemoryStats sets GPU d's peak statistics (PeakAllocated,
// PeakReserved) to the memory held now, after collecting the memory of
// unreachable tensors, so that the peaks measure the work that follows.
func ResetPeakMemoryStats(d Device) {
	defer rethrow()
	array.ResetPeakMemoryStats(d)
}

// EmptyCache returns the cached, unused GPU memory of device d to the
// driver, after collecting the memory of unreachable tensors (tensors
// still alive keep theirs). On the CPU, which caches
// nothing, it does nothing, as Synchronize.
func EmptyCache(d Device) {
	defer rethrow()
	mustDevice("EmptyCache", d)
	array.EmptyCache(d)
}

// AllowTF32 lets float32 matrix products on GPUs use TensorFloat-32
// tensor cores: several times faster, with inputs rounded to 10-bit
// mantissas. Off by default, so results match the CPU's.
func AllowTF32(on bool) { array.AllowTF32(on) }

// UseDevice makes the device name names ("cpu", "cuda", "cuda:N"; "" for
// GOCOMPILE_DEVICE's choice, else the CPU) the default for new tensors,
// after checking that it can be used: a GPU needs its driver and NVRTC.
// The error says why not. Programs with a -device flag call it first.
func UseDevice(name string) error {
	return Try(func() {
		d := DefaultDevice()
		if name != "" {
			var err error
			if d, err = ParseDevice(name); err != nil {
				panic(&Error{Op: "UseDevice", Reason: fmt.Sprintf("unknown device %q", name), Fix: "use cpu, cuda or cuda:N"})
			}
		}
		SetDefaultDevice(d)
	})
}
