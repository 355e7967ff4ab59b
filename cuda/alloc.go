package cuda

// The caching device allocator.
//
// cuMemAlloc and cuMemFree are slow (cuMemFree also synchronises the device),
// so tensors do not call them directly. Like PyTorch's CUDACachingAllocator,
// the Allocator obtains large "segments" from the device and carves them into
// blocks; a freed block goes back to a cache and is handed out again to the
// next request of a fitting size on the same stream, without a device call.
//
// Sizes. A request is rounded up to a multiple of 512 bytes. Requests of at
// most 1 MiB are "small" and are carved from 2 MiB segments; larger requests
// are "large": those under 10 MiB are carved from 20 MiB segments, bigger ones
// get a segment of their own rounded up to a multiple of 2 MiB. The two pools
// never mix, so small short-lived buffers do not fragment the large segments.
//
// Blocks. Every segment keeps its blocks in address order in a doubly linked
// list. A request is served by the best-fitting free block (smallest size,
// then lowest address) of its pool and stream; a block larger than needed is
// split when the remainder is worth keeping (small pool: at least 512 bytes;
// large pool: more than 1 MiB), otherwise the whole block is handed out. A
// freed block merges with free neighbours of its segment.
//
// Streams. Every block belongs to the stream it was allocated on, and a freed
// block is only reused for requests on that same stream: work queued on a
// stream runs in order, so a kernel that is still using the old contents
// finishes before any later work on the stream touches the reused memory,
// and no synchronisation is needed. A caller that used a block on some other
// stream must synchronise that stream before freeing the block.
//
// Out of memory. When the device cannot satisfy a new segment, the allocator
// returns every fully free cached segment (of all streams) to the device and
// retries once; if that still fails it returns an *OutOfMemoryError.
//
// An Allocator is safe for concurrent use by multiple goroutines.

import (
	"errors"
	"fmt"
	"math"
	"sort"
	"sync"
)

// StreamID identifies the stream a block is allocated on and may be reused
// on. 0 is the default (legacy NULL) stream; other values are typically the
// CUstream handle.
type StreamID uintptr

const (
	allocMinBlockSize  = 512      // every block size is a multiple of this
	allocSmallSize     = 1 << 20  // largest "small" request
	allocSmallBuffer   = 2 << 20  // segment size for small requests
	allocLargeBuffer   = 20 << 20 // segment size for large requests < allocMinLargeAlloc
	allocMinLargeAlloc = 10 << 20 // large requests from here on get their own segment
	allocRoundLarge    = 2 << 20  // ... rounded up to a multiple of this

	// allocMaxRequest bounds a request so that rounding cannot overflow.
	allocMaxRequest = math.MaxInt / 2
)

// memBackend is where the allocator gets device memory from: the real device,
// or a fake in tests.
type memBackend interface {
	// malloc returns n bytes of device memory; on out of memory the error
	// satisfies IsOutOfMemory (or has an OutOfMemory() bool method).
	malloc(n int) (DevicePtr, error)
	free(p DevicePtr) error
}

// memInfoer is optionally implemented by a memBackend that can report the
// device's free and total memory (used in out-of-memory messages).
type memInfoer interface {
	memInfo() (free, total uint64, err error)
}

// Block is a piece of device memory handed out by an Allocator. The zero
// Block (Ptr 0, Size 0) is what a zero-size request returns; freeing it does
// nothing. A Block is a value: copies refer to the same memory, and it must be
// freed exactly once.
type Block struct {
	Ptr  DevicePtr // device address of the first byte
	Size int       // bytes requested (the block may be larger, see Capacity)

	capacity int      // rounded size of the block
	stream   StreamID // stream the block was allocated on
	b        *block   // allocator bookkeeping; nil for the zero Block
	id       uint64   // allocation id, detects frees of stale copies
}

// Capacity returns the number of usable bytes of b: its size rounded up to
// the allocator's granularity (at least Size).
func (b Block) Capacity() int { return b.capacity }

// Stream returns the stream b was allocated on.
func (b Block) Stream() StreamID { return b.stream }

