package cuda

import (
	"errors"
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"sync"
	"testing"
)

const (
	kiB = 1 << 10
	miB = 1 << 20
)

// fakeBackend simulates device memory: a bump allocator over a large address
// space (addresses are never reused, so device allocations never overlap),
// with an optional capacity past which malloc fails with out of memory.
type fakeBackend struct {
	mu       sync.Mutex
	capacity int // 0 = unlimited
	used     int
	next     DevicePtr
	live     map[DevicePtr]int
	mallocs  int
	frees    int
	errs     []string // misuse detected (bad frees)
}

func newFakeBackend(capacity int) *fakeBackend {
	return &fakeBackend{capacity: capacity, next: 0x7f0000000000, live: make(map[DevicePtr]int)}
}

func (f *fakeBackend) malloc(n int) (DevicePtr, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if n <= 0 {
		f.errs = append(f.errs, fmt.Sprintf("malloc(%d)", n))
		return 0, errors.New("fake device: bad size")
	}
	if f.capacity > 0 && f.used+n > f.capacity {
		// what (*Device).Malloc returns
		return 0, &Error{Op: "cuMemAlloc_v2", Code: ErrorOutOfMemory, Name: "CUDA_ERROR_OUT_OF_MEMORY", Msg: "out of memory"}
	}
	p := f.next
	f.next += DevicePtr(n) + 4096 // a gap between allocations
	f.live[p] = n
	f.used += n
	f.mallocs++
	return p, nil
}

func (f *fakeBackend) free(p DevicePtr) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	n, ok := f.live[p]
	if !ok {
		f.errs = append(f.errs, fmt.Sprintf("free(%#x) of unknown pointer", uint64(p)))
		return errors.New("fake device: invalid pointer")
	}
	delete(f.live, p)
	f.used -= n
	f.frees++
	return nil
}

func (f *fakeBackend) memInfo() (free, total uint64, err error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.capacity == 0 {
		return 0, 0, errors.New("unknown")
	}
	return uint64(f.capacity - f.used), uint64(f.capacity), nil
}

func (f *fakeBackend) check(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, e := range f.errs {
		t.Errorf("backend misuse: %s", e)
	}
	f.errs = nil
}

// liveSet tracks the blocks a test holds and fails on overlap.
type liveSet struct {
	mu     sync.Mutex
	blocks []Block // sorted by Ptr
}

func (s *liveSet) add(t *testing.T, b Block) {
	if b.Size == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	end := b.Ptr + DevicePtr(b.Capacity())
	i := sort.Search(len(s.blocks), func(i int) bool { return s.blocks[i].Ptr >= b.Ptr })
	if i < len(s.blocks) && s.blocks[i].Ptr < end {
		t.Errorf("live overlap: new block [%#x,+%d) overlaps [%#x,+%d)", uint64(b.Ptr), b.Capacity(), uint64(s.blocks[i].Ptr), s.blocks[i].Capacity())
	}
	if i > 0 && s.blocks[i-1].Ptr+DevicePtr(s.blocks[i-1].Capacity()) > b.Ptr {
		t.Errorf("live overlap: new block [%#x,+%d) overlaps [%#x,+%d)", uint64(b.Ptr), b.Capacity(), uint64(s.blocks[i-1].Ptr), s.blocks[i-1].Capacity())
	}
	s.blocks = append(s.blocks, Block{})
	copy(s.blocks[i+1:], s.blocks[i:])
	s.blocks[i] = b
}

