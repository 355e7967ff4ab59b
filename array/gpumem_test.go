package array

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"weak"

	"gocompile/cuda"
)

// fakeHeap is a deviceHeap whose blocks are counted, not device memory.
type fakeHeap struct {
	*deviceHeap
	allocated atomic.Int64
	mu        sync.Mutex
	freed     map[cuda.DevicePtr]int
}

func newFakeHeap(floor int64) *fakeHeap {
	f := &fakeHeap{freed: make(map[cuda.DevicePtr]int)}
	f.deviceHeap = &deviceHeap{
		allocated: f.allocated.Load,
		free: func(b cuda.Block) {
			f.mu.Lock()
			f.freed[b.Ptr]++
			f.mu.Unlock()
			f.allocated.Add(-int64(b.Size))
		},
		floor: floor,
		live:  make(map[*gpuBuffer]weak.Pointer[storage]),
	}
	return f
}

// alloc makes a storage holding a block of n bytes at ptr.
func (f *fakeHeap) alloc(ptr cuda.DevicePtr, n int) *storage {
	buf := &gpuBuffer{block: cuda.Block{Ptr: ptr, Size: n}}
	st := &storage{gpu: buf}
	f.allocated.Add(int64(n))
	f.track(st, buf)
	return st
}

func (f *fakeHeap) timesFreed(ptr cuda.DevicePtr) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.freed[ptr]
}

// checkFreed checks that of the n blocks allocated at 0x1000·(i+1), those
// with i a multiple of every (the ones kept reachable) were not freed and
// the others freed once.
func (f *fakeHeap) checkFreed(t *testing.T, n, every int, when string) {
	t.Helper()
	for i := range n {
		want := 1
		if i%every == 0 {
			want = 0
		}
		if got := f.timesFreed(cuda.DevicePtr(0x1000 * (i + 1))); got != want {
			t.Fatalf("block %d freed %d times %s, want %d", i, got, when, want)
		}
	}
}

// A collection frees the blocks of unreachable storages before it returns
// and keeps reachable ones.
func TestDeviceHeapCollectFreesUnreachable(t *testing.T) {
	f := newFakeHeap(1 << 20)
	var kept []*storage
	for i := range 100 {
		st := f.alloc(cuda.DevicePtr(0x1000*(i+1)), 1000)
		if i%3 == 0 {
			kept = append(kept, st)
		}
	}
	f.collect()
	f.checkFreed(t, 100, 3, "right after the collection")
	if got, want := f.allocated.Load(), int64(1000*len(kept)); got != want || f.liveAfter.Load() != want {
		t.Errorf("allocated after the collection = %d (recorded %d), want %d", got, f.liveAfter.Load(), want)
	}
	runtime.KeepAlive(kept)
}

// A block is freed once, whether a sweep or a collection finds it first.
func TestDeviceHeapFreesOnce(t *testing.T) {
	f := newFakeHeap(1 << 20)
	for i := range 100 {
		f.alloc(cuda.DevicePtr(0x1000*(i+1)), 1000)
		if i%10 == 0 {
			runtime.GC()
			f.sweep() // some are freed before the collection
		}
	}
	f.collect()
	for range 3 { // and the rest after it
		runtime.GC()
		f.sweep()
	}
	f.collect()
	for i := range 100 {
		if got := f.timesFreed(cuda.DevicePtr(0x1000 * (i + 1))); got != 1 {
			t.Fatalf("block %d freed %d times, want once", i, got)
		}
	}
}

// A sweep frees nothing until a Go collection has run since the last
// one; then it frees the blocks of the storages that collection found
// unreachable, and keeps the rest.
func TestDeviceHeapSweep(t *testing.T) {
	f := newFakeHeap(1 << 20)
	f.collect() // a sweep now finds no collection since
	var kept []*storage
	for i := range 50 {
		st := f.alloc(cuda.DevicePtr(0x1000*(i+1)), 100)
		if i%2 == 0 {
			kept = append(kept, st)
		}
	}
	if f.sweep() {
		t.Fatal("a sweep with no collection since the last reports one")
	}
	if got := f.allocated.Load(); got != 50*100 {
		t.Fatalf("%d bytes allocated after a sweep with no collection, want all %d", got, 50*100)
	}
	runtime.GC()
	if !f.sweep() {
		t.Fatal("a sweep after a collection reports none")
	}
	f.checkFreed(t, 50, 2, "after the sweep")
	if f.sweep() {
		t.Error("a second sweep after the same collection reports one")
	}
	runtime.KeepAlive(kept)
}

// A collection is due once the bytes allocated have grown past those live
// after the last one by as much again, or by the floor if that is more.
func TestDeviceHeapPacing(t *testing.T) {
	const floor = 10_000
	f := newFakeHeap(floor)
	var live []*storage
	ptr := cuda.DevicePtr(0)
	grow := func(n int) {
		ptr += 0x10000
		live = append(live, f.alloc(ptr, n))
	}
	for _, c := range []struct {
		add  int
		due  bool
		keep bool // collect and keep what was added live
	}{
		{add: floor - 1, due: false},
		{add: 1, due: true, keep: true}, // live 10k: next due at 20k
		{add: 9_999, due: false},
		{add: 1, due: true, keep: true}, // live 20k: next due at 40k (growth = live)
		{add: 19_999, due: false},
		{add: 1, due: true},
	} {
		grow(c.add)
		if got := f.due(); got != c.due {
			t.Fatalf("with %d bytes allocated, %d live after the last collection: due = %v, want %v",
				f.allocated.Load(), f.liveAfter.Load(), got, c.due)
		}
		if c.keep {
			f.collect()
		}
	}
	runtime.KeepAlive(live)
}

// Goroutines that ask for a collection while one runs take its result.
func TestDeviceHeapConcurrentCollect(t *testing.T) {
	f := newFakeHeap(1 << 20)
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 200 {
				st := f.alloc(cuda.DevicePtr(0x100000*(g+1)+0x100*i), 64)
				if i%50 == 0 {
					f.collect()
				}
				runtime.KeepAlive(st)
			}
		}()
	}
	wg.Wait()
	for range 3 { // a stack slot of a finished goroutine may hold one for a cycle
		f.collect()
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	for p, n := range f.freed {
		if n != 1 {
			t.Errorf("block %#x freed %d times", uint64(p), n)
		}
	}
	if len(f.freed) != 8*200 {
		t.Errorf("%d of %d blocks freed after every storage was dropped", len(f.freed), 8*200)
	}
}