// AllocatorStats is a snapshot of an Allocator's counters. Byte counts are of
// rounded block sizes.
type AllocatorStats struct {
	Allocated     int64 // bytes in blocks handed out and not yet freed
	Reserved      int64 // bytes obtained from the device and not returned (segments)
	PeakAllocated int64 // maximum of Allocated since creation or ResetPeakStats
	PeakReserved  int64 // maximum of Reserved since creation or ResetPeakStats

	NumAllocs     int64 // Alloc calls (including zero-size ones)
	NumCacheHits  int64 // non-zero Allocs served from cached memory, without a device malloc
	NumMallocs    int64 // device mallocs (segments created)
	NumFrees      int64 // device frees (segments released)
	NumOOMRetries int64 // times the cache was flushed after a device out-of-memory error

	Segments     int // segments currently held
	ActiveBlocks int // blocks currently handed out
}

// OutOfMemoryError is returned by Allocator.Alloc when the device cannot
// provide the memory even after the allocator released its cache.
type OutOfMemoryError struct {
	Requested   int   // bytes asked for
	SegmentSize int   // bytes the allocator asked the device for
	Allocated   int64 // bytes handed out by the allocator at the time
	Reserved    int64 // bytes held by the allocator at the time (after releasing its cache)
	Limit       int64 // the allocator's limit on Reserved, 0 if none

	DeviceFreeKnown bool   // whether DeviceFree/DeviceTotal are valid
	DeviceFree      uint64 // device's free memory
	DeviceTotal     uint64 // device's total memory

	Err error // the device error (nil when the allocator's own limit was hit)
}

func (e *OutOfMemoryError) Error() string {
	msg := fmt.Sprintf("cuda: out of memory: tried to allocate %s", formatBytes(int64(e.Requested)))
	if e.SegmentSize > 0 && e.SegmentSize != e.Requested {
		msg += fmt.Sprintf(" (a %s segment)", formatBytes(int64(e.SegmentSize)))
	}
	if e.DeviceFreeKnown {
		msg += fmt.Sprintf("; the device has %s free of %s", formatBytes(int64(e.DeviceFree)), formatBytes(int64(e.DeviceTotal)))
	}
	msg += fmt.Sprintf("; %s allocated by tensors, %s reserved by the allocator",
		formatBytes(e.Allocated), formatBytes(e.Reserved))
	if e.Limit > 0 {
		msg += fmt.Sprintf(" (limit %s)", formatBytes(e.Limit))
	}
	if e.Reserved-e.Allocated > 0 {
		msg += fmt.Sprintf("; %s is reserved but unallocated (fragmentation)", formatBytes(e.Reserved-e.Allocated))
	}
	msg += "; free tensors you no longer need, or lower the batch size"
	if e.Err != nil {
		msg += " [" + e.Err.Error() + "]"
	}
	return msg
}

// OutOfMemory reports true; IsOutOfMemory recognises errors with this method.
func (e *OutOfMemoryError) OutOfMemory() bool { return true }

// Unwrap returns the device error.
func (e *OutOfMemoryError) Unwrap() error { return e.Err }

// isOOM reports whether a backend error means out of memory.
func isOOM(err error) bool {
	if err == nil {
		return false
	}
	if IsOutOfMemory(err) {
		return true
	}
	var o interface{ OutOfMemory() bool }
	return errors.As(err, &o) && o.OutOfMemory()
}

// errLimit is what malloc reports when the allocator's own limit is hit.
var errLimit = errors.New("allocator limit reached")

// block is a contiguous piece of a segment.
type block struct {
	ptr        DevicePtr
	size       int // rounded, multiple of allocMinBlockSize
	seg        *segment
	prev, next *block // neighbours in the segment, address order
	allocated  bool
	id         uint64 // allocation id while allocated
}

// segment is one device allocation.
type segment struct {
	ptr    DevicePtr
	size   int
	stream StreamID
	large  bool
	head   *block // lowest-address block
	index  int    // position in Allocator.segments
	owner  *Allocator
}

// poolKey selects a free set.
type poolKey struct {
	large  bool
	stream StreamID
}

// freeSet is a set of free blocks ordered by (size, ptr).
type freeSet []*block

func blockLess(a, b *block) bool {
	if a.size != b.size {
		return a.size < b.size
	}
	return a.ptr < b.ptr
}