func (s *liveSet) remove(t *testing.T, b Block) {
	if b.Size == 0 {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	i := sort.Search(len(s.blocks), func(i int) bool { return s.blocks[i].Ptr >= b.Ptr })
	if i == len(s.blocks) || s.blocks[i].Ptr != b.Ptr {
		t.Fatalf("liveSet: removing unknown block %#x", uint64(b.Ptr))
	}
	s.blocks = append(s.blocks[:i], s.blocks[i+1:]...)
}

// checkInvariants walks the allocator's segments and free sets and verifies
// their consistency with each other, with the stats and with the backend.
func checkInvariants(t *testing.T, a *Allocator, f *fakeBackend) {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("allocator invariant: "+format, args...)
	}

	freeBlocks := map[*block]poolKey{}
	var reserved, allocated int64
	active := 0
	for i, seg := range a.segments {
		if seg.index != i {
			fail("segment %d has index %d", i, seg.index)
		}
		if seg.owner != a {
			fail("segment %d has wrong owner", i)
		}
		if seg.size%allocMinBlockSize != 0 {
			fail("segment size %d not a multiple of %d", seg.size, allocMinBlockSize)
		}
		if seg.large == (seg.size == allocSmallBuffer) {
			fail("segment of size %d in the wrong pool (large=%v)", seg.size, seg.large)
		}
		if seg.head == nil || seg.head.prev != nil || seg.head.ptr != seg.ptr {
			fail("segment %#x: bad head", uint64(seg.ptr))
		}
		sum := 0
		var prev *block
		for b := seg.head; b != nil; b = b.next {
			if b.seg != seg {
				fail("block %#x: wrong segment", uint64(b.ptr))
			}
			if b.prev != prev {
				fail("block %#x: prev link broken", uint64(b.ptr))
			}
			if b.size <= 0 || b.size%allocMinBlockSize != 0 {
				fail("block %#x: bad size %d", uint64(b.ptr), b.size)
			}
			if b.ptr != seg.ptr+DevicePtr(sum) {
				fail("block %#x: not adjacent to its predecessor (expected %#x)", uint64(b.ptr), uint64(seg.ptr)+uint64(sum))
			}
			if b.allocated {
				allocated += int64(b.size)
				active++
				if b.id == 0 {
					fail("allocated block %#x without id", uint64(b.ptr))
				}
			} else {
				if prev != nil && !prev.allocated {
					fail("adjacent free blocks %#x and %#x not merged", uint64(prev.ptr), uint64(b.ptr))
				}
				freeBlocks[b] = poolKey{large: seg.large, stream: seg.stream}
			}
			sum += b.size
			prev = b
		}
		if sum != seg.size {
			fail("segment %#x: blocks sum to %d, segment size %d", uint64(seg.ptr), sum, seg.size)
		}
		reserved += int64(seg.size)
	}

	inSets := 0
	for key, fs := range a.free {
		for i, b := range *fs {
			if i > 0 && !blockLess((*fs)[i-1], b) {
				fail("free set %v not strictly ordered at %d", key, i)
			}
			k, ok := freeBlocks[b]
			if !ok {
				fail("free set %v holds block %#x that is not a free block of a segment", key, uint64(b.ptr))
			}
			if k != key {
				fail("block %#x in free set %v, belongs in %v", uint64(b.ptr), key, k)
			}
			inSets++
		}
	}
	if inSets != len(freeBlocks) {
		fail("%d free blocks, %d entries in free sets", len(freeBlocks), inSets)
	}

	st := a.stats
	if st.Allocated != allocated || st.Reserved != reserved {
		fail("stats Allocated=%d Reserved=%d, walk found %d/%d", st.Allocated, st.Reserved, allocated, reserved)
	}
	if st.ActiveBlocks != active || st.Segments != len(a.segments) {
		fail("stats ActiveBlocks=%d Segments=%d, walk found %d/%d", st.ActiveBlocks, st.Segments, active, len(a.segments))
	}
	if st.PeakAllocated < st.Allocated || st.PeakReserved < st.Reserved {
		fail("peaks below current: %+v", st)
	}
	if a.limit > 0 && st.Reserved > a.limit {
		fail("Reserved %d above limit %d", st.Reserved, a.limit)
	}
	if f != nil {
		f.mu.Lock()
		defer f.mu.Unlock()
		if int64(f.used) != reserved || len(f.live) != len(a.segments) {
			fail("backend holds %d bytes in %d allocations, allocator %d in %d segments", f.used, len(f.live), reserved, len(a.segments))
		}
		for _, seg := range a.segments {
			if f.live[seg.ptr] != seg.size {
				fail("segment %#x of size %d: backend has size %d", uint64(seg.ptr), seg.size, f.live[seg.ptr])
			}
		}
		if int64(f.mallocs) != st.NumMallocs || int64(f.frees) != st.NumFrees {
			fail("backend mallocs/frees %d/%d, stats %d/%d", f.mallocs, f.frees, st.NumMallocs, st.NumFrees)
		}
	}
}

