package tensor

import (
	"errors"
	"runtime"
	"runtime/metrics"
	"slices"
	"strings"
	"testing"
	"time"

	"gocompile/array"
	"gocompile/cuda"
)

// requireGPU skips a test, saying why, when no usable CUDA GPU is present.
func requireGPU(t testing.TB) {
	t.Helper()
	if ok, err := cuda.Available(); !ok {
		t.Skipf("no usable GPU: %v", err)
	}
}

// deviceMemory is the total memory of GPU dev, in bytes.
func deviceMemory(t *testing.T, dev Device) uint64 {
	t.Helper()
	_, total, err := array.MustGPU("test", dev).Dev().MemInfo()
	if err != nil {
		t.Fatal(err)
	}
	return total
}

// A steady loop of ops reuses cached device memory: after the first
// iteration the allocator asks the device for nothing.
func TestGPUAllocatorSteadyState(t *testing.T) {
	requireGPU(t)
	dev := CUDA(0)
	x := Randn(1, Float32, 64, 512).ToDevice(dev)
	w := Randn(2, Float32, 256, 512).ToDevice(dev)
	step := func() {
		y := x.Linear(w, nil).GELU().Softmax(-1).Sum(0)
		y.Float32s()
	}
	step()
	runtime.GC() // return the first iteration's garbage to the cache
	Synchronize(dev)
	time.Sleep(10 * time.Millisecond)
	before := MemoryStats(dev)
	for range 20 {
		step()
		runtime.GC()
	}
	after := MemoryStats(dev)
	if after.NumMallocs != before.NumMallocs {
		t.Errorf("steady loop made %d new device allocations", after.NumMallocs-before.NumMallocs)
	}
	if after.NumAllocs <= before.NumAllocs || after.NumCacheHits <= before.NumCacheHits {
		t.Errorf("stats did not count the loop's allocations: %+v -> %+v", before, after)
	}
	if after.Allocated > after.Reserved || after.PeakAllocated < after.Allocated {
		t.Errorf("inconsistent stats: %+v", after)
	}
}

// A loop that drops a large result per call, with no Go collection of its
// own, holds the device cache to about its live bytes plus the floor (a
// sixteenth of the device) instead of growing by one result per call until
// the host heap happens to be collected.
func TestGPUDroppedResultsAreCollected(t *testing.T) {
	requireGPU(t)
	dev := CUDA(0)
	total := deviceMemory(t, dev)
	const n = 16 << 20 // float32s: 64 MiB per result
	x := Zeros(Float32, n).ToDevice(dev)
	calls := int(total/16)/(4*n)*4 + 8 // the floor four times over
	EmptyCache(dev)
	before := MemoryStats(dev)
	gcs := func() int64 {
		s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
		metrics.Read(s)
		return int64(s[0].Value.Uint64())
	}
	gc0 := gcs()
	for range calls {
		x.AddScalar(1) // dropped
	}
	Synchronize(dev)
	after := MemoryStats(dev)
	limit := int64(total/16) + 4*4*n // the floor and a few results
	if grown := after.Reserved - before.Reserved; grown > limit {
		t.Errorf("%d calls dropping %d MiB each grew the cache by %d MiB, want at most %d MiB (%d collections ran)",
			calls, 4*n>>20, grown>>20, limit>>20, gcs()-gc0)
	}
	if after.NumMallocs-before.NumMallocs >= int64(calls)/2 {
		t.Errorf("%d calls took %d segments from the device", calls, after.NumMallocs-before.NumMallocs)
	}
	runtime.KeepAlive(x)
}

// Asking for more than the device has is an *Error naming the size; the
// device keeps working afterwards.
func TestGPUOutOfMemory(t *testing.T) {
	requireGPU(t)
	dev := CUDA(0)
	total := deviceMemory(t, dev)
	n := int(total/4) + (1 << 28) // more float32s than the device holds
	err := Try(func() { Zeros(Float32, 1).ToDevice(dev).Expand(n).Contiguous() })
	var e *Error
	if !errors.As(err, &e) || !strings.Contains(err.Error(), "out of memory") {
		t.Fatalf("got %v, want an out-of-memory *Error", err)
	}
	if got := FromSlice([]float32{1, 2}).ToDevice(dev).MulScalar(3).Float32s(); got[1] != 6 {
		t.Fatalf("device unusable after OOM: %v", got)
	}
}

func TestGPUMixedDevices(t *testing.T) {
	requireGPU(t)
	a := FromSlice([]float32{1, 2}).cpu()
	b := FromSlice([]float32{1, 2}).ToDevice(CUDA(0))
	err := Try(func() { a.Add(b) })
	if err == nil || !strings.Contains(err.Error(), "operand 0 is on cpu, operand 1 on cuda:0") {
		t.Fatalf("got %v", err)
	}
}

// Every dtype survives a round trip through the GPU bit for bit, from any
// view.
func TestGPUTransfers(t *testing.T) {
	requireGPU(t)
	for _, dt := range []DType{Float32, Float64, Float16, BFloat16, Int32, Int64, Bool} {
		x := Randn(5, Float64, 33, 17).MulScalar(100).cpu().To(dt).T()
		y := x.ToDevice(CUDA(0))
		if y.Device() != CUDA(0) || !slices.Equal(y.Shape(), x.Shape()) {
			t.Fatalf("%v: %v %v", dt, y.Device(), y.Shape())
		}
		if !slices.Equal(y.ToDevice(CPU).Float64s(), x.Float64s()) {
			t.Errorf("%v: round trip changed values", dt)
		}
	}
}

func TestToTargets(t *testing.T) {
	x := FromSlice([]float32{1.5, -2}).cpu()
	if y := x.To(Float16); y.DType() != Float16 || x.To(Float32) != x || x.To(CPU) != x {
		t.Fatalf("To of a dtype: %v", y.DType())
	}
	if ok, _ := cuda.Available(); !ok {
		return
	}
	y := x.To(CUDA(0))
	if y.Device() != CUDA(0) || !slices.Equal(y.To(CPU).Float32s(), []float32{1.5, -2}) {
		t.Fatalf("To of a device: %v", y.Device())
	}
}