// search returns the index of the first block not less than (size, ptr).
func (s freeSet) search(size int, ptr DevicePtr) int {
	return sort.Search(len(s), func(i int) bool {
		b := s[i]
		return b.size > size || (b.size == size && b.ptr >= ptr)
	})
}

func (s *freeSet) insert(b *block) {
	i := s.search(b.size, b.ptr)
	*s = append(*s, nil)
	copy((*s)[i+1:], (*s)[i:])
	(*s)[i] = b
}

func (s *freeSet) remove(b *block) {
	i := s.search(b.size, b.ptr)
	if i >= len(*s) || (*s)[i] != b {
		panic("cuda: allocator internal error: free block missing from its free set")
	}
	copy((*s)[i:], (*s)[i+1:])
	(*s)[len(*s)-1] = nil
	*s = (*s)[:len(*s)-1]
}

// Allocator is a caching allocator of device memory; see the comment at the
// top of alloc.go. Use Device.Allocator to get a device's allocator.
type Allocator struct {
	mu       sync.Mutex
	backend  memBackend
	limit    int64 // maximum Reserved; 0 = none
	free     map[poolKey]*freeSet
	segments []*segment
	nextID   uint64
	stats    AllocatorStats
}

// newAllocator returns an allocator drawing memory from backend. An optional
// limit > 0 caps the bytes the allocator may reserve from the device; going
// past it is treated like a device out-of-memory error.
func newAllocator(backend memBackend, limit ...int64) *Allocator {
	a := &Allocator{backend: backend, free: make(map[poolKey]*freeSet)}
	if len(limit) > 0 && limit[0] > 0 {
		a.limit = limit[0]
	}
	return a
}

// roundSize rounds a request up to the block granularity.
func roundSize(n int) int {
	return (n + allocMinBlockSize - 1) / allocMinBlockSize * allocMinBlockSize
}

// segmentSize returns the size of the segment to create for a rounded request.
func segmentSize(size int) int {
	switch {
	case size <= allocSmallSize:
		return allocSmallBuffer
	case size < allocMinLargeAlloc:
		return allocLargeBuffer
	default:
		return (size + allocRoundLarge - 1) / allocRoundLarge * allocRoundLarge
	}
}

// shouldSplit reports whether a free block of the given size, serving a
// request of req bytes, is split.
func shouldSplit(large bool, blockSize, req int) bool {
	rem := blockSize - req
	if large {
		return rem > allocSmallSize
	}
	return rem >= allocMinBlockSize
}

// Alloc returns a block of at least n bytes for use on the given stream.
// A zero-size request returns the zero Block without touching the device.
// When the device is out of memory even after the cache was released, the
// error is an *OutOfMemoryError.
func (a *Allocator) Alloc(n int, stream StreamID) (Block, error) {
	b, _, err := a.alloc(n, stream, true)
	return b, err
}

// AllocCached is Alloc served from the cache alone: ok is false, and
// nothing is counted, when the cache has no free block that fits and the
// device would have to be asked for more memory. Callers that can free
// memory themselves (by collecting unreachable tensors) try it first.
func (a *Allocator) AllocCached(n int, stream StreamID) (b Block, ok bool, err error) {
	return a.alloc(n, stream, false)
}