func mustAlloc(t *testing.T, a *Allocator, n int, s StreamID) Block {
	t.Helper()
	b, err := a.Alloc(n, s)
	if err != nil {
		t.Fatalf("Alloc(%d, %d): %v", n, s, err)
	}
	if b.Size != n || b.Capacity() < n || (n > 0 && b.Ptr == 0) {
		t.Fatalf("Alloc(%d): bad block %+v (capacity %d)", n, b, b.Capacity())
	}
	return b
}

func TestAllocSizeRounding(t *testing.T) {
	for _, c := range []struct{ n, round, seg int }{
		{1, 512, 2 * miB},
		{512, 512, 2 * miB},
		{513, 1024, 2 * miB},
		{1 * miB, 1 * miB, 2 * miB},
		{1*miB + 1, 1*miB + 512, 20 * miB},
		{10*miB - 512, 10*miB - 512, 20 * miB},
		{10 * miB, 10 * miB, 10 * miB},
		{11 * miB, 11 * miB, 12 * miB},
		{100*miB + 1, 100*miB + 512, 102 * miB},
	} {
		if r := roundSize(c.n); r != c.round {
			t.Errorf("roundSize(%d) = %d, want %d", c.n, r, c.round)
		}
		if s := segmentSize(roundSize(c.n)); s != c.seg {
			t.Errorf("segmentSize(%d) = %d, want %d", c.n, s, c.seg)
		}
	}
}

func TestAllocZeroSize(t *testing.T) {
	f := newFakeBackend(0)
	a := newAllocator(f)
	b := mustAlloc(t, a, 0, 0)
	if b != (Block{}) {
		t.Fatalf("zero-size Alloc returned %+v", b)
	}
	a.Free(b)
	a.Free(Block{})
	if st := a.Stats(); st.NumMallocs != 0 || st.Reserved != 0 || st.NumAllocs != 1 {
		t.Fatalf("zero-size Alloc touched the device: %+v", st)
	}
	if _, err := a.Alloc(-1, 0); err == nil {
		t.Fatal("negative Alloc succeeded")
	}
}

// Allocating and freeing the same sizes repeatedly needs no device malloc
// after the first iteration.
func TestAllocSteadyLoop(t *testing.T) {
	f := newFakeBackend(0)
	a := newAllocator(f)
	sizes := []int{100, 4 * kiB, 300 * kiB, 1 * miB, 3 * miB, 7*miB + 3, 12 * miB, 64 * miB}
	var mallocs int64
	for iter := 0; iter < 20; iter++ {
		var bs []Block
		for _, n := range sizes {
			bs = append(bs, mustAlloc(t, a, n, 0))
		}
		for i := range bs { // free in a different order each time
			a.Free(bs[(i+iter)%len(bs)])
		}
		checkInvariants(t, a, f)
		st := a.Stats()
		if iter == 0 {
			mallocs = st.NumMallocs
			continue
		}
		if st.NumMallocs != mallocs {
			t.Fatalf("iteration %d: NumMallocs %d, was %d after the first iteration", iter, st.NumMallocs, mallocs)
		}
		if st.Allocated != 0 {
			t.Fatalf("Allocated = %d after freeing everything", st.Allocated)
		}
	}
	st := a.Stats()
	if want := int64(19 * len(sizes)); st.NumCacheHits < want {
		t.Fatalf("NumCacheHits = %d, want >= %d", st.NumCacheHits, want)
	}
	if st.NumFrees != 0 {
		t.Fatalf("NumFrees = %d, want 0 (nothing released)", st.NumFrees)
	}
	f.check(t)
}

// One 20 MiB segment serves several 3 MiB requests; once they are freed the
// merged block serves a 19 MiB request.
func TestAllocSplitMerge(t *testing.T) {
	f := newFakeBackend(0)
	a := newAllocator(f)
	var live liveSet
	var bs []Block
	for i := 0; i < 6; i++ {
		b := mustAlloc(t, a, 3*miB, 0)
		live.add(t, b)
		bs = append(bs, b)
		checkInvariants(t, a, f)
	}
	st := a.Stats()
	if st.NumMallocs != 1 || st.Reserved != 20*miB || st.Allocated != 18*miB || st.NumCacheHits != 5 {
		t.Fatalf("six 3 MiB blocks: %+v", st)
	}
	for i := 1; i < len(bs); i++ {
		if bs[i].Ptr != bs[i-1].Ptr+3*miB {
			t.Fatalf("block %d at %#x, want right after block %d", i, uint64(bs[i].Ptr), i-1)
		}
	}
	// Free in an order that exercises merging with the previous, the next and both.
	for _, i := range []int{1, 3, 2, 0, 5, 4} {
		live.remove(t, bs[i])
		a.Free(bs[i])
		checkInvariants(t, a, f)
	}
	if n := len(*a.free[poolKey{large: true}]); n != 1 {
		t.Fatalf("after freeing all, %d free blocks; want 1 merged block", n)
	}
	b := mustAlloc(t, a, 19*miB, 0)
	if st := a.Stats(); st.NumMallocs != 1 {
		t.Fatalf("19 MiB request after merging made a device malloc: %+v", st)
	}
	if b.Ptr != bs[0].Ptr || b.Capacity() != 20*miB {
		// remainder of 1 MiB is not worth a block in the large pool
		t.Fatalf("19 MiB block at %#x capacity %d, want %#x capacity %d", uint64(b.Ptr), b.Capacity(), uint64(bs[0].Ptr), 20*miB)
	}
	a.Free(b)
	checkInvariants(t, a, f)

	// Small pool: a 2 MiB segment split into 512-byte pieces.
	var small []Block
	for i := 0; i < 4096; i++ {
		b := mustAlloc(t, a, 1+i%512, 7)
		live.add(t, b)
		small = append(small, b)
	}
	if st := a.Stats(); st.NumMallocs != 2 {
		t.Fatalf("4096 blocks of 512 B: NumMallocs %d, want 2 (one small segment)", st.NumMallocs)
	}
	checkInvariants(t, a, f)
	rng := rand.New(rand.NewSource(3))
	rng.Shuffle(len(small), func(i, j int) { small[i], small[j] = small[j], small[i] })
	for _, b := range small {
		live.remove(t, b)
		a.Free(b)
	}
	checkInvariants(t, a, f)
	if n := len(*a.free[poolKey{stream: 7}]); n != 1 {
		t.Fatalf("small pool: %d free blocks after freeing all, want 1", n)
	}
	f.check(t)
}

// A block freed on one stream is not handed to another.
func TestAllocStreamSeparation(t *testing.T) {
	f := newFakeBackend(0)
	a := newAllocator(f)
	for _, n := range []int{4 * kiB, 5 * miB} {
		b1 := mustAlloc(t, a, n, 1)
		if b1.Stream() != 1 {
			t.Fatalf("Stream() = %d", b1.Stream())
		}
		a.Free(b1)
		before := a.Stats().NumMallocs
		b2 := mustAlloc(t, a, n, 2)
		if b2.Ptr >= b1.Ptr && b2.Ptr < b1.Ptr+DevicePtr(segmentSize(roundSize(n))) {
			t.Fatalf("size %d: stream 2 got %#x from stream 1's segment at %#x", n, uint64(b2.Ptr), uint64(b1.Ptr))
		}
		if a.Stats().NumMallocs != before+1 {
			t.Fatalf("size %d: stream 2 request did not create its own segment", n)
		}
		b3 := mustAlloc(t, a, n, 1)
		if b3.Ptr != b1.Ptr {
			t.Fatalf("size %d: stream 1 did not reuse its own cached block", n)
		}
		a.Free(b2)
		a.Free(b3)
		checkInvariants(t, a, f)
	}
	f.check(t)
}