func (a *Allocator) alloc(n int, stream StreamID, grow bool) (Block, bool, error) {
	if n < 0 {
		return Block{}, false, fmt.Errorf("cuda: Alloc of negative size %d", n)
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if n == 0 {
		a.stats.NumAllocs++
		return Block{}, true, nil
	}
	if n > allocMaxRequest {
		a.stats.NumAllocs++
		return Block{}, false, a.oomError(n, 0, nil)
	}
	size := roundSize(n)
	key := poolKey{large: size > allocSmallSize, stream: stream}

	var b *block
	if fs := a.free[key]; fs != nil {
		if i := fs.search(size, 0); i < len(*fs) {
			b = (*fs)[i]
			fs.remove(b)
			a.stats.NumCacheHits++
		}
	}
	if b == nil && !grow {
		return Block{}, false, nil
	}
	a.stats.NumAllocs++
	if b == nil {
		seg, err := a.newSegment(n, size, key)
		if err != nil {
			return Block{}, false, err
		}
		b = seg.head
	}

	if shouldSplit(key.large, b.size, size) {
		rest := &block{ptr: b.ptr + DevicePtr(size), size: b.size - size, seg: b.seg, prev: b, next: b.next}
		if b.next != nil {
			b.next.prev = rest
		}
		b.next = rest
		b.size = size
		a.freeSet(key).insert(rest)
	}

	a.nextID++
	b.allocated = true
	b.id = a.nextID
	a.stats.ActiveBlocks++
	a.stats.Allocated += int64(b.size)
	if a.stats.Allocated > a.stats.PeakAllocated {
		a.stats.PeakAllocated = a.stats.Allocated
	}
	return Block{Ptr: b.ptr, Size: n, capacity: b.size, stream: stream, b: b, id: b.id}, true, nil
}

func (a *Allocator) freeSet(key poolKey) *freeSet {
	fs := a.free[key]
	if fs == nil {
		fs = new(freeSet)
		a.free[key] = fs
	}
	return fs
}

// newSegment obtains a segment for a rounded request of size bytes (n as
// requested), releasing the cache and retrying once on out of memory. The
// segment's single block is not in any free set.
func (a *Allocator) newSegment(n, size int, key poolKey) (*segment, error) {
	segSize := segmentSize(size)
	ptr, err := a.deviceMalloc(segSize)
	if err != nil && isOOM(err) {
		a.stats.NumOOMRetries++
		a.releaseCached() // best effort: errors freeing leave the segment cached
		ptr, err = a.deviceMalloc(segSize)
	}
	if err != nil {
		if isOOM(err) {
			return nil, a.oomError(n, segSize, err)
		}
		return nil, fmt.Errorf("cuda: allocating a %s segment: %w", formatBytes(int64(segSize)), err)
	}
	seg := &segment{ptr: ptr, size: segSize, stream: key.stream, large: key.large, index: len(a.segments), owner: a}
	seg.head = &block{ptr: ptr, size: segSize, seg: seg}
	a.segments = append(a.segments, seg)
	a.stats.NumMallocs++
	a.stats.Segments++
	a.stats.Reserved += int64(segSize)
	if a.stats.Reserved > a.stats.PeakReserved {
		a.stats.PeakReserved = a.stats.Reserved
	}
	return seg, nil
}

func (a *Allocator) deviceMalloc(n int) (DevicePtr, error) {
	if a.limit > 0 && a.stats.Reserved+int64(n) > a.limit {
		return 0, &OutOfMemoryError{Err: errLimit}
	}
	return a.backend.malloc(n)
}

// oomError builds the error for a failed request; err is the device error.
func (a *Allocator) oomError(n, segSize int, err error) *OutOfMemoryError {
	e := &OutOfMemoryError{
		Requested:   n,
		SegmentSize: segSize,
		Allocated:   a.stats.Allocated,
		Reserved:    a.stats.Reserved,
		Limit:       a.limit,
		Err:         err,
	}
	var inner *OutOfMemoryError
	if errors.As(err, &inner) && inner.Err == errLimit {
		e.Err = nil // the allocator's own limit: Limit says it
	}
	if mi, ok := a.backend.(memInfoer); ok {
		if free, total, err := mi.memInfo(); err == nil {
			e.DeviceFreeKnown, e.DeviceFree, e.DeviceTotal = true, free, total
		}
	}
	return e
}

// Free returns b to the allocator's cache, for reuse on b's stream. Freeing
// the zero Block does nothing. Freeing a block twice, or a block of another
// allocator, panics.
func (a *Allocator) Free(b Block) {
	if b.b == nil {
		if b.Ptr != 0 || b.Size != 0 {
			panic(fmt.Sprintf("cuda: Allocator.Free of a Block not made by an Allocator (ptr %#x, size %d)", uint64(b.Ptr), b.Size))
		}
		return
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	blk := b.b
	if blk.seg != nil && blk.seg.owner != a {
		panic(fmt.Sprintf("cuda: Allocator.Free of a block (ptr %#x, size %d) that belongs to another allocator", uint64(b.Ptr), b.Size))
	}
	if blk.seg == nil || !blk.allocated || blk.id != b.id || blk.ptr != b.Ptr {
		panic(fmt.Sprintf("cuda: Allocator.Free: double free of block (ptr %#x, size %d)", uint64(b.Ptr), b.Size))
	}
	blk.allocated = false
	blk.id = 0
	a.stats.ActiveBlocks--
	a.stats.Allocated -= int64(blk.size)

	seg := blk.seg
	fs := a.freeSet(poolKey{large: seg.large, stream: seg.stream})
	if p := blk.prev; p != nil && !p.allocated {
		fs.remove(p)
		p.size += blk.size
		p.next = blk.next
		if blk.next != nil {
			blk.next.prev = p
		}
		blk.seg = nil // a stale copy of b now fails the owner check
		blk = p
	}
	if nx := blk.next; nx != nil && !nx.allocated {
		fs.remove(nx)
		blk.size += nx.size
		blk.next = nx.next
		if nx.next != nil {
			nx.next.prev = blk
		}
		nx.seg = nil
	}
	fs.insert(blk)
}

// EmptyCache returns every fully free segment to the device. Blocks in use
// are unaffected. It returns the first error from the device; segments whose
// release failed stay cached.
func (a *Allocator) EmptyCache() error {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.releaseCached()
}

// releaseCached frees every segment that consists of one free block.
func (a *Allocator) releaseCached() error {
	var first error
	for i := 0; i < len(a.segments); {
		seg := a.segments[i]
		h := seg.head
		if h.allocated || h.next != nil {
			i++
			continue
		}
		if err := a.backend.free(seg.ptr); err != nil {
			if first == nil {
				first = fmt.Errorf("cuda: releasing a cached %s segment: %w", formatBytes(int64(seg.size)), err)
			}
			i++
			continue
		}
		key := poolKey{large: seg.large, stream: seg.stream}
		fs := a.free[key]
		fs.remove(h)
		if len(*fs) == 0 {
			delete(a.free, key)
		}
		h.seg = nil
		last := len(a.segments) - 1
		a.segments[i] = a.segments[last]
		a.segments[i].index = i
		a.segments[last] = nil
		a.segments = a.segments[:last]
		seg.owner = nil
		a.stats.NumFrees++
		a.stats.Segments--
		a.stats.Reserved -= int64(seg.size)
	}
	return first
}

// Stats returns a snapshot of the allocator's counters.
func (a *Allocator) Stats() AllocatorStats {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.stats
}

// ResetPeakStats sets PeakAllocated and PeakReserved to the current values.
func (a *Allocator) ResetPeakStats() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.stats.PeakAllocated = a.stats.Allocated
	a.stats.PeakReserved = a.stats.Reserved
}

// formatBytes renders a byte count as "512 B", "1.50 KiB", "2.00 GiB".
func formatBytes(n int64) string {
	const unit = 1024
	if n < unit && n > -unit {
		return fmt.Sprintf("%d B", n)
	}
	f := float64(n)
	for _, s := range []string{"KiB", "MiB", "GiB", "TiB"} {
		f /= unit
		if f < unit && f > -unit || s == "TiB" {
			return fmt.Sprintf("%.2f %s", f, s)
		}
	}
	return fmt.Sprintf("%d B", n) // unreachable
}

// deviceBackend is the memBackend of a real device.
type deviceBackend struct{ d *Device }

func (b deviceBackend) malloc(n int) (DevicePtr, error)          { return b.d.Malloc(n) }
func (b deviceBackend) free(p DevicePtr) error                   { return b.d.Free(p) }
func (b deviceBackend) memInfo() (free, total uint64, err error) { return b.d.MemInfo() }

// deviceAllocators holds each Device's Allocator (*Device -> *Allocator);
// GetDevice returns one *Device per ordinal.
var deviceAllocators sync.Map

// Allocator returns d's caching allocator, creating it on first use. All
// users of a device should share it, so that memory one frees is reused by
// the others.
func (d *Device) Allocator() *Allocator {
	if a, ok := deviceAllocators.Load(d); ok {
		return a.(*Allocator)
	}
	a, _ := deviceAllocators.LoadOrStore(d, newAllocator(deviceBackend{d}))
	return a.(*Allocator)
}

// ID returns the StreamID under which an Allocator caches blocks freed on s:
// its CUstream handle, 0 for a nil or default stream. Synchronise a stream
// before destroying it if blocks freed on it may still be in use by its
// work: a later stream can get the same handle.
func (s *Stream) ID() StreamID { return StreamID(s.handle()) }