// Filling the device, freeing everything (cached) and asking for memory that
// needs a new segment flushes the cache and succeeds.
func TestAllocOOMRecovery(t *testing.T) {
	f := newFakeBackend(40 * miB)
	a := newAllocator(f)
	x := mustAlloc(t, a, 20*miB, 1)
	y := mustAlloc(t, a, 20*miB, 2)
	a.Free(x)
	a.Free(y)
	checkInvariants(t, a, f)
	if st := a.Stats(); st.Reserved != 40*miB {
		t.Fatalf("freeing released memory: Reserved %d", st.Reserved)
	}

	b := mustAlloc(t, a, 30*miB, 0)
	st := a.Stats()
	if st.NumOOMRetries != 1 || st.NumFrees != 2 || st.NumMallocs != 3 || st.Reserved != 30*miB || st.Allocated != 30*miB {
		t.Fatalf("after OOM recovery: %+v", st)
	}
	checkInvariants(t, a, f)

	// A request that can never fit.
	_, err := a.Alloc(64*miB, 0)
	var oom *OutOfMemoryError
	if !errors.As(err, &oom) {
		t.Fatalf("Alloc(64 MiB) error %v (%T), want *OutOfMemoryError", err, err)
	}
	if !isOOM(err) || !IsOutOfMemory(err) {
		t.Fatalf("IsOutOfMemory(%v) = false", err)
	}
	var cause *Error
	if !errors.As(err, &cause) || cause.Code != ErrorOutOfMemory {
		t.Fatalf("OutOfMemoryError does not wrap the device error")
	}
	if oom.Requested != 64*miB || oom.SegmentSize != 64*miB || oom.Allocated != 30*miB || oom.Reserved != 30*miB ||
		!oom.DeviceFreeKnown || oom.DeviceFree != 10*miB || oom.DeviceTotal != 40*miB {
		t.Fatalf("OutOfMemoryError fields: %+v", oom)
	}
	msg := err.Error()
	t.Log(msg)
	for _, want := range []string{"out of memory", "tried to allocate 64.00 MiB", "10.00 MiB free of 40.00 MiB",
		"30.00 MiB allocated by tensors", "30.00 MiB reserved by the allocator", "lower the batch size"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error message %q lacks %q", msg, want)
		}
	}
	if st := a.Stats(); st.NumOOMRetries != 2 {
		t.Fatalf("NumOOMRetries = %d, want 2", st.NumOOMRetries)
	}
	checkInvariants(t, a, f)
	a.Free(b)
	if err := a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, a, f)
	if st := a.Stats(); st.Reserved != 0 {
		t.Fatalf("Reserved after EmptyCache: %d", st.Reserved)
	}
	f.check(t)
}

// The allocator's own limit behaves like a device of that size.
func TestAllocLimit(t *testing.T) {
	f := newFakeBackend(0)
	a := newAllocator(f, 24*miB)
	x := mustAlloc(t, a, 20*miB, 0)
	a.Free(x)
	y := mustAlloc(t, a, 1*kiB, 0) // 2 MiB segment: fits next to the cached 20 MiB
	if _, err := a.Alloc(4*miB, 1); err != nil {
		t.Fatalf("cache flush should make room: %v", err)
	}
	if st := a.Stats(); st.NumOOMRetries != 1 || st.Reserved != 22*miB {
		t.Fatalf("after limit-triggered flush: %+v", st)
	}
	_, err := a.Alloc(4*miB, 2)
	var oom *OutOfMemoryError
	if !errors.As(err, &oom) || oom.Limit != 24*miB || oom.Err != nil || !strings.Contains(err.Error(), "limit 24.00 MiB") {
		t.Fatalf("Alloc past the limit: %v", err)
	}
	if !isOOM(err) || !oom.OutOfMemory() {
		t.Fatalf("limit error not recognised as out of memory: %v", err)
	}
	a.Free(y)
	checkInvariants(t, a, f)
}

// Allocated, Reserved and the peaks after a scripted sequence.
func TestAllocStats(t *testing.T) {
	f := newFakeBackend(0)
	a := newAllocator(f)
	type want struct{ alloc, res, peakA, peakR, mallocs, frees, hits int64 }
	expect := func(step string, w want) {
		t.Helper()
		st := a.Stats()
		got := want{st.Allocated, st.Reserved, st.PeakAllocated, st.PeakReserved, st.NumMallocs, st.NumFrees, st.NumCacheHits}
		if got != w {
			t.Fatalf("%s: got %+v, want %+v", step, got, w)
		}
		checkInvariants(t, a, f)
	}
	a1 := mustAlloc(t, a, 1000, 0) // 1024 B from a new 2 MiB small segment
	expect("a1", want{1024, 2 * miB, 1024, 2 * miB, 1, 0, 0})
	a2 := mustAlloc(t, a, 3*miB, 0) // new 20 MiB segment, 17 MiB left free
	expect("a2", want{1024 + 3*miB, 22 * miB, 1024 + 3*miB, 22 * miB, 2, 0, 0})
	a3 := mustAlloc(t, a, 11*miB, 0) // from the 17 MiB free block, 6 MiB left
	expect("a3", want{1024 + 14*miB, 22 * miB, 1024 + 14*miB, 22 * miB, 2, 0, 1})
	a4 := mustAlloc(t, a, 25*miB, 0) // new 26 MiB segment; 1 MiB remainder not split
	if a4.Capacity() != 26*miB {
		t.Fatalf("a4 capacity %d, want 26 MiB", a4.Capacity())
	}
	expect("a4", want{1024 + 40*miB, 48 * miB, 1024 + 40*miB, 48 * miB, 3, 0, 1})
	a.Free(a4)
	expect("free a4", want{1024 + 14*miB, 48 * miB, 1024 + 40*miB, 48 * miB, 3, 0, 1})
	a.Free(a2)
	a.Free(a3)
	expect("free a2 a3", want{1024, 48 * miB, 1024 + 40*miB, 48 * miB, 3, 0, 1})
	a.ResetPeakStats()
	expect("reset peaks", want{1024, 48 * miB, 1024, 48 * miB, 3, 0, 1})
	if err := a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	expect("empty cache", want{1024, 2 * miB, 1024, 48 * miB, 3, 2, 1})
	a5 := mustAlloc(t, a, 2000, 0) // 2048 B from the small segment
	expect("a5", want{3072, 2 * miB, 3072, 48 * miB, 3, 2, 2})
	a.Free(a1)
	a.Free(a5)
	if err := a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	expect("end", want{0, 0, 3072, 48 * miB, 3, 3, 2})
	if st := a.Stats(); st.NumAllocs != 5 || st.Segments != 0 || st.ActiveBlocks != 0 {
		t.Fatalf("end: %+v", st)
	}
	f.check(t)
}

func TestAllocFreeMisusePanics(t *testing.T) {
	f := newFakeBackend(0)
	a := newAllocator(f)
	other := newAllocator(newFakeBackend(0))
	mustPanic := func(name, want string, fn func()) {
		t.Helper()
		defer func() {
			t.Helper()
			r := recover()
			if r == nil {
				t.Fatalf("%s: no panic", name)
			}
			if s := fmt.Sprint(r); !strings.Contains(s, want) {
				t.Fatalf("%s: panic %q, want it to mention %q", name, s, want)
			}
		}()
		fn()
	}
	b := mustAlloc(t, a, 100, 0)
	c := mustAlloc(t, a, 100, 0)
	a.Free(b)
	mustPanic("double free", "double free", func() { a.Free(b) })
	a.Free(c) // merges with b's block
	mustPanic("double free after merge", "double free", func() { a.Free(c) })
	d := mustAlloc(t, a, 100, 0) // reuses b's memory
	if d.Ptr != b.Ptr {
		t.Fatalf("expected reuse of the freed block")
	}
	mustPanic("stale copy", "double free", func() { a.Free(b) })
	o := mustAlloc(t, other, 100, 0)
	mustPanic("foreign block", "another allocator", func() { a.Free(o) })
	mustPanic("made-up block", "not made by an Allocator", func() { a.Free(Block{Ptr: 0x1000, Size: 8}) })
	a.Free(d)
	other.Free(o)
	checkInvariants(t, a, f)
}

// Many goroutines allocate and free random sizes on a few streams.
func TestAllocConcurrent(t *testing.T) {
	f := newFakeBackend(0)
	a := newAllocator(f)
	var live liveSet
	const workers, ops = 32, 300
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func(w int) {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(w)))
			stream := StreamID(w % 4)
			var mine []Block
			for i := 0; i < ops; i++ {
				if len(mine) > 0 && (rng.Intn(2) == 0 || len(mine) > 16) {
					j := rng.Intn(len(mine))
					b := mine[j]
					mine[j] = mine[len(mine)-1]
					mine = mine[:len(mine)-1]
					live.remove(t, b)
					a.Free(b)
					continue
				}
				b, err := a.Alloc(randomSize(rng), stream)
				if err != nil {
					t.Error(err)
					return
				}
				live.add(t, b)
				mine = append(mine, b)
				if i%50 == 0 {
					_ = a.Stats()
				}
			}
			for _, b := range mine {
				live.remove(t, b)
				a.Free(b)
			}
		}(w)
	}
	wg.Wait()
	checkInvariants(t, a, f)
	if st := a.Stats(); st.Allocated != 0 || st.ActiveBlocks != 0 {
		t.Fatalf("after all frees: %+v", st)
	}
	if err := a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, a, f)
	if st := a.Stats(); st.Reserved != 0 || st.NumMallocs != st.NumFrees {
		t.Fatalf("after EmptyCache: %+v", st)
	}
	f.check(t)
}

// randomSize mixes tiny, small, large and huge requests.
func randomSize(rng *rand.Rand) int {
	switch r := rng.Intn(100); {
	case r < 40:
		return 1 + rng.Intn(4*kiB)
	case r < 70:
		return 1 + rng.Intn(1*miB)
	case r < 95:
		return 1*miB + 1 + rng.Intn(9*miB)
	default:
		return 10*miB + rng.Intn(20*miB)
	}
}

// A few thousand random operations with a small device, checking every
// invariant after each step.
func TestAllocRandomizedInvariants(t *testing.T) {
	f := newFakeBackend(160 * miB)
	a := newAllocator(f)
	rng := rand.New(rand.NewSource(42))
	var live liveSet
	var held []Block
	var allocated int64
	ooms := 0
	for step := 0; step < 4000; step++ {
		switch r := rng.Intn(100); {
		case r < 48:
			n := randomSize(rng)
			if rng.Intn(20) == 0 {
				n = 0
			}
			b, err := a.Alloc(n, StreamID(rng.Intn(3)))
			if err != nil {
				var oom *OutOfMemoryError
				if !errors.As(err, &oom) || oom.Requested != n {
					t.Fatalf("step %d: Alloc(%d): %v", step, n, err)
				}
				ooms++
				break
			}
			live.add(t, b)
			held = append(held, b)
			allocated += int64(b.Capacity())
		case r < 97:
			if len(held) == 0 {
				break
			}
			j := rng.Intn(len(held))
			b := held[j]
			held[j] = held[len(held)-1]
			held = held[:len(held)-1]
			live.remove(t, b)
			a.Free(b)
			allocated -= int64(b.Capacity())
		case r < 99:
			if err := a.EmptyCache(); err != nil {
				t.Fatal(err)
			}
		default:
			a.ResetPeakStats()
		}
		checkInvariants(t, a, f)
		if st := a.Stats(); st.Allocated != allocated {
			t.Fatalf("step %d: Allocated %d, test holds %d", step, st.Allocated, allocated)
		}
	}
	st := a.Stats()
	t.Logf("stats: %+v, OOM errors: %d", st, ooms)
	if st.NumOOMRetries == 0 || ooms == 0 || st.NumCacheHits == 0 {
		t.Errorf("randomized test did not exercise the OOM and cache paths: %+v", st)
	}
	for _, b := range held {
		a.Free(b)
	}
	if err := a.EmptyCache(); err != nil {
		t.Fatal(err)
	}
	checkInvariants(t, a, f)
	if st := a.Stats(); st.Reserved != 0 || st.Allocated != 0 {
		t.Fatalf("at the end: %+v", st)
	}
	f.check(t)
}

func TestAllocFormatBytes(t *testing.T) {
	for n, want := range map[int64]string{
		0: "0 B", 512: "512 B", 1536: "1.50 KiB", 3 * miB: "3.00 MiB", 2 << 30: "2.00 GiB", 3 << 40: "3.00 TiB",
	} {
		if got := formatBytes(n); got != want {
			t.Errorf("formatBytes(%d) = %q, want %q", n, got, want)
		}
	}
}

// The real device adapter satisfies the backend interfaces.
var (
	_ memBackend = deviceBackend{}
	_ memInfoer  = deviceBackend{}
)

func TestAllocStreamID(t *testing.T) {
	var s *Stream
	if id := s.ID(); id != 0 {
		t.Fatalf("nil Stream ID() = %d", id)
	}
	if id := (&Stream{h: 0x1234}).ID(); id != 0x1234 {
		t.Fatalf("ID() = %#x", id)
	}
}

// AllocCached serves what the cache holds and, on a miss, neither asks the
// device for memory nor counts an allocation.
func TestAllocCached(t *testing.T) {
	f := newFakeBackend(0)
	a := newAllocator(f)
	const s StreamID = 1
	for _, n := range []int{512, 3 << 20, 64 << 20} {
		before := a.Stats()
		if b, ok, err := a.AllocCached(n, s); ok || err != nil || b.Ptr != 0 {
			t.Fatalf("AllocCached(%d) with nothing that fits cached = %v, %v, %v; want a miss", n, b, ok, err)
		}
		if st := a.Stats(); st != before {
			t.Fatalf("a miss of %d bytes changed the statistics from %+v to %+v", n, before, st)
		}
		b, err := a.Alloc(n, s)
		if err != nil {
			t.Fatal(err)
		}
		a.Free(b)
		mallocs := f.mallocs
		c, ok, err := a.AllocCached(n, s)
		if !ok || err != nil || c.Ptr != b.Ptr || c.Size != n {
			t.Fatalf("AllocCached(%d) after a free = %v, %v, %v; want the freed block %#x", n, c, ok, err, uint64(b.Ptr))
		}
		if f.mallocs != mallocs {
			t.Fatalf("a cache hit of %d bytes asked the device", n)
		}
		if _, ok, _ := a.AllocCached(n, s+1); ok {
			t.Fatalf("AllocCached(%d) on another stream took this stream's block", n)
		}
		a.Free(c)
	}
	if b, ok, err := a.AllocCached(0, s); !ok || err != nil || b.Size != 0 {
		t.Errorf("AllocCached(0) = %v, %v, %v; want the zero block", b, ok, err)
	}
	if _, ok, err := a.AllocCached(-1, s); ok || err == nil {
		t.Errorf("AllocCached(-1) = %v, %v; want an error", ok, err)
	}
	f.check(t)
}
